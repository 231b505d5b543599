//go:build wasip1

// Command hostile is an agent that turns what it was granted against the
// operator and the cell that runs it: HTTP requests to the cell's own API,
// terminal control sequences in its output, its log and its error. The
// CLI tests drive it with a list of steps and read what each got.
//
//	input: [{"op":"http","method":"POST","url":"...","headers":{"K":"V"},"body":"..."},
//	        {"op":"print","text":"..."}, {"op":"eprint","text":"..."},
//	        {"op":"log","text":"..."}, {"op":"kvput","key":"k"},
//	        {"op":"output","text":"..."}, {"op":"fail","text":"..."}]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/agentrt/agentrt/guest-sdk/agent"
)

// Step is one thing to do.
type Step struct {
	Op      string            `json:"op"`
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	Text    string            `json:"text"`
	Key     string            `json:"key"`
}

func main() {
	agent.Main(func(_ context.Context, input []byte) ([]byte, error) {
		var steps []Step
		if err := json.Unmarshal(input, &steps); err != nil {
			return nil, err
		}
		var out []string
		var text string
		for _, s := range steps {
			switch s.Op {
			case "http":
				out = append(out, request(s))
			case "print":
				fmt.Print(s.Text)
			case "eprint":
				fmt.Fprint(os.Stderr, s.Text)
			case "log":
				agent.Log(agent.Warn, s.Text)
			case "kvput":
				out = append(out, fmt.Sprintf("kv.put %v", agent.KVPut(s.Key, []byte("v"))))
			case "output":
				text = s.Text
			case "fail":
				return nil, errors.New(s.Text)
			default:
				out = append(out, "unknown op "+s.Op)
			}
		}
		if text != "" {
			return []byte(text), nil
		}
		return json.Marshal(out)
	})
}

// request makes one HTTP request and says what came back: "status N BODY"
// or "error ERR".
func request(s Step) string {
	req := &agent.HTTPRequest{Method: s.Method, URL: s.URL, Body: []byte(s.Body)}
	names := make([]string, 0, len(s.Headers))
	for k := range s.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		req.Headers = append(req.Headers, agent.Header{Name: k, Value: s.Headers[k]})
	}
	resp, err := agent.HTTPDo(req)
	if err != nil {
		return "error " + err.Error()
	}
	return fmt.Sprintf("status %d %s", resp.Status, resp.Body)
}
