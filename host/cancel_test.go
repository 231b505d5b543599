package host_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// TestCancelStopsAtTheStepBoundaryAndResumeContinues cancels a run while
// one of its HTTP requests is in flight: the request completes and is
// journaled, the run stops before its next call, its index says cancelled,
// nothing is in doubt, and a resume finishes it with the output of a run
// never cancelled, sending nothing twice.
func TestCancelStopsAtTheStepBoundaryAndResumeContinues(t *testing.T) {
	ctx := context.Background()
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	var served atomic.Int32
	entered := make(chan struct{})
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		if r.URL.Path == "/slow" {
			close(entered)
			<-release
		}
		fmt.Fprint(w, "served "+r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	code := testutil.BuildGo(t, "host/testdata/agents/probe")
	steps := fmt.Sprintf(`[{"op":"http","url":"%s/a"},{"op":"http","url":"%s/slow"},{"op":"kv.put","key":"k","size":3},{"op":"kv.get","key":"k"}]`, srv.URL, srv.URL)
	st, err := env.Host.Start(ctx, host.RunSpec{Code: code, Grant: probeGrant(strings.TrimPrefix(srv.URL, "http://")), Input: []byte(steps)})
	if err != nil {
		t.Fatal(err)
	}
	run := st.Run
	type outcome struct {
		res *host.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := st.Execute(ctx)
		done <- outcome{res, err}
	}()
	<-entered
	cancelled := make(chan error, 1)
	go func() { cancelled <- env.Host.Cancel(ctx, run) }()
	for !env.Host.Stopping(run) {
		time.Sleep(time.Millisecond)
	}
	close(release)
	if err := <-cancelled; err != nil {
		t.Fatalf("cancel: %v", err)
	}
	o := <-done
	if !errors.Is(o.err, host.ErrInterrupted) || !errors.Is(o.err, host.ErrCancelled) {
		t.Fatalf("cancelled run returned %v, want ErrInterrupted and ErrCancelled", o.err)
	}
	if o.res.Status != journal.StatusCancelled || o.res.Steps != 3 {
		t.Fatalf("cancelled run: status %s after %d calls, want cancelled when making call 3", o.res.Status, o.res.Steps)
	}
	meta, err := env.Store.Meta(ctx, run)
	if err != nil || meta.Status != journal.StatusCancelled {
		t.Fatalf("index of the cancelled run: %v %v", meta.Status, err)
	}
	es := entries(t, env, run)
	last := es[len(es)-1]
	if last.Phase != journal.PhaseCompleted {
		t.Fatalf("the journal of the cancelled run ends with a %s entry; the request in flight must complete", last.Phase)
	}
	// Cancelling again does nothing; a stopped run is not live.
	if err := env.Host.Cancel(ctx, run); err != nil || env.Host.Live(run) {
		t.Fatalf("second cancel: %v (live %v)", err, env.Host.Live(run))
	}

	res, err := env.Host.Resume(ctx, run)
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("resume of the cancelled run: %v %v", res, err)
	}
	var lines []string
	if err := jsonLines(res.Output, &lines); err != nil {
		t.Fatal(err)
	}
	want := []string{"http 200 9 served /a", "http 200 12 served /slow", "kv.put <nil>", "kv.get 3 <nil>"}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Fatalf("resumed output %q, want %q", lines, want)
	}
	if n := served.Load(); n != 2 {
		t.Fatalf("the server saw %d requests, want 2: nothing is sent twice", n)
	}
	replaysTo(t, env, run, code, res.Output)
	if err := env.Host.Cancel(ctx, run); !errors.Is(err, host.ErrFinished) {
		t.Fatalf("cancel of a finished run: %v, want ErrFinished", err)
	}
}

// TestCancelOfAStoppedRunMarksItAndResumeRefusesTwice: a run that stopped
// (interrupted) is cancelled without executing, and two resumes at once
// are refused: one runs, the other gets ErrActive.
func TestCancelOfAStoppedRunMarksItAndResumeRefusesTwice(t *testing.T) {
	env, run, code, _ := interruptedRun(t, false)
	ctx := context.Background()
	if err := env.Host.Cancel(ctx, run); err != nil {
		t.Fatal(err)
	}
	meta, err := env.Store.Meta(ctx, run)
	if err != nil || meta.Status != journal.StatusCancelled {
		t.Fatalf("index after cancel: %v %v", meta.Status, err)
	}
	st, err := env.Host.Reopen(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Host.Resume(ctx, run); !errors.Is(err, host.ErrActive) {
		t.Fatalf("a second resume while one is open: %v, want ErrActive", err)
	}
	if meta, _ := env.Store.Meta(ctx, run); meta.Status != journal.StatusRunning {
		t.Fatalf("a reopened run's index says %s, want running", meta.Status)
	}
	res, err := st.Execute(ctx)
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("resume: %v %v", res, err)
	}
	replaysTo(t, env, run, code, res.Output)
}
