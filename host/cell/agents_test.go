package cell_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/clock"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
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
		var buf bytes.Buffer
		if _, err := replay.ExportTo(context.Background(), p.cell.Store, run, p.cell.Key, replay.EngineSettings{}, &buf); err != nil {
			t.Fatal(err)
		}
		rep, err := replay.VerifyBundle(context.Background(), buf.Bytes(), replay.VerifyOptions{Trusted: []ed25519.PublicKey{p.cell.Public()}})
		if err != nil || !rep.OK {
			t.Fatalf("run %s: verify: %v", run, err)
		}
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
