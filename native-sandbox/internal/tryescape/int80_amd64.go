//go:build linux

package main

// int80 makes an i386 system call through int 0x80 and returns the raw
// result (a negative errno on failure).
func int80(nr uintptr) uintptr
