// Command egress makes the HTTP requests its input lists, one line of
// output each, so tests can drive the http capability as an attacker would:
// any method, headers and body, to any URL.
//
//	input: [{"method":"POST","url":"http://127.0.0.1:7070/v1/runs","headers":{"Content-Type":"application/json"},"body":"{}"}]
//	output: ["201 location= body={...}", "denied: http.request: ...", ...]
package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentrt/agentrt/guest-sdk/agent"
)

// Request is one request to make.
type Request struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

func main() {
	agent.MainJSON(func(_ context.Context, reqs []Request) ([]string, error) {
		var out []string
		for _, r := range reqs {
			out = append(out, do(r))
		}
		return out, nil
	})
}

func do(r Request) string {
	req := &agent.HTTPRequest{Method: r.Method, URL: r.URL, Body: []byte(r.Body)}
	if req.Method == "" {
		req.Method = "GET"
	}
	for k, v := range r.Headers {
		req.Headers = append(req.Headers, agent.Header{Name: k, Value: v})
	}
	resp, err := agent.HTTPDo(req)
	switch {
	case errors.Is(err, agent.ErrDenied):
		return "denied: " + strings.TrimPrefix(err.Error(), "denied: ")
	case err != nil:
		return "error: " + err.Error()
	}
	location := ""
	for _, h := range resp.Headers {
		if strings.EqualFold(h.Name, "Location") {
			location = h.Value
		}
	}
	body := string(resp.Body)
	if len(body) > 200 {
		body = body[:200]
	}
	return fmt.Sprintf("%d location=%s body=%s", resp.Status, location, strings.TrimSpace(body))
}
