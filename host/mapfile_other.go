//go:build !linux && !darwin

package host

import "os"

// mapFile reads the file at path (no mapping here); release does nothing.
func mapFile(path string) ([]byte, func(), error) {
	b, err := os.ReadFile(path)
	return b, func() {}, err
}
