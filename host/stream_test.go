package host_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/policy"
)

// readStream returns run's whole stream from offset from.
func readStream(t *testing.T, env *testutil.Env, run journal.RunID, from uint64) []host.StreamEvent {
	t.Helper()
	var out []host.StreamEvent
	r := host.NewStreamReader(env.Store, env.Store, run, from)
	if err := r.Read(context.Background(), func(e host.StreamEvent) error { out = append(out, e); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// brief is one event in a line, for comparing streams.
func brief(e host.StreamEvent) string {
	s := string(e.Kind)
	for _, f := range []string{e.Op, e.Phase, e.Status, e.Layer, e.Reason, e.Data} {
		if f != "" {
			s += " " + strings.TrimSpace(f)
		}
	}
	return s
}

// TestStreamOrdersEveryEvent: a run that writes to stdout, logs, makes an
// allowed HTTP request, one its grant refuses and a kv write the
// customer's policy forbids, reads back as one stream in the order it
// happened: each call's phases and gate decisions at their entries' seqs,
// both denials with their layer and reason, the output where the guest
// wrote it; offsets count from 0 with no gap; a reader that starts at any
// offset gets exactly the rest.
func TestStreamOrdersEveryEvent(t *testing.T) {
	pol, err := policy.NewEngine(policy.Platform(), []policy.Source{{Name: "c.cedar", Text: []byte(`
@id("allow-all") permit (principal, action, resource);
@id("no-kv-writes") forbid (principal, action == Action::"kv.put", resource);`)}})
	if err != nil {
		t.Fatal(err)
	}
	env := testutil.NewEnv(t, host.Deps{Policy: pol}, host.Config{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	t.Cleanup(srv.Close)
	code := testutil.BuildGo(t, "host/testdata/agents/probe")
	steps := fmt.Sprintf(`[{"op":"print","key":"hello"},{"op":"log","key":"warned"},{"op":"http","url":"%s/a"},
		{"op":"http","url":"http://other.example/"},{"op":"kv.put","key":"k","size":1},{"op":"print","key":"bye"}]`, srv.URL)
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: code, Grant: probeGrant(strings.TrimPrefix(srv.URL, "http://")), Input: []byte(steps)})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run: %v %+v", err, res)
	}
	evs := readStream(t, env, res.Run, 0)
	var got []string
	for i, e := range evs {
		if e.Offset != uint64(i) {
			t.Fatalf("event %d has offset %d", i, e.Offset)
		}
		if i > 0 && e.Seq < evs[i-1].Seq {
			t.Fatalf("event %d (%s) at seq %d follows seq %d", i, brief(e), e.Seq, evs[i-1].Seq)
		}
		got = append(got, brief(e))
	}
	want := []string{
		"start",
		"lease",
		"call run.input completed ok",
		"gate run.input completed",
		"stdout hello",
		// The log line is written while its call is served, before the
		// call's entry.
		"log warned",
		"call run.log completed ok",
		"gate run.log completed",
		"call http.request intent",
		"gate http.request intent",
		"budget http.request reserve",
		"call http.request executing",
		"call http.request completed ok",
		"budget http.request settle",
		"call http.request failed denied",
		"denied http.request failed capability http.request: host other.example:80 is not in the grant (allowed: " + strings.TrimPrefix(srv.URL, "http://") + ")",
		"call kv.put failed denied",
		"denied kv.put failed policy policy: denied by customer:no-kv-writes (customer set)",
		"stdout bye",
		"call run.set_output completed ok",
		"gate run.set_output completed",
		"end completed",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("stream:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Every entry is in the stream at its seq.
	ents := entries(t, env, res.Run)
	seen := map[uint64]bool{}
	for _, e := range evs {
		if !e.After {
			seen[e.Seq] = true
		}
	}
	if len(seen) != len(ents) {
		t.Fatalf("the stream shows %d of the journal's %d entries", len(seen), len(ents))
	}
	for from := range uint64(len(evs) + 1) {
		if rest := readStream(t, env, res.Run, from); !reflect.DeepEqual(rest, evs[from:]) && len(rest)+len(evs[from:]) > 0 {
			t.Fatalf("from offset %d: %d events, want %d", from, len(rest), len(evs)-int(from))
		}
	}
}

// gatedApprover answers yes once release is closed.
type gatedApprover struct {
	asked   chan struct{}
	release chan struct{}
}

func (a *gatedApprover) Approve(ctx context.Context, _ host.Approval) (bool, string, error) {
	close(a.asked)
	select {
	case <-a.release:
		return true, "tester", nil
	case <-ctx.Done():
		return false, "", ctx.Err()
	}
}

// TestStreamFollowsALiveRun: a reader that reads while the run waits for
// an approval sees what is committed so far; read again after the run
// ends, it gets the rest, and the two reads together are the stream a
// reader gets after the end: none lost, none repeated.
func TestStreamFollowsALiveRun(t *testing.T) {
	modes, err := policy.ParseModes([]byte("rules:\n  - {name: ask-http, op: http.request, effect: ask}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ap := &gatedApprover{asked: make(chan struct{}), release: make(chan struct{})}
	env := testutil.NewEnv(t, host.Deps{Modes: modes, Approver: ap}, host.Config{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	t.Cleanup(srv.Close)
	code := testutil.BuildGo(t, "host/testdata/agents/probe")
	ctx := context.Background()
	steps := fmt.Sprintf(`[{"op":"print","key":"before"},{"op":"kv.put","key":"k","size":1},{"op":"http","url":"%s/a"},{"op":"print","key":"after"}]`, srv.URL)
	st, err := env.Host.Start(ctx, host.RunSpec{Code: code, Grant: probeGrant(strings.TrimPrefix(srv.URL, "http://")), Input: []byte(steps)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := st.Execute(ctx); done <- err }()
	<-ap.asked
	r := host.NewStreamReader(env.Store, env.Store, st.Run, 0)
	var live []host.StreamEvent
	read := func() {
		if err := r.Read(ctx, func(e host.StreamEvent) error { live = append(live, e); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	read()
	var early []string
	for _, e := range live {
		early = append(early, brief(e))
	}
	// kv.put is committed durably before the run goes on; the output
	// before it is committed with it.
	if !strings.Contains(strings.Join(early, "\n"), "stdout before\ncall kv.put intent\n") || strings.Contains(strings.Join(early, "\n"), "after") {
		t.Fatalf("while the run waits, the stream reads:\n%s", strings.Join(early, "\n"))
	}
	close(ap.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	read()
	if full := readStream(t, env, st.Run, 0); !reflect.DeepEqual(live, full) {
		t.Fatalf("followed: %d events, read after the end: %d", len(live), len(full))
	}
	var late []string
	for _, e := range live[len(early):] {
		late = append(late, brief(e))
	}
	if !strings.Contains(strings.Join(late, "\n"), "gate http.request intent approved by tester\n") || !strings.Contains(strings.Join(late, "\n"), "stdout after\n") || late[len(late)-1] != "end completed" {
		t.Fatalf("after the approval, the stream reads:\n%s", strings.Join(late, "\n"))
	}
}
