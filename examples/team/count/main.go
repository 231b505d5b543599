// Command count is the team example's counter, a sub-agent with one native
// tool, count-words (wc -w under the cell's sandbox), which its parent may
// delegate but not run. It counts the words of its input text. Told to try
// another tool, it does, and reports the host's refusal.
package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentrt/agentrt/guest-sdk/agent"
)

// Input is the text to count, and a tool to try that the grant lacks.
type Input struct {
	Text string `json:"text"`
	Try  string `json:"try,omitempty"`
}

// Output is the count.
type Output struct {
	Words   int      `json:"words"`
	Refused []string `json:"refused,omitempty"`
}

func main() {
	agent.MainJSON(func(ctx context.Context, in Input) (*Output, error) {
		res, err := agent.ToolWithStdin("count-words", []byte(in.Text))
		if err != nil {
			return nil, err
		}
		if res.Exit != 0 {
			return nil, fmt.Errorf("count-words exited %d: %s", res.Exit, res.Stderr)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
		if err != nil {
			return nil, fmt.Errorf("count-words printed %q, not a number", res.Stdout)
		}
		out := &Output{Words: n}
		if in.Try != "" {
			if _, err := agent.Tool(in.Try); err != nil {
				out.Refused = append(out.Refused, err.Error())
			}
		}
		return out, nil
	})
}
