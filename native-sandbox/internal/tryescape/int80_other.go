//go:build linux && !amd64

package main

import "syscall"

// int80 exists only on amd64; elsewhere the foreign ABI is not reachable.
func int80(uintptr) uintptr {
	e := int64(syscall.ENOSYS)
	return uintptr(-e)
}
