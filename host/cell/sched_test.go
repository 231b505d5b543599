package cell_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/clock"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// gate is an HTTP server the waiter agent posts to ("hits"): a POST
// "before" to a path under /hold/ is held until the test releases it, so a
// run holds its worker inside an effect for as long as the test wants; it
// records the order of the "before" posts by path and the most held at
// once.
type gate struct {
	*httptest.Server
	mu      sync.Mutex
	order   []string
	held    int
	maxHeld int
	arrived chan string
	release chan struct{}
}

func newGate(t *testing.T) *gate {
	g := &gate{arrived: make(chan string, 1024), release: make(chan struct{})}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if string(body) == "before" {
			g.mu.Lock()
			g.order = append(g.order, r.URL.Path)
			g.held++
			g.maxHeld = max(g.maxHeld, g.held)
			g.mu.Unlock()
			g.arrived <- r.URL.Path
			if strings.HasPrefix(r.URL.Path, "/hold/") {
				<-g.release
			}
			g.mu.Lock()
			g.held--
			g.mu.Unlock()
		}
		w.Write([]byte("ok"))
	}))
	t.Cleanup(func() {
		g.open()
		g.Close()
	})
	return g
}

// open releases every held post, now and to come.
func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.release:
	default:
		close(g.release)
	}
}

// wait returns the path of the next "before" post.
func (g *gate) wait(t *testing.T) string {
	t.Helper()
	select {
	case p := <-g.arrived:
		return p
	case <-time.After(60 * time.Second):
		t.Fatal("no run posted within 60 s")
		return ""
	}
}

func (g *gate) seen() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.order)
}

// schedCell is a daemon in process with a scheduler of its own options.
type schedCell struct {
	t     *testing.T
	dir   string
	clock *clock.Fake
	cell  *cell.Cell
	srv   *cell.Server
	ended chan journal.RunID
	code  []byte
}

func openSchedCell(t *testing.T, dir string, clk *clock.Fake, so cell.SchedulerOptions) *schedCell {
	t.Helper()
	c, err := cell.Open(context.Background(), dir, cached(cell.Options{Clock: clk}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := so.Check(); err != nil {
		t.Fatal(err)
	}
	p := &schedCell{t: t, dir: dir, clock: clk, cell: c, ended: make(chan journal.RunID, 1024),
		srv:  cell.NewServer(c, cell.ServerOptions{Logf: t.Logf, Scheduler: so}),
		code: testutil.BuildC(t, "host/testdata/agents/waiter")}
	p.srv.OnEnd(func(run journal.RunID, _ *host.Result, _ error) { p.ended <- run })
	if _, err := p.srv.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *schedCell) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.srv.Shutdown(ctx); err != nil {
		p.t.Fatal(err)
	}
	if err := p.cell.Close(ctx); err != nil {
		p.t.Fatal(err)
	}
}

// launch starts a waiter run with input, at priority prio, from origin
// (nil: a submission).
func (p *schedCell) launch(input map[string]any, prio uint8, origin *journal.Origin) (journal.RunID, error) {
	p.t.Helper()
	g, err := host.ParseGrant([]byte(waiterGrant))
	if err != nil {
		p.t.Fatal(err)
	}
	in, _ := json.Marshal(input)
	return p.srv.Launch(context.Background(), host.RunSpec{Code: p.code, Input: in, Grant: g, Priority: prio, Origin: origin}, "started")
}

func (p *schedCell) mustLaunch(input map[string]any, prio uint8, origin *journal.Origin) journal.RunID {
	p.t.Helper()
	run, err := p.launch(input, prio, origin)
	if err != nil {
		p.t.Fatal(err)
	}
	return run
}

// endOf waits until each of runs has stopped once.
func (p *schedCell) endOf(runs ...journal.RunID) {
	p.t.Helper()
	want := map[journal.RunID]bool{}
	for _, r := range runs {
		want[r] = true
	}
	for len(want) > 0 {
		select {
		case r := <-p.ended:
			delete(want, r)
		case <-time.After(60 * time.Second):
			p.t.Fatalf("%d runs did not stop within 60 s", len(want))
		}
	}
}

func (p *schedCell) status(run journal.RunID) journal.RunStatus {
	p.t.Helper()
	m, err := p.cell.Store.Meta(context.Background(), run)
	if err != nil {
		p.t.Fatal(err)
	}
	return m.Status
}

// idle returns the scheduler's stats once no worker is busy and no run
// waits, or after 10 s: a worker is given back just after its run's end
// hooks (endOf), so the last run's may still be busy for a moment.
func (p *schedCell) idle(t *testing.T) cell.SchedulerStats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := p.srv.SchedulerStats()
		if (st.Busy == 0 && st.Queued == 0) || time.Now().After(deadline) {
			return st
		}
		time.Sleep(time.Millisecond)
	}
}

// queued returns how many runs wait for a worker (Launch queues a run
// before it returns).
func (p *schedCell) queued() int { return p.srv.SchedulerStats().Queued }

func TestSchedulerOptionsOutOfRangeAreRefused(t *testing.T) {
	for _, o := range []cell.SchedulerOptions{{Workers: -1}, {Workers: cell.MaxWorkers + 1}, {MaxQueued: -3}, {Aging: -time.Second}, {RunBudget: "bogus=1"}, {CellBudget: "usd=x"}} {
		if _, err := o.Check(); err == nil {
			t.Errorf("%+v was taken", o)
		}
	}
	o, err := cell.SchedulerOptions{}.Check()
	if err != nil || o.Workers != cell.DefaultWorkers() || o.MaxQueued != cell.DefaultMaxQueued || o.Aging != cell.DefaultAging {
		t.Fatalf("defaults %+v, %v", o, err)
	}
}

// TestPoolBoundIsNeverExceeded: 12 runs each hold their worker inside an
// HTTP call; with 3 workers, 3 are in the call and 9 wait, and as the
// calls are released every run completes with never more than 3 at once.
func TestPoolBoundIsNeverExceeded(t *testing.T) {
	g := newGate(t)
	p := openSchedCell(t, t.TempDir(), clock.NewFake(time.Now()), cell.SchedulerOptions{Workers: 3, Aging: time.Hour})
	defer p.close()
	var runs []journal.RunID
	for range 12 {
		runs = append(runs, p.mustLaunch(map[string]any{"hits": g.URL + "/hold/x"}, 0, nil))
	}
	for range 3 {
		g.wait(t)
	}
	st := p.srv.SchedulerStats()
	if st.Busy != 3 || st.Queued != 9 {
		t.Fatalf("with 3 runs in their calls: %d busy, %d queued; want 3 and 9", st.Busy, st.Queued)
	}
	g.open()
	p.endOf(runs...)
	for _, r := range runs {
		if s := p.status(r); s != journal.StatusCompleted {
			t.Fatalf("run %s %s", r, s)
		}
	}
	st = p.idle(t)
	if st.MaxBusy != 3 || g.maxHeld > 3 || st.Busy != 0 || st.Queued != 0 || st.Dispatched != 12 {
		t.Fatalf("max busy %d, max in calls %d, busy %d, queued %d, dispatched %d: the pool of 3 was exceeded or lost a run",
			st.MaxBusy, g.maxHeld, st.Busy, st.Queued, st.Dispatched)
	}
}

// TestParkedRunsHoldNoWorker: with 2 workers, 8 runs park on timers, and a
// new run still executes and completes; woken, the parked runs queue for
// the workers again and all complete.
func TestParkedRunsHoldNoWorker(t *testing.T) {
	start := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	p := openSchedCell(t, t.TempDir(), clk, cell.SchedulerOptions{Workers: 2, Aging: time.Hour})
	defer p.close()
	var sleepers []journal.RunID
	for range 8 {
		sleepers = append(sleepers, p.mustLaunch(map[string]any{"sleep": int64(time.Hour)}, 0, nil))
	}
	p.endOf(sleepers...)
	for _, r := range sleepers {
		if s := p.status(r); s != journal.StatusParked {
			t.Fatalf("run %s is %s, want parked", r, s)
		}
	}
	if st := p.idle(t); st.Busy != 0 || st.Queued != 0 {
		t.Fatalf("8 parked runs: %d workers busy, %d queued; want none", st.Busy, st.Queued)
	}
	fresh := p.mustLaunch(map[string]any{}, 0, nil)
	p.endOf(fresh)
	if s := p.status(fresh); s != journal.StatusCompleted {
		t.Fatalf("a new run beside 8 parked ones on 2 workers: %s", s)
	}
	clk.Advance(time.Hour)
	p.endOf(sleepers...)
	for _, r := range sleepers {
		if s := p.status(r); s != journal.StatusCompleted {
			t.Fatalf("woken run %s: %s", r, s)
		}
	}
	if st := p.srv.SchedulerStats(); st.MaxBusy > 2 {
		t.Fatalf("max busy %d on 2 workers", st.MaxBusy)
	}
}

// TestQueueServesPriorityFirstThenRoundRobin: on one worker held by a
// blocker, runs queued at priorities 1, 9 and 5 go 9, 5, 1; then two
// tasks with four attempts each, queued task a's first, interleave.
func TestQueueServesPriorityFirstThenRoundRobin(t *testing.T) {
	g := newGate(t)
	p := openSchedCell(t, t.TempDir(), clock.NewFake(time.Now()), cell.SchedulerOptions{Workers: 1, Aging: time.Hour})
	defer p.close()
	blocker := p.mustLaunch(map[string]any{"hits": g.URL + "/hold/blocker"}, 0, nil)
	g.wait(t)
	var runs []journal.RunID
	for _, q := range []struct {
		name string
		prio uint8
	}{{"low", 1}, {"high", 9}, {"mid", 5}} {
		runs = append(runs, p.mustLaunch(map[string]any{"hits": g.URL + "/" + q.name}, q.prio, nil))
	}
	for _, task := range []string{"a", "b"} {
		for i := range 4 {
			runs = append(runs, p.mustLaunch(map[string]any{"hits": g.URL + "/" + task}, 0, &journal.Origin{Kind: cell.OriginTask, ID: task, Seq: uint64(i + 1)}))
		}
	}
	if n := p.queued(); n != 11 {
		t.Fatalf("%d queued, want 11", n)
	}
	// The order of the tasks' runs between themselves is what the test
	// is about; the three priorities go first as 9, 5 (then the tasks',
	// also 5, in turn after it), 1 last.
	g.open()
	p.endOf(append(runs, blocker)...)
	got := strings.Join(g.seen(), " ")
	want := "/hold/blocker /high /mid /a /b /a /b /a /b /a /b /low"
	if got != want {
		t.Fatalf("dispatch order\n got %s\nwant %s", got, want)
	}
}

// TestAdmissionRefusesWithAReason: a policy that forbids the agent, a
// budget over the cell's run budget (or none where it bounds one), a full
// queue and a priority out of range are refused, each with its reason; a
// refused run is journaled as failed with it.
func TestAdmissionRefusesWithAReason(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, cell.PoliciesDir), 0o700); err != nil {
		t.Fatal(err)
	}
	pol := "permit (principal, action, resource);\n" +
		"forbid (principal in Agent::\"miner\", action == Action::\"agent.spawn\", resource);\n"
	if err := os.WriteFile(filepath.Join(dir, cell.PoliciesDir, "admit.cedar"), []byte(pol), 0o600); err != nil {
		t.Fatal(err)
	}
	g := newGate(t)
	p := openSchedCell(t, dir, clock.NewFake(time.Now()), cell.SchedulerOptions{Workers: 1, MaxQueued: 1, Aging: time.Hour, RunBudget: "http_requests=10"})
	defer p.close()
	// launch starts a run of agent name granted http_requests=limit (0:
	// no budget).
	launch := func(name string, limit uint64, prio uint8) (journal.RunID, error) {
		t.Helper()
		return p.launchLimited(map[string]any{"hits": g.URL + "/hold/" + name}, name, limit, prio)
	}
	refused := func(err error, reason string) {
		t.Helper()
		var ae *cell.AdmissionError
		if !errors.As(err, &ae) || ae.Reason != reason {
			t.Fatalf("want a refusal for %s, got %v", reason, err)
		}
		if ae.Run.IsZero() {
			return
		}
		m, merr := p.cell.Store.Meta(context.Background(), ae.Run)
		if merr != nil {
			t.Fatal(merr)
		}
		if m.Status != journal.StatusFailed || !strings.Contains(m.Error, "admission refused ("+reason+")") {
			t.Fatalf("refused run journaled as %s %q", m.Status, m.Error)
		}
		if _, herr := p.cell.Host.Reopen(context.Background(), ae.Run); !errors.Is(herr, host.ErrFinished) {
			t.Fatalf("a refused run can be resumed: %v", herr)
		}
	}
	const bounded = 5

	_, err := launch("miner", bounded, 0)
	refused(err, cell.RefusedPolicy)
	if !strings.Contains(err.Error(), "forbidden by customer:") {
		t.Fatalf("the policy refusal does not name its policy: %v", err)
	}
	_, err = launch("unbounded", 0, 0)
	refused(err, cell.RefusedBudget)
	if !strings.Contains(err.Error(), "leaves http_requests unlimited") {
		t.Fatalf("the budget refusal does not say why: %v", err)
	}
	_, err = launch("greedy", 11, 0)
	refused(err, cell.RefusedBudget)
	_, err = launch("loud", bounded, 10)
	refused(err, cell.RefusedPriority)

	busy, err := launch("busy", bounded, 0)
	if err != nil {
		t.Fatal(err)
	}
	g.wait(t)
	waiting, err := launch("waiting", bounded, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = launch("third", bounded, 0)
	refused(err, cell.RefusedFull)
	if !errors.Is(err, cell.ErrQueueFull) {
		t.Fatalf("a full queue: %v", err)
	}
	st := p.srv.SchedulerStats()
	if st.Admitted != 2 || st.Refused[cell.RefusedPolicy] != 1 || st.Refused[cell.RefusedBudget] != 2 || st.Refused[cell.RefusedFull] != 1 {
		t.Fatalf("counted %d admitted, refused %v", st.Admitted, st.Refused)
	}
	g.open()
	p.endOf(busy, waiting)
}

// TestQueuedRunsSurviveARestart: runs queued behind a blocker when the
// daemon stops are queued again by Recover, with their priorities, and
// each executes once.
func TestQueuedRunsSurviveARestart(t *testing.T) {
	g := newGate(t)
	dir := t.TempDir()
	clk := clock.NewFake(time.Now())
	p := openSchedCell(t, dir, clk, cell.SchedulerOptions{Workers: 1, Aging: time.Hour})
	blocker := p.mustLaunch(map[string]any{"hits": g.URL + "/blocker"}, 0, nil)
	g.wait(t)
	p.endOf(blocker)
	p.mustLaunch(map[string]any{"hits": g.URL + "/hold/x"}, 0, nil)
	g.wait(t)
	q1 := p.mustLaunch(map[string]any{"hits": g.URL + "/q1"}, 2, nil)
	q2 := p.mustLaunch(map[string]any{"hits": g.URL + "/q2"}, 8, nil)
	if n := p.queued(); n != 2 {
		t.Fatalf("%d queued", n)
	}
	var ri cell.RunInfo
	for _, r := range []journal.RunID{q1, q2} {
		m, err := p.cell.Store.Meta(context.Background(), r)
		if err != nil || m.Status != journal.StatusRunning || m.Steps != 0 {
			t.Fatalf("queued run %s indexed as %+v (%v)", r, m.Status, err)
		}
		ri = cell.Info(m, false)
	}
	if ri.Priority != 8 {
		t.Fatalf("priority shown %d", ri.Priority)
	}
	// The shutdown lets the held call finish (a step under way completes).
	go g.open()
	p.close()
	if got := g.seen(); slices.Contains(got, "/q1") || slices.Contains(got, "/q2") {
		t.Fatalf("a queued run executed before the restart: %v", got)
	}
	p = openSchedCell(t, dir, clk, cell.SchedulerOptions{Workers: 1, Aging: time.Hour})
	defer p.close()
	p.endOf(q1, q2)
	for _, r := range []journal.RunID{q1, q2} {
		if s := p.status(r); s != journal.StatusCompleted {
			t.Fatalf("run %s %s after the restart", r, s)
		}
	}
	got := g.seen()
	n := func(path string) int {
		c := 0
		for _, x := range got {
			if x == path {
				c++
			}
		}
		return c
	}
	if n("/q1") != 1 || n("/q2") != 1 {
		t.Fatalf("posts after the restart %v: each queued run must execute once", got)
	}
	if slices.Index(got, "/q2") > slices.Index(got, "/q1") {
		t.Fatalf("priority 8 ran after priority 2 after the restart: %v", got)
	}
}

// TestCancelledQueuedRunLeavesTheQueue: a queued run that is cancelled is
// marked cancelled at once, without waiting for a worker.
func TestCancelledQueuedRunLeavesTheQueue(t *testing.T) {
	g := newGate(t)
	p := openSchedCell(t, t.TempDir(), clock.NewFake(time.Now()), cell.SchedulerOptions{Workers: 1, Aging: time.Hour})
	defer p.close()
	hold := p.mustLaunch(map[string]any{"hits": g.URL + "/hold/x"}, 0, nil)
	g.wait(t)
	q := p.mustLaunch(map[string]any{"hits": g.URL + "/q"}, 0, nil)
	if err := p.srv.Cancel(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	p.endOf(q)
	if s := p.status(q); s != journal.StatusCancelled {
		t.Fatalf("cancelled queued run is %s", s)
	}
	if n := p.queued(); n != 0 {
		t.Fatalf("%d still queued", n)
	}
	g.open()
	p.endOf(hold)
	if slices.Contains(g.seen(), "/q") {
		t.Fatal("the cancelled queued run executed")
	}
}

// TestSchedulerMetricsAndCellInfo: the queue depth and wait show in the
// Prometheus metrics, with bounded labels, and in GET /v1/cell.
func TestSchedulerMetricsAndCellInfo(t *testing.T) {
	g := newGate(t)
	p := openSchedCell(t, t.TempDir(), clock.NewFake(time.Now()), cell.SchedulerOptions{Workers: 1, Aging: time.Hour})
	defer p.close()
	mx := cell.NewMetrics()
	mx.Scheduler(p.srv)
	mx.Queues(p.srv.QueueDepths)
	hold := p.mustLaunch(map[string]any{"hits": g.URL + "/hold/x"}, 0, nil)
	g.wait(t)
	q := p.mustLaunch(map[string]any{"hits": g.URL + "/q"}, 7, nil)

	rec := httptest.NewRecorder()
	mx.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		"agentrt_sched_workers 1", "agentrt_sched_workers_busy 1", `agentrt_sched_queued{priority="7"} 1`, `agentrt_sched_queued{priority="5"} 0`,
		`agentrt_sched_admissions_total{outcome="admitted"} 2`, `agentrt_sched_admissions_total{outcome="queue_full"} 0`,
		`agentrt_queue_depth{queue="runs"} 1`, "agentrt_sched_wait_seconds_count 1", "agentrt_sched_oldest_wait_seconds",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	var ci cell.CellInfo
	rec = httptest.NewRecorder()
	p.srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/cell", nil))
	if err := json.Unmarshal(rec.Body.Bytes(), &ci); err != nil {
		t.Fatal(err)
	}
	if ci.Scheduler == nil || ci.Scheduler.Workers != 1 || ci.Scheduler.Queued != 1 || ci.Scheduler.QueuedByPriority[7] != 1 {
		t.Fatalf("cell info scheduler %+v", ci.Scheduler)
	}
	var ri cell.RunInfo
	rec = httptest.NewRecorder()
	p.srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/runs/"+q.String(), nil))
	if err := json.Unmarshal(rec.Body.Bytes(), &ri); err != nil {
		t.Fatal(err)
	}
	if ri.Queued == nil || ri.Queued.Priority != 7 || ri.Priority != 7 {
		t.Fatalf("a queued run shows as %+v (queued %+v)", ri, ri.Queued)
	}
	g.open()
	p.endOf(hold, q)
}

// TestPrioritiesOutOfRangeAreRefused: a submission's or a task's priority
// outside 1..9 is the submitter's error (400), before anything starts.
func TestPrioritiesOutOfRangeAreRefused(t *testing.T) {
	p := openSchedCell(t, t.TempDir(), clock.NewFake(time.Now()), cell.SchedulerOptions{Workers: 1})
	defer p.close()
	for _, c := range []struct{ path, body, want string }{
		{"/v1/runs", `{"module_sha256": "` + strings.Repeat("ab", 32) + `", "priority": 10}`, "priority 10 is out of range 1..9"},
		{"/v1/runs", `{"module_sha256": "` + strings.Repeat("ab", 32) + `", "priority": -1}`, "priority -1 is out of range 1..9"},
		{"/v1/tasks", `{"module": "AGFzbQEAAAA=", "objective": "x", "priority": 12}`, "priority 12: between 1 and 9"},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		p.srv.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), c.want) {
			t.Errorf("POST %s %s: %d %s", c.path, c.body, rec.Code, rec.Body)
		}
	}
	runs, err := p.cell.Store.Runs(context.Background())
	if err != nil || len(runs) != 0 {
		t.Fatalf("%d runs started (%v)", len(runs), err)
	}
}

// TestCellBudgetAdmission: with a cell budget of 10 HTTP requests, runs
// parked on a timer hold their ceilings until they end: a run that would
// take the sum past 10, or leaves http_requests unlimited, is refused with
// the reason cell_budget and journaled so. After a restart the sum is
// rebuilt from the index (still full: a run of 1 is refused); a parked run
// cancelled gives its share back, found at the next admission, and runs
// that complete give theirs back through the end hook.
func TestCellBudgetAdmission(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(time.Now())
	opts := cell.SchedulerOptions{Workers: 2, Aging: time.Hour, CellBudget: "http_requests=10"}
	p := openSchedCell(t, dir, clk, opts)
	launch := func(p *schedCell, n uint64) (journal.RunID, error) { return launchLimited(t, p, n) }
	refused := func(p *schedCell, err error, why string) {
		t.Helper()
		var ae *cell.AdmissionError
		if !errors.As(err, &ae) || ae.Reason != cell.RefusedCellBudget || !strings.Contains(err.Error(), why) {
			t.Fatalf("want a cell_budget refusal saying %q, got %v", why, err)
		}
		m, merr := p.cell.Store.Meta(context.Background(), ae.Run)
		if merr != nil || m.Status != journal.StatusFailed || !strings.Contains(m.Error, "admission refused (cell_budget)") {
			t.Fatalf("refused run journaled as %s %q (%v)", m.Status, m.Error, merr)
		}
	}
	held := func(p *schedCell, runs int, n uint64) { heldOf10(t, p, runs, n) }
	a, err := launch(p, 6)
	if err != nil {
		t.Fatal(err)
	}
	p.endOf(a) // parked
	_, err = launch(p, 5)
	refused(p, err, "the run asks http_requests=5 and the 1 runs admitted that have not ended hold 6 of the cell budget's 10")
	_, err = launch(p, 0)
	refused(p, err, "leaves http_requests unlimited")
	d, err := launch(p, 4)
	if err != nil {
		t.Fatal(err)
	}
	p.endOf(d)
	held(p, 2, 10)
	if st := p.srv.SchedulerStats(); st.Refused[cell.RefusedCellBudget] != 2 || st.Admitted != 2 {
		t.Fatalf("admitted %d, refused %v", st.Admitted, st.Refused)
	}

	p.close()
	p = openSchedCell(t, dir, clk, opts)
	defer func() { p.close() }()
	held(p, 2, 10)
	_, err = launch(p, 1)
	refused(p, err, "hold 10 of the cell budget's 10")

	if err := p.srv.Cancel(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	f, err := launch(p, 6)
	if err != nil {
		t.Fatalf("a run of 6 after the parked run of 6 was cancelled: %v", err)
	}
	p.endOf(f)
	held(p, 2, 10)
	clk.Advance(2 * time.Hour)
	deadline := time.Now().Add(60 * time.Second)
	for p.status(d) != journal.StatusCompleted || p.status(f) != journal.StatusCompleted {
		if time.Now().After(deadline) {
			t.Fatalf("the sleepers did not complete: %s %s", p.status(d), p.status(f))
		}
		time.Sleep(20 * time.Millisecond)
	}
	for p.srv.SchedulerStats().CellBudget.Runs != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the ended runs still hold %+v", p.srv.SchedulerStats().CellBudget)
		}
		time.Sleep(20 * time.Millisecond)
	}
	held(p, 0, 0)
}

// launchLimited starts a waiter that sleeps an hour, under a token
// granting http_requests=n (0: unlimited).
func launchLimited(t *testing.T, p *schedCell, n uint64) (journal.RunID, error) {
	t.Helper()
	return p.launchLimited(map[string]any{"sleep": int64(time.Hour)}, "", n, 0)
}

// launchLimited starts a waiter run of agent name with input, at priority
// prio, under a token of the waiter's grant that allows limit HTTP
// requests (0: no budget).
func (p *schedCell) launchLimited(input map[string]any, name string, limit uint64, prio uint8) (journal.RunID, error) {
	p.t.Helper()
	gr, err := host.ParseGrant([]byte(waiterGrant))
	if err != nil {
		p.t.Fatal(err)
	}
	tok := limitedToken(p.t, p.cell.Key, gr, limit, p.clock.Now())
	in, _ := json.Marshal(input)
	return p.srv.Launch(context.Background(), host.RunSpec{Code: p.code, Name: name, Input: in, Grant: gr, Token: tok, Priority: prio}, "started")
}

// limitedToken issues, with key and for its cell, a token of gr's
// capabilities whose budget allows limit HTTP requests (0: no budget),
// valid from an hour before now to a day after.
func limitedToken(t *testing.T, key ed25519.PrivateKey, gr *host.Grant, limit uint64, now time.Time) []byte {
	t.Helper()
	caps, err := gr.TokenCaps()
	if err != nil {
		t.Fatal(err)
	}
	var b capability.Budget
	if limit > 0 {
		b.HTTPRequests = capability.Limit(limit)
	}
	tok, err := capability.Issue(key, capability.Claims{Audience: key.Public().(ed25519.PublicKey), Caps: caps, Budget: b,
		NotBefore: now.Add(-time.Hour), Expires: now.Add(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// heldOf10 checks that runs hold n of a cell budget of http_requests=10.
func heldOf10(t *testing.T, p *schedCell, runs int, n uint64) {
	t.Helper()
	cb := p.srv.SchedulerStats().CellBudget
	if cb == nil || cb.Runs != runs || len(cb.Dims) != 1 || cb.Dims[0].Dim != "http_requests" || cb.Dims[0].Held != n || cb.Dims[0].Ceiling != 10 {
		t.Fatalf("cell budget %+v, want %d runs holding %d of 10", cb, runs, n)
	}
}

// TestResumeByHandIsAdmitted: a run resumed by hand (POST
// /v1/runs/{run}/resume, agentrt resume) is admitted as a submission is.
// With a cell budget of 10 HTTP requests, a cancelled run of 6 is
// resumed while another run of 6 holds its share: it is refused with the
// reason cell_budget, stays cancelled, and its journal gains no entry.
// Once the other is cancelled, the resume is admitted, and the resumed run
// holds its share: a new run of 6 is refused.
func TestResumeByHandIsAdmitted(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	p := openSchedCell(t, dir, clock.NewFake(time.Now()), cell.SchedulerOptions{Workers: 2, Aging: time.Hour, CellBudget: "http_requests=10"})
	defer func() { p.close() }()
	ln, err := cell.ListenSocket(cell.SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	hs, err := p.srv.Endpoint(ln)
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	defer func() { hs.Close() }()
	cl, err := cell.Dial("unix:" + cell.SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	mustLaunch := func(n uint64) journal.RunID {
		t.Helper()
		run, err := launchLimited(t, p, n)
		if err != nil {
			t.Fatal(err)
		}
		p.endOf(run) // parked on its timer
		return run
	}
	entries := func(run journal.RunID) int {
		t.Helper()
		n := 0
		if err := p.cell.Store.Records(ctx, run, 0, func(uint64, []byte) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}

	a := mustLaunch(6)
	if err := p.srv.Cancel(ctx, a); err != nil {
		t.Fatal(err)
	}
	b := mustLaunch(6)
	heldOf10(t, p, 1, 6)
	before := entries(a)
	_, err = cl.Resume(ctx, a.String())
	if !errors.Is(err, cell.ErrAdmissionRefused) || !strings.Contains(err.Error(), "admission refused (cell_budget)") {
		t.Fatalf("resume of a run of 6 beside one holding 6 of 10: %v; want an admission refusal (cell_budget)", err)
	}
	if st, n := p.status(a), entries(a); st != journal.StatusCancelled || n != before {
		t.Fatalf("after the refused resume the run is %s with %d entries; want cancelled with %d", st, n, before)
	}
	heldOf10(t, p, 1, 6)

	if err := p.srv.Cancel(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Resume(ctx, a.String()); err != nil {
		t.Fatalf("resume with room in the cell budget: %v", err)
	}
	p.endOf(a) // parked again
	heldOf10(t, p, 1, 6)
	if _, err := launchLimited(t, p, 6); !errors.Is(err, cell.ErrAdmissionRefused) {
		t.Fatalf("a run of 6 beside the resumed run of 6: %v; want an admission refusal", err)
	}

	// The cell starts again with a budget of 5: the parked run of 6
	// holds its share past it (it was admitted), and a resume by hand of
	// it is refused, the run keeping its share.
	hs.Close()
	p.close()
	p = openSchedCell(t, dir, p.clock, cell.SchedulerOptions{Workers: 2, Aging: time.Hour, CellBudget: "http_requests=5"})
	ln, err = cell.ListenSocket(cell.SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if hs, err = p.srv.Endpoint(ln); err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	_, err = cl.Resume(ctx, a.String())
	if !errors.Is(err, cell.ErrAdmissionRefused) || !strings.Contains(err.Error(), "admission refused (cell_budget)") {
		t.Fatalf("resume of a parked run of 6 under a budget of 5: %v; want an admission refusal (cell_budget)", err)
	}
	if cb := p.srv.SchedulerStats().CellBudget; cb == nil || cb.Runs != 1 || cb.Dims[0].Held != 6 {
		t.Fatalf("after the refused resume the cell budget is %+v; want the parked run holding its 6", cb)
	}
}
