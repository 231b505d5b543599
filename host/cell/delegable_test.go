package cell_test

import (
	"context"
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
)

// echoSpec declares a tool that prints "hi" (read: what /usr/bin/echo
// needs); otherSpec is the same tool declared to see /etc as well.
const (
	echoSpec  = "{name: echo, exec: /usr/bin/echo, args: {fixed: [hi]}, read: [/usr, /lib, /lib64]}"
	otherSpec = "{name: echo, exec: /usr/bin/echo, args: {fixed: [hi]}, read: [/usr, /lib, /lib64, /etc]}"
)

// A child may get a tool its parent cannot run only when the parent's
// token lists it as delegable, declared exactly so; the child runs it
// under that declaration's sandbox, and the parent, which may delegate
// it, cannot run it. A parent without it, or a child declaring it
// otherwise or asking for another tool, is denied.
func TestDelegableTools(t *testing.T) {
	p := openParkCell(t, t.TempDir(), clock.NewFake(time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)))
	defer func() { p.close() }()
	code, _ := family(p)
	tools := testutil.BuildGo(t, "host/testdata/agents/tools")
	sum := sha256.Sum256(tools)
	if err := p.cell.Store.PutModule(context.Background(), sum[:], tools); err != nil {
		t.Fatal(err)
	}
	toolsMod := hex.EncodeToString(sum[:])
	run := []map[string]any{{"tool": "echo"}}
	childCaps := func(spec string) string { return "{run: {}, tool: {tools: [" + spec + "]}}" }
	const agentCaps = "capabilities:\n  run: {}\n  timer: {}\n  agent: {max_children: 3, max_depth: 2}\n"
	delegating := agentCaps + "  tool: {tools: [], delegable: [" + echoSpec + "]}\n"

	parent := p.launchFamily(code, map[string]any{
		"spawn": []spawnOf{
			{Module: toolsMod, Caps: childCaps(echoSpec), Input: run},
			{Module: toolsMod, Caps: childCaps(otherSpec), Input: run},
			{Module: toolsMod, Caps: childCaps("{name: cat, exec: /usr/bin/cat, read: [/usr, /lib, /lib64]}"), Input: run},
		},
		"await": true,
	}, delegating)
	without := p.launchFamily(code, map[string]any{
		"spawn": []spawnOf{{Module: toolsMod, Caps: childCaps(echoSpec), Input: run}},
	}, agentCaps)

	r := p.report(parent)
	if len(r.Spawned) != 1 || len(r.Outcomes) != 1 || r.Outcomes[0].Status != abi.ChildCompleted {
		t.Fatalf("report %+v", r)
	}
	var outs []struct{ Stdout, Err string }
	if err := json.Unmarshal(r.Outcomes[0].Output, &outs); err != nil || len(outs) != 1 || outs[0].Stdout != "hi\n" {
		t.Fatalf("the child's tool: %q (%v)", r.Outcomes[0].Output, err)
	}
	want := []string{`tool "echo" is declared otherwise than in the parent`, `tool "cat" is neither in the parent's tools nor delegable by it`}
	if len(r.Errors) != len(want) {
		t.Fatalf("errors %q", r.Errors)
	}
	for i, w := range want {
		if !strings.HasPrefix(r.Errors[i], "denied: ") || !strings.Contains(r.Errors[i], w) {
			t.Errorf("error %d: %q, want a denial containing %q", i, r.Errors[i], w)
		}
	}
	// The child's grant is its own declaration: its sandbox spec.
	g, err := host.DecodeGrant(p.header(mustIDs(t, r.Spawned[0].Run)[0]).Grant)
	if err != nil {
		t.Fatal(err)
	}
	if g.Tool == nil || len(g.Tool.Tools) != 1 || g.Tool.Tools[0].Exec != "/usr/bin/echo" || len(g.Tool.Delegable) != 0 {
		t.Fatalf("the child's tool grant %+v", g.Tool)
	}
	w := p.report(without)
	if len(w.Spawned) != 0 || len(w.Errors) != 1 || !strings.Contains(w.Errors[0], "capability tool is not in the parent") {
		t.Fatalf("a parent without the tool: %+v", w)
	}

	// The parent may delegate echo and may not run it.
	gr, err := host.ParseGrant([]byte("capabilities:\n  run: {}\n  tool: {tools: [], delegable: [" + echoSpec + "]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal(run)
	self, err := p.srv.Launch(context.Background(), host.RunSpec{Code: tools, Input: in, Grant: gr}, "started")
	if err != nil {
		t.Fatal(err)
	}
	m := p.waitEnd(self)
	if m.Status != journal.StatusCompleted || !strings.Contains(string(m.Output), `"err":"denied: `) || strings.Contains(string(m.Output), "hi\\n") {
		t.Fatalf("the delegating run ran echo itself: %s %q %s", m.Status, m.Output, m.Error)
	}
}
