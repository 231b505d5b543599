package cell_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	"github.com/agentrt/agentrt/internal/clock"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

// counting returns a loopback server that counts the requests it
// answers, and its host:port.
func counting(t *testing.T) (*httptest.Server, *atomic.Int64, string) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv, &n, strings.TrimPrefix(srv.URL, "http://")
}

// spender builds the spender agent and stores it in p's cell, returning
// its code and its hash in hex.
func spender(p *parkCell) ([]byte, string) {
	p.t.Helper()
	code := testutil.BuildGo(p.t, "host/testdata/agents/spender")
	sum := sha256.Sum256(code)
	if err := p.cell.Store.PutModule(context.Background(), sum[:], code); err != nil {
		p.t.Fatal(err)
	}
	return code, hex.EncodeToString(sum[:])
}

// launchBudgeted launches the agent code with plan under grant and a
// token of the cell's with budget b.
func (p *parkCell) launchBudgeted(code []byte, plan any, grant string, b capability.Budget) journal.RunID {
	p.t.Helper()
	g, err := host.ParseGrant([]byte(grant))
	if err != nil {
		p.t.Fatal(err)
	}
	caps, err := g.TokenCaps()
	if err != nil {
		p.t.Fatal(err)
	}
	now := p.clock.Now()
	tok, err := capability.Issue(p.cell.Key, capability.Claims{Audience: p.cell.Public(), Caps: caps, Budget: b,
		NotBefore: now.Add(-time.Hour), Expires: now.Add(24 * time.Hour)})
	if err != nil {
		p.t.Fatal(err)
	}
	in, _ := json.Marshal(plan)
	run, err := p.srv.Launch(context.Background(), host.RunSpec{Code: code, Input: in, Grant: g, Token: tok}, "started")
	if err != nil {
		p.t.Fatal(err)
	}
	return run
}

// budgetOps returns the budget records of run's journal, in order, with
// the op of the entry that carries each.
func (p *parkCell) budgetOps(run journal.RunID) ([]budget.Op, []string) {
	p.t.Helper()
	var ops []budget.Op
	var on []string
	err := journal.ReadEntries(context.Background(), p.cell.Store, run, func(e *journal.Entry, _ *journal.Record) error {
		if len(e.Budget) == 0 {
			return nil
		}
		o, err := budget.DecodeRecord(e.Budget)
		if err != nil {
			return err
		}
		for range o {
			on = append(on, fmt.Sprintf("%s %s", e.Op, e.Phase))
		}
		ops = append(ops, o...)
		return nil
	})
	if err != nil {
		p.t.Fatal(err)
	}
	return ops, on
}

// spendOf returns the report row of d in run's budget, from its journal.
func (p *parkCell) spendOf(run journal.RunID, d budget.Dim) budget.Row {
	p.t.Helper()
	rep, err := host.LoadBudget(context.Background(), p.cell.Store, run, journal.TrustKeys(p.cell.Public()))
	if err != nil {
		p.t.Fatal(err)
	}
	return rep.Rows[d]
}

// verifies exports run and verifies its bundle offline (chain, seals,
// replay and budget records).
func (p *parkCell) verifies(run journal.RunID) {
	p.t.Helper()
	var buf bytes.Buffer
	if _, err := replay.ExportTo(context.Background(), p.cell.Store, run, p.cell.Key, replay.EngineSettings{}, &buf); err != nil {
		p.t.Fatal(err)
	}
	rep, err := replay.VerifyBundle(context.Background(), buf.Bytes(), replay.VerifyOptions{Engine: testutil.SharedEngine(p.t), Trusted: []ed25519.PublicKey{p.cell.Public()}})
	if err != nil || !rep.OK {
		p.t.Fatalf("run %s: verify: %v", run, err)
	}
}

// The budget bridge with real runs: a parent of 10 HTTP requests carves 4
// for each of two children running at once; a third child of 5 does not
// fit and is refused with status budget, a fourth of 11 is wider than the
// parent's token and denied; the child that spent 2 returns
// its other 2 when it ends, so the parent, after awaiting both, sends
// exactly the 4 left. The server sees 10 requests, the parent's journal
// carries both carves and their settles at what each child spent, every
// journal verifies, and the parent's ledger holds nothing at its end.
func TestBudgetBridge(t *testing.T) {
	p := openParkCell(t, t.TempDir(), clock.NewFake(time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)))
	defer func() { p.close() }()
	code, mod := spender(p)
	srv, served, hostport := counting(t)
	httpCaps := fmt.Sprintf("{run: {}, timer: {}, agent: {max_children: 1, max_depth: 1}, http: {hosts: [%q]}}", hostport)
	grant := parentGrant + fmt.Sprintf("  http: {hosts: [%q]}\n", hostport)
	fetch := func(n int) map[string]any { return map[string]any{"url": srv.URL, "n": n} }
	parent := p.launchBudgeted(code, map[string]any{
		"spawn": []spawnOf{
			{Module: mod, Caps: httpCaps, Budget: "http_requests=4", Input: map[string]any{"fetch": fetch(2)}},
			{Module: mod, Caps: httpCaps, Budget: "http_requests=4", Input: map[string]any{"fetch": fetch(6)}},
			{Module: mod, Caps: httpCaps, Budget: "http_requests=5", Input: map[string]any{"fetch": fetch(1)}},
			// More than the parent has at all: wider than its token.
			{Module: mod, Caps: httpCaps, Budget: "http_requests=11", Input: map[string]any{"fetch": fetch(1)}},
		},
		"await": true, "fetch": fetch(6),
	}, grant, capability.Budget{HTTPRequests: capability.Limit(10)})
	r := p.report(parent)
	if len(r.Spawned) != 2 || len(r.Outcomes) != 2 {
		t.Fatalf("report %+v", r)
	}
	// The third spawn: 10 - 4 - 4 = 2 left, whether or not the first
	// child has ended (it returns 2): 5 does not fit.
	if len(r.Errors) != 4 || !strings.HasPrefix(r.Errors[0], "budget: agent.spawn: the child's budget: budget exceeded: http_requests: asked 5") ||
		!strings.HasPrefix(r.Errors[1], "denied: agent.spawn: widens its parent: budget http_requests is 11 but the parent's is 10") {
		t.Fatalf("errors %q", r.Errors)
	}
	for _, e := range r.Errors[2:] {
		if !strings.HasPrefix(e, "budget: ") {
			t.Fatalf("the parent's fetches past its budget: %q", r.Errors)
		}
	}
	if r.Fetched != 4 {
		t.Fatalf("the parent fetched %d after its children, want the 4 they left", r.Fetched)
	}
	if n := served.Load(); n != 10 {
		t.Fatalf("the server answered %d requests, the parent's ceiling is 10", n)
	}
	kids := mustIDs(t, r.Spawned[0].Run, r.Spawned[1].Run)
	for i, want := range []uint64{2, 4} {
		row := p.spendOf(kids[i], budget.HTTPRequests)
		if row.Spent != want || *row.Ceiling != 4 || row.Reserved != 0 {
			t.Fatalf("child %d: %+v, want %d spent of 4", i, row, want)
		}
	}
	// The parent's journal: each carve reserved on its spawn's intent and
	// settled, at its child's spend, on the entry of the first of the
	// parent's agent calls that learnt its end (a spawn or an await), or
	// on its end entry.
	ops, on := p.budgetOps(parent)
	reserved := map[uint64]bool{}
	settled := map[uint64]bool{}
	for i, o := range ops {
		switch {
		case o.Carve && o.Kind == budget.OpReserve:
			reserved[o.ID] = true
			if on[i] != "agent.spawn intent" || o.Amounts[budget.HTTPRequests] != 4 {
				t.Errorf("carve %+v on %s", o, on[i])
			}
		case o.Carve && o.Kind == budget.OpSettle:
			settled[o.Amounts[budget.HTTPRequests]] = true
			if !reserved[o.ID] || !(strings.HasPrefix(on[i], "agent.") || on[i] == " end") || o.Amounts[budget.Steps] != 0 {
				t.Errorf("carve settle %+v on %s", o, on[i])
			}
		}
	}
	if len(reserved) != 2 || !settled[2] || !settled[4] {
		t.Fatalf("carves %v settled at %v in the parent's journal: %+v %q", reserved, settled, ops, on)
	}
	if row := p.spendOf(parent, budget.HTTPRequests); row.Spent != 10 || row.Reserved != 0 || row.Over != 0 {
		t.Fatalf("the parent's http_requests: %+v, want 10 spent of 10", row)
	}
	for _, run := range append([]journal.RunID{parent}, kids...) {
		p.verifies(run)
	}
}

// A child cancelled while it sleeps, having spent some of its budget:
// the parent's cancel learns its end, settles its carve at what it spent,
// and the rest returns. The parent then spends all that is left, so the
// family sends exactly its ceiling.
func TestBudgetBridgeCancel(t *testing.T) {
	p := openParkCell(t, t.TempDir(), clock.NewFake(time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)))
	defer func() { p.close() }()
	code, mod := spender(p)
	srv, served, hostport := counting(t)
	httpCaps := fmt.Sprintf("{run: {}, timer: {}, agent: {max_children: 1, max_depth: 1}, http: {hosts: [%q]}}", hostport)
	grant := parentGrant + fmt.Sprintf("  http: {hosts: [%q]}\n", hostport)
	parent := p.launchBudgeted(code, map[string]any{
		"spawn": []spawnOf{
			{Module: mod, Caps: httpCaps, Budget: "http_requests=6", Input: map[string]any{"fetch": map[string]any{"url": srv.URL, "n": 3}, "fetch_first": true, "sleep": true}},
		},
		"cancel": true, "children": true, "fetch": map[string]any{"url": srv.URL, "n": 12},
	}, grant, capability.Budget{HTTPRequests: capability.Limit(10)})
	r := p.report(parent)
	if len(r.Spawned) != 1 || len(r.Children) != 1 || r.Children[0].Status != "cancelled" {
		t.Fatalf("report %+v", r)
	}
	child := mustIDs(t, r.Spawned[0].Run)[0]
	spent := p.spendOf(child, budget.HTTPRequests)
	if spent.Spent+spent.Reserved+uint64(r.Fetched) != 10 {
		t.Fatalf("the child spent %d (and holds %d), the parent fetched %d: want all 10", spent.Spent, spent.Reserved, r.Fetched)
	}
	if n := served.Load(); n > 10 {
		t.Fatalf("the server answered %d requests, the parent's ceiling is 10", n)
	}
	if row := p.spendOf(parent, budget.HTTPRequests); row.Spent != 10 || row.Reserved != 0 {
		t.Fatalf("the parent's http_requests: %+v", row)
	}
	p.verifies(parent)
	p.verifies(child)
}

// The bridge carves steps and wall clock too. A parent of 40 steps and
// 3600 s, whose first request takes 100.5 s (the server moves the clock),
// carves 20 steps for a child that makes a few and leaves out its wall
// clock (its token gets the 3499 s the parent has left, in whole seconds:
// its deadline is not past the parent's); a second child
// of 30 steps does not fit beside the first and is refused with status
// budget, a third that leaves its steps out is refused with a hint. The
// parent then requests until the steps run out: it is stopped when its
// own steps and what its child made reach 40, and its journal's budget
// counts exactly 40, the child's unspent steps back in the parent.
func TestBudgetBridgeStepsAndWall(t *testing.T) {
	p := openParkCell(t, t.TempDir(), clock.NewFake(time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)))
	defer func() { p.close() }()
	code, mod := spender(p)
	var served atomic.Int64
	// The first child's fetches wait until the parent's three spawns have
	// their outcomes: the second is refused beside the first's carve, so
	// the first must not have ended (its carve settled) by then.
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/child" {
			select {
			case <-release:
			case <-time.After(time.Minute):
			}
		}
		if served.Add(1) == 1 {
			p.clock.Advance(100*time.Second + 500*time.Millisecond)
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	hostport := strings.TrimPrefix(srv.URL, "http://")
	httpCaps := fmt.Sprintf("{run: {}, timer: {}, agent: {max_children: 1, max_depth: 1}, http: {hosts: [%q]}}", hostport)
	grant := parentGrant + fmt.Sprintf("  http: {hosts: [%q]}\n", hostport)
	parent := p.launchBudgeted(code, map[string]any{
		"spawn": []spawnOf{
			{Module: mod, Caps: httpCaps, Budget: "steps=20", Input: map[string]any{"fetch": map[string]any{"url": srv.URL + "/child", "n": 2}}},
			{Module: mod, Caps: httpCaps, Budget: "steps=30", Input: map[string]any{}},
			{Module: mod, Caps: httpCaps, Input: map[string]any{}},
		},
		"await": true, "fetch_first": true, "fetch": map[string]any{"url": srv.URL, "n": 1}, "then": map[string]any{"url": srv.URL, "n": 100},
	}, grant, capability.Budget{Steps: capability.Limit(40), WallSeconds: capability.Limit(3600)})
	go func() {
		defer close(release)
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			outcomes := 0
			_ = journal.ReadEntries(context.Background(), p.cell.Store, parent, func(e *journal.Entry, _ *journal.Record) error {
				if e.Op == "agent.spawn" && (e.Phase == journal.PhaseCompleted || e.Phase == journal.PhaseFailed) {
					outcomes++
				}
				return nil
			})
			if outcomes >= 3 {
				return
			}
		}
	}()
	m := p.waitEnd(parent)
	if m.Status != journal.StatusFailed || !strings.Contains(m.Error, "budget: steps") || !strings.Contains(m.Error, "its children hold or made") {
		t.Fatalf("the parent ended %s: %q, want stopped by its steps with its child's", m.Status, m.Error)
	}
	var refusals []string
	var child journal.RunID
	for _, e := range p.entries(parent, "agent.spawn") {
		var ae abi.Error
		var sr abi.SpawnResponse
		switch {
		case e.Phase == journal.PhaseCompleted && abi.Unmarshal(e.Response, &sr) == nil && sr.Run != "":
			child = mustIDs(t, sr.Run)[0]
		case e.Phase != journal.PhaseIntent && abi.Unmarshal(e.Response, &ae) == nil && ae.Message != "":
			refusals = append(refusals, ae.Message)
		}
	}
	if len(refusals) != 2 || !strings.Contains(refusals[0], "the child's budget: budget exceeded: steps: asked 30") ||
		!strings.Contains(refusals[1], "a steps ceiling the spawn leaves out is the caller's whole") {
		t.Fatalf("refused spawns %q", refusals)
	}
	kid := p.spendOf(child, budget.Steps)
	if *kid.Ceiling != 20 || kid.Spent == 0 || kid.Spent >= 20 {
		t.Fatalf("the child's steps: %+v, want a few of 20", kid)
	}
	if wall := p.spendOf(child, budget.WallSeconds); wall.Ceiling == nil || *wall.Ceiling != 3499 {
		t.Fatalf("the child's wall clock: %+v, want the 3499 s its parent had left", wall)
	}
	// The carve reserved 20 steps and settled at what the child made.
	var carved, settled uint64
	ops, _ := p.budgetOps(parent)
	for _, o := range ops {
		switch {
		case o.Carve && o.Kind == budget.OpReserve:
			carved += o.Amounts[budget.Steps]
		case o.Carve && o.Kind == budget.OpSettle:
			settled += o.Amounts[budget.Steps]
		}
	}
	if carved != 20 || settled != kid.Spent {
		t.Fatalf("the parent carved %d steps and settled %d, the child made %d", carved, settled, kid.Spent)
	}
	if row := p.spendOf(parent, budget.Steps); row.Spent != 40 || row.Reserved != 0 {
		t.Fatalf("the parent's steps: %+v, want its own and its child's making 40", row)
	}
	p.verifies(parent)
	p.verifies(child)
}
