//go:build !linux && !darwin

package tool

import "os"

// openRegular opens p for reading; the caller checks it is a regular file.
func openRegular(p string) (*os.File, error) { return os.Open(p) }

// hasHoles reports no holes where SEEK_HOLE is not at hand.
func hasHoles(*os.File, int64) (bool, error) { return false, nil }
