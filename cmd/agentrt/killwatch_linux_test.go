//go:build linux

package main

import (
	"encoding/binary"
	"strings"

	"golang.org/x/sys/unix"
)

// killOnCreate calls kill the moment a file whose name ends in suffix is
// created in dir (inotify), so that a kill lands between badger creating a
// file and sizing it. It returns a channel closed once it called kill, and
// a function that stops watching.
func killOnCreate(dir, suffix string, kill func()) (<-chan struct{}, func(), error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		return nil, nil, err
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE); err != nil {
		unix.Close(fd)
		return nil, nil, err
	}
	killed := make(chan struct{})
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := unix.Read(fd, buf)
			if err != nil || n <= 0 {
				return
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				nameLen := int(binary.NativeEndian.Uint32(buf[off+12 : off+16]))
				name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+nameLen]), "\x00")
				if strings.HasSuffix(name, suffix) {
					kill()
					close(killed)
					return
				}
				off += unix.SizeofInotifyEvent + nameLen
			}
		}
	}()
	return killed, func() { unix.Close(fd) }, nil
}
