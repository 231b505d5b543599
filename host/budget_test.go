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
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

// countingServer is a real HTTP server on loopback that counts the
// requests that reach it.
func countingServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// budgetRun runs the probe with steps under a token with ceilings b, its
// HTTP granted to srv, and returns the output lines and the result.
func budgetRun(t *testing.T, b capability.Budget, srv *httptest.Server, steps string) (*testutil.Env, []string, *host.Result, []byte) {
	t.Helper()
	env, root, code := tokenEnv(t)
	hostport := strings.TrimPrefix(srv.URL, "http://")
	tok, err := capability.Issue(root, capability.Claims{Audience: env.Key.Public().(ed25519.PublicKey), Caps: probeCaps(hostport), Budget: b,
		NotBefore: time.Now().Add(-time.Minute), Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: code, Token: tok, Grant: probeGrant(hostport), Input: []byte(steps)})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	if res.Status == journal.StatusCompleted {
		if err := json.Unmarshal(res.Output, &lines); err != nil {
			t.Fatalf("output %q: %v", res.Output, err)
		}
	}
	return env, lines, res, code
}

// row returns the report's row of dimension d.
func row(t *testing.T, rep budget.Report, d budget.Dim) budget.Row {
	t.Helper()
	for _, r := range rep.Rows {
		if r.Dim == d {
			return r
		}
	}
	t.Fatalf("no row %s", d)
	return budget.Row{}
}

func report(t *testing.T, env *testutil.Env, run journal.RunID) budget.Report {
	t.Helper()
	rep, err := host.BudgetReport(entries(t, env, run))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// The issue's acceptance, an attack of SECURITY.md: a guest that loops
// past its token's http_requests ceiling is refused with status budget at
// the request past it, and nothing past the ceiling reaches the server.
// The refusal is journaled with the budget layer's gate record and no
// budget record; the journal replays, and its report says 3 of 3 spent.
func TestGuestLoopingPastItsHTTPCeilingIsStoppedWithBudget(t *testing.T) {
	srv, served := countingServer(t)
	env, lines, res, code := budgetRun(t, capability.Budget{HTTPRequests: capability.Limit(3)}, srv,
		fmt.Sprintf(`[{"op":"http-loop","url":"%s/x","n":10}]`, srv.URL))
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "http-loop 3 budget=true ") ||
		!strings.Contains(lines[0], "http_requests: asked 1, 0 left of 3 (3 spent, 0 reserved)") {
		t.Fatalf("the guest saw %q, want 3 requests sent and the 4th refused with budget", lines)
	}
	if n := served.Load(); n != 3 {
		t.Fatalf("the server saw %d requests, want 3", n)
	}
	// Steps: 1 run.input, 2-4 the requests, 5 the refused one.
	es := entries(t, env, res.Run)
	var refused *journal.Entry
	for _, e := range es {
		if e.Step == 5 {
			refused = e
		}
	}
	if refused == nil || refused.Phase != journal.PhaseFailed || abi.Status(refused.Status) != abi.StatusBudget || len(refused.Budget) != 0 {
		t.Fatalf("step 5 is %+v, want one failed entry with status budget and no budget record", refused)
	}
	if g := gateRecord(t, env, res.Run, 5); g.Allow || g.Layer != host.LayerBudget || !strings.Contains(g.Reason, "http_requests") {
		t.Fatalf("gate record of step 5: %+v", g)
	}
	r := row(t, report(t, env, res.Run), budget.HTTPRequests)
	if r.Spent != 3 || r.Reserved != 0 || *r.Left != 0 || *r.Ceiling != 3 {
		t.Fatalf("http_requests row %+v, want 3 spent of 3", r)
	}
	replaysTo(t, env, res.Run, code, res.Output)
}

// run.limit lowers a ceiling the token did not set, and the host enforces
// it: the guest asks for at most 2 more requests, then loops.
func TestRunLimitLowersACeilingTheHostEnforces(t *testing.T) {
	srv, served := countingServer(t)
	env, lines, res, code := budgetRun(t, capability.Budget{HTTPRequests: capability.Limit(100)}, srv,
		fmt.Sprintf(`[{"op":"http","url":"%[1]s/a"},{"op":"limit","dim":"http_requests","amount":2},{"op":"limit","dim":"http_requests","amount":50},{"op":"http-loop","url":"%[1]s/x","n":10}]`, srv.URL))
	if len(lines) != 4 || lines[1] != "limit http_requests=3" || lines[2] != "limit http_requests=3" || !strings.HasPrefix(lines[3], "http-loop 2 budget=true ") {
		t.Fatalf("got %q: want the ceiling lowered to 1+2, never raised, and 2 more requests sent", lines)
	}
	if n := served.Load(); n != 3 {
		t.Fatalf("the server saw %d requests, want 3", n)
	}
	r := row(t, report(t, env, res.Run), budget.HTTPRequests)
	if *r.Ceiling != 3 || r.Spent != 3 {
		t.Fatalf("http_requests row %+v, want 3 of 3", r)
	}
	replaysTo(t, env, res.Run, code, res.Output)

	// An unknown dimension is a bad request, and lowers nothing.
	_, lines, _, _ = budgetRun(t, capability.Budget{}, srv, `[{"op":"limit","dim":"usd","amount":1},{"op":"limit","dim":"tool_calls","amount":0}]`)
	if !strings.Contains(lines[0], `bad_request: run.limit: unknown dimension "usd"`) || lines[1] != "limit tool_calls=0" {
		t.Fatalf("got %q", lines)
	}
}

// A steps ceiling, the token's or run.limit's, stops the run at the call
// past it, and a replay stops at the same call.
func TestStepsCeilingStopsTheRun(t *testing.T) {
	srv, served := countingServer(t)
	env, _, res, code := budgetRun(t, capability.Budget{}, srv,
		fmt.Sprintf(`[{"op":"limit","dim":"steps","amount":2},{"op":"http","url":"%[1]s/a"},{"op":"http","url":"%[1]s/b"},{"op":"http","url":"%[1]s/c"}]`, srv.URL))
	if res.Status != journal.StatusFailed || res.Err == nil || !strings.Contains(res.Err.Error(), "stopped: budget: steps: the run has made its 4 calls") {
		t.Fatalf("run ended %s: %v; want stopped by its steps", res.Status, res.Err)
	}
	if n := served.Load(); n != 2 || res.Steps != 4 {
		t.Fatalf("served %d requests in %d steps, want 2 in 4 (input, limit, 2 requests)", n, res.Steps)
	}
	rep := report(t, env, res.Run)
	if r := row(t, rep, budget.Steps); *r.Ceiling != 4 || r.Spent != 4 {
		t.Fatalf("steps row %+v", r)
	}
	j, err := replay.Load(context.Background(), env.Store, res.Run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Replay(context.Background(), env.Engine, code, replay.Options{}); err != nil {
		t.Fatalf("replay: %v", err)
	}
}

// The entry hash covers the budget field: a journal whose settle was
// changed (a charge rewritten to nothing) fails verification at that
// entry.
func TestChangedBudgetRecordFailsVerification(t *testing.T) {
	srv, _ := countingServer(t)
	env, _, res, _ := budgetRun(t, capability.Budget{HTTPRequests: capability.Limit(3)}, srv,
		fmt.Sprintf(`[{"op":"http","url":"%s/a"}]`, srv.URL))
	ctx := context.Background()
	trust := journal.TrustKeys(env.Key.Public().(ed25519.PublicKey))
	if _, err := journal.VerifyStore(ctx, env.Store, res.Run, trust); err != nil {
		t.Fatalf("the untouched journal: %v", err)
	}
	// The records as stored, with the budget field of the request's
	// completed entry rewritten to a settle that charges nothing.
	var raws [][]byte
	var settle uint64
	zero, err := budget.EncodeRecord(budget.Op{Kind: budget.OpSettle, ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	err = journal.ReadEntries(ctx, env.Store, res.Run, func(e *journal.Entry, r *journal.Record) error {
		if e.Phase == journal.PhaseCompleted && e.Op == "http.request" {
			settle = e.Seq
			if ops, err := budget.DecodeRecord(e.Budget); err != nil || len(ops) != 1 || ops[0].Kind != budget.OpSettle || ops[0].Amounts[budget.HTTPRequests] != 1 {
				t.Fatalf("the request's completed entry carries %v (%v), want its settle of 1 request", ops, err)
			}
			e.Budget = zero
			b, err := journal.EncodeEntry(e)
			if err != nil {
				return err
			}
			r.Entry = b
		}
		raw, err := journal.EncodeRecord(r)
		raws = append(raws, raw)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	v := journal.NewVerifier(trust)
	for _, raw := range raws {
		if err = v.Add(raw); err != nil {
			break
		}
	}
	if err == nil {
		_, err = v.Finish()
	}
	var ve *journal.VerifyError
	if !errors.As(err, &ve) || ve.Seq != settle+1 && ve.Seq != settle {
		t.Fatalf("verify of the changed journal: %v, want a failure at entry %d", err, settle)
	}
}

// sameLedger fails t unless two reports agree on every dimension but the
// wall clock (the runs took different times).
func sameLedger(t *testing.T, got, want budget.Report) {
	t.Helper()
	for i := range want.Rows {
		g, w := got.Rows[i], want.Rows[i]
		if g.Dim == budget.WallSeconds {
			continue
		}
		if g.Spent != w.Spent || g.Reserved != w.Reserved || (g.Ceiling == nil) != (w.Ceiling == nil) {
			t.Fatalf("%s: resumed %+v, uninterrupted %+v", g.Name, g, w)
		}
	}
	if got.Open != want.Open {
		t.Fatalf("open reservations: resumed %d, uninterrupted %d", got.Open, want.Open)
	}
}

// The ledger of a run cut off while an HTTP request was in flight, then
// resumed, equals the ledger of the same run uninterrupted: the request
// in doubt is charged once, whether it is answered in_doubt (its worst
// case, on that answer's entry) or sent again under its idempotency key
// (settled as live, under the reservation its intent made).
func TestLedgerAfterResumeEqualsUninterrupted(t *testing.T) {
	srv, _ := countingServer(t)
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	code := testutil.BuildGo(t, "host/testdata/agents/probe")
	steps := fmt.Sprintf(`[{"op":"http","url":"%s/a"},{"op":"kv.put","key":"k","size":3},{"op":"http","url":"%s/cut"},{"op":"clock"},{"op":"kv.get","key":"k"}]`, srv.URL, srv.URL)
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: code, Grant: probeGrant(strings.TrimPrefix(srv.URL, "http://")), Input: []byte(steps)})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("uninterrupted run: %v %+v", err, res)
	}
	want := report(t, env, res.Run)
	if r := row(t, want, budget.HTTPRequests); r.Spent != 2 || r.Reserved != 0 {
		t.Fatalf("uninterrupted http_requests %+v, want 2 spent", r)
	}
	for _, idempotent := range []bool{false, true} {
		t.Run(fmt.Sprintf("idempotent=%v", idempotent), func(t *testing.T) {
			env, run, code, _ := interruptedRun(t, idempotent)
			before := report(t, env, run)
			if r := row(t, before, budget.HTTPRequests); r.Spent != 1 || r.Reserved != 1 || before.Open != 1 {
				t.Fatalf("before the resume: http_requests %+v, %d open; want 1 spent and the request in doubt reserved", r, before.Open)
			}
			resumeAndCheck(t, env, run, code)
			sameLedger(t, report(t, env, run), want)
			var doubt *journal.Entry
			for _, e := range entries(t, env, run) {
				if e.Step == 4 && (e.Phase == journal.PhaseCompleted || e.Phase == journal.PhaseFailed) {
					doubt = e
				}
			}
			ops, err := budget.DecodeRecord(doubt.Budget)
			if err != nil || len(ops) != 1 || ops[0].Kind != budget.OpSettle || ops[0].Orphan != !idempotent || ops[0].WorstCase != !idempotent {
				t.Fatalf("the outcome of the request in doubt carries %v (%v)", ops, err)
			}
		})
	}
}

// A run that checkpoints, is cut off while a request is in flight, and is
// resumed from its checkpoint rebuilds its ledger from the checkpoint's
// snapshot and the records after it, without reading the journal before:
// the spend before the checkpoint still counts, so the loop that follows
// gets exactly what its http_requests ceiling leaves.
func TestResumeFromACheckpointKeepsTheSpendBeforeIt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var served atomic.Int64
	var cut atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		if r.URL.Path == "/cut" && cut.CompareAndSwap(false, true) {
			cancel()
			<-r.Context().Done()
			return
		}
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(srv.Close)
	env, root, code := tokenEnv(t)
	hostport := strings.TrimPrefix(srv.URL, "http://")
	tok, err := capability.Issue(root, capability.Claims{Audience: env.Key.Public().(ed25519.PublicKey), Caps: probeCaps(hostport),
		Budget: capability.Budget{HTTPRequests: capability.Limit(5)}, NotBefore: time.Now().Add(-time.Minute), Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	steps := fmt.Sprintf(`[{"op":"http","url":"%[1]s/a"},{"op":"http","url":"%[1]s/b"},{"op":"checkpoint"},{"op":"http","url":"%[1]s/cut"},{"op":"http-loop","url":"%[1]s/x","n":10}]`, srv.URL)
	_, err = env.Host.Run(ctx, host.RunSpec{Code: code, Token: tok, Grant: probeGrant(hostport), Input: []byte(steps)})
	if !errors.Is(err, host.ErrInterrupted) {
		t.Fatalf("run: %v, want it interrupted", err)
	}
	runs, err := env.Store.Runs(context.Background())
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs %v %v", runs, err)
	}
	run := runs[0].ID
	if meta, err := env.Store.Meta(context.Background(), run); err != nil || meta.Checkpoint == 0 {
		t.Fatalf("the run's index names no checkpoint: %+v %v", meta, err)
	}
	// Damage an entry before the checkpoint: a resume does not read it.
	if err := env.Store.RewriteJournal(run, func(recs [][]byte) [][]byte {
		recs[3] = recs[3][:len(recs[3])-3]
		return recs
	}); err != nil {
		t.Fatal(err)
	}
	res, err := env.Host.Resume(context.Background(), run)
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("resume: %v %+v", err, res)
	}
	var lines []string
	if err := json.Unmarshal(res.Output, &lines); err != nil {
		t.Fatal(err)
	}
	// /a and /b before the checkpoint, /cut in doubt (charged at its
	// worst case): 2 of the 5 are left for the loop.
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "http in_doubt") || !strings.HasPrefix(lines[1], "http-loop 2 budget=true ") ||
		!strings.Contains(lines[1], "0 left of 5 (5 spent, 0 reserved)") {
		t.Fatalf("the resumed segment gave %q", lines)
	}
	if n := served.Load(); n != 5 {
		t.Fatalf("the server saw %d requests, want 5", n)
	}
}

// run.limit on wall_seconds moves the run's wall-time deadline: with no
// seconds more, the run is stopped, between two calls or at one, with the
// wall-time budget's reason, however long its loop would have gone on.
func TestRunLimitOnWallSecondsStopsTheRun(t *testing.T) {
	srv, served := countingServer(t)
	env, lines, res, _ := budgetRun(t, capability.Budget{}, srv,
		fmt.Sprintf(`[{"op":"limit","dim":"wall_seconds","amount":0},{"op":"http-loop","url":"%s/x","n":100000}]`, srv.URL))
	if res.Status != journal.StatusFailed || res.Err == nil || !strings.Contains(res.Err.Error(), "stopped: budget: the run's wall-time budget") {
		t.Fatalf("run ended %s: %v %q; want stopped by its wall clock", res.Status, res.Err, lines)
	}
	if n := served.Load(); n >= 100000 {
		t.Fatalf("the loop ran to its end (%d requests)", n)
	}
	if r := row(t, report(t, env, res.Run), budget.WallSeconds); r.Ceiling == nil {
		t.Fatalf("wall_seconds %+v: the report lacks the ceiling run.limit set", r)
	}
}

// A fork answers its calls up to the fork point from its parent's journal,
// run.limit among them: the absolute ceilings that answer names hold in
// the fork, live after the fork point, and in its replay. The fork is
// charged what it sends, not the calls its parent made before the fork
// point: under the parent's ceiling of 2 requests it sends 2 of its own.
func TestForkKeepsTheCeilingsItsParentSet(t *testing.T) {
	srv, served := countingServer(t)
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	code := testutil.BuildGo(t, "host/testdata/agents/probe")
	steps := fmt.Sprintf(`[{"op":"http","url":"%[1]s/a"},{"op":"limit","dim":"http_requests","amount":1},{"op":"http","url":"%[1]s/b"},{"op":"http","url":"%[1]s/c"},{"op":"http","url":"%[1]s/d"}]`, srv.URL)
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: code, Grant: probeGrant(strings.TrimPrefix(srv.URL, "http://")), Input: []byte(steps)})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("parent: %v %+v", err, res)
	}
	var atLimit uint64
	for _, e := range entries(t, env, res.Run) {
		if e.Op == "run.limit" {
			atLimit = e.Seq
		}
	}
	if served.Load() != 2 {
		t.Fatalf("the parent sent %d requests, want 2 (/c and /d refused)", served.Load())
	}
	st, err := env.Host.Fork(context.Background(), host.ForkSpec{Parent: res.Run, At: atLimit})
	if err != nil {
		t.Fatal(err)
	}
	fres, err := st.Execute(context.Background())
	if err != nil || fres.Status != journal.StatusCompleted {
		t.Fatalf("fork: %v %+v", err, fres)
	}
	var lines []string
	if err := json.Unmarshal(fres.Output, &lines); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 5 || lines[1] != "limit http_requests=2" || !strings.HasPrefix(lines[2], "http 200") || !strings.HasPrefix(lines[3], "http 200") ||
		!strings.Contains(lines[4], "budget exceeded: http_requests: asked 1, 0 left of 2 (2 spent, 0 reserved)") {
		t.Fatalf("the fork gave %q; want /b and /c sent and /d refused under the parent's ceiling", lines)
	}
	if n := served.Load(); n != 4 {
		t.Fatalf("the server saw %d requests, want the parent's 2 and the fork's 2", n)
	}
	replaysTo(t, env, fres.Run, code, fres.Output)
	if r := row(t, report(t, env, fres.Run), budget.HTTPRequests); r.Spent != 2 || *r.Ceiling != 2 {
		t.Fatalf("the fork's http_requests %+v, want its own 2 spent under the ceiling of 2", r)
	}
}
