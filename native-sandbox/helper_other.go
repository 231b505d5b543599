//go:build !linux && !darwin

package sandbox

import "errors"

// runHelper is not used where the launcher does not re-execute itself.
func runHelper(*helperConfig, string, []string) error {
	return errors.New("the sandbox helper is not used on this platform")
}
