//go:build !wasip1

package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/agentrt/agentrt/guest-sdk/abi"
)

// A host for the examples: a test binary on the build machine has no
// agentrt host to call, so the transports of transport_other.go are pointed
// at this one, in memory. Everything else is the SDK's own code: each
// example's call is encoded with the ABI codec, crosses the transport as
// bytes, is decoded strictly here (a request that is not canonical is
// bad_request, as on the real host), and the answer travels back as the
// bytes the real host would send: a canonical response, or an Error body
// with its status, which the SDK decodes.
//
// The fake serves the run's input {"name":"Ada"}; kv in memory; HTTP GETs
// of https://example.com/ (anything else is denied, as a grant naming only
// example.com would); a fixed wall clock; counting bytes for randomness;
// one tool, count-lines; and a model (exampleModel) that asks for the
// request's first tool once, then answers with its result. It prints each log line and the output it is
// given, so that the examples' Output shows them. The loop's tests set
// what it answers to llm.complete (llm) and read the limits it was given
// by run.limit (limits) and the model calls it received (llmCalls).

// testHost is the fake host the transports are pointed at.
var testHost *fakeHost

func init() {
	f := &fakeHost{kv: map[string][]byte{}}
	testHost = f
	runTransport = f.transport(abi.CapRun)
	kvTransport = f.transport(abi.CapKV)
	httpTransport = f.transport(abi.CapHTTP)
	clockTransport = f.transport(abi.CapClock)
	randomTransport = f.transport(abi.CapRandom)
	toolTransport = f.transport(abi.CapTool)
	llmTransport = f.transport(abi.CapLLM)
	mcpTransport = f.transport(abi.CapMCP)
}

type fakeHost struct {
	kv    map[string][]byte
	steps uint64
	// limits holds the request of every run.limit; limitErr, when set,
	// is its answer instead.
	limits   []abi.LimitRequest
	limitErr *fakeError
	// llm answers each llm.complete, given the decoded request; llmCalls
	// holds every request received.
	llm      func(req *abi.LLMRequest) (*abi.LLMResponse, *fakeError)
	llmCalls []abi.LLMRequest
	// mcpCalls holds every mcp.call_tool received.
	mcpCalls []abi.MCPCallToolRequest
}

// fakeError is an answer other than OK.
type fakeError struct {
	status abi.Status
	msg    string
}

func (f *fakeHost) transport(c abi.Capability) transportFunc {
	return func(op uint32, req []byte) (abi.Status, []byte, error) {
		resp, ferr := f.serve(c, op, req)
		f.steps++
		if ferr != nil {
			b, err := abi.Marshal(&abi.Error{Code: ferr.status, Message: ferr.msg})
			return ferr.status, b, err
		}
		if resp == nil {
			return abi.StatusOK, nil, nil
		}
		b, err := abi.Marshal(resp)
		return abi.StatusOK, b, err
	}
}

// decode reads a request as the host does.
func decode(req []byte, v any) *fakeError {
	if err := abi.Unmarshal(req, v); err != nil {
		return &fakeError{abi.StatusBadRequest, err.Error()}
	}
	return nil
}

func (f *fakeHost) serve(c abi.Capability, op uint32, req []byte) (any, *fakeError) {
	switch {
	case c == abi.CapRun && op == abi.OpRunInput:
		return &abi.InputResponse{Input: []byte(`{"name":"Ada"}`)}, nil
	case c == abi.CapRun && op == abi.OpRunSetOutput:
		var r abi.SetOutputRequest
		if err := decode(req, &r); err != nil {
			return nil, err
		}
		fmt.Printf("host: output %s\n", r.Output)
		return nil, nil
	case c == abi.CapRun && op == abi.OpRunLog:
		var r abi.LogRequest
		if err := decode(req, &r); err != nil {
			return nil, err
		}
		if r.Level > abi.LevelError {
			return nil, &fakeError{abi.StatusBadRequest, fmt.Sprintf("run.log: level %d is not 0..3", r.Level)}
		}
		fmt.Printf("host: log %s %s\n", []string{"debug", "info", "warn", "error"}[r.Level], r.Message)
		return nil, nil
	case c == abi.CapRun && op == abi.OpRunIntrospect:
		return &abi.IntrospectResponse{RunID: "0189c4f1d2a3b4c50123456789abcdef", ModuleSHA256: make([]byte, 32), ABI: abi.Version,
			Capabilities: []string{"run", "kv", "http", "clock", "random", "tool"}, Steps: f.steps}, nil
	case c == abi.CapRun && op == abi.OpRunCheckpoint:
		var r abi.CheckpointRequest
		if err := decode(req, &r); err != nil {
			return nil, err
		}
		// The host's request limit, 1 MiB, bounds a state; a state within
		// it would end this instance and start the next segment, which a
		// test binary cannot do.
		if len(req) > 1<<20 {
			return nil, &fakeError{abi.StatusTooLarge, fmt.Sprintf("request of %d bytes exceeds the limit of %d", len(req), 1<<20)}
		}
		return nil, &fakeError{abi.StatusInternal, "this fake host does not start segments"}
	case c == abi.CapRun && op == abi.OpRunLimit:
		var r abi.LimitRequest
		if err := decode(req, &r); err != nil {
			return nil, err
		}
		f.limits = append(f.limits, r)
		if f.limitErr != nil {
			return nil, f.limitErr
		}
		return &abi.LimitResponse{Ceilings: r.Limits}, nil
	case c == abi.CapLLM && op == abi.OpLLMComplete:
		var r abi.LLMRequest
		if err := decode(req, &r); err != nil {
			return nil, err
		}
		if err := r.Validate(); err != nil {
			return nil, &fakeError{abi.StatusBadRequest, "llm.complete: " + err.Error()}
		}
		f.llmCalls = append(f.llmCalls, r)
		if f.llm == nil {
			return exampleModel(&r), nil
		}
		return f.llm(&r)
	case c == abi.CapKV && op == abi.OpKVGet:
		var r abi.KVGetRequest
		if err := decode(req, &r); err != nil {
			return nil, err
		}
		v, ok := f.kv[r.Key]
		if !ok {
			return nil, &fakeError{abi.StatusNotFound, fmt.Sprintf("kv.get: no key %q", r.Key)}
		}
		return &abi.KVGetResponse{Value: v}, nil
	case c == abi.CapKV && op == abi.OpKVPut:
		var r abi.KVPutRequest
		if err := decode(req, &r); err != nil {
			return nil, err
		}
		f.kv[r.Key] = append([]byte{}, r.Value...)
		return nil, nil
	case c == abi.CapKV && op == abi.OpKVDelete:
		var r abi.KVDeleteRequest
		if err := decode(req, &r); err != nil {
			return nil, err
		}
		_, ok := f.kv[r.Key]
		delete(f.kv, r.Key)
		return &abi.KVDeleteResponse{Existed: ok}, nil
	case c == abi.CapKV && op == abi.OpKVList:
		var r abi.KVListRequest
		if err := decode(req, &r); err != nil {
			return nil, err
		}
		limit := int(r.Limit)
		if limit == 0 {
			limit = 1000
		}
		var keys []string
		for k := range f.kv {
			if strings.HasPrefix(k, r.Prefix) && k > r.After {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		more := len(keys) > limit
		if more {
			keys = keys[:limit]
		}
		return &abi.KVListResponse{Keys: append([]string{}, keys...), More: more}, nil
	case c == abi.CapHTTP && op == abi.OpHTTPRequest:
		var r abi.HTTPRequest
		if err := decode(req, &r); err != nil {
			return nil, err
		}
		host, _, _ := strings.Cut(strings.TrimPrefix(r.URL, "https://"), "/")
		if !strings.HasPrefix(r.URL, "https://") || host != "example.com" {
			return nil, &fakeError{abi.StatusDenied, fmt.Sprintf("http.request: host %s is not in the grant (allowed: example.com)", host)}
		}
		body := []byte("hello from example.com")
		if r.Method != "GET" {
			body = []byte(r.Method + " " + string(r.Body))
		}
		return &abi.HTTPResponse{Status: 200, Headers: []abi.Header{{Name: "Content-Type", Value: "text/plain"}}, Body: body}, nil
	case c == abi.CapClock && op == abi.OpClockNow:
		return &abi.ClockNowResponse{UnixNano: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC).UnixNano()}, nil
	case c == abi.CapRandom && op == abi.OpRandomBytes:
		var r abi.RandomBytesRequest
		if err := decode(req, &r); err != nil {
			return nil, err
		}
		if r.N > 65536 {
			return nil, &fakeError{abi.StatusTooLarge, fmt.Sprintf("random.bytes: %d bytes asked, at most 65536", r.N)}
		}
		b := make([]byte, r.N)
		for i := range b {
			b[i] = byte(i)
		}
		return &abi.RandomBytesResponse{Bytes: b}, nil
	case c == abi.CapMCP && op == abi.OpMCPListTools:
		var r abi.MCPListToolsRequest
		if err := decode(req, &r); err != nil {
			return nil, err
		}
		if r.Server != "notes" {
			return nil, &fakeError{abi.StatusDenied, fmt.Sprintf("mcp.list_tools: no mcp server %q in the grant (granted: notes)", r.Server)}
		}
		return &abi.MCPListToolsResponse{Tools: []abi.MCPTool{
			{Name: "add_note", Description: "Save a note.", InputSchema: `{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`, Hash: make([]byte, 32)},
			{Name: "list_notes", Description: "List the notes.", InputSchema: `{"type":"object"}`, Idempotent: true, Hash: make([]byte, 32)},
		}}, nil
	case c == abi.CapMCP && op == abi.OpMCPCallTool:
		var r abi.MCPCallToolRequest
		if err := decode(req, &r); err != nil {
			return nil, err
		}
		f.mcpCalls = append(f.mcpCalls, r)
		switch {
		case r.Server != "notes":
			return nil, &fakeError{abi.StatusDenied, fmt.Sprintf("mcp.call_tool: no mcp server %q in the grant (granted: notes)", r.Server)}
		case r.Tool == "list_notes":
			return &abi.MCPCallToolResponse{Content: "[]", Structured: `{"titles":["milk"]}`}, nil
		case r.Tool != "add_note":
			return nil, &fakeError{abi.StatusDenied, fmt.Sprintf("mcp.call_tool: tool %q of mcp server notes is not in the grant (granted: add_note, list_notes)", r.Tool)}
		}
		var a struct{ Title string }
		if json.Unmarshal([]byte(r.Arguments), &a) != nil || a.Title == "" {
			return &abi.MCPCallToolResponse{IsError: true, Content: "[]", Text: "title: required"}, nil
		}
		return &abi.MCPCallToolResponse{Content: "[]", Text: "saved " + a.Title}, nil
	case c == abi.CapTool && op == abi.OpToolRun:
		var r abi.ToolRunRequest
		if err := decode(req, &r); err != nil {
			return nil, err
		}
		if r.Name != "count-lines" {
			return nil, &fakeError{abi.StatusDenied, fmt.Sprintf("tool.run: tool %q is not in the grant (granted: count-lines)", r.Name)}
		}
		for i, a := range r.Args {
			if strings.HasPrefix(a, "-") {
				return nil, &fakeError{abi.StatusDenied, fmt.Sprintf("tool.run: tool count-lines: argument %d %q: flag %s is not in the tool's schema (allowed: none)", i+1, a, a)}
			}
		}
		n := bytes.Count(r.Stdin, []byte("\n"))
		return &abi.ToolRunResponse{Stdout: []byte(fmt.Sprintf("%d\n", n)), Stderr: []byte{}}, nil
	}
	return nil, &fakeError{abi.StatusBadRequest, fmt.Sprintf("%s: unknown op %d", c, op)}
}

// exampleModel answers a model call of the examples: while the request
// offers tools and holds no tool result, it calls the first tool with the
// text the user quoted; then it answers with the last result.
func exampleModel(r *abi.LLMRequest) *abi.LLMResponse {
	usage := abi.LLMUsage{Input: 120, Output: 20}
	last := r.Messages[len(r.Messages)-1].Content
	if p := last[0]; p.Type == abi.PartToolResult {
		return &abi.LLMResponse{ID: "resp-2", Model: r.Model, Usage: usage, StopReason: abi.StopEnd,
			Content: []abi.LLMPart{{Type: abi.PartText, Text: "There are " + p.Text + " words."}}}
	}
	if len(r.Tools) == 0 {
		return &abi.LLMResponse{ID: "resp-3", Model: r.Model, Usage: usage, StopReason: abi.StopEnd,
			Content: []abi.LLMPart{{Type: abi.PartText, Text: "I cannot tell."}}}
	}
	_, quoted, _ := strings.Cut(last[0].Text, "'")
	quoted, _, _ = strings.Cut(quoted, "'")
	args := fmt.Sprintf(`{"text":%q}`, quoted)
	return &abi.LLMResponse{ID: "resp-1", Model: r.Model, Usage: usage, StopReason: abi.StopToolUse,
		Content: []abi.LLMPart{{Type: abi.PartToolCall, ID: "call-1", Name: r.Tools[0].Name, Arguments: []byte(args)}}}
}
