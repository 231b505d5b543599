package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// discardInput drops what was typed before the prompt was shown (tcflush
// TCIFLUSH: TIOCFLUSH with FREAD), so that a key pressed earlier is not
// taken as the answer.
func discardInput(f *os.File) { unix.IoctlSetPointerInt(int(f.Fd()), unix.TIOCFLUSH, 1) }
