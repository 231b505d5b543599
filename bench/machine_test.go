package bench

import (
	"runtime"
	"testing"
)

// TestKernelThreadsAreNotNoise: a kernel thread's stat line (the PF_KTHREAD
// flag) counts its utime and stime, a process's counts nothing, whatever
// its name holds; on Linux, what the processes used is read.
func TestKernelThreadsAreNotNoise(t *testing.T) {
	for _, tc := range []struct {
		stat string
		want int64
	}{
		{"412 (jbd2/vda-8) S 2 0 0 0 -1 2129984 0 0 0 0 7 1510 0 0 20 0 1 0 350 0 0", 1517},
		{"77 (kworker/u4:2-events_unbound) I 2 0 0 0 -1 69238880 0 0 0 0 0 93 0 0 20 0 1 0 9 0 0", 93},
		{"901 (my (odd) prog) R 1 901 901 0 -1 4194560 300 0 0 0 120 30 0 0 20 0 1 0 100 0 0", 0},
		{"garbage", 0},
		{"5 (short) S 2 0", 0},
	} {
		if got := kthreadTicks(tc.stat); got != tc.want {
			t.Errorf("kthreadTicks(%q) = %d, want %d", tc.stat, got, tc.want)
		}
	}
	if runtime.GOOS == "linux" {
		if _, ok := othersBusy(); !ok {
			t.Error("othersBusy could not read /proc/stat")
		}
	}
}
