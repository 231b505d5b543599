package host_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
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

// probe runs the probe agent with steps and returns its output lines, after
// checking that the run verifies and replays to the same output.
func probe(t *testing.T, env *testutil.Env, g *host.Grant, steps string) ([]string, *host.Result) {
	t.Helper()
	code := testutil.BuildGo(t, "host/testdata/agents/probe")
	ctx := context.Background()
	res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Input: []byte(steps), Grant: g})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != journal.StatusCompleted {
		t.Fatalf("probe failed: %v", res.Err)
	}
	var lines []string
	if err := json.Unmarshal(res.Output, &lines); err != nil {
		t.Fatalf("output %q: %v", res.Output, err)
	}
	replaysTo(t, env, res.Run, code, res.Output)
	return lines, res
}

// replaysTo checks that run's journal verifies and replays with code to
// output.
func replaysTo(t *testing.T, env *testutil.Env, run journal.RunID, code, output []byte) {
	t.Helper()
	ctx := context.Background()
	j, err := replay.Load(ctx, env.Store, run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := j.Replay(ctx, env.Engine, code, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if string(rep.Output) != string(output) {
		t.Fatalf("replay output %s, run output %s", rep.Output, output)
	}
}

// probeGrant grants everything the probe imports; HTTP to hosts only.
func probeGrant(hosts ...string) *host.Grant {
	if hosts == nil {
		hosts = []string{"127.0.0.1:1"}
	}
	return &host.Grant{Run: &host.RunGrant{}, KV: &host.KVGrant{Namespace: "p"}, HTTP: &host.HTTPGrant{Hosts: hosts},
		Clock: &host.ClockGrant{}, Random: &host.RandomGrant{}}
}

func entries(t *testing.T, env *testutil.Env, run journal.RunID) []*journal.Entry {
	t.Helper()
	var out []*journal.Entry
	err := journal.ReadEntries(context.Background(), env.Store, run, func(e *journal.Entry, _ *journal.Record) error {
		out = append(out, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestOversizedRequestIsRefusedAndJournaled(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{MaxRequest: 64 << 10})
	lines, res := probe(t, env, probeGrant(), `[{"op":"kv.put","key":"big","size":100000},{"op":"kv.get","key":"big"},{"op":"kv.put","key":"ok","size":1000}]`)
	want := []string{
		"kv.put too_large: request exceeds the limit of 65536 bytes",
		`kv.get 0 not_found: kv.get: no key "big"`,
		"kv.put <nil>",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	var refused *journal.Entry
	for _, e := range entries(t, env, res.Run) {
		if e.Op == "kv.put" && e.Phase == journal.PhaseFailed {
			refused = e
		}
		if e.Op == "kv.put" && e.Phase == journal.PhaseIntent && len(e.Request) > 64<<10 {
			t.Fatalf("an oversized request reached the journal as intent")
		}
	}
	if refused == nil || refused.Request != nil || len(refused.InputHash) != 32 {
		t.Fatalf("refused call journaled as %+v; want a failed entry with the input hash and no request", refused)
	}
}

func TestHTTPGrantIdempotencyKeyAndPendingResponse(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get(host.IdempotencyHeader))
		mu.Unlock()
		w.Header()["Date"] = nil
		fmt.Fprint(w, strings.Repeat("x", 100_000)) // larger than the SDK's 16 KiB buffer: take path
	}))
	defer srv.Close()
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	g := probeGrant(strings.TrimPrefix(srv.URL, "http://"))
	steps := fmt.Sprintf(`[{"op":"http","url":%q},{"op":"http","url":"http://example.com/"},{"op":"http","url":%q}]`, srv.URL+"/a", srv.URL+"/b")
	lines, res := probe(t, env, g, steps)
	if !strings.HasPrefix(lines[0], "http 200 100000 xxx") || !strings.HasPrefix(lines[2], "http 200 100000") {
		t.Fatalf("granted requests: %q", lines)
	}
	if !strings.Contains(lines[1], "denied") || !strings.Contains(lines[1], "example.com") {
		t.Fatalf("request to an ungranted host: %q, want denied naming the host", lines[1])
	}
	// Steps: 1 run.input, 2 http, 3 http (denied), 4 http, 5 run.set_output.
	want := []string{res.Run.String() + "-2", res.Run.String() + "-4"}
	if fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Fatalf("server saw idempotency keys %v, want %v (replay must send none)", keys, want)
	}
	for _, e := range entries(t, env, res.Run) {
		if e.Step == 3 && e.Phase != journal.PhaseFailed {
			t.Fatalf("a denied call was journaled as %s; a denial never reaches intent", e.Phase)
		}
	}
}

func TestRealClockAndRandomAreJournaledVirtualOnesAreSeeded(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	g := probeGrant()
	steps := `[{"op":"clock"},{"op":"random","n":16},{"op":"virtual-clock"},{"op":"sleep"},{"op":"introspect"},{"op":"random","n":100000}]`
	lines, res := probe(t, env, g, steps) // probe checks that replay reproduces every line
	if !strings.HasSuffix(lines[0], "<nil>") || !strings.HasSuffix(lines[1], "<nil>") || len(lines[1]) != len("random ")+32+len(" <nil>") {
		t.Fatalf("clock/random: %q", lines[:2])
	}
	if lines[3] != "sleep 1h0m0s" {
		t.Fatalf("a one-hour sleep took %q of virtual time", lines[3])
	}
	if want := "introspect " + res.Run.String() + " [run kv http clock random] 3 <nil>"; lines[4] != want {
		t.Fatalf("introspect: %q, want %q", lines[4], want)
	}
	if !strings.Contains(lines[5], "too_large") {
		t.Fatalf("random of 100000 bytes: %q", lines[5])
	}
}

// TestInterruptedEffectIsLeftInDoubt cancels a run while an HTTP effect is
// in flight: the run stops, no outcome is invented for the effect, and the
// journal, ending with that step's intent and executing entries, verifies.
func TestInterruptedEffectIsLeftInDoubt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/2") {
			cancel() // the host goes away while this request is served
			<-r.Context().Done()
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	steps := fmt.Sprintf(`[{"op":"http","url":"%s/1"},{"op":"clock"},{"op":"http","url":"%s/2"},{"op":"clock"}]`, srv.URL, srv.URL)
	res, err := env.Host.Run(ctx, host.RunSpec{Code: testutil.BuildGo(t, "host/testdata/agents/probe"),
		Grant: probeGrant(strings.TrimPrefix(srv.URL, "http://")), Input: []byte(steps)})
	if !errors.Is(err, host.ErrInterrupted) || res == nil || res.Status != journal.StatusRunning {
		t.Fatalf("got %v, %+v; want ErrInterrupted and a run still running", err, res)
	}
	sum, verr := journal.VerifyStore(context.Background(), env.Store, res.Run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey)))
	if verr != nil {
		t.Fatal(verr)
	}
	es := entries(t, env, res.Run)
	last := es[len(es)-1]
	// Steps: 1 run.input, 2 http, 3 clock, 4 http (cut off).
	if sum.End != nil || last.Phase != journal.PhaseExecuting || last.Step != 4 || last.Op != "http.request" {
		t.Fatalf("journal ends with %s of step %d (%s), end %v; want step 4's executing entry and no end", last.Phase, last.Step, last.Op, sum.End)
	}
}

func jsonLines(b []byte, lines *[]string) error { return json.Unmarshal(b, lines) }
