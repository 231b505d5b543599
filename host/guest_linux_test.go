package host_test

import (
	"context"
	"encoding/binary"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// rss returns this process's resident set size, bytes.
func rss(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// TestGrowingMemoryDoesNotCopy: a guest that grows its memory one page at
// a time to the limit (1 GiB) takes the host almost no memory: its memory
// is reserved address space, made usable as it grows, never copied, and
// the pages it does not touch are not resident. (wazero's own memory grew
// by reallocating and copying: 3.8 GB of the host's memory.)
func TestGrowingMemoryDoesNotCopy(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	ctx := context.Background()
	code := testutil.BuildWAT(t, "host/testdata/wat/grow.wat")
	if _, err := env.Host.Run(ctx, host.RunSpec{Code: code}); err != nil { // compiled, warm
		t.Fatal(err)
	}
	base := rss(t)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if r := rss(t); r > peak.Load() {
				peak.Store(r)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	res, err := env.Host.Run(ctx, host.RunSpec{Code: code})
	close(stop)
	<-sampled
	runtime.ReadMemStats(&after)
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run: %v %+v", err, res)
	}
	if pages := binary.LittleEndian.Uint32(res.Output[8:]); pages != 16384 {
		t.Fatalf("the memory grew to %d pages, want 16384", pages)
	}
	grew, alloc := peak.Load()-base, after.TotalAlloc-before.TotalAlloc
	t.Logf("growing a memory to 1 GiB page by page: peak RSS +%d MiB, %d MiB allocated on the Go heap (indicative)", grew>>20, alloc>>20)
	// The run itself allocates a few MiB (the table's 2^20 elements, the
	// journal); copying the memory as it grows allocates gigabytes.
	if alloc > 256<<20 || grew > 256<<20 {
		t.Fatalf("growing the memory took the host %d MiB of heap allocations and %d MiB of RSS", alloc>>20, grew>>20)
	}
}
