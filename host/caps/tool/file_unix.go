//go:build linux || darwin

package tool

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// openRegular opens p for reading without following a final symbolic link
// and without blocking on a FIFO or a device.
func openRegular(p string) (*os.File, error) {
	return os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}

// hasHoles reports whether the file has a hole before its end (SEEK_HOLE;
// a file system that cannot tell reports none). It leaves the offset at the
// start.
func hasHoles(f *os.File, size int64) (bool, error) {
	if size == 0 {
		return false, nil
	}
	off, err := f.Seek(0, unix.SEEK_HOLE)
	if _, serr := f.Seek(0, 0); serr != nil {
		return false, serr
	}
	return err == nil && off < size, nil
}
