//go:build unix

package badgerstore

import "os"

// syncDir makes the names in dir durable: a file created there survives a
// crash once its directory is synced.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
