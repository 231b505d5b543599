// Command tools runs the native tools its input lists, one result per call,
// so host tests can drive the tool capability from Go.
//
//	input:  [{"tool":"grep-count","args":["TODO","in/a.txt"],"stdin":"..."}]
//	output: [{"tool":"grep-count","result":{...}} | {"tool":..., "err":"denied: ..."}]
package main

import (
	"context"

	"github.com/agentrt/agentrt/guest-sdk/agent"
)

// Step is one tool call.
type Step struct {
	Tool  string   `json:"tool"`
	Args  []string `json:"args"`
	Stdin string   `json:"stdin"`
}

// Outcome is what one call gave; Stdout repeats the result's stdout as
// text, for scripts to match, and Names the files' paths as bytes (base64
// in JSON, which would replace the bytes of a name that is not UTF-8).
type Outcome struct {
	Tool   string            `json:"tool"`
	Err    string            `json:"err,omitempty"`
	Stdout string            `json:"stdout,omitempty"`
	Names  [][]byte          `json:"names,omitempty"`
	Result *agent.ToolResult `json:"result,omitempty"`
}

func main() {
	agent.MainJSON(func(_ context.Context, steps []Step) ([]Outcome, error) {
		var out []Outcome
		for _, s := range steps {
			var stdin []byte
			if s.Stdin != "" {
				stdin = []byte(s.Stdin)
			}
			r, err := agent.ToolWithStdin(s.Tool, stdin, s.Args...)
			o := Outcome{Tool: s.Tool, Result: r}
			if err != nil {
				o.Err = err.Error()
			} else {
				o.Stdout = string(r.Stdout)
				for _, f := range r.Files {
					o.Names = append(o.Names, []byte(f.Path))
				}
			}
			out = append(out, o)
		}
		return out, nil
	})
}
