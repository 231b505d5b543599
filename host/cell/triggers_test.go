package cell_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/host/cell/trigger"
	"github.com/agentrt/agentrt/internal/clock"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// trigCell is a cell daemon's server with its triggers, on a fake clock,
// serving its API on a loopback TCP listener.
type trigCell struct {
	dir   string
	clk   *clock.Fake
	cell  *cell.Cell
	srv   *cell.Server
	hs    *http.Server
	addr  string
	api   *cell.Client
	token string
}

// trigT0 is the fake clocks' start: on a round hour, so that schedules'
// moments are easy to name.
var trigT0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func openTrigCell(t *testing.T, dir string, clk *clock.Fake) *trigCell {
	t.Helper()
	return openTrigCellWith(t, dir, clk, cell.SchedulerOptions{})
}

// openTrigCellWith is openTrigCell with the scheduler's options.
func openTrigCellWith(t *testing.T, dir string, clk *clock.Fake, sched cell.SchedulerOptions) *trigCell {
	t.Helper()
	ctx := context.Background()
	c, err := cell.Open(ctx, dir, cached(cell.Options{Clock: clk}))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cell.LoadOrCreateAPIToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := cell.NewServer(c, cell.ServerOptions{Logf: t.Logf, APIToken: tok, Triggers: true, Scheduler: sched})
	c.AddSink(srv.Sink)
	ln, err := cell.ListenLoopback("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs, err := srv.Endpoint(ln)
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	tc := &trigCell{dir: dir, clk: clk, cell: c, srv: srv, hs: hs, addr: ln.Addr().String(), token: tok}
	if tc.api, err = cell.DialWith("http://"+tc.addr, cell.DialOptions{Token: tok}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.StartTriggers(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.close)
	return tc
}

// close shuts the server down, as a daemon's drain does, and closes the
// cell; a second call does nothing.
func (tc *trigCell) close() {
	if tc.cell == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tc.hs.Close()
	tc.srv.Shutdown(ctx)
	tc.cell.Close(ctx)
	tc.cell = nil
}

// waitLog polls the log of name until ok says yes, within 60 s of real
// time (a deadline against hanging, not a timed assertion).
func (tc *trigCell) waitLog(t *testing.T, name, what string, ok func([]cell.Firing) bool) []cell.Firing {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		log, err := tc.api.TriggerLog(context.Background(), name, 0)
		if err == nil && ok(log) {
			return log
		}
		if time.Now().After(deadline) {
			t.Fatalf("trigger %s: never %s; log: %+v (%v)", name, what, log, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitIdle waits until no run of the cell is live.
func (tc *trigCell) waitIdle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ci, err := tc.api.Cell(context.Background())
		if err == nil && len(ci.Live) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs still live: %+v %v", ci.Live, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitInactive waits until the trigger of name has seen every run it
// started end (its overlap rule looks at that, not at the cell's runs).
func (tc *trigCell) waitInactive(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ti, err := tc.api.Trigger(context.Background(), name)
		if err == nil && len(ti.Active) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("trigger %s: runs still active: %+v %v", name, ti, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func count(log []cell.Firing, state string) int {
	n := 0
	for _, f := range log {
		if f.State == state {
			n++
		}
	}
	return n
}

// states is the log's states in order, e.g. "started skipped started".
func states(log []cell.Firing) string {
	var s []string
	for _, f := range log {
		s = append(s, f.State)
	}
	return strings.Join(s, " ")
}

var (
	loopOnce sync.Once
	loopWasm []byte
)

// loopModule is host/testdata/wat/loop.wat: a guest that logs and ends.
func loopModule(t *testing.T) []byte {
	loopOnce.Do(func() { loopWasm = testutil.BuildWAT(t, "host/testdata/wat/loop.wat") })
	return loopWasm
}

const runGrant = "capabilities: {run: {}}"

func (tc *trigCell) add(t *testing.T, ts cell.TriggerSpec) cell.TriggerInfo {
	t.Helper()
	if ts.Module == nil {
		ts.Module = loopModule(t)
	}
	if ts.Grant == "" && ts.Token == nil {
		ts.Grant = runGrant
	}
	ti, err := tc.api.AddTrigger(context.Background(), ts)
	if err != nil {
		t.Fatalf("add %s: %v", ts.Name, err)
	}
	return ti
}

// runsOf returns the runs whose origin names trigger name, by seq.
func runsOf(t *testing.T, st interface {
	Runs(context.Context) ([]journal.RunMeta, error)
}, name string) map[uint64][]journal.RunID {
	t.Helper()
	runs, err := st.Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64][]journal.RunID{}
	for _, m := range runs {
		if o := m.Origin; o != nil && o.Kind == cell.OriginTrigger && o.ID == name {
			out[o.Seq] = append(out[o.Seq], m.ID)
		}
	}
	return out
}

// TestTriggerMisfirePolicies stops the daemon for five and a half hours of
// an @hourly schedule and starts it again: skip fires none of the five
// moments missed, once fires the newest, all:3 fires the three newest,
// CatchupSpacing apart and not in a burst; each skip is one log entry.
func TestTriggerMisfirePolicies(t *testing.T) {
	for _, tt := range []struct {
		misfire string
		fired   []time.Time
	}{
		{"skip", nil},
		{"once", []time.Time{trigT0.Add(5 * time.Hour)}},
		{"all:3", []time.Time{trigT0.Add(3 * time.Hour), trigT0.Add(4 * time.Hour), trigT0.Add(5 * time.Hour)}},
	} {
		t.Run(tt.misfire, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "cell")
			clk := clock.NewFake(trigT0.Add(time.Minute))
			tc := openTrigCell(t, dir, clk)
			tc.add(t, cell.TriggerSpec{Name: "hourly", On: "schedule:@hourly", Misfire: tt.misfire})
			tc.close()
			clk.Set(trigT0.Add(5*time.Hour + 30*time.Minute))
			tc = openTrigCell(t, dir, clk)
			log := tc.waitLog(t, "hourly", "logged the missed moments", func(l []cell.Firing) bool {
				return len(l) > 0 && l[0].State == cell.FiringSkipped
			})
			skipped := log[0]
			if want := 5 - len(tt.fired); skipped.Skipped != want || !skipped.Catchup {
				t.Fatalf("skipped entry %+v, want %d moments skipped", skipped, want)
			}
			for i := 1; i < len(tt.fired); i++ {
				// The next catch-up waits its turn: pending until the
				// clock moves CatchupSpacing on.
				tc.waitLog(t, "hourly", "started catch-up "+strconv.Itoa(i), func(l []cell.Firing) bool { return count(l, cell.FiringStarted) == i })
				if got := count(tc.waitLog(t, "hourly", "read", func([]cell.Firing) bool { return true }), cell.FiringPending); got != len(tt.fired)-i {
					t.Fatalf("after %d catch-up firings, %d pending, want %d", i, got, len(tt.fired)-i)
				}
				tc.waitInactive(t, "hourly")
				clk.Advance(trigger.CatchupSpacing)
			}
			log = tc.waitLog(t, "hourly", "fired the catch-up", func(l []cell.Firing) bool { return count(l, cell.FiringStarted) == len(tt.fired) })
			var got []time.Time
			for _, f := range log {
				if f.State == cell.FiringStarted {
					got = append(got, f.Moment.UTC())
					if !f.Catchup {
						t.Errorf("firing %+v is not marked catch-up", f)
					}
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.fired) {
				t.Fatalf("fired %v, want %v (log: %s)", got, tt.fired, states(log))
			}
			// The schedule goes on: the next moment, on time, fires.
			tc.waitInactive(t, "hourly")
			clk.Set(trigT0.Add(6 * time.Hour))
			log = tc.waitLog(t, "hourly", "fired on time", func(l []cell.Firing) bool { return count(l, cell.FiringStarted) == len(tt.fired)+1 })
			if last := log[len(log)-1]; !last.Moment.Equal(trigT0.Add(6*time.Hour)) || last.Catchup {
				t.Fatalf("last firing %+v, want 16:00 on time", last)
			}
			runs := runsOf(t, tc.cell.Store, "hourly")
			if len(runs) != len(tt.fired)+1 {
				t.Fatalf("runs by moment: %v", runs)
			}
			for seq, ids := range runs {
				if len(ids) != 1 {
					t.Fatalf("moment %d has runs %v", seq, ids)
				}
			}
		})
	}
}

// blocker is an HTTP server whose requests wait until released: an
// agent's call to it keeps its run going.
type blocker struct {
	srv     *httptest.Server
	mu      sync.Mutex
	got     int
	release chan struct{}
}

func newBlocker(t *testing.T) *blocker {
	b := &blocker{release: make(chan struct{})}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.got++
		b.mu.Unlock()
		<-b.release
		w.Write([]byte("done"))
	}))
	t.Cleanup(func() {
		b.open()
		b.srv.Close()
	})
	return b
}

func (b *blocker) open() {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.release:
	default:
		close(b.release)
	}
}

func (b *blocker) requests() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.got
}

// waitRequests waits until b has had n requests.
func (b *blocker) waitRequests(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for b.requests() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the blocker had %d requests, want %d", b.requests(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var (
	egressOnce sync.Once
	egressWasm []byte
)

func egressModule(t *testing.T) []byte {
	egressOnce.Do(func() { egressWasm = testutil.BuildGo(t, "host/testdata/agents/egress") })
	return egressWasm
}

// TestTriggerOverlapPolicies fires an every-minute schedule twice while
// its first run is still going (its agent waits on an HTTP server): skip
// logs the second firing skipped and starts nothing, queue starts it once
// the first has ended, allow starts it beside the first.
func TestTriggerOverlapPolicies(t *testing.T) {
	code := egressModule(t)
	for _, overlap := range []string{"skip", "queue", "allow"} {
		t.Run(overlap, func(t *testing.T) {
			b := newBlocker(t)
			clk := clock.NewFake(trigT0)
			tc := openTrigCell(t, filepath.Join(t.TempDir(), "cell"), clk)
			in, _ := json.Marshal([]map[string]string{{"url": b.srv.URL + "/"}})
			u := strings.TrimPrefix(b.srv.URL, "http://")
			tc.add(t, cell.TriggerSpec{Name: "minute", On: "schedule:* * * * *", Module: code, Input: in, Overlap: overlap,
				Grant: fmt.Sprintf("capabilities: {run: {}, http: {hosts: [%q]}}", u)})
			clk.Set(trigT0.Add(time.Minute))
			b.waitRequests(t, 1)
			clk.Set(trigT0.Add(2 * time.Minute))
			switch overlap {
			case "skip":
				log := tc.waitLog(t, "minute", "skipped the second", func(l []cell.Firing) bool { return len(l) == 2 })
				if states(log) != "started skipped" || !strings.Contains(log[1].Reason, "overlap skip") {
					t.Fatalf("log %s (%+v)", states(log), log)
				}
			case "queue":
				log := tc.waitLog(t, "minute", "queued the second", func(l []cell.Firing) bool { return len(l) == 2 })
				if states(log) != "started queued" {
					t.Fatalf("log %s", states(log))
				}
				if n := b.requests(); n != 1 {
					t.Fatalf("%d requests while the second firing is queued", n)
				}
			case "allow":
				b.waitRequests(t, 2)
				log := tc.waitLog(t, "minute", "started both", func(l []cell.Firing) bool { return count(l, cell.FiringStarted) == 2 })
				if states(log) != "started started" {
					t.Fatalf("log %s", states(log))
				}
			}
			b.open()
			want := map[string]string{"skip": "started skipped", "queue": "started started", "allow": "started started"}[overlap]
			log := tc.waitLog(t, "minute", "settled", func(l []cell.Firing) bool { return states(l) == want })
			tc.waitIdle(t)
			runs := runsOf(t, tc.cell.Store, "minute")
			if len(runs) != count(log, cell.FiringStarted) {
				t.Fatalf("runs %v for log %s", runs, states(log))
			}
		})
	}
}

// TestTriggerWaitsForRoomInTheCell: on a cell of one worker and a queue
// of one, an every-minute trigger (overlap allow) fires four times while
// its first run holds the worker (its agent waits on an HTTP server): the
// second firing's run waits in the scheduler's queue, the third is
// refused for want of room (queue_full) and the fourth comes after it.
// Both wait in the trigger's log, queued, the third saying why; the
// refusal is not the trigger's (it is not paused, nothing is counted
// against it). Once the first run ends, each start as room is made, in
// order, and every firing's run completes.
func TestTriggerWaitsForRoomInTheCell(t *testing.T) {
	code := egressModule(t)
	b := newBlocker(t)
	clk := clock.NewFake(trigT0)
	tc := openTrigCellWith(t, filepath.Join(t.TempDir(), "cell"), clk, cell.SchedulerOptions{Workers: 1, MaxQueued: 1})
	in, _ := json.Marshal([]map[string]string{{"url": b.srv.URL + "/"}})
	u := strings.TrimPrefix(b.srv.URL, "http://")
	tc.add(t, cell.TriggerSpec{Name: "minute", On: "schedule:* * * * *", Module: code, Input: in, Overlap: "allow",
		Grant: fmt.Sprintf("capabilities: {run: {}, http: {hosts: [%q]}}", u)})
	clk.Set(trigT0.Add(time.Minute))
	b.waitRequests(t, 1)
	for m := 2; m <= 4; m++ {
		clk.Set(trigT0.Add(time.Duration(m) * time.Minute))
		tc.waitLog(t, "minute", fmt.Sprintf("logged firing %d", m), func(l []cell.Firing) bool { return len(l) == m && l[m-1].State != cell.FiringClaimed })
	}
	log, err := tc.api.TriggerLog(context.Background(), "minute", 0)
	if err != nil {
		t.Fatal(err)
	}
	if states(log) != "started started queued queued" || !strings.Contains(log[2].Reason, "waiting for room in the cell") || !strings.Contains(log[2].Reason, "queue_full") {
		t.Fatalf("log %s (%+v)", states(log), log)
	}
	if ti, err := tc.api.Trigger(context.Background(), "minute"); err != nil || ti.Paused {
		t.Fatalf("trigger %+v (%v): a cell without room must not pause it", ti, err)
	}
	b.open()
	log = tc.waitLog(t, "minute", "started every firing", func(l []cell.Firing) bool { return count(l, cell.FiringStarted) == 4 })
	for i, f := range log {
		if f.Reason != "" || (i > 0 && f.Seq <= log[i-1].Seq) {
			t.Fatalf("firing %d: %+v", i+1, f)
		}
	}
	tc.waitIdle(t)
	started := map[string]bool{}
	for _, f := range log {
		started[f.Run] = true
		if st := runStatus(t, tc, f.Run); st != journal.StatusCompleted {
			t.Fatalf("firing %d's run %s ended %s", f.Seq, f.Run, st)
		}
	}
	// Every other run of the trigger is an attempt the scheduler refused,
	// journaled so.
	for seq, runs := range runsOf(t, tc.cell.Store, "minute") {
		for _, run := range runs {
			if started[run.String()] {
				continue
			}
			m, err := tc.cell.Store.Meta(context.Background(), run)
			if err != nil || m.Status != journal.StatusFailed || !strings.Contains(m.Error, "admission refused (queue_full)") {
				t.Fatalf("run %s of firing %d, not the one it started: %s %q (%v)", run, seq, m.Status, m.Error, err)
			}
		}
	}
	if ti, err := tc.api.Trigger(context.Background(), "minute"); err != nil || ti.Paused {
		t.Fatalf("trigger %+v (%v)", ti, err)
	}
}

// TestTriggerStartsWhenTheQueueMakesRoom: on a cell of one worker and a
// queue of one, a firing refused for a full queue starts as soon as the
// worker takes the run that filled the queue, not when that run ends: the
// first run's agent waits on one gate, every later run's on another, kept
// shut until the refused firing has started.
func TestTriggerStartsWhenTheQueueMakesRoom(t *testing.T) {
	code := egressModule(t)
	first, later := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	seen := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen++
		n := seen
		mu.Unlock()
		if n == 1 {
			<-first
		} else {
			<-later
		}
		w.Write([]byte("done"))
	}))
	shut := sync.OnceFunc(func() { close(later) })
	defer srv.Close()
	defer shut()
	clk := clock.NewFake(trigT0)
	tc := openTrigCellWith(t, filepath.Join(t.TempDir(), "cell"), clk, cell.SchedulerOptions{Workers: 1, MaxQueued: 1})
	in, _ := json.Marshal([]map[string]string{{"url": srv.URL + "/"}})
	tc.add(t, cell.TriggerSpec{Name: "minute", On: "schedule:* * * * *", Module: code, Input: in, Overlap: "allow",
		Grant: fmt.Sprintf("capabilities: {run: {}, http: {hosts: [%q]}}", strings.TrimPrefix(srv.URL, "http://"))})
	for m := 1; m <= 3; m++ {
		clk.Set(trigT0.Add(time.Duration(m) * time.Minute))
		tc.waitLog(t, "minute", fmt.Sprintf("logged firing %d", m), func(l []cell.Firing) bool { return len(l) == m && l[m-1].State != cell.FiringClaimed })
	}
	if log, _ := tc.api.TriggerLog(context.Background(), "minute", 0); states(log) != "started started queued" {
		t.Fatalf("log %s", states(log))
	}
	close(first)
	// The first run ends; the worker takes the second, which then waits on
	// the later gate: the queue has room, and the third firing starts.
	tc.waitLog(t, "minute", "started the third while the second runs", func(l []cell.Firing) bool { return count(l, cell.FiringStarted) == 3 })
	shut()
	tc.waitIdle(t)
}

// TestTriggerWaitsForTheCellBudget: with a cell budget of 10 HTTP
// requests, a parked run holds 6; a trigger whose token allows 6 more
// fires, is refused (cell_budget) and waits in its log, queued. Another
// run of the cell parking and waking does not try it again (no share was
// given back). Cancelling the parked run gives its share back, and the
// firing starts then, and completes.
func TestTriggerWaitsForTheCellBudget(t *testing.T) {
	clk := clock.NewFake(trigT0)
	tc := openTrigCellWith(t, filepath.Join(t.TempDir(), "cell"), clk, cell.SchedulerOptions{CellBudget: "http_requests=10"})
	waiter := testutil.BuildC(t, "host/testdata/agents/waiter")
	gr, err := host.ParseGrant([]byte(waiterGrant))
	if err != nil {
		t.Fatal(err)
	}
	sleep := func(d time.Duration, limit uint64) journal.RunID {
		t.Helper()
		in, _ := json.Marshal(map[string]any{"sleep": int64(d)})
		run, err := tc.srv.Launch(context.Background(), host.RunSpec{Code: waiter, Input: in, Grant: gr,
			Token: limitedToken(t, tc.cell.Key, gr, limit, clk.Now())}, "started")
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "run "+run.String()+" to park", func() bool { return runStatus(t, tc, run.String()) == journal.StatusParked })
		return run
	}
	holder := sleep(time.Hour, 6)
	tc.add(t, cell.TriggerSpec{Name: "budgeted", On: "schedule:* * * * *", Module: waiter, Overlap: "queue",
		Input: []byte(`{"sleep": 0}`), Token: limitedToken(t, tc.cell.Key, gr, 6, clk.Now())})
	clk.Set(trigT0.Add(time.Minute))
	log := tc.waitLog(t, "budgeted", "waited for room", func(l []cell.Firing) bool { return len(l) == 1 && l[0].State == cell.FiringQueued })
	if !strings.Contains(log[0].Reason, "waiting for room in the cell") || !strings.Contains(log[0].Reason, "cell_budget") {
		t.Fatalf("log %+v", log)
	}
	// A run of 1 fits beside the holder and parks: its worker ends, and no
	// share comes back, so the firing is not tried again.
	small := sleep(time.Hour, 1)
	waitFor(t, "the scheduler's workers to be free", func() bool { return tc.srv.SchedulerStats().Busy == 0 })
	refused := func() int {
		n := 0
		for _, runs := range runsOf(t, tc.cell.Store, "budgeted") {
			for _, run := range runs {
				m, err := tc.cell.Store.Meta(context.Background(), run)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(m.Error, "admission refused (cell_budget)") {
					n++
				}
			}
		}
		return n
	}
	if n := refused(); n != 1 {
		t.Fatalf("%d attempts refused for the cell budget before any share came back, want the first only", n)
	}
	// Cancelling the holder gives its share back: the firing starts.
	if err := tc.srv.Cancel(context.Background(), holder); err != nil {
		t.Fatal(err)
	}
	log = tc.waitLog(t, "budgeted", "started once the holder was cancelled", func(l []cell.Firing) bool { return count(l, cell.FiringStarted) == 1 })
	waitFor(t, "the firing's run to complete", func() bool { return runStatus(t, tc, log[0].Run) == journal.StatusCompleted })
	if n := refused(); n != 1 || log[0].Reason != "" {
		t.Fatalf("%d attempts refused; log %+v", n, log)
	}
	if err := tc.srv.Cancel(context.Background(), small); err != nil {
		t.Fatal(err)
	}
}

// runStatus is the status of run as the cell's API says.
func runStatus(t *testing.T, tc *trigCell, run string) journal.RunStatus {
	t.Helper()
	ri, err := tc.api.Run(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	return ri.Status
}

var (
	kv3Once sync.Once
	kv3Wasm []byte
)

// kv3Module writes orders/new/a, orders/new/b and orders/old/c.
func kv3Module(t *testing.T) []byte {
	kv3Once.Do(func() { kv3Wasm = testutil.BuildWAT(t, "host/cell/testdata/kv3.wat") })
	return kv3Wasm
}

// TestTriggerKVFiresOncePerWrite runs a writer of three keys twice: a kv
// trigger on orders/new/ fires once for each of the four writes under its
// prefix, none for the others, and none for a write in another namespace.
func TestTriggerKVFiresOncePerWrite(t *testing.T) {
	tc := openTrigCell(t, filepath.Join(t.TempDir(), "cell"), clock.NewFake(trigT0))
	tc.add(t, cell.TriggerSpec{Name: "orders", On: "kv:orders/new/", Overlap: "allow"})
	ctx := context.Background()
	write := func(ns string) {
		g, err := host.ParseGrant([]byte("capabilities: {run: {}, kv: {namespace: " + ns + "}}"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tc.srv.Launch(ctx, host.RunSpec{Code: kv3Module(t), Grant: g}, "test"); err != nil {
			t.Fatal(err)
		}
	}
	write("orders")
	tc.waitLog(t, "orders", "fired twice", func(l []cell.Firing) bool { return count(l, cell.FiringStarted) == 2 })
	write("elsewhere")
	write("orders")
	log := tc.waitLog(t, "orders", "fired four times", func(l []cell.Firing) bool { return count(l, cell.FiringStarted) == 4 })
	tc.waitIdle(t)
	if log = tc.waitLog(t, "orders", "read", func([]cell.Firing) bool { return true }); len(log) != 4 {
		t.Fatalf("log %s, want four firings", states(log))
	}
	keys := map[string]int{}
	for seq, ids := range runsOf(t, tc.cell.Store, "orders") {
		if len(ids) != 1 {
			t.Fatalf("firing %d has runs %v", seq, ids)
		}
		var in struct {
			Key, Namespace string
		}
		if err := json.Unmarshal(runInput(t, tc.cell, ids[0]), &in); err != nil {
			t.Fatal(err)
		}
		if in.Namespace != "orders" {
			t.Fatalf("firing %d for namespace %q", seq, in.Namespace)
		}
		keys[in.Key]++
	}
	if fmt.Sprint(keys) != "map[new/a:2 new/b:2]" {
		t.Fatalf("keys fired: %v", keys)
	}
}

// runInput returns the input recorded in run's header.
func runInput(t *testing.T, c *cell.Cell, run journal.RunID) []byte {
	t.Helper()
	var in []byte
	err := journal.ReadEntries(context.Background(), c.Store, run, func(e *journal.Entry, _ *journal.Record) error {
		if e.Header != nil {
			in = e.Header.Input
		}
		return errStop
	})
	if err != nil && err != errStop {
		t.Fatal(err)
	}
	return in
}

var errStop = fmt.Errorf("stop")

// TestTriggerFileFiresOncePerArrival watches a folder for *.csv: a file
// written in place, a file moved in and a file in a subfolder created
// later (the glob is **/*.csv) each fire once, when complete; a .txt does
// not fire, nor does a settled file's own chmod.
func TestTriggerFileFiresOncePerArrival(t *testing.T) {
	clk := clock.NewFake(trigT0)
	tc := openTrigCell(t, filepath.Join(t.TempDir(), "cell"), clk)
	inbox, outside := t.TempDir(), t.TempDir()
	tc.add(t, cell.TriggerSpec{Name: "inbox", On: "file:" + inbox + "/**/*.csv", Overlap: "allow"})
	settle := func(n int, what string) []cell.Firing {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			// The watcher sees the file in real time, then waits
			// FileSettle on the cell's clock: move it until it fired.
			clk.Advance(cell.FileSettle)
			log, err := tc.api.TriggerLog(context.Background(), "inbox", 0)
			if err == nil && len(log) >= n {
				return log
			}
			if time.Now().After(deadline) {
				t.Fatalf("never %s: %+v %v", what, log, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// a.csv is written in two parts: it fires once, complete.
	f, err := os.Create(filepath.Join(inbox, "a.csv"))
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("1,2\n")
	f.Sync()
	time.Sleep(50 * time.Millisecond)
	f.WriteString("3,4\n")
	f.Close()
	os.WriteFile(filepath.Join(inbox, "a.txt"), []byte("no"), 0o600)
	settle(1, "fired for a.csv")
	os.WriteFile(filepath.Join(outside, "b.csv"), []byte("3,4\n"), 0o600)
	if err := os.Rename(filepath.Join(outside, "b.csv"), filepath.Join(inbox, "b.csv")); err != nil {
		t.Fatal(err)
	}
	settle(2, "fired for b.csv, moved in")
	os.Chmod(filepath.Join(inbox, "a.csv"), 0o644)
	if err := os.MkdirAll(filepath.Join(inbox, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	// Written at once, before the new folder's watch may be in place: the
	// folder's files are taken when its creation is seen.
	os.WriteFile(filepath.Join(inbox, "sub", "c.csv"), []byte("5,6\n"), 0o600)
	settle(3, "fired for sub/c.csv")
	// A firing is claimed before its run starts: wait until none is left
	// claimed and no run is live, then move the clock on and look again.
	tc.waitLog(t, "inbox", "settled", func(l []cell.Firing) bool { return count(l, cell.FiringClaimed) == 0 })
	tc.waitIdle(t)
	clk.Advance(10 * cell.FileSettle)
	log := tc.waitLog(t, "inbox", "read", func([]cell.Firing) bool { return true })
	if len(log) != 3 || count(log, cell.FiringStarted) != 3 {
		t.Fatalf("log %s, want three firings", states(log))
	}
	paths := map[string]bool{}
	for _, ids := range runsOf(t, tc.cell.Store, "inbox") {
		var in struct {
			Path string
			Size int
		}
		json.Unmarshal(runInput(t, tc.cell, ids[0]), &in)
		rel, _ := filepath.Rel(inbox, in.Path)
		paths[filepath.ToSlash(rel)] = true
		if rel == "a.csv" && in.Size != 8 {
			t.Errorf("a.csv fired at %d bytes, want all 8", in.Size)
		}
	}
	if fmt.Sprint(paths) != "map[a.csv:true b.csv:true sub/c.csv:true]" {
		t.Fatalf("fired for %v", paths)
	}
}

// hookPost posts body to the webhook of name on tc's TCP listener, with no
// API token, and the headers given.
func (tc *trigCell) hookPost(t *testing.T, name string, body []byte, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+tc.addr+cell.HookPrefix+name, bytes.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// TestTriggerWebhookSignature: a webhook without a signature, with a bad
// one, with one over another body, with a stale timestamp, and replayed,
// is refused; a good one fires once, its body the run's input.
func TestTriggerWebhookSignature(t *testing.T) {
	clk := clock.NewFake(trigT0)
	tc := openTrigCell(t, filepath.Join(t.TempDir(), "cell"), clk)
	ti := tc.add(t, cell.TriggerSpec{Name: "deploy", On: "webhook"})
	if len(ti.Secret) != 64 || ti.Webhook != "/v1/hooks/deploy" {
		t.Fatalf("add answered %+v", ti)
	}
	if fi, err := os.Stat(filepath.Join(tc.dir, "triggers", "deploy.secret")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file: %v %v", fi, err)
	}
	if again, _ := tc.api.Trigger(context.Background(), "deploy"); again.Secret != "" {
		t.Fatal("the secret is shown again")
	}
	body := []byte(`{"ref":"main"}`)
	now := clk.Now()
	ts := strconv.FormatInt(now.Unix(), 10)
	good := map[string]string{trigger.HeaderTimestamp: ts, trigger.HeaderSignature: trigger.Sign(ti.Secret, now, body)}
	for _, c := range []struct {
		name string
		body []byte
		hdr  map[string]string
		code int
		want string
	}{
		{"missing", body, nil, 401, "no signature"},
		{"bad", body, map[string]string{trigger.HeaderTimestamp: ts, trigger.HeaderSignature: "v1=" + strings.Repeat("00", 32)}, 401, "does not match"},
		{"other body", []byte(`{"ref":"evil"}`), good, 401, "does not match"},
		{"other secret", body, map[string]string{trigger.HeaderTimestamp: ts, trigger.HeaderSignature: trigger.Sign(strings.Repeat("a", 64), now, body)}, 401, "does not match"},
		{"stale", body, map[string]string{trigger.HeaderTimestamp: strconv.FormatInt(now.Add(-6*time.Minute).Unix(), 10),
			trigger.HeaderSignature: trigger.Sign(ti.Secret, now.Add(-6*time.Minute), body)}, 401, "replay window"},
		{"good", body, good, 202, `"state":"started"`},
		{"replayed", body, good, 409, "a replay"},
	} {
		code, resp := tc.hookPost(t, "deploy", c.body, c.hdr)
		if code != c.code || !strings.Contains(resp, c.want) {
			t.Errorf("%s: %d %s, want %d with %q", c.name, code, resp, c.code, c.want)
		}
	}
	log := tc.waitLog(t, "deploy", "read", func([]cell.Firing) bool { return true })
	if len(log) != 1 || log[0].State != cell.FiringStarted {
		t.Fatalf("log %+v, want one firing", log)
	}
	run, _ := journal.ParseRunID(log[0].Run)
	if in := runInput(t, tc.cell, run); !bytes.Equal(in, body) {
		t.Fatalf("the run's input is %q, want the body", in)
	}
}

// TestTriggerDeniedStartIsRecorded: a trigger whose module imports kv
// under a grant of run alone is refused at every start; each refusal is
// logged with the cell's reason, and the third pauses the trigger, which
// says why and fires no more.
func TestTriggerDeniedStartIsRecorded(t *testing.T) {
	clk := clock.NewFake(trigT0)
	tc := openTrigCell(t, filepath.Join(t.TempDir(), "cell"), clk)
	tc.add(t, cell.TriggerSpec{Name: "denied", On: "schedule:* * * * *", Module: kv3Module(t)})
	for i := 1; i <= cell.MaxRefusals; i++ {
		clk.Set(trigT0.Add(time.Duration(i) * time.Minute))
		tc.waitLog(t, "denied", "refused "+strconv.Itoa(i), func(l []cell.Firing) bool { return count(l, cell.FiringRefused) == i })
	}
	log := tc.waitLog(t, "denied", "read", func([]cell.Firing) bool { return true })
	for _, f := range log {
		if f.State != cell.FiringRefused || !strings.Contains(f.Reason, "kv") || f.Run != "" {
			t.Fatalf("firing %+v, want refused naming kv", f)
		}
	}
	ti, err := tc.api.Trigger(context.Background(), "denied")
	if err != nil {
		t.Fatal(err)
	}
	if !ti.Paused || !strings.Contains(ti.PausedReason, "3 starts in a row refused") || !strings.Contains(ti.PausedReason, "kv") {
		t.Fatalf("trigger %+v, want paused with the reason", ti)
	}
	clk.Set(trigT0.Add(10 * time.Minute))
	if log2 := tc.waitLog(t, "denied", "read", func([]cell.Firing) bool { return true }); len(log2) != len(log) {
		t.Fatalf("a paused trigger fired: %s", states(log2))
	}
	// Resumed, it fires again from now on, without catching up.
	if _, err := tc.api.ResumeTrigger(context.Background(), "denied"); err != nil {
		t.Fatal(err)
	}
	clk.Set(trigT0.Add(11 * time.Minute))
	n := len(log)
	log = tc.waitLog(t, "denied", "fired after resume", func(l []cell.Firing) bool { return count(l, cell.FiringRefused) == n+1 })
	if last := log[len(log)-1]; !last.Moment.Equal(trigT0.Add(11*time.Minute)) || last.State != cell.FiringRefused {
		t.Fatalf("after resume: %+v", last)
	}
}

// TestTriggerTokenFreshPerFiring: a trigger granted by a token (issued by
// the cell's key, carrying its key) starts a run at every firing, though
// the cell takes a token once: each firing presents its own attenuation.
// A sealed token is refused at add, naming why.
func TestTriggerTokenFreshPerFiring(t *testing.T) {
	clk := clock.NewFake(trigT0)
	tc := openTrigCell(t, filepath.Join(t.TempDir(), "cell"), clk)
	tok, err := capability.Issue(tc.cell.Key, capability.Claims{Caps: capability.Caps{Run: &capability.Unit{}},
		Audience: tc.cell.Key.Public().(ed25519.PublicKey), NotBefore: trigT0.Add(-time.Hour), Expires: trigT0.Add(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := capability.Seal(tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tc.api.AddTrigger(context.Background(), cell.TriggerSpec{Name: "sealed", On: "schedule:@hourly", Module: loopModule(t), Token: sealed})
	if err == nil || !strings.Contains(err.Error(), "carries its key") {
		t.Fatalf("a sealed token: %v", err)
	}
	tc.add(t, cell.TriggerSpec{Name: "tok", On: "schedule:* * * * *", Token: tok})
	for i := 1; i <= 3; i++ {
		// The overlap rule skips a firing while the last run is active:
		// wait for the trigger to see its end, not only the cell.
		tc.waitInactive(t, "tok")
		clk.Set(trigT0.Add(time.Duration(i) * time.Minute))
		tc.waitLog(t, "tok", "started "+strconv.Itoa(i), func(l []cell.Firing) bool { return count(l, cell.FiringStarted) == i })
	}
	if log := tc.waitLog(t, "tok", "read", func([]cell.Firing) bool { return true }); states(log) != "started started started" {
		t.Fatalf("log %s %+v", states(log), log)
	}
}

// TestTriggerSurvivesRestart: a trigger added, paused and resumed is
// there after a restart, with its log, and fires at its next moment.
func TestTriggerSurvivesRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cell")
	clk := clock.NewFake(trigT0)
	tc := openTrigCell(t, dir, clk)
	tc.add(t, cell.TriggerSpec{Name: "every", On: "schedule:*/5 * * * *", Misfire: "skip"})
	tc.add(t, cell.TriggerSpec{Name: "hook", On: "webhook"})
	tc.add(t, cell.TriggerSpec{Name: "gone", On: "webhook"})
	if err := tc.api.RemoveTrigger(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
	clk.Set(trigT0.Add(5 * time.Minute))
	tc.waitLog(t, "every", "fired", func(l []cell.Firing) bool { return count(l, cell.FiringStarted) == 1 })
	tc.waitIdle(t)
	tc.close()
	tc = openTrigCell(t, dir, clk)
	all, err := tc.api.Triggers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Name != "every" || all[1].Name != "hook" || all[0].Misfire != "skip" || all[0].Last == nil {
		t.Fatalf("after restart: %+v", all)
	}
	if all[0].Next == nil || !all[0].Next.Equal(trigT0.Add(10*time.Minute)) {
		t.Fatalf("next moment %v, want 10:10", all[0].Next)
	}
	clk.Set(trigT0.Add(10 * time.Minute))
	log := tc.waitLog(t, "every", "fired after the restart", func(l []cell.Firing) bool { return count(l, cell.FiringStarted) == 2 })
	if len(log) != 2 {
		t.Fatalf("log %s", states(log))
	}
	if _, err := tc.api.Trigger(context.Background(), "gone"); err == nil {
		t.Fatal("a removed trigger is back")
	}
	// A webhook trigger whose secret is lost comes back paused, saying
	// so, and takes no webhook, resumed or not: it can only be removed.
	tc.close()
	if err := os.Remove(filepath.Join(dir, "triggers", "hook.secret")); err != nil {
		t.Fatal(err)
	}
	tc = openTrigCell(t, dir, clk)
	ti, err := tc.api.Trigger(context.Background(), "hook")
	if err != nil || !ti.Paused || !strings.Contains(ti.PausedReason, "webhook secret") {
		t.Fatalf("without its secret: %+v %v", ti, err)
	}
	if _, err := tc.api.ResumeTrigger(context.Background(), "hook"); err != nil {
		t.Fatal(err)
	}
	body := []byte("{}")
	code, resp := tc.hookPost(t, "hook", body, map[string]string{trigger.HeaderTimestamp: strconv.FormatInt(clk.Now().Unix(), 10),
		trigger.HeaderSignature: trigger.Sign("", clk.Now(), body)})
	if code != http.StatusConflict || !strings.Contains(resp, "no secret") {
		t.Fatalf("a webhook signed with an empty key: %d %s", code, resp)
	}
	if err := tc.api.RemoveTrigger(context.Background(), "hook"); err != nil {
		t.Fatal(err)
	}
}

// TestTriggerMetric: runs_failed>1/10m fires once when the second failed
// run ends, not again while it holds, and again after it stopped holding
// and holds once more.
func TestTriggerMetric(t *testing.T) {
	clk := clock.NewFake(trigT0)
	tc := openTrigCell(t, filepath.Join(t.TempDir(), "cell"), clk)
	_, err := tc.api.AddTrigger(context.Background(), cell.TriggerSpec{Name: "q", On: "metric:queue_depth>3", Module: loopModule(t), Grant: runGrant})
	if err == nil || !strings.Contains(err.Error(), "no queue") {
		t.Fatalf("queue_depth: %v", err)
	}
	tc.add(t, cell.TriggerSpec{Name: "alarm", On: "metric:runs_failed>1/10m"})
	fail := func() {
		t.Helper()
		// A module that imports kv under a run-only grant is refused by
		// the link check: its run is journaled, and ends failed.
		g, _ := host.ParseGrant([]byte(runGrant))
		if _, err := tc.srv.Launch(context.Background(), host.RunSpec{Code: kv3Module(t), Grant: g}, "test"); err == nil {
			t.Fatal("the link check let kv3 start")
		}
	}
	// holds waits, moving the clock a tick at a time, until the trigger's
	// threshold holds (or not) at a look.
	holds := func(want bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			clk.Advance(cell.MetricTick)
			ti, err := tc.api.Trigger(context.Background(), "alarm")
			if err == nil && ti.Holds == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the threshold never came to hold=%v: %+v %v", want, ti, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	fail()
	fail()
	holds(true)
	tc.waitLog(t, "alarm", "fired", func(l []cell.Firing) bool { return count(l, cell.FiringStarted) == 1 })
	fail()
	clk.Advance(cell.MetricTick)
	clk.Advance(cell.MetricTick)
	tc.waitIdle(t)
	if log := tc.waitLog(t, "alarm", "read", func([]cell.Firing) bool { return true }); len(log) != 1 {
		t.Fatalf("fired again while the threshold held: %s", states(log))
	}
	// Ten minutes on, the failures are out of the window: it stops
	// holding, and two more make it hold again.
	clk.Advance(10 * time.Minute)
	holds(false)
	fail()
	fail()
	holds(true)
	log := tc.waitLog(t, "alarm", "fired again", func(l []cell.Firing) bool { return count(l, cell.FiringStarted) == 2 })
	if len(log) != 2 {
		t.Fatalf("log %s", states(log))
	}
	// The spend of the runs ended in the window comes from their budget
	// records; none of these spent anything. (A journal that did not read
	// would keep the threshold from being looked at, and it from firing.)
	tc.waitIdle(t)
	tc.add(t, cell.TriggerSpec{Name: "cheap", On: "metric:spend_usd<0.01/1h"})
	tc.waitLog(t, "cheap", "fired", func(l []cell.Firing) bool {
		clk.Advance(cell.MetricTick)
		return count(l, cell.FiringStarted) == 1
	})
}

// TestTriggerExpiredTokenIsRefused: a trigger's token that expires between
// two firings starts the first run, and the next start is refused, logged
// with the cell's reason (expired), not retried.
func TestTriggerExpiredTokenIsRefused(t *testing.T) {
	clk := clock.NewFake(trigT0)
	tc := openTrigCell(t, filepath.Join(t.TempDir(), "cell"), clk)
	tok, err := capability.Issue(tc.cell.Key, capability.Claims{Caps: capability.Caps{Run: &capability.Unit{}},
		Audience: tc.cell.Key.Public().(ed25519.PublicKey), NotBefore: trigT0.Add(-time.Hour), Expires: trigT0.Add(90 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	tc.add(t, cell.TriggerSpec{Name: "short", On: "schedule:* * * * *", Token: tok})
	clk.Set(trigT0.Add(time.Minute))
	tc.waitLog(t, "short", "started", func(l []cell.Firing) bool { return count(l, cell.FiringStarted) == 1 })
	tc.waitInactive(t, "short")
	clk.Set(trigT0.Add(2 * time.Minute))
	log := tc.waitLog(t, "short", "refused", func(l []cell.Firing) bool { return count(l, cell.FiringRefused) == 1 })
	if f := log[len(log)-1]; !strings.Contains(f.Reason, "expired") || f.Run != "" {
		t.Fatalf("the refusal %+v, want it to say the token expired", f)
	}
	ti, err := tc.api.Trigger(context.Background(), "short")
	if err != nil || ti.Refusals != 1 || ti.Paused {
		t.Fatalf("after one refusal: %+v %v", ti, err)
	}
}

// TestTriggerRunEndingBeforeItIsNotedFreesTheTrigger holds each firing's
// start between the launch of its run and the noting of the run as active
// until the run has ended, the order a short run takes on a busy machine:
// the trigger still hears of the end, so the next moment is not taken for
// an overlap, and the trigger is left with no active run.
func TestTriggerRunEndingBeforeItIsNotedFreesTheTrigger(t *testing.T) {
	clk := clock.NewFake(trigT0)
	tc := openTrigCell(t, filepath.Join(t.TempDir(), "cell"), clk)
	held := make(chan journal.RunID, 4)
	cell.SetTriggerLaunchHook(func(run journal.RunID) {
		deadline := time.Now().Add(60 * time.Second)
		for {
			m, err := tc.cell.Store.Meta(context.Background(), run)
			if err == nil && m.Status == journal.StatusCompleted {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("run %s never completed: %+v %v", run, m, err)
				break
			}
			time.Sleep(time.Millisecond)
		}
		// The run's end hooks run once its status is written; give them
		// the lead the old order gave them.
		time.Sleep(50 * time.Millisecond)
		held <- run
	})
	t.Cleanup(func() { cell.SetTriggerLaunchHook(nil) })
	tc.add(t, cell.TriggerSpec{Name: "minute", On: "schedule:* * * * *", Overlap: "skip"})
	for i := 1; i <= 2; i++ {
		clk.Set(trigT0.Add(time.Duration(i) * time.Minute))
		select {
		case <-held:
		case <-time.After(60 * time.Second):
			t.Fatalf("firing %d never launched", i)
		}
		tc.waitInactive(t, "minute")
	}
	log := tc.waitLog(t, "minute", "started both", func(l []cell.Firing) bool { return len(l) == 2 })
	if states(log) != "started started" {
		t.Fatalf("log %s (%+v)", states(log), log)
	}
}

// TestTriggerPriority: a trigger's priority is stored with it, shown,
// and given to every run it starts; one out of 0..9 is refused and
// nothing is stored.
func TestTriggerPriority(t *testing.T) {
	tc := openTrigCell(t, filepath.Join(t.TempDir(), "cell"), clock.NewFake(trigT0))
	ctx := context.Background()
	for _, p := range []int{-1, 10} {
		_, err := tc.api.AddTrigger(ctx, cell.TriggerSpec{Name: "bad", On: "kv:orders/new/", Module: loopModule(t), Grant: runGrant, Priority: p})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("priority %d: the priority of the trigger's runs is 1 (lowest) to 9", p)) {
			t.Fatalf("priority %d: %v", p, err)
		}
	}
	if ti := tc.add(t, cell.TriggerSpec{Name: "orders", On: "kv:orders/new/", Overlap: "allow", Priority: 8}); ti.Priority != 8 {
		t.Fatalf("added with priority %d, want 8", ti.Priority)
	}
	if ti := tc.add(t, cell.TriggerSpec{Name: "plain", On: "webhook"}); ti.Priority != cell.DefaultPriority {
		t.Fatalf("added without a priority: %d, want %d", ti.Priority, cell.DefaultPriority)
	}
	list, err := tc.api.Triggers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "orders" || list[0].Priority != 8 {
		t.Fatalf("triggers %+v", list)
	}
	g, err := host.ParseGrant([]byte("capabilities: {run: {}, kv: {namespace: orders}}"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tc.srv.Launch(ctx, host.RunSpec{Code: kv3Module(t), Grant: g}, "test"); err != nil {
		t.Fatal(err)
	}
	tc.waitLog(t, "orders", "fired twice", func(l []cell.Firing) bool { return count(l, cell.FiringStarted) == 2 })
	tc.waitIdle(t)
	fired := runsOf(t, tc.cell.Store, "orders")
	if len(fired) != 2 {
		t.Fatalf("firings %v", fired)
	}
	for seq, ids := range fired {
		for _, id := range ids {
			m, err := tc.cell.Store.Meta(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if m.Priority != 8 {
				t.Fatalf("firing %d's run %s has priority %d, want the trigger's 8", seq, id, m.Priority)
			}
		}
	}
}
