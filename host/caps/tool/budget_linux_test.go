package tool_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// A real guest launching a real tool past its token's tool_calls ceiling
// (2) is refused with status budget from the third launch on: the tool
// ran twice (its own count of launches says so), and the run's report
// says 2 of 2 spent.
func TestToolCallsCeilingRefusesTheLaunchPastIt(t *testing.T) {
	b := newToolBox(t)
	env := testutil.NewEnv(t, host.Deps{Tools: host.ToolDeps{Workspaces: b.work}}, host.Config{})
	g := b.grant()
	caps, err := g.TokenCaps()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := capability.Issue(env.Key, capability.Claims{Audience: env.Key.Public().(ed25519.PublicKey), Caps: caps,
		Budget: capability.Budget{ToolCalls: capability.Limit(2)}, NotBefore: time.Now().Add(-time.Minute), Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal([]toolStep{{Tool: "mark"}, {Tool: "mark"}, {Tool: "mark"}, {Tool: "mark"}})
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: testutil.BuildGo(t, "host/testdata/agents/tools"), Token: tok, Grant: g, Input: in})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run: %v %+v", err, res)
	}
	outs := decodeOutcomes(t, res.Output)
	for i, o := range outs {
		refused := strings.HasPrefix(o.Err, "budget: tool.run: budget exceeded: tool_calls: asked 1, 0 left of 2")
		if (i < 2) != (o.Result != nil) || (i >= 2) != refused {
			t.Fatalf("launch %d: %+v; want 2 launches, then budget", i, o)
		}
	}
	if n := b.launches(t); n != 2 {
		t.Fatalf("the tool ran %d times, want 2", n)
	}
	rep, err := host.BudgetReport(entries(t, env, res.Run))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Rows {
		if r.Name == "tool_calls" && (r.Spent != 2 || *r.Left != 0) {
			t.Fatalf("tool_calls %+v", r)
		}
	}
	replaysTo(t, env, res.Run, testutil.BuildGo(t, "host/testdata/agents/tools"), res.Output)
}
