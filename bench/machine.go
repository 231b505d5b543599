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
// used meanwhile (from /proc/stat, where there is one), which is the noise
// in the figure.
type meter struct {
	wall  time.Time
	cpu   time.Duration
	busy  time.Duration
	valid bool
}

func startMeter() meter {
	b, ok := machineBusy()
	return meter{wall: time.Now(), cpu: processCPU(), busy: b, valid: ok}
}

// reading is a meter's result.
type reading struct {
	Wall time.Duration
	// CPU is this process's CPU time.
	CPU time.Duration
	// Others is the CPU time of every other process; -1 when unknown.
	Others time.Duration
}

func (m meter) stop() reading {
	r := reading{Wall: time.Since(m.wall), CPU: processCPU() - m.cpu, Others: -1}
	if b, ok := machineBusy(); ok && m.valid {
		r.Others = max(0, b-m.busy-r.CPU)
	}
	return r
}

// machineBusy returns the CPU time all processes have used since boot, from
// the first line of /proc/stat.
func machineBusy() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, false
	}
	var ticks int64
	// user nice system idle iowait irq softirq steal: all but idle and
	// iowait are busy.
	for i, s := range f[1:8] {
		if i == 3 || i == 4 {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, false
		}
		ticks += n
	}
	const userHZ = 100 // USER_HZ, fixed at 100 on Linux
	return time.Duration(ticks) * time.Second / userHZ, true
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
