package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// Hostile guests against a real daemon (SECURITY.md, "Hostile guests").

// guestDaemon is an `agentrt cell serve` on a data directory of its own.
type guestDaemon struct {
	bin, data, cache string
	cmd              *exec.Cmd
	log              *syncWriter
	client           *cell.Client
	exited           chan error
}

// startGuestDaemon starts a daemon on data and waits until it answers and
// has recovered what it recovers.
func startGuestDaemon(t *testing.T, bin, data, cache string) *guestDaemon {
	t.Helper()
	d := &guestDaemon{bin: bin, data: data, cache: cache, log: &syncWriter{w: &bytes.Buffer{}}, exited: make(chan error, 1)}
	d.cmd = exec.Command(bin, "--data", data, "--cache", cache, "cell", "serve")
	d.cmd.Stderr = d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.exited <- d.cmd.Wait() }()
	t.Cleanup(func() { d.cmd.Process.Kill() })
	var err error
	if d.client, err = cell.Dial("unix:" + cell.SocketPath(data)); err != nil {
		t.Fatal(err)
	}
	d.waitLog(t, "unfinished runs", "the daemon did not start", 30*time.Second)
	return d
}

// waitLog waits until the daemon's log holds want; it fails with what
// when within passes, or when the daemon exits.
func (d *guestDaemon) waitLog(t *testing.T, want, what string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(d.log.String(), want) {
		select {
		case err := <-d.exited:
			t.Fatalf("the daemon exited: %v\n%s", err, d.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s\n%s", what, d.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (d *guestDaemon) kill() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
}

// waitRun polls run until ok says yes.
func (d *guestDaemon) waitRun(t *testing.T, run, what string, within time.Duration, ok func(cell.RunInfo) bool) cell.RunInfo {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ri, err := d.client.Run(context.Background(), run)
		if err == nil && ok(ri) {
			return ri
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s never %s (%+v, %v)\n%s", run, what, ri, err, d.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDaemonRefusesACompileBombWithinTheLimit submits modules that took a
// compiler minutes (3 MB of nested blocks; 100 000 blocks in a row) to a
// real daemon: each is refused with 422 at once, naming the limit, while
// GET /v1/runs keeps answering.
func TestDaemonRefusesACompileBombWithinTheLimit(t *testing.T) {
	bin := buildCLI(t)
	d := startGuestDaemon(t, bin, t.TempDir(), t.TempDir())
	ctx := context.Background()
	stop := make(chan struct{})
	var mu sync.Mutex
	var slowest time.Duration
	listed := 0
	var lister sync.WaitGroup
	lister.Add(1)
	go func() {
		defer lister.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			if _, err := d.client.Runs(ctx); err != nil {
				t.Errorf("GET /v1/runs during the submission: %v", err)
				return
			}
			mu.Lock()
			slowest, listed = max(slowest, time.Since(start)), listed+1
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	for _, c := range []struct {
		name string
		code []byte
		want string
	}{
		{"3 MB of nested blocks", bombModule(nestedBody(1_000_000)), "blocks nest 2001 deep, over the limit of 2000"},
		{"100 000 blocks in a row", bombModule(append(append([]byte{0}, bytes.Repeat([]byte{0x02, 0x40, 0x0b}, 100_000)...), 0x0b)), "over the limit of 10000 (CompileLimits.Branches)"},
	} {
		start := time.Now()
		_, err := d.client.Submit(ctx, cell.Submission{Module: c.code, Name: "bomb.wasm"})
		took := time.Since(start)
		var re *cell.RemoteError
		if !errors.As(err, &re) || re.Code != http.StatusUnprocessableEntity || !strings.Contains(re.Error(), c.want) {
			t.Fatalf("%s: %v; want 422 naming the limit (%s)", c.name, err, c.want)
		}
		if took > 10*time.Second {
			t.Fatalf("%s: refused after %v", c.name, took)
		}
		t.Logf("%s (%d bytes): refused in %v (indicative)", c.name, len(c.code), took)
	}
	time.Sleep(50 * time.Millisecond)
	close(stop)
	lister.Wait()
	if listed == 0 || slowest > 2*time.Second {
		t.Fatalf("GET /v1/runs answered %d times, the slowest in %v", listed, slowest)
	}
	if runs, _ := d.client.Runs(ctx); len(runs) != 0 {
		t.Fatalf("the refused modules left %d runs", len(runs))
	}
}

// TestDaemonStopsASpinningGuest: a guest that computes forever after its
// third call is cancelled through the API (promptly, cancelled, nothing in
// doubt), resumed through it, drained by SIGTERM (the daemon exits, the
// run stays running) and recovered by the next daemon.
func TestDaemonStopsASpinningGuest(t *testing.T) {
	bin := buildCLI(t)
	data, cache := t.TempDir(), t.TempDir()
	d := startGuestDaemon(t, bin, data, cache)
	ctx := context.Background()
	run, err := d.client.Submit(ctx, cell.Submission{Module: testutil.BuildWAT(t, "host/testdata/wat/spin.wat"), Name: "spin.wasm"})
	if err != nil {
		t.Fatal(err)
	}
	d.waitRun(t, run, "went live", 10*time.Second, func(ri cell.RunInfo) bool { return ri.Live })
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	ri, err := d.client.Cancel(ctx, run)
	if err != nil || ri.Status != journal.StatusCancelled || ri.Live {
		t.Fatalf("cancel: %v %+v", err, ri)
	}
	t.Logf("the API cancelled the spinning guest in %v (indicative)", time.Since(start))
	if _, err := d.client.Resume(ctx, run); err != nil {
		t.Fatal(err)
	}
	d.waitRun(t, run, "went live again", 10*time.Second, func(ri cell.RunInfo) bool { return ri.Live && ri.Status == journal.StatusRunning })
	time.Sleep(200 * time.Millisecond)
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("SIGTERM did not stop a daemon with a spinning guest\n%s", d.log.String())
	}
	d = startGuestDaemon(t, bin, data, cache)
	// Recover queues the runs it finds, then logs their number; a worker
	// takes each (and logs it) after that, by priority.
	d.waitLog(t, "recovered run "+run, "the next daemon did not recover the drained run", 20*time.Second)
	if _, err := d.client.Cancel(ctx, run); err != nil {
		t.Fatal(err)
	}
}

// TestCrashLoopBreakerHoldsARunThatKillsItsDaemon: a run whose daemon dies
// every time it executes (SIGKILL, here from the test, as the out-of-memory
// killer would) is recovered at each start, after a growing backoff, and
// after three recoveries without progress it is held: listed held with the
// reason, not resumed; meanwhile other runs complete on every daemon. A
// resume by hand continues it.
func TestCrashLoopBreakerHoldsARunThatKillsItsDaemon(t *testing.T) {
	bin := buildCLI(t)
	data, cache := t.TempDir(), t.TempDir()
	ctx := context.Background()
	spin, loop := testutil.BuildWAT(t, "host/testdata/wat/spin.wat"), testutil.BuildWAT(t, "host/testdata/wat/loop.wat")
	d := startGuestDaemon(t, bin, data, cache)
	run, err := d.client.Submit(ctx, cell.Submission{Module: spin, Name: "killer.wasm"})
	if err != nil {
		t.Fatal(err)
	}
	var starts []time.Time
	for attempt := 1; ; attempt++ {
		// Another run completes on this daemon, whatever the killer does.
		other, err := d.client.Submit(ctx, cell.Submission{Module: loop, Name: "other.wasm"})
		if err != nil {
			t.Fatal(err)
		}
		d.waitRun(t, other, "completed", 20*time.Second, func(ri cell.RunInfo) bool { return ri.Status == journal.StatusCompleted })
		ri := d.waitRun(t, run, "went live or was held", 30*time.Second, func(ri cell.RunInfo) bool { return ri.Live || ri.Status == journal.StatusHeld })
		if ri.Status == journal.StatusHeld {
			if attempt != 5 {
				t.Fatalf("the run was held at daemon start %d; want the fifth (it ran on the first, and was recovered on the next three)", attempt)
			}
			if !strings.Contains(ri.Error, "held by the crash-loop breaker: 3 recoveries in a row made no progress") {
				t.Fatalf("the held run's reason: %q", ri.Error)
			}
			break
		}
		if attempt > 5 {
			t.Fatalf("the run is still recovered at daemon start %d", attempt)
		}
		starts = append(starts, time.Now())
		time.Sleep(100 * time.Millisecond) // into its loop
		d.kill()
		d = startGuestDaemon(t, bin, data, cache)
	}
	// The backoff: none before the first recovery, 2 s before the second
	// (from the start of the first), 4 s before the third.
	if len(starts) != 4 {
		t.Fatalf("%d executions before the hold", len(starts))
	}
	// The test sees a run live some time after its attempt began (the
	// backoff counts from there), up to a second on a loaded machine.
	for i, want := range []time.Duration{2 * time.Second, 4 * time.Second} {
		if gap := starts[i+2].Sub(starts[i+1]); gap < want-time.Second {
			t.Errorf("recovery %d came %v after the one before; the backoff is %v", i+2, gap, want)
		}
	}
	// Still held on the next start, with the reason in the list.
	d.kill()
	d = startGuestDaemon(t, bin, data, cache)
	time.Sleep(300 * time.Millisecond)
	if ri, _ := d.client.Run(ctx, run); ri.Status != journal.StatusHeld || ri.Live {
		t.Fatalf("after another restart the held run is %+v", ri)
	}
	out, err := exec.Command(bin, "--data", data, "--cache", cache, "runs").CombinedOutput()
	if err != nil || !strings.Contains(string(out), run) || !strings.Contains(string(out), "held") {
		t.Fatalf("agentrt runs does not list the run held: %v\n%s", err, out)
	}
	// A resume by hand continues it (and it spins again).
	if _, err := d.client.Resume(ctx, run); err != nil {
		t.Fatal(err)
	}
	d.waitRun(t, run, "went live", 10*time.Second, func(ri cell.RunInfo) bool { return ri.Live && ri.Status == journal.StatusRunning })
	if _, err := d.client.Cancel(ctx, run); err != nil {
		t.Fatal(err)
	}
}

// nestedBody is a function body that nests depth empty blocks.
func nestedBody(depth int) []byte {
	b := append([]byte{0}, bytes.Repeat([]byte{0x02, 0x40}, depth)...)
	return append(append(b, bytes.Repeat([]byte{0x0b}, depth)...), 0x0b)
}

// bombModule is a module with memory exported as "memory" and one function,
// _start, of the given body.
func bombModule(body []byte) []byte {
	sec := func(id byte, b []byte) []byte {
		return append(append([]byte{id}, uleb(len(b))...), b...)
	}
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, sec(1, []byte{1, 0x60, 0, 0})...)
	m = append(m, sec(3, []byte{1, 0})...)
	m = append(m, sec(5, []byte{1, 0, 1})...)
	m = append(m, sec(7, append([]byte{2, 6}, "memory\x02\x00\x06_start\x00\x00"...))...)
	return append(m, sec(10, append(append([]byte{1}, uleb(len(body))...), body...))...)
}

func uleb(n int) []byte {
	var b []byte
	for {
		c := byte(n & 0x7f)
		n >>= 7
		if n == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
