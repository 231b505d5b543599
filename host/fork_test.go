package host_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

// forkParent runs the probe through two HTTP requests, a kv write and read
// and a third request, and returns the environment, the run, the module,
// a count of the requests the server saw by path, and the seq of the
// completed entry of the request to /b: a fork point in the middle.
func forkParent(t *testing.T) (env *testutil.Env, run journal.RunID, code []byte, count func(string) int, atB uint64) {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path]++
		mu.Unlock()
		fmt.Fprintf(w, "served %s", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	env = testutil.NewEnv(t, host.Deps{}, host.Config{})
	code = testutil.BuildGo(t, "host/testdata/agents/probe")
	steps := fmt.Sprintf(`[{"op":"http","url":"%s/a"},{"op":"http","url":"%s/b"},{"op":"kv.put","key":"k","size":3},{"op":"kv.get","key":"k"},{"op":"http","url":"%s/c"}]`,
		srv.URL, srv.URL, srv.URL)
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: code, Grant: probeGrant(strings.TrimPrefix(srv.URL, "http://")), Input: []byte(steps)})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("parent run: %v %v", err, res)
	}
	requests := 0
	for _, e := range entries(t, env, res.Run) {
		if e.Op == "http.request" && e.Phase == journal.PhaseCompleted {
			if requests++; requests == 2 {
				atB = e.Seq
			}
		}
	}
	count = func(path string) int {
		mu.Lock()
		defer mu.Unlock()
		return seen[path]
	}
	return env, res.Run, code, count, atB
}

// fork forks run at seq with code (nil: the parent's) and runs the fork to
// its end.
func fork(t *testing.T, env *testutil.Env, run journal.RunID, at uint64, code []byte) *host.Result {
	t.Helper()
	ctx := context.Background()
	st, err := env.Host.Fork(ctx, host.ForkSpec{Parent: run, At: at, Code: code})
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Execute(ctx)
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("fork: %v %+v", err, res)
	}
	return res
}

func header(t *testing.T, env *testutil.Env, run journal.RunID) *journal.Header {
	t.Helper()
	return entries(t, env, run)[0].Header
}

func TestForkWithTheSameModuleSendsOnlyTheEffectsAfterTheForkPoint(t *testing.T) {
	env, parent, code, count, atB := forkParent(t)
	res := fork(t, env, parent, atB, nil)
	if res.Run == parent {
		t.Fatal("the fork has its parent's run id")
	}
	pe := entries(t, env, parent)
	if got := string(res.Output); got != string(outputOf(t, env, parent)) {
		t.Fatalf("fork output %s, parent output %s", got, outputOf(t, env, parent))
	}
	// /a and /b were answered from the parent's journal; /c was sent again.
	if count("/a") != 1 || count("/b") != 1 || count("/c") != 2 {
		t.Fatalf("the server saw /a %d, /b %d, /c %d times; want 1, 1, 2", count("/a"), count("/b"), count("/c"))
	}
	f := header(t, env, res.Run).Fork
	if f == nil || f.Parent != parent || f.Seq != atB || f.Step != pe[atB].Step {
		t.Fatalf("fork header %+v, want parent %s seq %d step %d", f, parent, atB, pe[atB].Step)
	}
	// The fork is granted what its parent was, no more.
	if !bytes.Equal(header(t, env, res.Run).Grant, header(t, env, parent).Grant) {
		t.Fatal("the fork's grant is not its parent's")
	}
	raw := recordAt(t, env, parent, atB)
	if !bytes.Equal(f.Entry, journal.Sum(raw)) {
		t.Fatalf("fork header names entry hash %x, the parent's entry %d hashes to %x", f.Entry, atB, journal.Sum(raw))
	}
	if res.Replayed != f.Step {
		t.Fatalf("%d calls answered from the parent, want %d", res.Replayed, f.Step)
	}
	// The served effects are an intent and an outcome; the live ones are
	// dispatched (an executing entry), under the fork's idempotency keys.
	executing := map[uint64]string{}
	for _, e := range entries(t, env, res.Run) {
		if e.Phase == journal.PhaseExecuting {
			executing[e.Step] = e.Key
		}
	}
	for step := uint64(1); step <= f.Step; step++ {
		if _, ok := executing[step]; ok {
			t.Fatalf("step %d, before the fork point, has an executing entry", step)
		}
	}
	if len(executing) != 2 { // kv.put and the request to /c
		t.Fatalf("executing entries %v, want the kv.put and the request to /c", executing)
	}
	for step, key := range executing {
		if want := fmt.Sprintf("%s-%d", res.Run, step); key != want {
			t.Fatalf("step %d has idempotency key %q, want %q", step, key, want)
		}
	}
	// The fork verifies and replays on its own.
	replaysTo(t, env, res.Run, code, res.Output)
	rep, err := replay.CompareFork(context.Background(), env.Store, res.Run)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Diverged != 0 || !rep.Finished || !rep.SameOutput || len(rep.Calls) == 0 {
		t.Fatalf("report of a fork with the same module: %+v", rep)
	}
	for _, c := range rep.Calls {
		if !c.Match || c.Step <= f.Step {
			t.Fatalf("call %+v of a fork with the same module", c)
		}
	}
	if _, err := replay.CompareFork(context.Background(), env.Store, parent); !errors.Is(err, replay.ErrNotFork) {
		t.Fatalf("comparing a run that is no fork: %v, want ErrNotFork", err)
	}
}

func TestForkWithAnotherModuleReportsWhereItDiverges(t *testing.T) {
	env, parent, _, count, atB := forkParent(t)
	// The fourth call of the probe's list reads another key.
	v2 := testutil.BuildVariant(t, "host/testdata/agents/probe", "out = append(out, do(s))",
		"if len(out) == 3 {\n\t\t\t\ts.Key += \"-v2\"\n\t\t\t}\n\t\t\tout = append(out, do(s))")
	res := fork(t, env, parent, atB, v2)
	replaysTo(t, env, res.Run, v2, res.Output)
	rep, err := replay.CompareFork(context.Background(), env.Store, res.Run)
	if err != nil {
		t.Fatal(err)
	}
	getStep := rep.Step + 2 // kv.put, then the kv.get that changed
	if rep.Diverged != getStep || rep.SameOutput {
		t.Fatalf("diverged at step %d (same output %v), want step %d: %+v", rep.Diverged, rep.SameOutput, getStep, rep)
	}
	byStep := map[uint64]replay.ForkCall{}
	for _, c := range rep.Calls {
		byStep[c.Step] = c
	}
	if c := byStep[getStep]; c.Op != "kv.get" || c.Match || len(c.Changes) != 1 || c.Changes[0].String() != `key: "k" → "k-v2"` {
		t.Fatalf("the diverging call: %+v", c)
	}
	if c := byStep[getStep+1]; c.Op != "http.request" || !c.Match {
		t.Fatalf("the call after the diverging one: %+v", c)
	}
	if !byStep[getStep-1].Match {
		t.Fatalf("the kv.put before it: %+v", byStep[getStep-1])
	}
	if count("/a") != 1 || count("/b") != 1 || count("/c") != 2 {
		t.Fatalf("the server saw /a %d, /b %d, /c %d times; want 1, 1, 2", count("/a"), count("/b"), count("/c"))
	}

	// Forked after the changed call, the module diverges before the fork
	// point: refused, naming the step, and no run starts.
	var atEnd uint64
	for _, e := range entries(t, env, parent) {
		if e.Phase == journal.PhaseCompleted && e.Op == "kv.get" {
			atEnd = e.Seq
		}
	}
	before := runCount(t, env)
	_, err = env.Host.Fork(context.Background(), host.ForkSpec{Parent: parent, At: atEnd, Code: v2})
	var div *host.DivergenceError
	if !errors.As(err, &div) || div.Step != getStep || div.Op != "kv.get" {
		t.Fatalf("fork past the changed call: %v, want a divergence at step %d", err, getStep)
	}
	if n := runCount(t, env); n != before {
		t.Fatalf("a refused fork left %d runs in the store", n-before)
	}
}

func TestForkOfAFork(t *testing.T) {
	env, parent, code, count, atB := forkParent(t)
	first := fork(t, env, parent, atB, nil)
	// Fork the fork after its live kv.get: only /c is sent again.
	var at uint64
	for _, e := range entries(t, env, first.Run) {
		if e.Phase == journal.PhaseCompleted && e.Op == "kv.get" {
			at = e.Seq
		}
	}
	second := fork(t, env, first.Run, at, nil)
	if f := header(t, env, second.Run).Fork; f == nil || f.Parent != first.Run || f.Seq != at {
		t.Fatalf("the second fork's header %+v, want parent %s at %d", f, first.Run, at)
	}
	if string(second.Output) != string(first.Output) || count("/c") != 3 || count("/a") != 1 {
		t.Fatalf("fork of a fork: output %s (first %s), /a %d /c %d times", second.Output, first.Output, count("/a"), count("/c"))
	}
	replaysTo(t, env, second.Run, code, second.Output)
}

func TestForkRefusesAForkPointThatIsNoCallBoundary(t *testing.T) {
	env, parent, _, _, atB := forkParent(t)
	pe := entries(t, env, parent)
	// The request to /b: its intent, executing and completed entries.
	intent := atB - 2
	if pe[intent].Phase != journal.PhaseIntent {
		t.Fatalf("entry %d is %s, want the intent of /b", intent, pe[intent].Phase)
	}
	last := uint64(len(pe) - 1)
	before := runCount(t, env)
	for _, tc := range []struct {
		at                  uint64
		step, before, after uint64
		msg                 string
	}{
		{intent, pe[atB].Step, intent - 1, atB, fmt.Sprintf("inside step %d (http.request), entries %d to %d", pe[atB].Step, intent, atB)},
		{intent + 1, pe[atB].Step, intent - 1, atB, "inside step"},
		{last + 1, 0, last, 0, fmt.Sprintf("past the end of run %s, whose last entry is %d", parent, last)},
	} {
		_, err := env.Host.Fork(context.Background(), host.ForkSpec{Parent: parent, At: tc.at})
		var fe *host.ForkPointError
		if !errors.As(err, &fe) || fe.Step != tc.step || fe.Before != tc.before || fe.After != tc.after || !strings.Contains(err.Error(), tc.msg) {
			t.Fatalf("fork at %d: %v (%+v), want step %d between %d and %d", tc.at, err, fe, tc.step, tc.before, tc.after)
		}
	}
	if n := runCount(t, env); n != before {
		t.Fatalf("refused forks left %d runs in the store", n-before)
	}
	// The boundaries the error names are fork points.
	for _, at := range []uint64{intent - 1, atB, last, 0} {
		fork(t, env, parent, at, nil)
	}
}

func outputOf(t *testing.T, env *testutil.Env, run journal.RunID) []byte {
	t.Helper()
	pe := entries(t, env, run)
	return pe[len(pe)-1].End.Output
}

func recordAt(t *testing.T, env *testutil.Env, run journal.RunID, seq uint64) []byte {
	t.Helper()
	var raw []byte
	journal.ReadEntries(context.Background(), env.Store, run, func(e *journal.Entry, r *journal.Record) error {
		if e.Seq == seq {
			raw = r.Entry
		}
		return nil
	})
	if raw == nil {
		t.Fatalf("run %s has no entry %d", run, seq)
	}
	return raw
}

func runCount(t *testing.T, env *testutil.Env) int {
	t.Helper()
	runs, err := env.Store.Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(runs)
}

func TestResumeRefusesAForkStoppedBeforeItsForkPoint(t *testing.T) {
	env, parent, _, count, atB := forkParent(t)
	ctx := context.Background()
	st, err := env.Host.Fork(ctx, host.ForkSpec{Parent: parent, At: atB})
	if err != nil {
		t.Fatal(err)
	}
	st.Abandon() // its journal holds its start and none of the calls it answers from its parent
	if _, err := env.Host.Resume(ctx, st.Run); !errors.Is(err, host.ErrForkIncomplete) || !strings.Contains(err.Error(), "fork "+parent.String()+" again at") {
		t.Fatalf("resume of a fork stopped before its fork point: %v, want ErrForkIncomplete", err)
	}
	if count("/a") != 1 || count("/b") != 1 || count("/c") != 1 {
		t.Fatalf("the refused resume sent requests: /a %d, /b %d, /c %d", count("/a"), count("/b"), count("/c"))
	}
}

func TestForkRefusesAForkPointPastACheckpoint(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	ctx := context.Background()
	res, err := env.Host.Run(ctx, segmentsSpec(testutil.BuildGo(t, "host/testdata/agents/segments"), 6, 3))
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("segments: %v %+v", err, res)
	}
	var cp uint64
	for _, e := range entries(t, env, res.Run) {
		if e.Op == "run.checkpoint" && cp == 0 {
			cp = e.Seq
		}
	}
	if cp == 0 {
		t.Fatal("the segments agent did not checkpoint")
	}
	before := runCount(t, env)
	want := fmt.Sprintf("past its checkpoint at entry %d; fork at or before entry %d", cp, cp-1)
	if _, err := env.Host.Fork(ctx, host.ForkSpec{Parent: res.Run, At: cp}); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("fork at the checkpoint: %v, want %q", err, want)
	}
	if n := runCount(t, env); n != before {
		t.Fatalf("the refused fork left %d runs", n-before)
	}
	if f := fork(t, env, res.Run, cp-1, nil); string(f.Output) != string(outputOf(t, env, res.Run)) {
		t.Fatalf("fork before the checkpoint: output %s, parent %s", f.Output, outputOf(t, env, res.Run))
	}
}
