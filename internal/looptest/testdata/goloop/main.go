// A looping agent: agent.Loop with ToolStep over one tool, lookup, as its
// input configures ({"max_iterations": 3, "max_output_tokens": 2048}).
// After the loop it makes one more model call of its own, outside the
// loop, to show what the host does with a guest that ignores its loop. It
// prints what came of both as JSON.
package main

import (
	"context"

	"github.com/agentrt/agentrt/guest-sdk/agent"
)

type input struct {
	MaxIterations   int    `json:"max_iterations"`
	MaxOutputTokens uint64 `json:"max_output_tokens"`
	MaxToolCalls    int    `json:"max_tool_calls"`
}

type output struct {
	Reason     string `json:"reason"`
	Concluded  bool   `json:"concluded"`
	Iterations int    `json:"iterations"`
	ToolCalls  int    `json:"tool_calls"`
	Lookups    int    `json:"lookups"`
	Text       string `json:"text"`
	Detail     string `json:"detail"`
	Output     uint64 `json:"output_tokens"`
	// After is the error of the model call made after the loop ("" if
	// the host answered it).
	After string `json:"after"`
}

func main() {
	agent.MainJSON(func(ctx context.Context, in input) (output, error) {
		lookups := 0
		tools := map[string]agent.ToolFunc{
			"lookup": func(ctx context.Context, args []byte) (string, error) {
				lookups++
				return "2.1 million", nil
			},
		}
		req := agent.LLMRequest{
			Model:           "m-test",
			MaxOutputTokens: 256,
			Tools: []agent.LLMTool{{Name: "lookup", Description: "population of a city",
				Schema: []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}},
			Messages: []agent.LLMMessage{
				{Role: "system", Content: []agent.LLMPart{{Type: "text", Text: "Answer with numbers."}}},
				{Role: "user", Content: []agent.LLMPart{{Type: "text", Text: "How many people live in Paris?"}}},
			},
		}
		res, err := agent.Loop(ctx, agent.LoopConfig{Request: req, MaxIterations: in.MaxIterations,
			MaxOutputTokens: in.MaxOutputTokens, MaxToolCalls: in.MaxToolCalls}, agent.ToolStep(tools))
		if err != nil {
			return output{}, err
		}
		out := output{Reason: res.Reason.String(), Concluded: res.Concluded, Iterations: res.Iterations,
			ToolCalls: res.ToolCalls, Lookups: lookups, Detail: res.Detail, Output: res.Usage.Output}
		if res.Response != nil {
			out.Text = res.Response.Text()
		}
		req.Tools = nil
		if _, err := agent.LLMComplete(&req); err != nil {
			out.After = err.Error()
		}
		return out, nil
	})
}
