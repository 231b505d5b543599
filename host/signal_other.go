//go:build !unix

package host

import "strconv"

// signalName names signal n; platforms without POSIX signals have no names.
func signalName(n int) string { return "signal " + strconv.Itoa(n) }
