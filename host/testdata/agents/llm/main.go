// A test agent of the llm capability: a two-turn tool-calling conversation,
// unstreamed or streamed as its input says ("complete", "stream"), printing
// what it got so that a test compares runs.
package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentrt/agentrt/guest-sdk/agent"
)

func main() {
	agent.Main(func(_ context.Context, input []byte) ([]byte, error) {
		stream := strings.TrimSpace(string(input)) == "stream"
		msgs := []agent.LLMMessage{
			{Role: "system", Content: []agent.LLMPart{{Type: "text", Text: "Answer with numbers."}}},
			{Role: "user", Content: []agent.LLMPart{{Type: "text", Text: "How many people live in Paris?"}}},
		}
		tools := []agent.LLMTool{{Name: "lookup", Description: "population of a city",
			Schema: []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}}
		var out strings.Builder
		chunks := 0
		ask := func() (*agent.LLMResponse, error) {
			req := &agent.LLMRequest{Model: "m-test", MaxOutputTokens: 256, Tools: tools, Messages: msgs}
			if !stream {
				return agent.LLMComplete(req)
			}
			return agent.LLMStream(req, func(c agent.LLMChunk) error {
				chunks++
				return nil
			})
		}
		for turn := 0; turn < 4; turn++ {
			resp, err := ask()
			if errors.Is(err, agent.ErrStreamInterrupted) {
				fmt.Fprintf(&out, "interrupted: %v\n", err)
				continue
			}
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&out, "turn %d: stop=%s text=%q usage=%+v\n", turn, resp.StopReason, resp.Text(), resp.Usage)
			calls := resp.ToolCalls()
			if len(calls) == 0 {
				break
			}
			msgs = append(msgs, agent.LLMMessage{Role: "assistant", Content: resp.Content})
			var results []agent.LLMPart
			for _, c := range calls {
				fmt.Fprintf(&out, "tool %s(%s)\n", c.Name, c.Arguments)
				results = append(results, agent.LLMPart{Type: "tool_result", ID: c.ID, Text: "2.1 million"})
			}
			msgs = append(msgs, agent.LLMMessage{Role: "user", Content: results})
		}
		if stream {
			fmt.Fprintf(&out, "streamed: %v\n", chunks > 0)
		}
		return []byte(out.String()), nil
	})
}
