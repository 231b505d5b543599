package cell_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/clock"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// familyReport is the family agent's output (host/testdata/agents/family).
type familyReport struct {
	Spawned []struct {
		Run       string
		TokenHash []byte
		Budget    string
	}
	Outcomes []struct {
		Run, Status, Err string
		Output           []byte
		OutputHash       []byte
	}
	Children []abi.Child
	Errors   []string
	Output   string
	// Fetched is the spender agent's count of answered GETs.
	Fetched int
}

// spawnOf is one child in a family agent's plan.
type spawnOf struct {
	Module string `json:"module"`
	Caps   string `json:"caps"`
	Budget string `json:"budget,omitempty"`
	Input  any    `json:"input"`
}

// family builds the family agent and stores it in p's cell, returning its
// code and its hash in hex, the name a plan spawns it by.
func family(p *parkCell) ([]byte, string) {
	p.t.Helper()
	code := testutil.BuildGo(p.t, "host/testdata/agents/family")
	sum := sha256.Sum256(code)
	if err := p.cell.Store.PutModule(context.Background(), sum[:], code); err != nil {
		p.t.Fatal(err)
	}
	return code, hex.EncodeToString(sum[:])
}

func (p *parkCell) launchFamily(code []byte, plan any, grant string) journal.RunID {
	p.t.Helper()
	g, err := host.ParseGrant([]byte(grant))
	if err != nil {
		p.t.Fatal(err)
	}
	in, _ := json.Marshal(plan)
	run, err := p.srv.Launch(context.Background(), host.RunSpec{Code: code, Input: in, Grant: g}, "started")
	if err != nil {
		p.t.Fatal(err)
	}
	return run
}

// waitEnd waits until run's index record says it is finished.
func (p *parkCell) waitEnd(run journal.RunID) journal.RunMeta {
	p.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if m := p.meta(run); m.Status.Finished() {
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.t.Fatalf("run %s did not end within 60 s: %s", run, p.meta(run).Status)
	return journal.RunMeta{}
}

// waitStatus waits until run's index record has status st.
func (p *parkCell) waitStatus(run journal.RunID, st journal.RunStatus) journal.RunMeta {
	p.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if m := p.meta(run); m.Status == st {
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.t.Fatalf("run %s is %s after 60 s, want %s", run, p.meta(run).Status, st)
	return journal.RunMeta{}
}

func (p *parkCell) report(run journal.RunID) familyReport {
	p.t.Helper()
	m := p.waitEnd(run)
	if m.Status != journal.StatusCompleted {
		p.t.Fatalf("run %s ended %s: %s", run, m.Status, m.Error)
	}
	var r familyReport
	if err := json.Unmarshal(m.Output, &r); err != nil {
		p.t.Fatalf("output %q: %v", m.Output, err)
	}
	return r
}

// header returns run's journal header.
func (p *parkCell) header(run journal.RunID) *journal.Header {
	p.t.Helper()
	var hdr *journal.Header
	err := journal.ReadEntries(context.Background(), p.cell.Store, run, func(e *journal.Entry, _ *journal.Record) error {
		if e.Header != nil {
			hdr = e.Header
		}
		return nil
	})
	if err != nil || hdr == nil {
		p.t.Fatalf("header of %s: %v", run, err)
	}
	return hdr
}

const parentGrant = "capabilities:\n  run: {}\n  kv: {namespace: team}\n  timer: {}\n  agent: {max_children: 3, max_depth: 2}\n"

// leafCaps are the least a family agent needs: it imports timer and agent.
const leafCaps = "{run: {}, timer: {}, agent: {max_children: 1, max_depth: 1}}"

// A parent spawns two children, awaits them (parking), and gets each one's
// typed outcome; the journals name each other both ways and all verify
// and replay.
func TestSpawnAwaitChildren(t *testing.T) {
	p := openParkCell(t, t.TempDir(), clock.NewFake(time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)))
	defer func() { p.close() }()
	code, mod := family(p)
	parent := p.launchFamily(code, map[string]any{
		"spawn": []spawnOf{
			{Module: mod, Caps: "{run: {}, timer: {}, agent: {max_children: 1, max_depth: 1}, kv: {namespace: team}}", Budget: "steps=50", Input: map[string]any{"output": "from a"}},
			{Module: mod, Caps: leafCaps, Input: map[string]any{"fail": "b gives up"}},
		},
		"await": true, "children": true,
	}, parentGrant)
	r := p.report(parent)
	if len(r.Errors) != 0 || len(r.Spawned) != 2 || len(r.Outcomes) != 2 {
		t.Fatalf("report %+v", r)
	}
	a, b := r.Outcomes[0], r.Outcomes[1]
	if a.Status != abi.ChildCompleted || !bytes.Contains(a.Output, []byte(`"from a"`)) || !bytes.Equal(a.OutputHash, journal.Sum(a.Output)) {
		t.Fatalf("child a: %+v", a)
	}
	if b.Status != abi.ChildFailed || !strings.Contains(b.Err, "exited with status 1") || len(b.OutputHash) != 32 {
		t.Fatalf("child b: %+v", b)
	}
	if r.Spawned[0].Budget != "steps=50" || r.Spawned[1].Budget != "" {
		t.Fatalf("budgets %q %q", r.Spawned[0].Budget, r.Spawned[1].Budget)
	}
	if len(r.Children) != 2 || r.Children[0].Status != abi.ChildCompleted || r.Children[1].Status != abi.ChildFailed {
		t.Fatalf("children %+v", r.Children)
	}

	spawns := p.entries(parent, "agent.spawn")
	awaits := p.entries(parent, "agent.await")
	for i, s := range r.Spawned {
		child, err := journal.ParseRunID(s.Run)
		if err != nil {
			t.Fatal(err)
		}
		// The child's journal names its parent and the spawning step.
		hdr := p.header(child)
		m := p.meta(child)
		if !bytes.Equal(hdr.Parent, parent[:]) || hdr.Origin == nil || hdr.Origin.Kind != "spawn" || hdr.Origin.ID != parent.String() {
			t.Fatalf("child %d header: parent %x origin %+v", i, hdr.Parent, hdr.Origin)
		}
		// The parent's journal records the spawn at that step: the child's
		// id, its token's hash and its budget.
		var done *journal.Entry
		for _, e := range spawns {
			if e.Step == hdr.Origin.Seq && e.Phase == journal.PhaseCompleted {
				done = e
			}
		}
		if done == nil {
			t.Fatalf("no completed agent.spawn at step %d in the parent", hdr.Origin.Seq)
		}
		var resp abi.SpawnResponse
		if err := abi.Unmarshal(done.Response, &resp); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(hdr.Token)
		if resp.Run != child.String() || !bytes.Equal(resp.TokenHash, sum[:]) {
			t.Fatalf("spawn record %+v, child %s token hash %x", resp, child, sum)
		}
		// ... and the child's outcome: status and output hash.
		var got abi.AwaitResponse
		for _, e := range awaits {
			if e.Phase == journal.PhaseCompleted {
				var ar abi.AwaitResponse
				if err := abi.Unmarshal(e.Response, &ar); err == nil && ar.Run == child.String() {
					got = ar
				}
			}
		}
		if got.Status != string(m.Status) || !bytes.Equal(got.OutputHash, journal.Sum(m.Output)) {
			t.Fatalf("await record %+v, child ended %s", got, m.Status)
		}
	}
	// Awaiting parked the parent: the await's intent came before the
	// child's end, and the outcome after.
	if awaits[0].Phase != journal.PhaseIntent {
		t.Fatalf("first await entry is %s", awaits[0].Phase)
	}

	// Lineage both ways: the parent's sub-runs reach the children's calls;
	// a child's call names its parent.
	lin := p.cell.Store
	if _, err := lin.Index(context.Background()); err != nil {
		t.Fatal(err)
	}
	calls, err := lin.Query(context.Background(), journal.Filter{Run: &parent, SubRuns: true, Op: "run.set_output"})
	if err != nil {
		t.Fatal(err)
	}
	kids := map[journal.RunID]bool{}
	for _, c := range calls {
		if c.Run != parent {
			if c.Parent != parent {
				t.Fatalf("a sub-run's call names parent %s", c.Parent)
			}
			kids[c.Run] = true
		}
	}
	if len(kids) != 1 { // b failed before setting an output
		t.Fatalf("sub-runs with run.set_output: %d, want 1 (%+v)", len(kids), calls)
	}

	// Every journal of the family verifies and replays, offline.
	for _, run := range append([]journal.RunID{parent}, mustIDs(t, r.Spawned[0].Run, r.Spawned[1].Run)...) {
		p.verifies(run)
	}
}

func mustIDs(t *testing.T, ids ...string) []journal.RunID {
	t.Helper()
	var out []journal.RunID
	for _, s := range ids {
		id, err := journal.ParseRunID(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}

// An agent asks, using only its grant, for children wider than itself, or
// past its bounds, and is refused each time with a precise reason; what it
// may delegate, it does.
func TestSpawnNeverWiderThanTheParent(t *testing.T) {
	p := openParkCell(t, t.TempDir(), clock.NewFake(time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)))
	defer func() { p.close() }()
	code, mod := family(p)
	leaf := map[string]any{"output": "leaf"}
	parent := p.launchFamily(code, map[string]any{
		"spawn": []spawnOf{
			{Module: mod, Caps: "{run: {}, timer: {}, agent: {max_children: 1, max_depth: 1}, kv: {namespace: other}}", Input: leaf},
			{Module: mod, Caps: "{run: {}, timer: {}, agent: {max_children: 1, max_depth: 1}, http: {hosts: [example.com]}}", Input: leaf},
			{Module: mod, Caps: "{run: {}, timer: {}, agent: {max_children: 1, max_depth: 2}}", Input: leaf},
			{Module: mod, Caps: "{run: {}, timer: {}, agent: {max_children: 4, max_depth: 1}}", Input: leaf},
			{Module: mod, Caps: "{run: {}}", Input: leaf},
			{Module: mod, Caps: "{run: {}, timer: {}, agent: {max_children: 1, max_depth: 1}, kv: {namespace: team}}", Input: leaf},
			{Module: mod, Caps: leafCaps, Input: leaf},
			{Module: mod, Caps: leafCaps, Input: leaf},
			{Module: mod, Caps: leafCaps, Input: leaf},
			{Module: strings.Repeat("ab", 32), Caps: leafCaps, Input: leaf},
		},
		"other": "18ee4cab4e0d0000a04efd9b1a3fd4d7", "await": true,
	}, parentGrant)
	r := p.report(parent)
	want := []string{
		`kv namespace "other" is not in the parent's`,
		`capability http is not in the parent`,
		`max_depth 2 must be below its parent's 2`,
		`max_children 4 is above the parent's 3`,
		// A module whose imports its grant lacks: refused at link time,
		// journaled as a failed child, which counts.
		`module refused: imports capabilities its grant lacks: timer, agent`,
		`has spawned 3 children, its grant's max_children`,
		`has spawned 3 children, its grant's max_children`,
		// An unknown module, past the bound too.
		`has spawned 3 children, its grant's max_children`,
		`is not a child of run`,
		`is not a child of run`,
	}
	if len(r.Errors) != len(want) {
		t.Fatalf("errors %q, want %d", r.Errors, len(want))
	}
	for i, w := range want {
		if !strings.Contains(r.Errors[i], w) || !strings.HasPrefix(r.Errors[i], "denied: ") {
			t.Errorf("error %d: %q, want a denial containing %q", i, r.Errors[i], w)
		}
	}
	if len(r.Spawned) != 2 || len(r.Outcomes) != 2 || r.Outcomes[0].Status != abi.ChildCompleted || r.Outcomes[1].Status != abi.ChildCompleted {
		t.Fatalf("spawned %+v outcomes %+v", r.Spawned, r.Outcomes)
	}
	// The child got exactly what was asked, within the parent's.
	hdr := p.header(mustIDs(t, r.Spawned[0].Run)[0])
	g, err := host.DecodeGrant(hdr.Grant)
	if err != nil {
		t.Fatal(err)
	}
	if g.KV == nil || g.KV.Namespace != "team" || g.HTTP != nil || g.Agent == nil || g.Agent.MaxDepth != 1 {
		t.Fatalf("child grant %+v", g)
	}
}

// chain returns a plan of depth levels of family agents, each spawning the
// next and awaiting it; the last sleeps an hour (parked on its timer).
func chain(mod string, depth int) map[string]any {
	plan := map[string]any{"sleep": true, "output": "deepest"}
	for d := 1; d < depth; d++ {
		caps := fmt.Sprintf("{run: {}, timer: {}, agent: {max_children: 1, max_depth: %d}}", d)
		plan = map[string]any{"spawn": []spawnOf{{Module: mod, Caps: caps, Input: plan}}, "await": true, "output": fmt.Sprintf("level %d", depth-d-1)}
	}
	return plan
}

// family returns run and its descendants, waiting until there are n runs,
// the deepest one parked on its timer.
func (p *parkCell) familyOf(run journal.RunID, n int) []journal.RunID {
	p.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		runs, err := p.cell.Store.Runs(context.Background())
		if err != nil {
			p.t.Fatal(err)
		}
		out := []journal.RunID{run}
		for i := 0; i < len(out); i++ {
			for _, m := range runs {
				if m.Origin != nil && m.Origin.Kind == cell.OriginSpawn && m.Origin.ID == out[i].String() {
					out = append(out, m.ID)
				}
			}
		}
		if len(out) == n {
			if m := p.meta(out[n-1]); m.Status == journal.StatusParked && m.Wait != nil && m.Wait.Kind == journal.WaitTimer {
				return out
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.t.Fatalf("no family of %d runs with its deepest parked within 60 s", n)
	return nil
}

const chainGrant = "capabilities:\n  run: {}\n  timer: {}\n  agent: {max_children: 1, max_depth: 4}\n"

// Cancelling a run reaches every descendant, three levels down.
func TestCancelReachesEveryDescendant(t *testing.T) {
	p := openParkCell(t, t.TempDir(), clock.NewFake(time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)))
	defer func() { p.close() }()
	code, mod := family(p)
	root := p.launchFamily(code, chain(mod, 4), chainGrant)
	runs := p.familyOf(root, 4)
	for _, run := range runs[:3] {
		if m := p.waitStatus(run, journal.StatusParked); m.Wait.Kind != journal.WaitRun {
			t.Fatalf("run %s waits for %+v, want its child", run, m.Wait)
		}
	}
	if err := p.srv.Cancel(context.Background(), root); err != nil {
		t.Fatal(err)
	}
	for i, run := range runs {
		if m := p.meta(run); m.Status != journal.StatusCancelled {
			t.Errorf("level %d (%s) is %s after its ancestor's cancel", i, run, m.Status)
		}
	}
}

// A family in flight survives a restart of the daemon: parked parents stay
// attached to their children through their journals, and when the deepest
// wakes, each ancestor is woken in turn and completes with its child's
// outcome.
func TestFamilyReattachedAfterRestart(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC))
	p := openParkCell(t, t.TempDir(), clk)
	code, mod := family(p)
	root := p.launchFamily(code, chain(mod, 3), chainGrant)
	runs := p.familyOf(root, 3)
	p = p.restart()
	defer func() { p.close() }()
	clk.Advance(61 * time.Minute)
	r := p.report(root)
	if len(r.Outcomes) != 1 || r.Outcomes[0].Status != abi.ChildCompleted || !bytes.Contains(r.Outcomes[0].Output, []byte(`"level 1"`)) {
		t.Fatalf("root report %+v", r)
	}
	mid := p.report(runs[1])
	if len(mid.Outcomes) != 1 || !bytes.Contains(mid.Outcomes[0].Output, []byte(`"deepest"`)) {
		t.Fatalf("middle report %+v", mid)
	}
}

// The C SDK spawns and awaits as the Go SDK does, and is refused the same.
func TestSpawnFromC(t *testing.T) {
	p := openParkCell(t, t.TempDir(), clock.NewFake(time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)))
	defer func() { p.close() }()
	_, mod := family(p)
	sum, _ := hex.DecodeString(mod)
	code := testutil.BuildC(t, "host/testdata/agents/cspawner")
	g, err := host.ParseGrant([]byte("capabilities:\n  run: {}\n  timer: {}\n  agent: {max_children: 2, max_depth: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ caps, want string }{
		{leafCaps, " completed "},
		{"{run: {}, timer: {}, agent: {max_children: 1, max_depth: 1}, kv: {namespace: x}}", `refused denied: agent.spawn: widens its parent: capability kv is not in the parent`},
	} {
		run, err := p.srv.Launch(context.Background(), host.RunSpec{Code: code, Input: append(bytes.Clone(sum), c.caps...), Grant: g}, "started")
		if err != nil {
			t.Fatal(err)
		}
		m := p.waitEnd(run)
		if m.Status != journal.StatusCompleted || !strings.Contains(string(m.Output), c.want) {
			t.Fatalf("caps %s: ended %s %q %s, want %q", c.caps, m.Status, m.Output, m.Error, c.want)
		}
		if strings.HasPrefix(string(m.Output), "refused") {
			continue
		}
		f := strings.SplitN(string(m.Output), " ", 4)
		child := p.meta(mustIDs(t, f[0])[0])
		if f[3] != string(child.Output) || f[2] != hex.EncodeToString(journal.Sum(child.Output)) {
			t.Fatalf("the C agent read %q, the child output %q", m.Output, child.Output)
		}
	}
}

// A child stopped by its wall-time budget reaches its parent as
// budget_exhausted.
func TestChildTerminalStates(t *testing.T) {
	p := openParkCell(t, t.TempDir(), clock.NewFake(time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)))
	defer func() { p.close() }()
	code, mod := family(p)
	parent := p.launchFamily(code, map[string]any{
		"spawn": []spawnOf{
			{Module: mod, Caps: leafCaps, Budget: "wall_seconds=1", Input: map[string]any{"spin": true}},
		},
		"await": true,
	}, parentGrant)
	r := p.report(parent)
	if len(r.Outcomes) != 1 || r.Outcomes[0].Status != abi.ChildBudgetExhausted || !strings.Contains(r.Outcomes[0].Err, "wall-time budget") {
		t.Fatalf("report %+v", r)
	}
}

// Every terminal state of a child reaches its parent typed, through
// agent.await: completed, failed, budget_exhausted (its wall-time budget),
// in_doubt (the cell stopped recovering it: held, seen by the parent
// after a restart), and cancelled (by its parent). Every journal of both
// families verifies and replays.
func TestEveryTerminalStateReachesTheParent(t *testing.T) {
	p := openParkCell(t, t.TempDir(), clock.NewFake(time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)))
	defer func() { p.close() }()
	code, mod := family(p)
	parent := p.launchFamily(code, map[string]any{
		"spawn": []spawnOf{
			{Module: mod, Caps: leafCaps, Input: map[string]any{"output": "done"}},
			{Module: mod, Caps: leafCaps, Input: map[string]any{"fail": "gives up"}},
			{Module: mod, Caps: leafCaps, Budget: "wall_seconds=1", Input: map[string]any{"spin": true}},
			{Module: mod, Caps: leafCaps, Input: map[string]any{"sleep": true}},
		},
		"await": true,
	}, "capabilities:\n  run: {}\n  timer: {}\n  agent: {max_children: 4, max_depth: 2}\n")
	canceller := p.launchFamily(code, map[string]any{
		"spawn":  []spawnOf{{Module: mod, Caps: leafCaps, Input: map[string]any{"sleep": true}}},
		"cancel": true, "await": true,
	}, parentGrant)
	// The parent parks on its fourth child, which sleeps: the cell holds
	// it (as its crash-loop breaker would), and the restarted daemon
	// wakes the parent, whose await finds it held.
	var sleeper journal.RunID
	deadline := time.Now().Add(60 * time.Second)
	for sleeper.IsZero() {
		if m := p.meta(parent); m.Status == journal.StatusParked && m.Wait != nil && m.Wait.Kind == journal.WaitRun {
			if c := p.meta(m.Wait.Run); c.Status == journal.StatusParked {
				sleeper = m.Wait.Run
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the parent never parked on its sleeping child: %+v", p.meta(parent))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := p.cell.Host.Hold(context.Background(), sleeper, "held by the test"); err != nil {
		t.Fatal(err)
	}
	p = p.restart()
	r := p.report(parent)
	want := []string{abi.ChildCompleted, abi.ChildFailed, abi.ChildBudgetExhausted, abi.ChildInDoubt}
	if len(r.Outcomes) != len(want) || len(r.Errors) != 0 {
		t.Fatalf("report %+v", r)
	}
	for i, w := range want {
		if o := r.Outcomes[i]; o.Status != w || o.Run != r.Spawned[i].Run {
			t.Errorf("child %d: %+v, want %s", i, o, w)
		}
	}
	if !strings.Contains(r.Outcomes[3].Err, "held by the test") {
		t.Errorf("the in-doubt child's error %q, want the reason it was held", r.Outcomes[3].Err)
	}
	c := p.report(canceller)
	if len(c.Outcomes) != 1 || c.Outcomes[0].Status != abi.ChildCancelled || len(c.Errors) != 0 {
		t.Fatalf("canceller report %+v", c)
	}
	for _, run := range []journal.RunID{parent, canceller} {
		p.verifies(run)
	}
	for _, s := range append(r.Spawned, c.Spawned...) {
		if m := p.meta(mustIDs(t, s.Run)[0]); m.Status.Finished() {
			p.verifies(m.ID)
		}
	}
}

// Cancelling a run stops its whole family, three levels down, the deepest
// one live (spinning through calls) and the others parked awaiting their
// children: when the cancel returns, within a second's deadline, every
// one of them is cancelled.
func TestCancelStopsALiveFamily(t *testing.T) {
	p := openParkCell(t, t.TempDir(), clock.NewFake(time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)))
	defer func() { p.close() }()
	code, mod := family(p)
	plan := chain(mod, 4)
	leaf := plan
	for range 3 {
		leaf = leaf["spawn"].([]spawnOf)[0].Input.(map[string]any)
	}
	delete(leaf, "sleep")
	leaf["spin"] = true
	root := p.launchFamily(code, plan, chainGrant)
	var runs []journal.RunID
	deadline := time.Now().Add(60 * time.Second)
	for {
		runs = p.descendants(root)
		if len(runs) == 4 && p.cell.Host.Live(runs[3]) && p.meta(runs[2]).Status == journal.StatusParked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no family of 4 with its deepest live: %v", runs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := p.srv.Cancel(ctx, root); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	for i, run := range runs {
		if m := p.meta(run); m.Status != journal.StatusCancelled || p.cell.Host.Live(run) {
			t.Errorf("level %d (%s) is %s (live %v) when its ancestor's cancel returned", i, run, m.Status, p.cell.Host.Live(run))
		}
	}
}

// descendants returns run and every run below it, parents first.
func (p *parkCell) descendants(run journal.RunID) []journal.RunID {
	p.t.Helper()
	runs, err := p.cell.Store.Runs(context.Background())
	if err != nil {
		p.t.Fatal(err)
	}
	out := []journal.RunID{run}
	for i := 0; i < len(out); i++ {
		for _, m := range runs {
			if m.Origin != nil && m.Origin.Kind == cell.OriginSpawn && m.Origin.ID == out[i].String() {
				out = append(out, m.ID)
			}
		}
	}
	return out
}

// Depth and fan-out are bounded over the whole tree by the root's grant:
// a root of {max_children: 2, max_depth: 2} gets two children of its
// three; each child, {max_children: 2, max_depth: 1}, may start only
// children that cannot spawn (one asking for agent is denied, one whose
// module imports agent is refused at link time and counts), and no more
// than two. The tree holds 7 runs, none below the second generation.
func TestDepthAndFanOutBoundTheTree(t *testing.T) {
	p := openParkCell(t, t.TempDir(), clock.NewFake(time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)))
	defer func() { p.close() }()
	code, mod := family(p)
	leaf := map[string]any{"output": "leaf"}
	kid := spawnOf{Module: mod, Caps: "{run: {}, timer: {}, agent: {max_children: 2, max_depth: 1}}", Input: map[string]any{
		"spawn": []spawnOf{
			{Module: mod, Caps: "{run: {}, timer: {}, agent: {max_children: 1, max_depth: 1}}", Input: leaf},
			{Module: mod, Caps: "{run: {}, timer: {}}", Input: leaf},
			{Module: mod, Caps: "{run: {}}", Input: leaf},
			{Module: mod, Caps: "{run: {}}", Input: leaf},
		},
		"await": true, "output": "child",
	}}
	root := p.launchFamily(code, map[string]any{"spawn": []spawnOf{kid, kid, kid}, "await": true},
		"capabilities:\n  run: {}\n  timer: {}\n  agent: {max_children: 2, max_depth: 2}\n")
	r := p.report(root)
	if len(r.Spawned) != 2 || len(r.Errors) != 1 || !strings.Contains(r.Errors[0], "has spawned 2 children, its grant's max_children") {
		t.Fatalf("root report %+v", r)
	}
	wantKid := []string{
		"max_depth 1 must be below its parent's 1",
		"module refused: imports capabilities its grant lacks: agent",
		"module refused: imports capabilities its grant lacks: timer, agent",
		"has spawned 2 children, its grant's max_children",
	}
	for i, o := range r.Outcomes {
		var k familyReport
		if o.Status != abi.ChildCompleted || json.Unmarshal(o.Output, &k) != nil || len(k.Errors) != len(wantKid) || len(k.Spawned) != 0 {
			t.Fatalf("child %d: %+v", i, o)
		}
		for j, w := range wantKid {
			if !strings.HasPrefix(k.Errors[j], "denied: ") || !strings.Contains(k.Errors[j], w) {
				t.Errorf("child %d, error %d: %q, want a denial containing %q", i, j, k.Errors[j], w)
			}
		}
	}
	runs := p.descendants(root)
	if len(runs) != 7 {
		t.Fatalf("the tree has %d runs, want the root, 2 children and their 2 refused ones each", len(runs))
	}
	for _, run := range runs[3:] {
		if m := p.meta(run); m.Status != journal.StatusFailed || !strings.Contains(m.Error, "module refused") {
			t.Errorf("grandchild %s: %s %q", run, m.Status, m.Error)
		}
		if kids := p.descendants(run); len(kids) != 1 {
			t.Errorf("grandchild %s has children %v", run, kids[1:])
		}
	}
}

// A child runs at its parent's priority unless it asks a lower one; one
// above its parent's is refused (denied), never lowered.
func TestSpawnPriorityIsAtMostTheParents(t *testing.T) {
	p := openParkCell(t, t.TempDir(), clock.NewFake(time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)))
	defer func() { p.close() }()
	_, mod := family(p)
	sum, _ := hex.DecodeString(mod)
	code := testutil.BuildC(t, "host/testdata/agents/cspawner")
	g, err := host.ParseGrant([]byte("capabilities:\n  run: {}\n  timer: {}\n  agent: {max_children: 2, max_depth: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ask  string
		want uint8 // the child's priority; 0: refused
	}{{"", 3}, {"2:", 2}, {"3:", 3}, {"4:", 0}, {"9:", 0}} {
		run, err := p.srv.Launch(context.Background(), host.RunSpec{Code: code, Input: append(bytes.Clone(sum), c.ask+leafCaps...), Grant: g, Priority: 3}, "started")
		if err != nil {
			t.Fatal(err)
		}
		m := p.waitEnd(run)
		out := string(m.Output)
		if c.want == 0 {
			if !strings.HasPrefix(out, "refused denied: ") || !strings.Contains(out, "above the caller's, 3") {
				t.Fatalf("priority %q above the parent's 3: %s %q %s", c.ask, m.Status, out, m.Error)
			}
			continue
		}
		if m.Status != journal.StatusCompleted || !strings.Contains(out, " completed ") {
			t.Fatalf("priority %q: %s %q %s", c.ask, m.Status, out, m.Error)
		}
		child := p.meta(mustIDs(t, strings.SplitN(out, " ", 2)[0])[0])
		if child.Priority != c.want {
			t.Fatalf("priority %q: the child is indexed at %d, want %d", c.ask, child.Priority, c.want)
		}
	}
}
