package bench

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync is what the journal's log does after a durable round's record.
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
