package badgerstore

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync makes f's data durable: fdatasync, which leaves out the inode's
// times (a segment's size is set when it is made).
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
