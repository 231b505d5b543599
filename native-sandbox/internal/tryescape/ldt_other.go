//go:build linux && !amd64

package main

import "syscall"

// modifyLDT: the LDT exists only on x86.
func modifyLDT() syscall.Errno { return syscall.ENOSYS }
