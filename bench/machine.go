package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// meter measures what one stretch of the harness cost: wall time, this
// process's CPU time and the CPU time every other process on the machine
// used meanwhile (from /proc, where there is one), which is the noise in
// the figure. The kernel's own work (its threads, as the file system's
// journal writer jbd2 and the kworkers, and interrupt handling) is left
// out of the noise: most of it is done for the I/O of the processes,
// this one's durable commits first.
type meter struct {
	wall  time.Time
	cpu   time.Duration
	busy  time.Duration
	valid bool
}

func startMeter() meter {
	b, ok := othersBusy()
	return meter{wall: time.Now(), cpu: processCPU(), busy: b, valid: ok}
}

// reading is a meter's result.
type reading struct {
	Wall time.Duration
	// CPU is this process's CPU time.
	CPU time.Duration
	// Others is the CPU time of every other process (the kernel's own
	// work left out); -1 when unknown.
	Others time.Duration
}

func (m meter) stop() reading {
	r := reading{Wall: time.Since(m.wall), CPU: processCPU() - m.cpu, Others: -1}
	if b, ok := othersBusy(); ok && m.valid {
		r.Others = max(0, b-m.busy-r.CPU)
	}
	return r
}

// userHZ is the unit of /proc's CPU times, fixed at 100 on Linux.
const userHZ = 100

func ticks(n int64) time.Duration { return time.Duration(n) * time.Second / userHZ }

// othersBusy returns the CPU time the processes have used since boot (the
// processes that exited too), the kernel's own work left out: the first
// line of /proc/stat less its irq and softirq times and the time of the
// kernel's threads.
func othersBusy() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, false
	}
	var busy int64
	// user nice system idle iowait irq softirq steal: user, nice, system
	// and steal are the processes' (steal: the hypervisor's other guests,
	// noise too).
	for i, s := range f[1:8] {
		if i == 3 || i == 4 || i == 5 || i == 6 {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, false
		}
		busy += n
	}
	return max(0, ticks(busy)-kernelThreads()), true
}

// pfKthread is the flags bit of a kernel thread in /proc/PID/stat.
const pfKthread = 0x00200000

// kernelThreads returns the CPU time the kernel's threads now running have
// used (from /proc/PID/stat); 0 where it cannot tell.
func kernelThreads() time.Duration {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var sum int64
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		sum += kthreadTicks(string(b))
	}
	return ticks(sum)
}

// kthreadTicks returns the CPU time (utime + stime, in ticks) of the task
// whose /proc/PID/stat line is stat when it is a kernel thread, else 0.
func kthreadTicks(stat string) int64 {
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
	// majflt cmajflt utime stime ...: comm may hold spaces and
	// parentheses, the fields start after its last ')'.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	if err != nil || flags&pfKthread == 0 {
		return 0
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return u + st
}

// fsyncMicros times small appends with an fsync each in dir: the disk's
// price of durability, which bounds figures 3 and 4.
func fsyncMicros(dir string) (float64, error) {
	f, err := os.CreateTemp(dir, "fsync-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 256)
	const n = 200
	start := time.Now()
	for range n {
		if _, err := f.Write(buf); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
	}
	return us(time.Since(start)) / n, nil
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func (r reading) String() string {
	return fmt.Sprintf("wall %v cpu %v others %v", r.Wall, r.CPU, r.Others)
}
