//go:build unix

package fileread

import (
	"os"
	"syscall"
)

// openNonBlocking opens path with O_NONBLOCK, so that opening a FIFO with
// no writer returns at once instead of waiting for one; Open then refuses
// it as not regular.
func openNonBlocking(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
