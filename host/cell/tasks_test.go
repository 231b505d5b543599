package cell_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/clock"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
)

const taskGrant = "capabilities:\n  run: {}\n  kv: {namespace: taskprobe}\n  clock: {}\n  timer: {}\n"

// t0 is where the tests' fake clocks start.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// taskDaemon is a cell daemon in process, on a fake clock, serving its API
// on its unix socket; stop shuts it down as SIGTERM does.
type taskDaemon struct {
	cell *cell.Cell
	srv  *cell.Server
	cl   *cell.Client
	stop func()
}

// startTaskDaemon opens the cell in dir on clk, serves it and recovers
// what it had, as agentrt cell serve does.
func startTaskDaemon(t *testing.T, dir string, clk clock.Clock) *taskDaemon {
	t.Helper()
	ctx := context.Background()
	c, err := cell.Open(ctx, dir, cached(cell.Options{Clock: clk}))
	if err != nil {
		t.Fatal(err)
	}
	srv := cell.NewServer(c, cell.ServerOptions{Logf: t.Logf})
	c.AddSink(srv.Sink)
	ln, err := cell.ListenSocket(cell.SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	hs, err := srv.Endpoint(ln)
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	if _, err := srv.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	cl, err := cell.Dial("unix:" + cell.SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	d := &taskDaemon{cell: c, srv: srv, cl: cl}
	stopped := false
	d.stop = func() {
		if stopped {
			return
		}
		stopped = true
		hs.Close()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		c.Close(ctx)
	}
	t.Cleanup(d.stop)
	return d
}

// waitTask polls the task until ok says it stands as wanted, for at most
// 60 s (the polling is the wait; no assertion is on its duration).
func waitTask(t *testing.T, cl *cell.Client, id string, what string, ok func(cell.Task) bool) cell.Task {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		tk, err := cl.Task(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if ok(tk) {
			return tk
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(tk, "", "  ")
			t.Fatalf("task never %s:\n%s", what, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func state(s cell.TaskState, attempts int) func(cell.Task) bool {
	return func(tk cell.Task) bool { return tk.State == s && len(tk.Attempts) == attempts }
}

func probeInput(t *testing.T, v map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func runMeta(t *testing.T, c *cell.Cell, run string) journal.RunMeta {
	t.Helper()
	id, err := journal.ParseRunID(run)
	if err != nil {
		t.Fatalf("attempt run id %q: %v", run, err)
	}
	m, err := c.Store.Meta(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// ceiling returns the ceiling of d the run was held to, from its journal.
func ceiling(t *testing.T, c *cell.Cell, run string, d budget.Dim) (uint64, bool) {
	t.Helper()
	id, _ := journal.ParseRunID(run)
	rep, err := host.LoadBudget(context.Background(), c.Store, id, journal.TrustKeys(c.Public()))
	if err != nil {
		t.Fatal(err)
	}
	if p := rep.Rows[d].Ceiling; p != nil {
		return *p, true
	}
	return 0, false
}

// TestTaskRetriesWithBackoff runs a task whose first two attempts fail:
// each retry is a new run linked to the task (its origin), started when
// the backoff base·2^(n−1), capped, has passed on the cell's clock, and
// not before; the third attempt completes the task.
func TestTaskRetriesWithBackoff(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	d := startTaskDaemon(t, t.TempDir(), clk)
	code := testutil.BuildC(t, "host/testdata/agents/taskprobe")
	tk, err := d.cl.SubmitTask(ctx, cell.TaskSubmission{Module: code, Name: "taskprobe.wasm", Objective: "succeed on the third try",
		Input: probeInput(t, map[string]any{"fail": 2}), Grant: taskGrant, Retries: 3, Backoff: "10s", MaxBackoff: "15s"})
	if err != nil {
		t.Fatal(err)
	}
	tk = waitTask(t, d.cl, tk.ID, "waited after attempt 1", state(cell.TaskWaiting, 1))
	if want := t0.Add(10 * time.Second); tk.NextAt == nil || !tk.NextAt.Equal(want) {
		t.Fatalf("after attempt 1 failed at %v, next attempt at %v, want %v (backoff 10s)", t0, tk.NextAt, want)
	}
	if a := tk.Attempts[0]; a.Status != "failed" || a.Error == "" || a.Ended == nil {
		t.Fatalf("attempt 1 = %+v, want failed on purpose", a)
	}
	if n := clk.Advance(9 * time.Second); n != 0 {
		t.Fatalf("%d timers fired 1 s before the backoff ended", n)
	}
	if tk, _ = d.cl.Task(ctx, tk.ID); len(tk.Attempts) != 1 {
		t.Fatalf("attempt 2 started before the backoff ended: %+v", tk.Attempts)
	}
	clk.Advance(time.Second)
	tk = waitTask(t, d.cl, tk.ID, "waited after attempt 2", state(cell.TaskWaiting, 2))
	// Attempt 2 failed at t0+10s; 2·10s is over the cap of 15s.
	if want := t0.Add(25 * time.Second); !tk.NextAt.Equal(want) {
		t.Fatalf("next attempt at %v, want %v (backoff min(20s, 15s))", tk.NextAt, want)
	}
	clk.Advance(14 * time.Second)
	if tk, _ = d.cl.Task(ctx, tk.ID); len(tk.Attempts) != 2 {
		t.Fatalf("attempt 3 started early: %+v", tk.Attempts)
	}
	clk.Advance(time.Second)
	tk = waitTask(t, d.cl, tk.ID, "completed", state(cell.TaskCompleted, 3))
	if tk.Reason != "attempt 3 completed" || tk.NextAt != nil {
		t.Fatalf("completed task: reason %q, next %v", tk.Reason, tk.NextAt)
	}
	for i, want := range []time.Time{t0, t0.Add(10 * time.Second), t0.Add(25 * time.Second)} {
		a := tk.Attempts[i]
		m := runMeta(t, d.cell, a.Run)
		if !a.Started.Equal(want) || !time.Unix(0, m.Started).Equal(want) {
			t.Errorf("attempt %d started %v (run %v), want %v", i+1, a.Started, time.Unix(0, m.Started).UTC(), want)
		}
		if o := m.Origin; o == nil || o.Kind != "task" || o.ID != tk.ID || o.Seq != uint64(i+1) {
			t.Errorf("attempt %d's run has origin %+v, want task %s attempt %d", i+1, o, tk.ID, i+1)
		}
	}
	if m := runMeta(t, d.cell, tk.Attempts[2].Run); string(m.Output) != "done after 3 tries" {
		t.Errorf("output %q", m.Output)
	}
}

// TestTaskCapsHoldAcrossAttempts gives a task a steps cap that two
// attempts use up: the second starts with the cap less what the first
// spent, is stopped when that runs out, and the task then fails naming
// the cap, though retries are left.
func TestTaskCapsHoldAcrossAttempts(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	d := startTaskDaemon(t, t.TempDir(), clk)
	code := testutil.BuildC(t, "host/testdata/agents/taskprobe")
	const steps = 12
	tk, err := d.cl.SubmitTask(ctx, cell.TaskSubmission{Module: code, Objective: "spend", Input: probeInput(t, map[string]any{"fail": 10, "puts": 3}),
		Grant: taskGrant, Retries: 5, Backoff: "1s", Caps: capability.Budget{Steps: capability.Limit(steps), ToolCalls: capability.Limit(5), MicroUSD: capability.Limit(2_500_000)}})
	if err != nil {
		t.Fatal(err)
	}
	tk = waitTask(t, d.cl, tk.ID, "waited after attempt 1", state(cell.TaskWaiting, 1))
	s1 := tk.Attempts[0].Spent["steps"]
	if s1 == 0 || s1 >= steps {
		t.Fatalf("attempt 1 spent %d steps; the test needs between 1 and %d", s1, steps-1)
	}
	if c, ok := ceiling(t, d.cell, tk.Attempts[0].Run, budget.Steps); !ok || c != steps {
		t.Fatalf("attempt 1's steps ceiling = %d (%v), want the cap %d", c, ok, steps)
	}
	if c, ok := ceiling(t, d.cell, tk.Attempts[0].Run, budget.ToolCalls); !ok || c != 5 {
		t.Fatalf("attempt 1's tool_calls ceiling = %d (%v), want 5", c, ok)
	}
	if c, ok := ceiling(t, d.cell, tk.Attempts[0].Run, budget.MicroUSD); !ok || c != 2_500_000 {
		t.Fatalf("attempt 1's micro_usd ceiling = %d (%v), want 2500000", c, ok)
	}
	clk.Advance(time.Second)
	tk = waitTask(t, d.cl, tk.ID, "failed", state(cell.TaskFailed, 2))
	a2 := tk.Attempts[1]
	if c, _ := ceiling(t, d.cell, a2.Run, budget.Steps); c != steps-s1 {
		t.Fatalf("attempt 2's steps ceiling = %d, want %d - %d = %d", c, steps, s1, steps-s1)
	}
	if !strings.Contains(a2.Error, "budget") {
		t.Errorf("attempt 2 was not stopped by its budget: %+v", a2)
	}
	if tk.Spent["steps"] < steps || tk.Spent["steps"] != s1+a2.Spent["steps"] {
		t.Errorf("task spent %v, attempts %d + %d", tk.Spent, s1, a2.Spent["steps"])
	}
	if !strings.Contains(tk.Reason, "steps cap of 12 is spent") {
		t.Errorf("reason %q does not name the steps cap", tk.Reason)
	}
	if clk.Pending() != 0 {
		t.Errorf("%d timers armed for a failed task", clk.Pending())
	}
}

// TestTaskWallCapAcrossAttempts gives a task a wall-clock cap: the first
// attempt takes 60 s of the cell's clock, so the second starts with the
// 40 s left; the task completes with its spend the sum of both.
func TestTaskWallCapAcrossAttempts(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	d := startTaskDaemon(t, t.TempDir(), clk)
	code := testutil.BuildC(t, "host/testdata/agents/taskprobe")
	tk, err := d.cl.SubmitTask(ctx, cell.TaskSubmission{Module: code, Objective: "take a minute", Grant: taskGrant, Retries: 1, Backoff: "1s",
		Input: probeInput(t, map[string]any{"fail": 1, "until": t0.Add(time.Minute).UnixNano()}), Caps: capability.Budget{WallSeconds: capability.Limit(100)}})
	if err != nil {
		t.Fatal(err)
	}
	waitTask(t, d.cl, tk.ID, "executing", func(tk cell.Task) bool { return tk.Attempts[0].Live })
	clk.Advance(time.Minute)
	tk = waitTask(t, d.cl, tk.ID, "waited", state(cell.TaskWaiting, 1))
	if w := tk.Attempts[0].Spent["wall_seconds"]; w != 60 {
		t.Fatalf("attempt 1 spent %d wall seconds, want 60", w)
	}
	clk.Advance(time.Second)
	tk = waitTask(t, d.cl, tk.ID, "completed", state(cell.TaskCompleted, 2))
	if c, ok := ceiling(t, d.cell, tk.Attempts[1].Run, budget.WallSeconds); !ok || c != 40 {
		t.Fatalf("attempt 2's wall_seconds ceiling = %d (%v), want 100 - 60 = 40", c, ok)
	}
	if c, _ := ceiling(t, d.cell, tk.Attempts[0].Run, budget.WallSeconds); c != 100 {
		t.Fatalf("attempt 1's wall_seconds ceiling = %d, want the cap 100", c)
	}
}

// TestTaskTokenAttenuatedPerAttempt submits a task with a bearer token:
// every attempt presents an attenuation of its own (the nonce cache
// refuses a token presented twice), with the cap less what was spent and
// never above the token's ceiling; a sealed token, which cannot be
// attenuated, is refused and leaves no task.
func TestTaskTokenAttenuatedPerAttempt(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	dir := t.TempDir()
	d := startTaskDaemon(t, dir, clk)
	code := testutil.BuildC(t, "host/testdata/agents/taskprobe")
	g, err := host.ParseGrant([]byte(taskGrant))
	if err != nil {
		t.Fatal(err)
	}
	caps, err := g.TokenCaps()
	if err != nil {
		t.Fatal(err)
	}
	pub := d.cell.Public()
	tok, err := capability.Issue(d.cell.Key, capability.Claims{Audience: pub, Caps: caps, Budget: capability.Budget{Steps: capability.Limit(40)},
		NotBefore: t0.Add(-time.Hour), Expires: t0.Add(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := capability.Seal(tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	sub := cell.TaskSubmission{Module: code, Objective: "twice", Input: probeInput(t, map[string]any{"fail": 1}), Grant: taskGrant,
		Retries: 1, Backoff: "1s", Caps: capability.Budget{Steps: capability.Limit(100)}}
	sub.Token = sealed
	var re *cell.RemoteError
	if _, err := d.cl.SubmitTask(ctx, sub); !errors.As(err, &re) || re.Code/100 != 4 || !strings.Contains(err.Error(), "attenuate") {
		t.Fatalf("a sealed token: %v, want a 4xx that says it cannot be attenuated", err)
	}
	if tks, err := d.cl.Tasks(ctx); err != nil || len(tks) != 0 {
		t.Fatalf("a refused submission left tasks: %v %v", tks, err)
	}
	sub.Token = tok
	tk, err := d.cl.SubmitTask(ctx, sub)
	if err != nil {
		t.Fatal(err)
	}
	if !tk.Token {
		t.Error("the task does not say it is granted by a token")
	}
	tk = waitTask(t, d.cl, tk.ID, "waited after attempt 1", state(cell.TaskWaiting, 1))
	clk.Advance(time.Second)
	tk = waitTask(t, d.cl, tk.ID, "completed", state(cell.TaskCompleted, 2))
	s1 := tk.Attempts[0].Spent["steps"]
	for i, want := range []uint64{40, 40} {
		// The cap (100, then 100 - s1) is over the token's 40: the
		// token's ceiling holds.
		if c, _ := ceiling(t, d.cell, tk.Attempts[i].Run, budget.Steps); c != want {
			t.Errorf("attempt %d's steps ceiling = %d, want %d (attempt 1 spent %d)", i+1, c, want, s1)
		}
	}
	raw, err := json.Marshal(tk)
	if err != nil {
		t.Fatal(err)
	}
	tk2, _ := d.cl.Task(ctx, tk.ID)
	raw2, _ := json.Marshal(tk2)
	for _, b := range [][]byte{raw, raw2} {
		if strings.Contains(string(b), "token_bytes") || strings.Contains(string(b), fmt.Sprintf("%q", tok)) {
			t.Fatal("an answer carries the task's token")
		}
	}
}

// TestTaskCancelAndResume cancels a task while its run executes: the run
// is cancelled with its journal kept, and resume continues that same run
// (no new attempt) to its end. Then a task cancelled in its backoff starts
// no attempt until resumed, and resume starts the one that was due.
func TestTaskCancelAndResume(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	d := startTaskDaemon(t, t.TempDir(), clk)
	code := testutil.BuildC(t, "host/testdata/agents/taskprobe")
	until := t0.Add(time.Hour).UnixNano()
	tk, err := d.cl.SubmitTask(ctx, cell.TaskSubmission{Module: code, Objective: "wait for the hour", Input: probeInput(t, map[string]any{"until": until}),
		Grant: taskGrant})
	if err != nil {
		t.Fatal(err)
	}
	tk = waitTask(t, d.cl, tk.ID, "executing", func(tk cell.Task) bool { return tk.Attempts[0].Live })
	tk, err = d.cl.CancelTask(ctx, tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	run := tk.Attempts[0].Run
	if tk.State != cell.TaskCancelled || runMeta(t, d.cell, run).Status != journal.StatusCancelled {
		t.Fatalf("cancelled task %s, run %s", tk.State, runMeta(t, d.cell, run).Status)
	}
	if _, err := d.cl.CancelTask(ctx, tk.ID); err != nil {
		t.Fatalf("cancelling a cancelled task: %v", err)
	}
	tk, err = d.cl.ResumeTask(ctx, tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if tk.State != cell.TaskRunning || len(tk.Attempts) != 1 {
		t.Fatalf("resumed task %s with %d attempts", tk.State, len(tk.Attempts))
	}
	var re *cell.RemoteError
	if _, err := d.cl.ResumeTask(ctx, tk.ID); !errors.As(err, &re) || re.Code != http.StatusConflict {
		t.Fatalf("resuming a running task: %v, want 409", err)
	}
	clk.Advance(time.Hour)
	tk = waitTask(t, d.cl, tk.ID, "completed", state(cell.TaskCompleted, 1))
	if tk.Attempts[0].Run != run || string(runMeta(t, d.cell, run).Output) != "done after 1 tries" {
		t.Fatalf("the task completed by run %s (%q), want the resumed %s", tk.Attempts[0].Run, runMeta(t, d.cell, run).Output, run)
	}
	if _, err := d.cl.CancelTask(ctx, tk.ID); !errors.As(err, &re) || re.Code != http.StatusConflict {
		t.Fatalf("cancelling a completed task: %v, want 409", err)
	}

	// Cancelled in its backoff.
	tk, err = d.cl.SubmitTask(ctx, cell.TaskSubmission{Module: code, Objective: "retry once", Input: probeInput(t, map[string]any{"fail": 2}),
		Grant: taskGrant, Retries: 1, Backoff: "10s"})
	if err != nil {
		t.Fatal(err)
	}
	tk = waitTask(t, d.cl, tk.ID, "waited", state(cell.TaskWaiting, 1))
	if tk, err = d.cl.CancelTask(ctx, tk.ID); err != nil || tk.State != cell.TaskCancelled || tk.NextAt == nil {
		t.Fatalf("cancel in backoff: %+v %v", tk, err)
	}
	if clk.Pending() != 0 {
		t.Fatalf("the cancelled task's retry is still armed (%d timers)", clk.Pending())
	}
	clk.Advance(time.Minute)
	if tk, _ = d.cl.Task(ctx, tk.ID); len(tk.Attempts) != 1 || tk.State != cell.TaskCancelled {
		t.Fatalf("a cancelled task went on: %s, %d attempts", tk.State, len(tk.Attempts))
	}
	resumedAt := clk.Now()
	if _, err := d.cl.ResumeTask(ctx, tk.ID); err != nil {
		t.Fatal(err)
	}
	// kv "tries" is shared with the first task: this attempt is try 3.
	tk = waitTask(t, d.cl, tk.ID, "completed", state(cell.TaskCompleted, 2))
	if !tk.Attempts[1].Started.Equal(resumedAt) {
		t.Errorf("attempt 2 started %v, want at the resume, %v (its time had passed)", tk.Attempts[1].Started, resumedAt)
	}

	// A task's run cancelled as a run (agentrt cancel RUN) cancels the
	// task.
	tk, err = d.cl.SubmitTask(ctx, cell.TaskSubmission{Module: code, Objective: "wait again", Input: probeInput(t, map[string]any{"until": clk.Now().Add(time.Hour).UnixNano()}),
		Grant: taskGrant})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.cl.Cancel(ctx, tk.Attempts[0].Run); err != nil {
		t.Fatal(err)
	}
	waitTask(t, d.cl, tk.ID, "cancelled with its run", state(cell.TaskCancelled, 1))
	if _, err := d.cl.ResumeTask(ctx, tk.ID); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	waitTask(t, d.cl, tk.ID, "completed", state(cell.TaskCompleted, 1))
}

// TestTaskSurvivesRestart stops the daemon in a task's backoff and starts
// it again: the backoff is armed again from the task record and the next
// attempt starts at its time, not before. Then it stops the daemon while an
// attempt runs: Recover resumes the run and its end reaches the task.
func TestTaskSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	dir := t.TempDir()
	d := startTaskDaemon(t, dir, clk)
	code := testutil.BuildC(t, "host/testdata/agents/taskprobe")
	until := t0.Add(time.Hour).UnixNano()
	tk, err := d.cl.SubmitTask(ctx, cell.TaskSubmission{Module: code, Objective: "survive", Input: probeInput(t, map[string]any{"fail": 1, "until": until}),
		Grant: taskGrant, Retries: 2, Backoff: "30s"})
	if err != nil {
		t.Fatal(err)
	}
	id := tk.ID
	waitTask(t, d.cl, id, "executing", func(tk cell.Task) bool { return tk.Attempts[0].Live })
	d.stop()               // drains: the run stays running, to be recovered
	clk.Advance(time.Hour) // while no daemon runs
	d = startTaskDaemon(t, dir, clk)
	tk = waitTask(t, d.cl, id, "waited after the recovered attempt 1", state(cell.TaskWaiting, 1))
	failedAt := t0.Add(time.Hour)
	if want := failedAt.Add(30 * time.Second); !tk.NextAt.Equal(want) {
		t.Fatalf("next attempt at %v, want %v", tk.NextAt, want)
	}
	d.stop()
	clk.Advance(10 * time.Second)
	d = startTaskDaemon(t, dir, clk)
	if clk.Pending() != 1 {
		t.Fatalf("%d timers armed after the restart, want the task's backoff", clk.Pending())
	}
	clk.Advance(19 * time.Second)
	if tk, _ = d.cl.Task(ctx, id); len(tk.Attempts) != 1 || tk.State != cell.TaskWaiting {
		t.Fatalf("attempt 2 started before its time: %s, %d attempts", tk.State, len(tk.Attempts))
	}
	clk.Advance(time.Second)
	tk = waitTask(t, d.cl, id, "completed", state(cell.TaskCompleted, 2))
	if want := failedAt.Add(30 * time.Second); !tk.Attempts[1].Started.Equal(want) {
		t.Errorf("attempt 2 started %v, want %v", tk.Attempts[1].Started, want)
	}
}

// TestTaskSubmissionRefused sends submissions that are not tasks: each is
// refused with an error that names what is wrong, and none leaves a task.
func TestTaskSubmissionRefused(t *testing.T) {
	ctx := context.Background()
	d := startTaskDaemon(t, t.TempDir(), clock.NewFake(t0))
	code := testutil.BuildC(t, "host/testdata/agents/taskprobe")
	ok := cell.TaskSubmission{Module: code, Objective: "x", Grant: taskGrant}
	for _, c := range []struct {
		name string
		edit func(*cell.TaskSubmission)
		code int
		want string
	}{
		{"no objective", func(s *cell.TaskSubmission) { s.Objective = " " }, 400, "no objective"},
		{"no module", func(s *cell.TaskSubmission) { s.Module = nil }, 400, "no module"},
		{"retries", func(s *cell.TaskSubmission) { s.Retries = 101 }, 400, "retries 101"},
		{"backoff", func(s *cell.TaskSubmission) { s.Backoff = "soon" }, 400, `backoff "soon"`},
		{"backoff over max", func(s *cell.TaskSubmission) { s.Backoff, s.MaxBackoff = "1m", "10s" }, 400, "over max_backoff"},
		{"zero cap", func(s *cell.TaskSubmission) { s.Caps.Steps = capability.Limit(0) }, 400, "steps is 0"},
		{"grant", func(s *cell.TaskSubmission) { s.Grant = "capabilities: {kv: {}}" }, 400, "grant"},
		{"link", func(s *cell.TaskSubmission) { s.Grant = "capabilities: {run: {}}" }, 422, "clock"},
		{"not wasm", func(s *cell.TaskSubmission) { s.Module = []byte("nope") }, 422, "not a WebAssembly module"},
	} {
		sub := ok
		c.edit(&sub)
		_, err := d.cl.SubmitTask(ctx, sub)
		var re *cell.RemoteError
		if !errors.As(err, &re) || re.Code != c.code || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %d naming %q", c.name, err, c.code, c.want)
		}
	}
	if tks, err := d.cl.Tasks(ctx); err != nil || len(tks) != 0 {
		t.Fatalf("refused submissions left tasks: %d %v", len(tks), err)
	}
	var re *cell.RemoteError
	if _, err := d.cl.Task(ctx, "0123"); !errors.As(err, &re) || re.Code != 404 || !errors.Is(err, cell.ErrNoTask) {
		t.Errorf("an unknown task: %v, want 404 no_task", err)
	}
}

// editTask changes the record of task id in the store of the stopped
// daemon's dir, as a daemon killed at the wrong moment would have left it.
func editTask(t *testing.T, dir, id string, edit func(rec map[string]any)) {
	t.Helper()
	st, err := badgerstore.Open(cell.StoreDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	raw, ok, err := st.CellGet(cell.TasksTable, id)
	if err != nil || !ok {
		t.Fatalf("task record %s: %v %v", id, ok, err)
	}
	var rec map[string]any
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	edit(rec)
	if raw, err = json.Marshal(rec); err != nil {
		t.Fatal(err)
	}
	if err := st.CellPut(cell.TasksTable, id, raw); err != nil {
		t.Fatal(err)
	}
}

// attemptRuns counts the runs of the store that are attempt seq of task.
func attemptRuns(t *testing.T, c *cell.Cell, task string, seq uint64) int {
	t.Helper()
	runs, err := c.Store.Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range runs {
		if o := m.Origin; o != nil && o.Kind == "task" && o.ID == task && o.Seq == seq {
			n++
		}
	}
	return n
}

// TestTaskReattachesClaimedAttempts starts a daemon on task records left
// by a daemon that died between claiming an attempt and recording its run:
// an attempt that never started is started, once; one whose run had
// started is found by the run's origin and followed to its end, with no
// second run.
func TestTaskReattachesClaimedAttempts(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	dir := t.TempDir()
	d := startTaskDaemon(t, dir, clk)
	code := testutil.BuildC(t, "host/testdata/agents/taskprobe")

	// Claimed, never started.
	a, err := d.cl.SubmitTask(ctx, cell.TaskSubmission{Module: code, Objective: "claimed", Input: probeInput(t, map[string]any{"fail": 1}),
		Grant: taskGrant, Retries: 1, Backoff: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	waitTask(t, d.cl, a.ID, "waited", state(cell.TaskWaiting, 1))
	// Started, its run id not recorded.
	b, err := d.cl.SubmitTask(ctx, cell.TaskSubmission{Module: code, Objective: "started", Input: probeInput(t, map[string]any{"until": t0.Add(time.Hour).UnixNano()}),
		Grant: taskGrant})
	if err != nil {
		t.Fatal(err)
	}
	b = waitTask(t, d.cl, b.ID, "executing", func(tk cell.Task) bool { return tk.Attempts[0].Live })
	runB := b.Attempts[0].Run
	d.stop()
	editTask(t, dir, a.ID, func(rec map[string]any) {
		rec["state"] = "running"
		delete(rec, "next_at")
		rec["attempts"] = append(rec["attempts"].([]any), map[string]any{"attempt": 2, "status": "starting", "started": t0})
	})
	editTask(t, dir, b.ID, func(rec map[string]any) {
		at := rec["attempts"].([]any)[0].(map[string]any)
		delete(at, "run_id")
		at["status"] = "starting"
	})

	d = startTaskDaemon(t, dir, clk)
	tk := waitTask(t, d.cl, a.ID, "completed", state(cell.TaskCompleted, 2))
	if n := attemptRuns(t, d.cell, a.ID, 2); n != 1 || runMeta(t, d.cell, tk.Attempts[1].Run).Origin.Seq != 2 {
		t.Fatalf("the claimed attempt 2 has %d runs (want 1), recorded %s", n, tk.Attempts[1].Run)
	}
	tk, _ = d.cl.Task(ctx, b.ID)
	if tk.Attempts[0].Run != runB {
		t.Fatalf("attempt 1 re-attached to run %q, want its run %s", tk.Attempts[0].Run, runB)
	}
	clk.Advance(time.Hour)
	tk = waitTask(t, d.cl, b.ID, "completed", state(cell.TaskCompleted, 1))
	if n := attemptRuns(t, d.cell, b.ID, 1); n != 1 || tk.Attempts[0].Run != runB {
		t.Fatalf("task completed by %s with %d runs of attempt 1, want %s alone", tk.Attempts[0].Run, n, runB)
	}
}

// TestBackoffFormula checks the waits min(base·2^(n−1), max), the largest
// shifts included.
func TestBackoffFormula(t *testing.T) {
	for _, c := range []struct {
		base, max time.Duration
		n         int
		want      time.Duration
	}{
		{10 * time.Second, time.Minute, 1, 10 * time.Second},
		{10 * time.Second, time.Minute, 2, 20 * time.Second},
		{10 * time.Second, time.Minute, 3, 40 * time.Second},
		{10 * time.Second, time.Minute, 4, time.Minute},
		{10 * time.Second, 15 * time.Second, 2, 15 * time.Second},
		{time.Millisecond, time.Hour, 100, time.Hour},
		{time.Hour, time.Hour, 1, time.Hour},
		{3 * time.Second, time.Duration(1<<63 - 1), 80, time.Duration(1<<63 - 1)},
	} {
		if got := cell.Backoff(c.base, c.max, c.n); got != c.want {
			t.Errorf("Backoff(%v, %v, %d) = %v, want %v", c.base, c.max, c.n, got, c.want)
		}
	}
}

// TestTaskParkedOnTimer runs a task whose attempt sleeps durably: the task
// shows the run parked with its wake time; cancelling the task cancels
// the run, whose timer then wakes nothing; resume parks it again, and the
// timer, its time passed, completes it, in the same attempt.
func TestTaskParkedOnTimer(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	d := startTaskDaemon(t, t.TempDir(), clk)
	code := testutil.BuildC(t, "host/testdata/agents/taskprobe")
	tk, err := d.cl.SubmitTask(ctx, cell.TaskSubmission{Module: code, Objective: "sleep an hour", Grant: taskGrant,
		Input: probeInput(t, map[string]any{"sleep": int64(time.Hour)})})
	if err != nil {
		t.Fatal(err)
	}
	tk = waitTask(t, d.cl, tk.ID, "parked", func(tk cell.Task) bool { return tk.Attempts[0].Wait != nil })
	a := tk.Attempts[0]
	if a.Status != "parked" || a.Wait.Kind != "timer" || a.Wait.Until == nil || !a.Wait.Until.Equal(t0.Add(time.Hour)) || tk.State != cell.TaskRunning {
		t.Fatalf("the parked attempt shows %+v (wait %+v), task %s; want parked on a timer until %v", a, a.Wait, tk.State, t0.Add(time.Hour))
	}
	if tk, err = d.cl.CancelTask(ctx, tk.ID); err != nil || tk.State != cell.TaskCancelled {
		t.Fatalf("cancel: %v %v", tk.State, err)
	}
	clk.Advance(2 * time.Hour)
	if m := runMeta(t, d.cell, a.Run); m.Status != journal.StatusCancelled {
		t.Fatalf("the cancelled run is %s after its wake time", m.Status)
	}
	if _, err := d.cl.ResumeTask(ctx, tk.ID); err != nil {
		t.Fatal(err)
	}
	tk = waitTask(t, d.cl, tk.ID, "completed", state(cell.TaskCompleted, 1))
	if tk.Attempts[0].Run != a.Run {
		t.Fatalf("completed by run %s, want the parked %s", tk.Attempts[0].Run, a.Run)
	}
}
