//go:build wasip1

// Command llmcalls is the Go agent of the model-call benchmarks (figures
// 14 and 15): it makes its input's number of llm.complete calls through
// the guest SDK, streamed or not. With conv_tokens set it holds one
// conversation (internal/synthconv's user messages, the model's answers
// appended as they come), whose every call resends the whole history;
// otherwise each call is one short user message of its own.
package main

import (
	"context"
	"fmt"

	"github.com/agentrt/agentrt/guest-sdk/agent"
	"github.com/agentrt/agentrt/internal/synthconv"
)

type input struct {
	Calls      int    `json:"calls"`
	Stream     bool   `json:"stream"`
	ConvTokens int    `json:"conv_tokens"`
	ConvCalls  int    `json:"conv_calls"`
	Seed       uint64 `json:"seed"`
	Model      string `json:"model"`
}

func text(s string) []agent.LLMPart { return []agent.LLMPart{{Type: "text", Text: s}} }

func main() {
	agent.MainJSON(func(_ context.Context, in input) (int, error) {
		var conv *synthconv.Conversation
		var msgs []agent.LLMMessage
		if in.ConvTokens > 0 {
			// The conversation's shape is that of ConvCalls calls; the
			// run makes the first Calls of them.
			conv = synthconv.New(in.ConvCalls, in.ConvTokens, in.Seed)
			msgs = []agent.LLMMessage{{Role: "system", Content: text(conv.System)}}
		}
		got := 0
		for i := range in.Calls {
			req := &agent.LLMRequest{Model: in.Model, MaxOutputTokens: 4096}
			if conv != nil {
				msgs = append(msgs, agent.LLMMessage{Role: "user", Content: text(conv.Users[i])})
				req.Messages = msgs
			} else {
				req.Messages = []agent.LLMMessage{{Role: "user", Content: text(fmt.Sprintf("call %d", i))}}
			}
			var resp *agent.LLMResponse
			var err error
			if in.Stream {
				resp, err = agent.LLMStream(req, nil)
			} else {
				resp, err = agent.LLMComplete(req)
			}
			if err != nil {
				return got, fmt.Errorf("call %d: %w", i, err)
			}
			got += len(resp.Text())
			if conv != nil {
				msgs = append(msgs, agent.LLMMessage{Role: "assistant", Content: resp.Content})
			}
		}
		return got, nil
	})
}
