//go:build unix

package bench

import (
	"os"
	"runtime"
	"syscall"
)

// peakRSSMB returns the peak resident set size of a finished child process
// in MB, from its rusage (ru_maxrss: KiB on Linux, bytes on macOS).
func peakRSSMB(ps *os.ProcessState) float64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	if runtime.GOOS == "darwin" {
		return float64(ru.Maxrss) / 1e6
	}
	return float64(ru.Maxrss) * 1024 / 1e6
}
