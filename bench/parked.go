package bench

import (
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentrt/agentrt/approval"
	"github.com/agentrt/agentrt/host"
	agentcell "github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/clock"
	"github.com/agentrt/agentrt/journal"
	"golang.org/x/crypto/ssh"
)

// Figure 16: parked runs. A run that waits (timer.sleep, approval.request)
// parks: its intent is durable, its instance closed, and the cell daemon
// keeps one timer for it at most. 16a is what the daemon holds per parked
// run; 16b and 16c the time from what a run waits for (a deciding vote, a
// timer firing) to the run's next live call, against the bare resume of a
// run parked the same way, without the daemon.

const (
	// parkGroup is the approvers' group of the approval runs: one
	// approver, quorum 1.
	parkGroup = "bench"
	// parkInFlight bounds the runs being started or executed at once
	// while the harness parks them: enough for the store to group their
	// durable commits, few enough that their instances stay small.
	parkInFlight = 128
	// parkLaunchers is the number of goroutines that launch them.
	parkLaunchers = 32
	// wakeWait is how long the harness waits for a woken run's live call
	// before it gives up on the figure.
	wakeWait = 30 * time.Second
)

// parkInput is the run input that makes testdata/park.wat sleep for d:
// its 8 bytes big-endian (d must be at least 2^32 ns, about 4.3 s).
func parkInput(d time.Duration) []byte { return binary.BigEndian.AppendUint64(nil, uint64(d)) }

// approvalInput is the run input that makes testdata/park.wat ask group
// parkGroup for an approval.
func approvalInput() []byte { return make([]byte, 8) }

// parkGrant grants what testdata/park.wat imports.
func parkGrant() *host.Grant {
	g, err := host.ParseGrant([]byte("capabilities:\n  run: {}\n  timer: {}\n  approval: {groups: [" + parkGroup + "]}\n"))
	if err != nil {
		panic(err)
	}
	return g
}

// parkApprover is the one member of group parkGroup.
type parkApprover struct{ signer ssh.Signer }

func newParkApprover() (*parkApprover, error) {
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, err
	}
	return &parkApprover{signer: s}, nil
}

// install writes the approver as the group's one member, quorum 1, in the
// data directory dir.
func (a *parkApprover) install(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, agentcell.ApproversDir), 0o700); err != nil {
		return err
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(a.signer.PublicKey()))) + " bench-approver\n"
	if err := os.WriteFile(filepath.Join(dir, agentcell.ApproversDir, parkGroup), []byte(line), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, approval.RulesFile), []byte("groups:\n  "+parkGroup+": {quorum: 1}\n"), 0o600)
}

// vote approves the approval run waits for at step, signed by a, and
// returns when the book has taken it (stored durably and, in a daemon,
// the wake begun).
func (a *parkApprover) vote(b *agentcell.Book, run journal.RunID, step uint64) error {
	p, err := b.Get(run, step)
	if err != nil {
		return err
	}
	st := p.Statement(true)
	msg := st.Marshal()
	sig, err := approval.Sign(a.signer, msg)
	if err != nil {
		return err
	}
	t, err := b.Vote(run, step, msg, sig)
	if err != nil {
		return err
	}
	if t.State != approval.Approved {
		return fmt.Errorf("bench: the vote on run %s step %d leaves it %s, want approved (quorum 1)", run, step, t.State)
	}
	return nil
}

// daemon is a cell daemon in process without listeners, as
// host/cell/park_test.go runs one: the harness drives its server
// directly.
type daemon struct {
	cell *agentcell.Cell
	srv  *agentcell.Server
	ends chan ended
}

// ended is a run the daemon executed that stopped.
type ended struct {
	run journal.RunID
	res *host.Result
	err error
}

// openDaemon opens the cell in dir on clk, with sink (nil: none) seeing
// its events, and a server for it; it does not Recover.
func openDaemon(ctx context.Context, dir string, clk clock.Clock, sink func(host.Event)) (*daemon, error) {
	c, err := agentcell.Open(ctx, dir, agentcell.Options{Clock: clk, Sink: sink})
	if err != nil {
		return nil, err
	}
	d := &daemon{cell: c, ends: make(chan ended, parkInFlight)}
	// 10 000 runs log two lines each: the figures do not read them, and a
	// run that stops on an error is reported by OnEnd.
	d.srv = agentcell.NewServer(c, agentcell.ServerOptions{Logf: func(string, ...any) {}})
	d.srv.OnEnd(func(run journal.RunID, res *host.Result, err error) { d.ends <- ended{run, res, err} })
	return d, nil
}

// close shuts the server down, as a daemon stopping does, and closes the
// cell.
func (d *daemon) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return errors.Join(d.srv.Shutdown(ctx), d.cell.Close(ctx))
}

// parkAll launches one run of code per input, at most parkInFlight at
// once, and waits until every one has stopped: each must have parked. It
// returns the runs, in the order of inputs, with what each waits for.
func (d *daemon) parkAll(ctx context.Context, code []byte, inputs [][]byte) ([]journal.RunID, []*journal.Wait, error) {
	runs := make([]journal.RunID, len(inputs))
	waits := map[journal.RunID]*journal.Wait{}
	sem := make(chan struct{}, parkInFlight)
	launched := make(chan error, 1)
	// Launch journals each run's start durably before it returns: the
	// launchers are many, so that the store groups those commits too.
	next, stop := make(chan int), make(chan struct{})
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }) }
	defer halt() // a harness that gives up launches no more
	go func() {
		defer close(next)
		for i := range inputs {
			select {
			case sem <- struct{}{}:
			case <-stop:
				return
			}
			select {
			case next <- i:
			case <-stop:
				return
			}
		}
	}()
	go func() {
		_, err := concurrently(parkLaunchers, func(int) error {
			for i := range next {
				run, err := d.srv.Launch(ctx, host.RunSpec{Code: code, Name: "park", Input: inputs[i], Grant: parkGrant()}, "started")
				if err != nil {
					halt()
					return fmt.Errorf("bench: launch of run %d of %d: %w", i, len(inputs), err)
				}
				runs[i] = run
			}
			return nil
		})
		launched <- err
	}()
	var lerr error
	done := false
	for range inputs {
		var e ended
		select {
		case e = <-d.ends:
		case lerr = <-launched:
			done = true
			if lerr != nil {
				return nil, nil, lerr
			}
			e = <-d.ends
		}
		<-sem
		if e.err != nil {
			return nil, nil, fmt.Errorf("bench: run %s stopped: %w", e.run, e.err)
		}
		if e.res.Status != journal.StatusParked || e.res.Wait == nil {
			return nil, nil, fmt.Errorf("bench: run %s ended %s (%v), want parked", e.run, e.res.Status, e.res.Err)
		}
		waits[e.run] = e.res.Wait
	}
	if !done {
		if lerr = <-launched; lerr != nil {
			return nil, nil, lerr
		}
	}
	ws := make([]*journal.Wait, len(runs))
	for i, run := range runs {
		if ws[i] = waits[run]; ws[i] == nil {
			return nil, nil, fmt.Errorf("bench: run %s was launched but never stopped", run)
		}
	}
	return runs, ws, nil
}

// countingClock is a clock that counts its timers armed and not yet fired
// or stopped: the daemon's timers of parked runs.
type countingClock struct {
	clock.Clock
	armed atomic.Int64
}

func (c *countingClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.armed.Add(1)
	return &countedTimer{c: c, t: c.Clock.AfterFunc(d, func() { c.armed.Add(-1); f() })}
}

type countedTimer struct {
	c *countingClock
	t clock.Timer
}

func (t *countedTimer) Stop() bool {
	ok := t.t.Stop()
	if ok {
		t.c.armed.Add(-1)
	}
	return ok
}

// memUse is the process's memory at one moment, after a full collection
// that returned what it could to the system.
type memUse struct {
	// rss and anon are VmRSS and RssAnon (/proc/self/status), heap the Go
	// heap's live bytes (runtime.MemStats.HeapAlloc), all in bytes.
	rss, anon, heap float64
}

func readMem() memUse {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memUse{rss: procStatusKiB("VmRSS") * 1024, anon: procStatusKiB("RssAnon") * 1024, heap: float64(ms.HeapAlloc)}
}

// procStatusKiB reads one field, in kB, of /proc/self/status; 0 where the
// system does not say.
func procStatusKiB(field string) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			f, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return f
		}
	}
	return 0
}

// Figure 16: parked runs: what the daemon holds for each (16a, on Linux,
// where /proc says), and the wake latencies (16b, 16c).
func (h *harness) parked(ctx context.Context) ([]Figure, error) {
	code := h.guests.Park
	var figs []Figure
	if runtime.GOOS == "linux" {
		f, err := h.parkedMemory(ctx, code)
		if err != nil {
			return nil, err
		}
		figs = append(figs, f)
	} else {
		h.logf("16a skipped: the resident set is read from /proc/self/status, which %s has not", runtime.GOOS)
	}
	wake, err := h.wakeLatency(ctx, code)
	if err != nil {
		return nil, err
	}
	return append(figs, wake...), nil
}

// Figure 16a: the memory a daemon holds per parked run.
func (h *harness) parkedMemory(ctx context.Context, code []byte) (Figure, error) {
	n := h.cfg.ParkedRuns
	data := dir(h.root, "parked")
	d, err := openDaemon(ctx, data, clock.Real, nil)
	if err != nil {
		return Figure{}, err
	}
	inputs := make([][]byte, n)
	for i := range inputs {
		inputs[i] = parkInput(time.Hour)
	}
	start := time.Now()
	if _, _, err := d.parkAll(ctx, code, inputs); err != nil {
		d.close()
		return Figure{}, err
	}
	parkWall := time.Since(start)
	if err := d.close(); err != nil {
		return Figure{}, err
	}
	h.logf("16a parked %d runs in %.1f s", n, parkWall.Seconds())

	var rss, anon, heap, before []float64
	for r := range h.cfg.Reps {
		d, err := openDaemon(ctx, data, clock.Real, nil)
		if err != nil {
			return Figure{}, err
		}
		// Read every index record once, as Recover does, so that the
		// store's caches hold them before the first reading too: they are
		// the store's, not the parked runs'.
		if _, err := d.cell.Store.Runs(ctx); err != nil {
			d.close()
			return Figure{}, err
		}
		b := readMem()
		if _, err := d.srv.Recover(ctx); err != nil {
			d.close()
			return Figure{}, err
		}
		a := readMem()
		if err := d.close(); err != nil {
			return Figure{}, err
		}
		rss = append(rss, (a.rss-b.rss)/float64(n))
		anon = append(anon, (a.anon-b.anon)/float64(n))
		heap = append(heap, (a.heap-b.heap)/float64(n))
		before = append(before, b.rss/1e6)
		h.logf("16a rep %d: RSS %.0f -> %.0f MB, %.0f B/run; heap %.0f B/run", r, b.rss/1e6, a.rss/1e6, rss[r], heap[r])
	}

	// Once more, on a clock that counts the daemon's timers, to check
	// what it holds: every run parked, none live, one timer each.
	cc := &countingClock{Clock: clock.Real}
	d, err = openDaemon(ctx, data, cc, nil)
	if err != nil {
		return Figure{}, err
	}
	defer d.close()
	if _, err := d.srv.Recover(ctx); err != nil {
		return Figure{}, err
	}
	armed := cc.armed.Load()
	metas, err := d.cell.Store.Runs(ctx)
	if err != nil {
		return Figure{}, err
	}
	parked := 0
	for _, m := range metas {
		if d.cell.Host.Live(m.ID) {
			return Figure{}, fmt.Errorf("bench: run %s is live after Recover, want parked", m.ID)
		}
		if m.Status == journal.StatusParked && m.Wait != nil && m.Wait.Kind == journal.WaitTimer {
			parked++
		}
	}
	if parked != n || len(metas) != n {
		return Figure{}, fmt.Errorf("bench: %d of the store's %d runs are parked on a timer, want all %d", parked, len(metas), n)
	}
	if armed != int64(n) {
		return Figure{}, fmt.Errorf("bench: the daemon armed %d timers for %d parked runs, want one each", armed, n)
	}
	kib := func(v []float64) []float64 {
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = x / 1024
		}
		return out
	}
	return Figure{
		ID: "16a", Name: fmt.Sprintf("memory per parked run, %d runs parked in one daemon", n), Unit: "KiB/run", Better: "lower",
		Value: median(kib(rss)), Samples: kib(rss),
		Measures: fmt.Sprintf("%d runs of testdata/park.wat, each parked on timer.sleep for an hour (journaled durably, instance closed, index record parked), "+
			"launched through cell.Server.Launch at most %d at a time on a cell.Open'ed cell (badgerstore, system clock); the daemon is shut down "+
			"and the cell closed, then opened again with a new server, every index record read once (store.Runs, so that the store's caches hold "+
			"them before both readings), and the process's resident set (VmRSS) read after runtime.GC and debug.FreeOSMemory; then Server.Recover, "+
			"which arms one timer per parked run, and the same reading again: the figure is the difference / %d. Counted: what the daemon keeps "+
			"for a parked run after Recover (its waker's map entry, its timer and closure) and any growth of the process the readings see. "+
			"Not counted: the store's own memory (badger's memtables, block and index caches, mmapped tables) and the cell's engine, which are "+
			"there before the first reading and are the cell's, not the runs'; no module is compiled or instantiated, since a parked run holds "+
			"no instance; and the runs' state, which is their journal on disk. Median over %d reopenings.", n, parkInFlight, n, h.cfg.Reps),
		Goal: &Goal{Text: "<= 4 KiB/run", MaxValue: ptr(4)},
		Extra: map[string]float64{
			"Go heap B/run":            median(heap),
			"RssAnon B/run":            median(anon),
			"runs parked":              float64(parked),
			"timers armed":             float64(armed),
			"RSS before Recover MB":    median(before),
			"time to park the runs s":  parkWall.Seconds(),
			"runs parked per second":   float64(n) / parkWall.Seconds(),
			"runs in flight (parking)": parkInFlight,
		},
		Notes: "The readings are the whole process's; a busy machine or the collector's timing can move them by a few pages, which divided by the run count is small. The check that every run is parked and none live, with one timer each, is a further reopening on a clock that counts the timers.",
	}, nil
}

// wakeSink notes the time each run's run.log event reaches the cell's
// sink: the woken run's next live call.
type wakeSink struct {
	ch chan wakeEvent
}

type wakeEvent struct {
	run journal.RunID
	at  time.Time
}

func newWakeSink() *wakeSink { return &wakeSink{ch: make(chan wakeEvent, 64)} }

func (w *wakeSink) sink(e host.Event) {
	if e.Kind != host.EventRunLog {
		return
	}
	at := time.Now()
	select {
	case w.ch <- wakeEvent{e.Run, at}:
	default: // never blocks the run; the harness then misses the event and says so
	}
}

// next returns when run's live call reached the sink.
func (w *wakeSink) next(run journal.RunID) (time.Time, error) {
	timeout := time.After(wakeWait)
	for {
		select {
		case e := <-w.ch:
			if e.run == run {
				return e.at, nil
			}
			return time.Time{}, fmt.Errorf("bench: run %s made a live call while run %s was being woken", e.run, run)
		case <-timeout:
			return time.Time{}, fmt.Errorf("bench: run %s made no live call within %v of its wake", run, wakeWait)
		}
	}
}

// wakeRuns are the runs of one repetition of figures 16b and 16c: approval
// runs and timer runs, parked; the timer runs' wake times.
type wakeRuns struct {
	approvals     []journal.RunID
	approvalSteps []uint64
	timers        []journal.RunID
	until         []time.Time
}

// wakeInputs are the inputs of k approval runs then k timer runs, the
// i-th timer run sleeping 1 h + (i+1) ms: on a clock that does not move
// while they park, each wakes at a time of its own.
func wakeInputs(k int) [][]byte {
	var in [][]byte
	for range k {
		in = append(in, approvalInput())
	}
	for i := range k {
		in = append(in, parkInput(time.Hour+time.Duration(i+1)*time.Millisecond))
	}
	return in
}

func splitWakeRuns(k int, runs []journal.RunID, waits []*journal.Wait) (*wakeRuns, error) {
	w := &wakeRuns{approvals: runs[:k], timers: runs[k:]}
	for i, wt := range waits {
		switch {
		case i < k && wt.Kind == journal.WaitApproval:
			w.approvalSteps = append(w.approvalSteps, wt.Step)
		case i >= k && wt.Kind == journal.WaitTimer:
			w.until = append(w.until, time.Unix(0, wt.Until))
		default:
			return nil, fmt.Errorf("bench: run %s waits for a %s, want a %s", runs[i], wt.Kind, map[bool]string{true: "approval", false: "timer"}[i < k])
		}
	}
	return w, nil
}

// Figures 16b and 16c: from a deciding vote, and from a timer firing, to
// the parked run's next live call.
func (h *harness) wakeLatency(ctx context.Context, code []byte) ([]Figure, error) {
	k := h.cfg.WakeSamples
	appr, err := newParkApprover()
	if err != nil {
		return nil, err
	}
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	// The daemon: a vote wakes the run through the book's decided hook, a
	// timer through the waker; both Reopen and execute it.
	ddir := dir(h.root, "wake-daemon")
	if err := appr.install(ddir); err != nil {
		return nil, err
	}
	dclk := clock.NewFake(epoch)
	dsink := newWakeSink()
	d, err := openDaemon(ctx, ddir, dclk, dsink.sink)
	if err != nil {
		return nil, err
	}
	defer d.close()
	// The floor: a cell without a server, where nothing wakes a run on its
	// own; the harness reopens and executes it.
	fdir := dir(h.root, "wake-floor")
	if err := appr.install(fdir); err != nil {
		return nil, err
	}
	fclk := clock.NewFake(epoch)
	fsink := newWakeSink()
	fc, err := agentcell.Open(ctx, fdir, agentcell.Options{Clock: fclk, Sink: fsink.sink})
	if err != nil {
		return nil, err
	}
	defer fc.Close(context.Background())

	// The daemon's wake ends when the woken run does, after its live
	// call reached the sink.
	daemonWake := func(run journal.RunID, t0 time.Time) (time.Duration, error) {
		select {
		case e := <-d.ends:
			if e.run != run || e.err != nil || e.res.Status != journal.StatusCompleted {
				return 0, fmt.Errorf("bench: woken, run %s stopped (%v, %+v), want run %s completed", e.run, e.err, e.res, run)
			}
		case <-time.After(wakeWait):
			return 0, fmt.Errorf("bench: woken run %s did not end within %v", run, wakeWait)
		}
		at, err := dsink.next(run)
		if err != nil {
			return 0, err
		}
		return at.Sub(t0), nil
	}
	bareResume := func(run journal.RunID, t0 time.Time) (time.Duration, error) {
		st, err := fc.Host.Reopen(ctx, run)
		if err != nil {
			return 0, err
		}
		res, err := st.Execute(ctx)
		if err != nil {
			return 0, err
		}
		if res.Status != journal.StatusCompleted {
			return 0, fmt.Errorf("bench: resumed, run %s ended %s (%v), want completed", run, res.Status, res.Err)
		}
		at, err := fsink.next(run)
		if err != nil {
			return 0, err
		}
		return at.Sub(t0), nil
	}

	var v50, v99, t50, t99, fv50, fv99, ft50, ft99 []float64
	for r := range h.cfg.Reps {
		// k+1 of each, the first a warm-up whose time is dropped: the
		// module is compiled (the engine keeps it in memory) and the
		// resume path run once before any sample.
		runs, waits, err := d.parkAll(ctx, code, wakeInputs(k+1))
		if err != nil {
			return nil, err
		}
		dw, err := splitWakeRuns(k+1, runs, waits)
		if err != nil {
			return nil, err
		}
		fw, err := parkBare(ctx, fc.Host, code, k+1)
		if err != nil {
			return nil, err
		}
		var vote, timer, fvote, ftimer []time.Duration
		for i := range k + 1 {
			run := dw.approvals[i]
			if err := appr.vote(d.cell.Book, run, dw.approvalSteps[i]); err != nil {
				return nil, err
			}
			lat, err := daemonWake(run, time.Now())
			if err != nil {
				return nil, err
			}
			run = fw.approvals[i]
			if err := appr.vote(fc.Book, run, fw.approvalSteps[i]); err != nil {
				return nil, err
			}
			flat, err := bareResume(run, time.Now())
			if err != nil {
				return nil, err
			}
			if i > 0 {
				vote, fvote = append(vote, lat), append(fvote, flat)
			}
		}
		for i := range k + 1 {
			run := dw.timers[i]
			t0 := time.Now()
			if dclk.Set(dw.until[i]) == 0 {
				return nil, fmt.Errorf("bench: moving the daemon's clock to %v fired no timer: run %s was not armed", dw.until[i], run)
			}
			lat, err := daemonWake(run, t0)
			if err != nil {
				return nil, err
			}
			fclk.Set(fw.until[i])
			flat, err := bareResume(fw.timers[i], time.Now())
			if err != nil {
				return nil, err
			}
			if i > 0 {
				timer, ftimer = append(timer, lat), append(ftimer, flat)
			}
		}
		v50, v99 = append(v50, ms(percentile(vote, 50))), append(v99, ms(percentile(vote, 99)))
		t50, t99 = append(t50, ms(percentile(timer, 50))), append(t99, ms(percentile(timer, 99)))
		fv50, fv99 = append(fv50, ms(percentile(fvote, 50))), append(fv99, ms(percentile(fvote, 99)))
		ft50, ft99 = append(ft50, ms(percentile(ftimer, 50))), append(ft99, ms(percentile(ftimer, 99)))
		h.logf("16 wake rep %d: vote p50 %.2f p99 %.2f ms (bare %.2f/%.2f), timer p50 %.2f p99 %.2f ms (bare %.2f/%.2f)",
			r, v50[r], v99[r], fv50[r], fv99[r], t50[r], t99[r], ft50[r], ft99[r])
	}
	measures := func(parkedOn, start string) string {
		return fmt.Sprintf("a cell daemon in process (cell.Open on a clock.Fake, cell.NewServer, no listeners) with %d+1 runs of testdata/park.wat "+
			"parked per repetition on %s; one at a time, the time from %s to the woken run's next live call (its run.log, timestamped with "+
			"time.Now in the cell's sink), the daemon having resumed it (Store.Meta, Host.Reopen: verify the last segment, the module from the "+
			"engine's in-memory compilation cache, replay of the recorded calls, the parked call asked again and answered, then live). The first "+
			"run of each repetition is a warm-up and not counted; the percentile is over the %d others, the median over %d repetitions.",
			k, parkedOn, start, k, h.cfg.Reps)
	}
	floor := func(name string, v []float64, start string) *Floor {
		return &Floor{Name: name, Unit: "ms", Value: median(v), Samples: v,
			Measures: fmt.Sprintf("the bare resume: runs parked the same way on a cell without a server (Host.Start + Execute), %s, then Host.Reopen + Started.Execute called directly, timed from just before Reopen to the run.log event in the sink, same percentile: what resuming costs without the daemon's wake.", start)}
	}
	goal := func() *Goal { return &Goal{Text: "p99 < 50 ms", MaxValue: ptr(50)} }
	return []Figure{{
		ID: "16b", Name: "wake latency, parked on an approval: deciding vote to next live call, p99", Unit: "ms", Better: "lower",
		Value: median(v99), Samples: v99, Goal: goal(),
		Measures: measures("approval.request (a group of one approver, quorum 1)", "the return of Book.Vote for the deciding vote (signed with approval.Sign by an ed25519 ssh.Signer, before the timing; Vote checks it, stores it durably and tells the daemon, which wakes the run in a goroutine of its own)"),
		Floor:    floor("bare resume (Reopen + Execute) after the vote, p99", fv99, "the vote taken by the book (no daemon to tell)"),
		Extra:    map[string]float64{"p50 ms": median(v50), "floor p50 ms": median(fv50), "samples per repetition": float64(k)},
	}, {
		ID: "16c", Name: "wake latency, parked on a timer: timer firing to next live call, p99", Unit: "ms", Better: "lower",
		Value: median(t99), Samples: t99, Goal: goal(),
		Measures: measures("timer.sleep (each a wake time of its own)", "clock.Fake.Set to the run's wake time (which fires the daemon's timer of that run alone, in a goroutine)"),
		Floor:    floor("bare resume (Reopen + Execute) after the wake time, p99", ft99, "the cell's clock set past the run's wake time"),
		Extra:    map[string]float64{"p50 ms": median(t50), "floor p50 ms": median(ft50), "samples per repetition": float64(k)},
	}}, nil
}

// parkBare starts and executes on h, with no daemon, k approval runs and k
// timer runs of code (wakeInputs), concurrently: each must park.
func parkBare(ctx context.Context, h *host.Host, code []byte, k int) (*wakeRuns, error) {
	inputs := wakeInputs(k)
	runs := make([]journal.RunID, len(inputs))
	waits := make([]*journal.Wait, len(inputs))
	var mu sync.Mutex
	_, err := concurrently(len(inputs), func(i int) error {
		res, err := h.Run(ctx, host.RunSpec{Code: code, Name: "park", Input: inputs[i], Grant: parkGrant()})
		if err != nil {
			return err
		}
		if res.Status != journal.StatusParked || res.Wait == nil {
			return fmt.Errorf("bench: run %s ended %s (%v), want parked", res.Run, res.Status, res.Err)
		}
		mu.Lock()
		runs[i], waits[i] = res.Run, res.Wait
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return splitWakeRuns(k, runs, waits)
}
