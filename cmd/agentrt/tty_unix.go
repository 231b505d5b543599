//go:build unix

package main

import "os"

// openTTY opens the controlling terminal, for reading and writing: the
// approval prompt's own channel, apart from the streams the guest's output
// goes to. A process without one (setsid, a daemon) gets an error.
func openTTY() (in, out *os.File, err error) {
	f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	return f, f, err
}
