package guestabi

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/abi"
	gabi "github.com/agentrt/agentrt/guest-sdk/abi"
	"github.com/agentrt/agentrt/guest-sdk/agent"
	"github.com/agentrt/agentrt/host/caps/llm/provider"
)

// TestLoopInputBoundIsTheHosts holds the guest loop's worst case for a
// call's input tokens to the host's reservation
// (provider.EstimateInputTokens), which the guest SDK may not import: the
// loop stops early enough for its concluding call by that rule, so a
// drift would have the host refuse the call. The loop reports its bound
// when it refuses a MaxInputTokens too small for one step, before it
// sends anything.
func TestLoopInputBoundIsTheHosts(t *testing.T) {
	sha := make([]byte, 32)
	text := func(s string) abi.LLMPart { return abi.LLMPart{Type: abi.PartText, Text: s} }
	reqs := []abi.LLMRequest{
		{Model: "m", MaxOutputTokens: 1, Messages: []abi.LLMMessage{{Role: abi.RoleUser, Content: []abi.LLMPart{text("hi")}}}},
		{Model: "m", MaxOutputTokens: 100, Stop: []string{"END", "\n\n"},
			Tools:  []abi.LLMTool{{Name: "search", Description: "Searches the web.", Schema: []byte(`{"type":"object"}`)}, {Name: "f", Schema: []byte(`{}`)}},
			Format: &abi.LLMFormat{Type: abi.FormatJSONSchema, Name: "answer", Schema: []byte(`{"type":"object","properties":{"a":{"type":"string"}}}`)},
			Messages: []abi.LLMMessage{
				{Role: abi.RoleSystem, Content: []abi.LLMPart{text("Réponds en français. 日本語も。")}},
				{Role: abi.RoleUser, Content: []abi.LLMPart{text("look"), {Type: abi.PartImage, SHA256: sha, MediaType: "image/png"}}},
				{Role: abi.RoleAssistant, Content: []abi.LLMPart{text("searching"), {Type: abi.PartToolCall, ID: "call_1", Name: "search", Arguments: []byte(`{"q":"agentrt"}`)}}},
				{Role: abi.RoleUser, Content: []abi.LLMPart{{Type: abi.PartToolResult, ID: "call_1", Text: "no results", IsError: true}}},
			}},
	}
	re := regexp.MustCompile(`of (\d+) input tokens each at worst`)
	for i, host := range reqs {
		b, err := abi.Marshal(&host)
		if err != nil {
			t.Fatal(err)
		}
		var guest gabi.LLMRequest
		if err := gabi.Unmarshal(b, &guest); err != nil {
			t.Fatal(err)
		}
		_, err = agent.Loop(context.Background(), agent.LoopConfig{Request: guest, MaxIterations: 1, MaxInputTokens: 1}, agent.ToolStep(nil))
		m := re.FindStringSubmatch(errText(err))
		if m == nil {
			t.Fatalf("request %d: the loop's error %v does not give its bound", i, err)
		}
		got, _ := strconv.ParseUint(m[1], 10, 64)
		if want := provider.EstimateInputTokens(&host); got != want {
			t.Errorf("request %d: the loop bounds its input by %d tokens, the host by %d", i, got, want)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return strings.TrimSpace(err.Error())
}
