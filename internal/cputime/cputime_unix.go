//go:build unix

// Package cputime reads the CPU time this process has used, for the
// benchmarks that report it beside the wall time.
package cputime

import (
	"syscall"
	"time"
)

// Process returns the CPU time (user and system) this process has used
// so far: benchmarks report it per op beside the wall time, which other
// processes' load stretches.
func Process() time.Duration {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		return 0
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}
