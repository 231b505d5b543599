//go:build !unix

package fileread

import "os"

// openNonBlocking opens path for reading; where there is no O_NONBLOCK,
// there are no FIFOs to block on.
func openNonBlocking(path string) (*os.File, error) { return os.Open(path) }
