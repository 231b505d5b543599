//go:build unix

package tool

import (
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// signalName names signal n as the tool's platform does ("SIGKILL").
func signalName(n int) string {
	if name := unix.SignalName(syscall.Signal(n)); name != "" {
		return name
	}
	return "signal " + strconv.Itoa(n)
}
