//go:build !wasip1

package agent

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/guest-sdk/abi"
)

// TestMCPToolsLoop: the tools of an MCP server, offered to a model and
// called by it through ToolStep: each call goes to mcp.call_tool of the
// right server and tool with the model's arguments; a tool error, a tool
// the grant does not allow and a tool the model makes up reach the model
// as failed results, and the loop goes on to its answer.
func TestMCPToolsLoop(t *testing.T) {
	testHost.mcpCalls = nil
	tools, funcs, err := MCPTools("notes", "notes_")
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 2 || tools[0].Name != "notes_add_note" || tools[0].Description != "Save a note." ||
		!strings.Contains(string(tools[0].Schema), `"required":["title"]`) || tools[1].Name != "notes_list_notes" {
		t.Fatalf("tools %+v", tools)
	}
	model(t, func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *fakeError) {
		switch i {
		case 0:
			return &abi.LLMResponse{ID: "r", Model: "m", StopReason: abi.StopToolUse, Content: []LLMPart{
				{Type: abi.PartToolCall, ID: "c1", Name: "notes_add_note", Arguments: []byte(`{"title":"milk"}`)},
				{Type: abi.PartToolCall, ID: "c2", Name: "notes_add_note", Arguments: []byte(`{}`)},
				{Type: abi.PartToolCall, ID: "c3", Name: "notes_list_notes", Arguments: []byte(`{}`)},
				{Type: abi.PartToolCall, ID: "c4", Name: "notes_delete_all", Arguments: []byte(`{}`)},
			}}, nil
		}
		return text("done", LLMUsage{}), nil
	})
	cfg := config()
	cfg.Request.Tools = tools
	res, err := Loop(context.Background(), cfg, ToolStep(funcs))
	if err != nil || res.Reason != LoopDone {
		t.Fatalf("loop: %v %+v", err, res)
	}
	if len(testHost.mcpCalls) != 3 {
		t.Fatalf("mcp.call_tool %d times (%+v), want 3: the made-up tool never reaches the host", len(testHost.mcpCalls), testHost.mcpCalls)
	}
	if c := testHost.mcpCalls[0]; c.Server != "notes" || c.Tool != "add_note" || c.Arguments != `{"title":"milk"}` {
		t.Errorf("the first call: %+v", c)
	}
	results := lastUser(t, testHost.llmCalls[1])
	want := []struct {
		id, text string
		failed   bool
	}{
		{"c1", "saved milk", false},
		{"c2", "title: required", true},
		{"c3", `{"titles":["milk"]}`, false},
		{"c4", `no tool named "notes_delete_all"`, true},
	}
	if len(results) != len(want) {
		t.Fatalf("results %+v", results)
	}
	for i, w := range want {
		r := results[i]
		if r.Type != abi.PartToolResult || r.ID != w.id || !strings.Contains(r.Text, w.text) || r.IsError != w.failed {
			t.Errorf("result %d: %+v, want %+v", i, r, w)
		}
	}
}

// TestMCPToolsRefusals: a server the grant does not declare is the host's
// denial; a name the providers would refuse is an error naming it.
func TestMCPToolsRefusals(t *testing.T) {
	if _, _, err := MCPTools("other", ""); err == nil || !strings.Contains(err.Error(), `no mcp server "other"`) {
		t.Errorf("another server: %v", err)
	}
	if _, _, err := MCPTools("notes", "notes."); err == nil || !strings.Contains(err.Error(), `named "notes.add_note" for the model`) {
		t.Errorf("a prefix the providers refuse: %v", err)
	}
}

// TestModelToolNameIsTheProvidersRule holds modelToolName to the rule it
// replaced, ^[A-Za-z0-9_-]{1,64}$, on the edges and on every byte.
func TestModelToolNameIsTheProvidersRule(t *testing.T) {
	rule := regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	names := []string{"", "a", "Z", "9", "_", "-", "files__read", "a.b", "a b", "é", "a\x00", strings.Repeat("x", 64), strings.Repeat("x", 65), "mcp_" + strings.Repeat("y", 60), "mcp_" + strings.Repeat("y", 61)}
	for c := 0; c < 256; c++ {
		names = append(names, string([]byte{byte(c)}), "tool"+string([]byte{byte(c)}))
	}
	for _, n := range names {
		if got, want := modelToolName(n), rule.MatchString(n); got != want {
			t.Errorf("modelToolName(%q) = %v, the rule says %v", n, got, want)
		}
	}
}
