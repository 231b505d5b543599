// Command write is the team example's writer, a sub-agent with llm and
// nothing else: it asks the model for a summary of its input text, in the
// style the planner chose.
package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentrt/agentrt/guest-sdk/agent"
)

// Input is the text to summarise, the model and the style ("brief" or
// "detailed").
type Input struct {
	Text  string `json:"text"`
	Model string `json:"model"`
	Style string `json:"style"`
}

// Output is the model's summary.
type Output struct {
	Summary string `json:"summary"`
	Tokens  uint64 `json:"tokens"`
}

func main() {
	agent.MainJSON(func(ctx context.Context, in Input) (*Output, error) {
		words := 40
		if in.Style == "detailed" {
			words = 120
		}
		req := &agent.LLMRequest{Model: in.Model, MaxOutputTokens: 256, Messages: []agent.LLMMessage{{Role: "user", Content: []agent.LLMPart{{
			Type: "text", Text: fmt.Sprintf("Summarise in at most %d words, for a team report:\n\n%s", words, in.Text)}}}}}
		resp, err := agent.LLMComplete(req)
		if err != nil {
			return nil, err
		}
		for _, p := range resp.Content {
			if p.Type == "text" && p.Text != "" {
				return &Output{Summary: p.Text, Tokens: resp.Usage.Input + resp.Usage.Output}, nil
			}
		}
		return nil, errors.New("the model answered no text")
	})
}
