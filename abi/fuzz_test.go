package abi_test

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/agentrt/agentrt/abi"
)

// bodies lists every request and response type of the ABI, with sample
// values whose canonical encodings seed the fuzzer.
type fuzzBody struct {
	name    string
	new     func() any
	samples []any
}

var bodies = []fuzzBody{
	{"Empty", func() any { return new(abi.Empty) }, []any{abi.Empty{}}},
	{"InputResponse", func() any { return new(abi.InputResponse) }, []any{
		abi.InputResponse{}, abi.InputResponse{Input: []byte("hello")}, abi.InputResponse{Input: []byte("in"), State: []byte("s"), Segment: 2}}},
	{"CheckpointRequest", func() any { return new(abi.CheckpointRequest) }, []any{abi.CheckpointRequest{State: []byte("state")}}},
	{"CheckpointResponse", func() any { return new(abi.CheckpointResponse) }, []any{abi.CheckpointResponse{Segment: 3, Clock: 42000, Header: make([]byte, 32)}}},
	{"SetOutputRequest", func() any { return new(abi.SetOutputRequest) }, []any{
		abi.SetOutputRequest{Output: []byte{}}, abi.SetOutputRequest{Output: []byte("done")}}},
	{"LogRequest", func() any { return new(abi.LogRequest) }, []any{
		abi.LogRequest{Level: abi.LevelWarn, Message: "héllo"}}},
	{"IntrospectResponse", func() any { return new(abi.IntrospectResponse) }, []any{
		abi.IntrospectResponse{RunID: "00", ModuleSHA256: make([]byte, 32), ABI: abi.Version,
			Capabilities: []string{"run", "kv"}, Steps: 1 << 40}}},
	{"SelfResponse", func() any { return new(abi.SelfResponse) }, []any{
		abi.SelfResponse{ABI: abi.Version, Cell: "00", RunID: "00", Depth: 3, Parent: "01", ParentStep: 9, Task: "t", Attempt: 2, ModuleSHA256: make([]byte, 32)}}},
	{"SelfCapsResponse", func() any { return new(abi.SelfCapsResponse) }, []any{
		abi.SelfCapsResponse{Caps: `{"run":{}}`, Budget: "steps=10", Capabilities: []string{"run"}}}},
	{"MayRequest", func() any { return new(abi.MayRequest) }, []any{
		abi.MayRequest{Op: "kv.put", Request: []byte{0xa0}}, abi.MayRequest{Op: "clock.now"}}},
	{"MayResponse", func() any { return new(abi.MayResponse) }, []any{
		abi.MayResponse{Decision: abi.MayDeny, Stage: "policy", Status: abi.StatusDenied, Reason: "no"}}},
	{"SelfBudgetResponse", func() any { return new(abi.SelfBudgetResponse) }, []any{
		abi.SelfBudgetResponse{Dims: []abi.SelfBudget{{Dim: "steps", Spent: 1, Limited: true, Ceiling: 9, Left: 8, Children: 1, Reserved: 1}}}}},
	{"SelfModeResponse", func() any { return new(abi.SelfModeResponse) }, []any{
		abi.SelfModeResponse{Mode: "interactive", Modes: true, Default: "ask", Rules: []abi.ModeRule{{Name: "r", Op: "kv.*", Effect: "deny", Method: "GET", Resource: "x"}}}}},
	{"JournalRequest", func() any { return new(abi.JournalRequest) }, []any{
		abi.JournalRequest{From: 3, Limit: 10, Op: "kv.put", Phase: "failed"}}},
	{"JournalResponse", func() any { return new(abi.JournalResponse) }, []any{
		abi.JournalResponse{Next: 4, Entries: []abi.JournalEntry{{Seq: 1, Phase: "completed", Step: 1, Op: "run.input", Status: 0, Input: make([]byte, 32), Output: make([]byte, 32), Hash: make([]byte, 32)}}}}},
	{"LimitRequest", func() any { return new(abi.LimitRequest) }, []any{
		abi.LimitRequest{Limits: []abi.BudgetLimit{{Dim: "tool_calls", Amount: 0}, {Dim: "steps", Amount: 1 << 40}}}}},
	{"LimitResponse", func() any { return new(abi.LimitResponse) }, []any{
		abi.LimitResponse{Ceilings: []abi.BudgetLimit{{Dim: "micro_usd", Amount: 10_000_000}}}}},
	{"KVGetRequest", func() any { return new(abi.KVGetRequest) }, []any{abi.KVGetRequest{Key: "k"}}},
	{"KVGetResponse", func() any { return new(abi.KVGetResponse) }, []any{abi.KVGetResponse{Value: []byte{0}}}},
	{"KVPutRequest", func() any { return new(abi.KVPutRequest) }, []any{
		abi.KVPutRequest{Key: "greeting", Value: []byte("hi")}}},
	{"KVDeleteRequest", func() any { return new(abi.KVDeleteRequest) }, []any{abi.KVDeleteRequest{Key: "k"}}},
	{"KVDeleteResponse", func() any { return new(abi.KVDeleteResponse) }, []any{abi.KVDeleteResponse{Existed: true}}},
	{"KVListRequest", func() any { return new(abi.KVListRequest) }, []any{
		abi.KVListRequest{Prefix: "a"}, abi.KVListRequest{Prefix: "a", After: "ab", Limit: 300}}},
	{"KVListResponse", func() any { return new(abi.KVListResponse) }, []any{
		abi.KVListResponse{Keys: []string{"a", "b"}, More: true}, abi.KVListResponse{Keys: []string{}}}},
	{"HTTPRequest", func() any { return new(abi.HTTPRequest) }, []any{
		abi.HTTPRequest{Method: "GET", URL: "http://127.0.0.1:8080/"},
		abi.HTTPRequest{Method: "POST", URL: "http://example.com/x", Body: []byte("{}"),
			Headers: []abi.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "A", Value: ""}}}}},
	{"HTTPResponse", func() any { return new(abi.HTTPResponse) }, []any{
		abi.HTTPResponse{Status: 200, Headers: []abi.Header{{Name: "X", Value: "1"}}, Body: []byte("ok"), Truncated: true}}},
	{"ClockNowResponse", func() any { return new(abi.ClockNowResponse) }, []any{
		abi.ClockNowResponse{UnixNano: -1}, abi.ClockNowResponse{UnixNano: 1767323045000000000}}},
	{"RandomBytesRequest", func() any { return new(abi.RandomBytesRequest) }, []any{abi.RandomBytesRequest{N: 32}}},
	{"RandomBytesResponse", func() any { return new(abi.RandomBytesResponse) }, []any{
		abi.RandomBytesResponse{Bytes: make([]byte, 32)}}},
	{"ToolRunRequest", func() any { return new(abi.ToolRunRequest) }, []any{
		abi.ToolRunRequest{Name: "grep"}, abi.ToolRunRequest{Name: "grep", Args: []string{"-c", "x"}, Stdin: []byte("in")}}},
	{"ToolRunResponse", func() any { return new(abi.ToolRunResponse) }, []any{
		abi.ToolRunResponse{Stdout: []byte("out"), Stderr: []byte{}},
		abi.ToolRunResponse{Exit: 137, Signal: "SIGKILL", TimedOut: true, Limits: []string{"wall"}, StdoutTruncated: true, StderrTruncated: true,
			Files: []abi.ToolFile{{Path: "a.txt", Size: 1, SHA256: make([]byte, 32)}}},
		abi.ToolRunResponse{Stdout: []byte{}, Stderr: []byte{}, Limits: []string{"hash"},
			Files: []abi.ToolFile{{Path: "caf\xe9", Size: 9, Unhashed: abi.UnhashedLimit}, {Path: "d", Size: 1 << 33, Unhashed: abi.UnhashedSparse}}}}},
	{"TimerSleepRequest", func() any { return new(abi.TimerSleepRequest) }, []any{
		abi.TimerSleepRequest{For: 90_000_000_000}, abi.TimerSleepRequest{Until: 1767225600000000000}}},
	{"TimerSleepResponse", func() any { return new(abi.TimerSleepResponse) }, []any{
		abi.TimerSleepResponse{Due: 1767225600000000000, Woke: 1767225600250000000}}},
	{"ApprovalRequest", func() any { return new(abi.ApprovalRequest) }, []any{
		abi.ApprovalRequest{Action: "deploy v2 to production", Group: "release"}}},
	{"ApprovalResponse", func() any { return new(abi.ApprovalResponse) }, []any{
		abi.ApprovalResponse{Approved: true, Digest: make([]byte, 32), Approvers: []string{"alice", "bob"}},
		abi.ApprovalResponse{Digest: make([]byte, 32), Reason: "denied by carol"}}},
	{"MCPListToolsRequest", func() any { return new(abi.MCPListToolsRequest) }, []any{abi.MCPListToolsRequest{Server: "notes"}}},
	{"MCPListToolsResponse", func() any { return new(abi.MCPListToolsResponse) }, []any{
		abi.MCPListToolsResponse{Tools: []abi.MCPTool{{Name: "a", InputSchema: "{}", Annotations: `{"readOnlyHint":true}`, Idempotent: true, Hash: make([]byte, 32)}}}}},
	{"MCPCallToolRequest", func() any { return new(abi.MCPCallToolRequest) }, []any{abi.MCPCallToolRequest{Server: "notes", Tool: "a", Arguments: `{"x":1}`}}},
	{"MCPCallToolResponse", func() any { return new(abi.MCPCallToolResponse) }, []any{
		abi.MCPCallToolResponse{IsError: true, Content: "[]", Text: "t", Structured: "{}"}}},
	{"MCPReadResourceRequest", func() any { return new(abi.MCPReadResourceRequest) }, []any{abi.MCPReadResourceRequest{Server: "notes", URI: "notes://1"}}},
	{"MCPReadResourceResponse", func() any { return new(abi.MCPReadResourceResponse) }, []any{
		abi.MCPReadResourceResponse{Contents: []abi.MCPResourceContents{{URI: "u", MIMEType: "text/plain", Text: "t", Blob: []byte{1}}}}}},
	{"MCPGetPromptRequest", func() any { return new(abi.MCPGetPromptRequest) }, []any{
		abi.MCPGetPromptRequest{Server: "notes", Name: "p", Arguments: []abi.MCPPrompt{{Name: "a", Value: "b"}}}}},
	{"MCPGetPromptResponse", func() any { return new(abi.MCPGetPromptResponse) }, []any{
		abi.MCPGetPromptResponse{Description: "d", Messages: []abi.MCPPromptMessage{{Role: "user", Content: "{}", Text: "t"}}}}},
	{"SpawnRequest", func() any { return new(abi.SpawnRequest) }, []any{
		abi.SpawnRequest{Module: make([]byte, 32), Input: []byte("in"), Caps: "{run: {}}", Budget: "steps=5"}}},
	{"SpawnResponse", func() any { return new(abi.SpawnResponse) }, []any{
		abi.SpawnResponse{Run: "18ee4cab4e0d0000a04efd9b1a3fd4d7", TokenHash: make([]byte, 32)}}},
	{"RunRef", func() any { return new(abi.RunRef) }, []any{abi.RunRef{Run: "18ee4cab4e0d0000a04efd9b1a3fd4d7"}}},
	{"AwaitResponse", func() any { return new(abi.AwaitResponse) }, []any{
		abi.AwaitResponse{Run: "18ee4cab4e0d0000a04efd9b1a3fd4d7", Status: "completed", Output: []byte("ok"), OutputHash: make([]byte, 32)}}},
	{"ChildrenResponse", func() any { return new(abi.ChildrenResponse) }, []any{
		abi.ChildrenResponse{Children: []abi.Child{{Run: "18ee4cab4e0d0000a04efd9b1a3fd4d7", Step: 2, Status: "running"}}}}},
	{"Error", func() any { return new(abi.Error) }, []any{
		abi.Error{Code: abi.StatusTooLarge, Message: "request exceeds the limit"}}},
}

// FuzzUnmarshal decodes arbitrary bytes as the body type which selects:
// decoding never panics, an empty body is the zero value, and a body that
// decodes re-encodes to the same bytes.
func FuzzUnmarshal(f *testing.F) {
	for i, b := range bodies {
		f.Add(uint8(i), []byte{})
		for _, s := range b.samples {
			enc, err := abi.Marshal(s)
			if err != nil {
				f.Fatalf("%s: %v", b.name, err)
			}
			f.Add(uint8(i), enc)
		}
	}
	// Every vector, valid or not, seeds the type it is a body of.
	for _, v := range readVectors(f) {
		body, err := newBody(v.Op, v.Kind)
		if err != nil {
			f.Fatalf("%s: %v", v.File, err)
		}
		i := slices.IndexFunc(bodies, func(b fuzzBody) bool { return reflect.TypeOf(b.new()) == reflect.TypeOf(body) })
		if i < 0 {
			f.Fatalf("%s: no fuzz body for %T", v.File, body)
		}
		f.Add(uint8(i), v.Data)
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		b := bodies[int(which)%len(bodies)]
		v := b.new()
		if err := abi.Unmarshal(data, v); err != nil {
			return
		}
		if len(data) == 0 {
			if !reflect.DeepEqual(v, b.new()) {
				t.Fatalf("%s: an empty body decoded to %+v, not the zero value", b.name, v)
			}
			return
		}
		again, err := abi.Marshal(v)
		if err != nil {
			t.Fatalf("%s: decoded value does not encode: %v", b.name, err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("%s: decode then encode changed the bytes:\n in  %x\n out %x", b.name, data, again)
		}
	})
}

// TestUnmarshalRejects checks that specific non-canonical or hostile
// encodings of valid values are refused, with ErrNotCanonical where the
// bytes decode but are not the canonical form.
func TestUnmarshalRejects(t *testing.T) {
	tests := []struct {
		name         string
		in           []byte
		notCanonical bool
	}{
		// {"n": 32} with 32 written in two bytes after the head.
		{"non-minimal integer", []byte{0xa1, 0x61, 'n', 0x19, 0x00, 0x20}, true},
		// {"key": "k", "value": h''} for KVPutRequest, keys swapped.
		{"keys out of order", []byte{0xa2, 0x65, 'v', 'a', 'l', 'u', 'e', 0x40, 0x63, 'k', 'e', 'y', 0x61, 'k'}, true},
		{"duplicate key", []byte{0xa2, 0x61, 'n', 0x01, 0x61, 'n', 0x01}, false},
		{"unknown field", []byte{0xa2, 0x61, 'm', 0x01, 0x61, 'n', 0x01}, false},
		{"indefinite-length map", []byte{0xbf, 0x61, 'n', 0x01, 0xff}, false},
		{"tag", []byte{0xa1, 0x61, 'n', 0xc1, 0x01}, false},
		{"trailing byte", []byte{0xa1, 0x61, 'n', 0x01, 0x00}, false},
		{"invalid UTF-8 key", []byte{0xa1, 0x61, 0xff, 0x01}, false},
		{"deep nesting", append(bytes.Repeat([]byte{0x81}, 64), 0x00), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r abi.RandomBytesRequest
			var p abi.KVPutRequest
			var dst any = &r
			if tt.name == "keys out of order" {
				dst = &p
			}
			err := abi.Unmarshal(tt.in, dst)
			t.Log(err)
			if err == nil {
				t.Fatalf("accepted %x", tt.in)
			}
			if got := errors.Is(err, abi.ErrNotCanonical); got != tt.notCanonical {
				t.Errorf("errors.Is(err, ErrNotCanonical) = %v, want %v (err: %v)", got, tt.notCanonical, err)
			}
		})
	}
}
