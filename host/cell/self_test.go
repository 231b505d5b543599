package cell_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/clock"
	"github.com/agentrt/agentrt/internal/testutil"
)

// A sub-agent asks run.self and sees its parent, the parent's step that
// spawned it and its depth; its journal header says the same.
func TestChildSeesItsParent(t *testing.T) {
	p := openParkCell(t, t.TempDir(), clock.NewFake(time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)))
	defer func() { p.close() }()
	code, _ := family(p)
	probe := testutil.BuildGo(t, "host/testdata/agents/selfprobe")
	sum := sha256.Sum256(probe)
	if err := p.cell.Store.PutModule(context.Background(), sum[:], probe); err != nil {
		t.Fatal(err)
	}
	grant := "capabilities:\n  run: {}\n  kv: {namespace: team}\n  http: {hosts: [\"127.0.0.1:1\"]}\n  clock: {}\n  random: {}\n  timer: {}\n  agent: {max_children: 3, max_depth: 2}\n"
	parent := p.launchFamily(code, map[string]any{
		"spawn": []spawnOf{{Module: hex.EncodeToString(sum[:]), Caps: `{run: {}, kv: {namespace: team}, http: {hosts: ["127.0.0.1:1"]}, clock: {}, random: {}}`,
			Input: []map[string]any{{"op": "whoami"}, {"op": "caps"}}}},
		"await": true,
	}, grant)
	r := p.report(parent)
	if len(r.Errors) != 0 || len(r.Outcomes) != 1 || r.Outcomes[0].Status != "completed" {
		t.Fatalf("report %+v", r)
	}
	var lines []string
	if err := json.Unmarshal(r.Outcomes[0].Output, &lines); err != nil || len(lines) != 2 {
		t.Fatalf("child output %q: %v", r.Outcomes[0].Output, err)
	}
	spawns := p.entries(parent, "agent.spawn")
	if len(spawns) == 0 {
		t.Fatal("no agent.spawn entry in the parent's journal")
	}
	child := r.Spawned[0].Run
	want := fmt.Sprintf("whoami run=%s task= attempt=0 parent=%s step=%d depth=1 ", child, parent, spawns[0].Step)
	if !strings.HasPrefix(lines[0], want) {
		t.Errorf("the child saw\n %q\nwant %q...", lines[0], want)
	}
	if !strings.HasPrefix(lines[1], "caps run,kv,http,clock,random budget= claims=") {
		t.Errorf("the child's caps: %q", lines[1])
	}
}

// An attempt of a task asks run.self and sees the task and its attempt's
// number.
func TestTaskAttemptSeesItsTask(t *testing.T) {
	ctx := context.Background()
	d := startTaskDaemon(t, t.TempDir(), clock.NewFake(t0))
	code := testutil.BuildGo(t, "host/testdata/agents/selfprobe")
	grant := "capabilities:\n  run: {}\n  kv: {namespace: t}\n  http: {hosts: [\"127.0.0.1:1\"]}\n  clock: {}\n  random: {}\n"
	tk, err := d.cl.SubmitTask(ctx, cell.TaskSubmission{Module: code, Name: "selfprobe.wasm", Objective: "say who it is",
		Input: []byte(`[{"op":"whoami"}]`), Grant: grant})
	if err != nil {
		t.Fatal(err)
	}
	tk = waitTask(t, d.cl, tk.ID, "completed", state(cell.TaskCompleted, 1))
	m := runMeta(t, d.cell, tk.Attempts[0].Run)
	var lines []string
	if err := json.Unmarshal(m.Output, &lines); err != nil || len(lines) != 1 {
		t.Fatalf("output %q: %v", m.Output, err)
	}
	want := fmt.Sprintf("whoami run=%s task=%s attempt=1 parent= step=0 depth=0 ", tk.Attempts[0].Run, tk.ID)
	if !strings.HasPrefix(lines[0], want) {
		t.Errorf("the attempt saw\n %q\nwant %q...", lines[0], want)
	}
}
