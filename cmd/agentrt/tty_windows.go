package main

import (
	"os"

	"golang.org/x/sys/windows"
)

// openTTY opens the console, the approval prompt's own channel apart from
// the streams the guest's output goes to.
func openTTY() (in, out *os.File, err error) {
	if in, err = os.OpenFile("CONIN$", os.O_RDWR, 0); err != nil {
		return nil, nil, err
	}
	if out, err = os.OpenFile("CONOUT$", os.O_RDWR, 0); err != nil {
		in.Close()
		return nil, nil, err
	}
	return in, out, nil
}

// discardInput drops what was typed before the prompt was shown.
func discardInput(f *os.File) { windows.FlushConsoleInputBuffer(windows.Handle(f.Fd())) }
