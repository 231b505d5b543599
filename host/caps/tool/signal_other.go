//go:build !unix

package tool

import "strconv"

// signalName names signal n; platforms without POSIX signals have no names.
func signalName(n int) string { return "signal " + strconv.Itoa(n) }
