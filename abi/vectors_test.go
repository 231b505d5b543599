package abi_test

// The ABI test vectors in testdata/vectors are generated from the table in
// this file and checked by TestVectors, which reads nothing but the files:
// the same files the C SDK's tests (guest-sdk/c) and any other
// implementation run.
//
// After changing the table, regenerate the files with
//
//	go test ./abi/ -run TestVectorFiles -rewrite
//
// and review the diff: a changed byte in a valid vector is an ABI change.

import (
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/internal/abivectors"
	"github.com/fxamacker/cbor/v2"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/vectors from the generator table instead of checking them")

const vectorDir = "testdata/vectors"

// opBodies maps every op to constructors of its request and response types.
// A nil constructor stands for abi.Empty.
var opBodies = map[string]struct{ req, resp func() any }{
	"run.input":         {nil, func() any { return new(abi.InputResponse) }},
	"run.set_output":    {func() any { return new(abi.SetOutputRequest) }, nil},
	"run.log":           {func() any { return new(abi.LogRequest) }, nil},
	"run.introspect":    {nil, func() any { return new(abi.IntrospectResponse) }},
	"run.checkpoint":    {func() any { return new(abi.CheckpointRequest) }, func() any { return new(abi.CheckpointResponse) }},
	"run.limit":         {func() any { return new(abi.LimitRequest) }, func() any { return new(abi.LimitResponse) }},
	"run.self":          {nil, func() any { return new(abi.SelfResponse) }},
	"run.self_caps":     {nil, func() any { return new(abi.SelfCapsResponse) }},
	"run.self_may":      {func() any { return new(abi.MayRequest) }, func() any { return new(abi.MayResponse) }},
	"run.self_budget":   {nil, func() any { return new(abi.SelfBudgetResponse) }},
	"run.self_mode":     {nil, func() any { return new(abi.SelfModeResponse) }},
	"run.self_journal":  {func() any { return new(abi.JournalRequest) }, func() any { return new(abi.JournalResponse) }},
	"kv.get":            {func() any { return new(abi.KVGetRequest) }, func() any { return new(abi.KVGetResponse) }},
	"kv.put":            {func() any { return new(abi.KVPutRequest) }, nil},
	"kv.delete":         {func() any { return new(abi.KVDeleteRequest) }, func() any { return new(abi.KVDeleteResponse) }},
	"kv.list":           {func() any { return new(abi.KVListRequest) }, func() any { return new(abi.KVListResponse) }},
	"http.request":      {func() any { return new(abi.HTTPRequest) }, func() any { return new(abi.HTTPResponse) }},
	"clock.now":         {nil, func() any { return new(abi.ClockNowResponse) }},
	"random.bytes":      {func() any { return new(abi.RandomBytesRequest) }, func() any { return new(abi.RandomBytesResponse) }},
	"tool.run":          {func() any { return new(abi.ToolRunRequest) }, func() any { return new(abi.ToolRunResponse) }},
	"timer.sleep":       {func() any { return new(abi.TimerSleepRequest) }, func() any { return new(abi.TimerSleepResponse) }},
	"approval.request":  {func() any { return new(abi.ApprovalRequest) }, func() any { return new(abi.ApprovalResponse) }},
	"mcp.list_tools":    {func() any { return new(abi.MCPListToolsRequest) }, func() any { return new(abi.MCPListToolsResponse) }},
	"mcp.call_tool":     {func() any { return new(abi.MCPCallToolRequest) }, func() any { return new(abi.MCPCallToolResponse) }},
	"mcp.read_resource": {func() any { return new(abi.MCPReadResourceRequest) }, func() any { return new(abi.MCPReadResourceResponse) }},
	"mcp.get_prompt":    {func() any { return new(abi.MCPGetPromptRequest) }, func() any { return new(abi.MCPGetPromptResponse) }},
	"agent.spawn":       {func() any { return new(abi.SpawnRequest) }, func() any { return new(abi.SpawnResponse) }},
	"agent.await":       {func() any { return new(abi.RunRef) }, func() any { return new(abi.AwaitResponse) }},
	"agent.cancel":      {func() any { return new(abi.RunRef) }, nil},
	"agent.children":    {nil, func() any { return new(abi.ChildrenResponse) }},
}

// newBody returns a pointer to a fresh value of the Go type that a vector's
// bytes decode into.
func newBody(op, kind string) (any, error) {
	if kind == "error" {
		return new(abi.Error), nil
	}
	b, ok := opBodies[op]
	if !ok {
		return nil, fmt.Errorf("unknown op %q", op)
	}
	var mk func() any
	switch kind {
	case "request":
		mk = b.req
	case "response":
		mk = b.resp
	default:
		return nil, fmt.Errorf("unknown kind %q", kind)
	}
	if mk == nil {
		return new(abi.Empty), nil
	}
	return mk(), nil
}

// invalidReasons maps each failure class of an invalid vector to the check that
// the Go decoder failed for that reason and no other, so that a decoder bug
// cannot hide behind an unrelated rejection.
var invalidReasons = map[string]func(error) bool{
	"not-canonical":     func(err error) bool { return errors.Is(err, abi.ErrNotCanonical) },
	"duplicate-key":     errorAs[*cbor.DupMapKeyError],
	"unknown-field":     errorAs[*cbor.UnknownFieldError],
	"indefinite-length": errorAs[*cbor.IndefiniteLengthError],
	"tag":               errorAs[*cbor.TagsMdError],
	"wrong-type":        errorAs[*cbor.UnmarshalTypeError],
	"invalid-utf8":      errorAs[*cbor.SemanticError],
	"truncated":         func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) },
	"malformed":         errorAs[*cbor.SyntaxError],
	"trailing-bytes":    errorAs[*cbor.ExtraneousDataError],
}

func errorAs[T error](err error) bool {
	var t T
	return errors.As(err, &t)
}

// vector is one test vector: a file in testdata/vectors.
// vector is one vector file (internal/abivectors reads and writes them).
type vector = abivectors.Vector

// runIDForm is the form of a run id the host sends (SPEC.md §9.4; the host
// writes journal.RunID.String, tested in host/probe_test.go).
var runIDForm = regexp.MustCompile(`^[0-9a-f]{32}$`)

// readVectors parses every file in testdata/vectors.
func readVectors(t testing.TB) []*vector {
	t.Helper()
	vs, err := abivectors.Read(vectorDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Reason != "" && invalidReasons[v.Reason] == nil {
			t.Fatalf("%s: unknown reason %q", v.File, v.Reason)
		}
	}
	return vs
}

// TestVectorFiles checks that the files in testdata/vectors are exactly what
// the generator table produces, or rewrites them with -rewrite. It runs
// before TestVectors, so a rewrite is checked at once.
func TestVectorFiles(t *testing.T) {
	checkVectorFiles(t, vectorDir, "TestVectorFiles", generateVectors(t))
}

// checkVectorFiles checks that the files of dir are exactly the vectors
// want, or rewrites them with -rewrite; test names the test to run for a
// rewrite.
func checkVectorFiles(t *testing.T, dir, test string, want []*vector) {
	t.Helper()
	if *rewrite {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, v := range want {
			if err := os.WriteFile(filepath.Join(dir, v.File), v.Format(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	onDisk := map[string]bool{}
	for _, e := range entries {
		onDisk[e.Name()] = true
	}
	for _, v := range want {
		got, err := os.ReadFile(filepath.Join(dir, v.File))
		if err != nil {
			t.Errorf("%s: %v (run go test ./abi/ -run %s -rewrite)", v.File, err, test)
			continue
		}
		delete(onDisk, v.File)
		if !bytes.Equal(got, v.Format()) {
			t.Errorf("%s differs from the generator:\n got: %s\nwant: %s(run go test ./abi/ -run %s -rewrite if the change is intended)", v.File, got, v.Format(), test)
		}
	}
	for name := range onDisk {
		t.Errorf("%s is not produced by the generator (add it to the table or delete it)", name)
	}
}

// TestVectors is the runner: every valid vector decodes into its op's Go
// type and re-encodes to the same bytes (an empty body decodes to the zero
// value); every invalid vector fails to decode, for the reason it names.
func TestVectors(t *testing.T) {
	vs := readVectors(t)
	type cover struct{ op, kind string }
	covered := map[cover]bool{}
	reasonSeen := map[string]bool{}
	for _, v := range vs {
		t.Run(strings.TrimSuffix(v.File, ".txt"), func(t *testing.T) {
			body, err := newBody(v.Op, v.Kind)
			if err != nil {
				t.Fatal(err)
			}
			err = abi.Unmarshal(v.Data, body)
			if v.Expect == "invalid" {
				reasonSeen[v.Reason] = true
				if err == nil {
					t.Fatalf("decoded into %+v, want a %s error", body, v.Reason)
				}
				if !invalidReasons[v.Reason](err) {
					t.Fatalf("rejected with %v (%T), want a %s error", err, err, v.Reason)
				}
				return
			}
			if err != nil {
				t.Fatalf("decode %T: %v", body, err)
			}
			covered[cover{v.Op, v.Kind}] = true
			if len(v.Data) == 0 {
				zero := reflect.New(reflect.TypeOf(body).Elem()).Interface()
				if !reflect.DeepEqual(body, zero) {
					t.Fatalf("empty body decoded to %+v, want the zero value", body)
				}
				return
			}
			again, err := abi.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, v.Data) {
				t.Fatalf("re-encoded %T to\n%x, want\n%x", body, again, v.Data)
			}
			if r, ok := body.(*abi.IntrospectResponse); ok && r.RunID != "" && !runIDForm.MatchString(r.RunID) {
				t.Fatalf("run_id %q is not 32 lower-case hex digits (SPEC.md §9.4)", r.RunID)
			}
		})
	}
	for _, op := range abi.Ops {
		if op.Cap == abi.CapLLM {
			continue // testdata/llm: TestLLMVectors
		}
		for _, kind := range []string{"request", "response"} {
			if !covered[cover{op.Name, kind}] {
				t.Errorf("no valid %s vector for %s", kind, op.Name)
			}
		}
	}
	for r := range invalidReasons {
		if !reasonSeen[r] {
			t.Errorf("no invalid vector with reason %s", r)
		}
	}
	for s := abi.StatusBadRequest; s <= abi.StatusInternal; s++ {
		found := false
		for _, v := range vs {
			var e abi.Error
			if v.Kind == "error" && v.Expect == "valid" && abi.Unmarshal(v.Data, &e) == nil && e.Code == s {
				found = true
			}
		}
		if !found {
			t.Errorf("no error vector for status %s", s)
		}
	}
}

// The generator table.

// CBOR construction helpers for invalid vectors, which Marshal cannot
// produce.
func cborHead(major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return []byte{m | byte(n)}
	case n <= 0xff:
		return []byte{m | 24, byte(n)}
	case n <= 0xffff:
		return []byte{m | 25, byte(n >> 8), byte(n)}
	case n <= 0xffffffff:
		return []byte{m | 26, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
	}
	return []byte{m | 27, byte(n >> 56), byte(n >> 48), byte(n >> 40), byte(n >> 32), byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
}

func cborUint(n uint64) []byte   { return cborHead(0, n) }
func cborBytes(b []byte) []byte  { return append(cborHead(2, uint64(len(b))), b...) }
func cborText(s string) []byte   { return append(cborHead(3, uint64(len(s))), s...) }
func cborArray(n int) []byte     { return cborHead(4, uint64(n)) }
func cborMap(n int) []byte       { return cborHead(5, uint64(n)) }
func cborCat(p ...[]byte) []byte { return slices.Concat(p...) }
func unhex(h string) []byte {
	b, err := hex.DecodeString(h)
	if err != nil {
		panic(err)
	}
	return b
}

var (
	cborFalse = []byte{0xf4}
	cborTrue  = []byte{0xf5}
	cborNull  = []byte{0xf6}
)

func marshalVector(t *testing.T, v any) []byte {
	t.Helper()
	b, err := abi.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// generate returns every vector, named <op>.<kind>.<name>.txt.
func generateVectors(t *testing.T) []*vector {
	var out []*vector
	add := func(v *vector, name string) {
		v.File = fmt.Sprintf("%s.%s.%s.txt", v.Op, v.Kind, name)
		if slices.ContainsFunc(out, func(o *vector) bool { return o.File == v.File }) {
			t.Fatalf("duplicate vector %s", v.File)
		}
		out = append(out, v)
	}
	valid := func(op, kind, name, comment string, value any) {
		data := marshalVector(t, value)
		d, err := cbor.Diagnose(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		add(&vector{Op: op, Kind: kind, Expect: "valid", Comment: comment, Diag: d, Data: data}, name)
	}
	emptyBody := func(op, kind, comment string) {
		add(&vector{Op: op, Kind: kind, Expect: "valid", Comment: comment, Data: []byte{}}, "empty-body")
	}
	invalid := func(op, kind, name, reason, comment string, data []byte) {
		add(&vector{Op: op, Kind: kind, Expect: "invalid", Reason: reason, Comment: comment, Data: data}, name)
	}
	errorVector := func(op, name string, code abi.Status, msg string) {
		valid(op, "error", name, fmt.Sprintf("the Error body of a %s call answered with status %d (%s)", op, code, code),
			&abi.Error{Code: code, Message: msg})
	}
	sha := unhex("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")

	// Ops without request fields: SDKs send the empty body, and the empty
	// map is the same value.
	for _, op := range []string{"run.input", "run.introspect", "clock.now", "agent.children", "run.self", "run.self_caps", "run.self_budget", "run.self_mode"} {
		emptyBody(op, "request", "the request SDKs send: no fields, so no bytes")
		valid(op, "request", "empty-map", "the canonical encoding of the same empty request", &abi.Empty{})
	}
	// Ops without response fields: the host sends the empty body.
	for _, op := range []string{"run.set_output", "run.log", "kv.put", "agent.cancel"} {
		emptyBody(op, "response", "the response hosts send: no fields, so no bytes")
		valid(op, "response", "empty-map", "the canonical encoding of the same empty response", &abi.Empty{})
	}

	// run
	valid("run.input", "response", "text", "", &abi.InputResponse{Input: []byte("the quick brown fox")})
	valid("run.input", "response", "nil", "a run started without input: a nil byte string is null", &abi.InputResponse{})
	valid("run.input", "response", "empty", "an empty, non-nil input is the empty byte string", &abi.InputResponse{Input: []byte{}})
	valid("run.input", "response", "segment", "in a segment after a checkpoint: keys sorted by encoded length first: input, state, segment",
		&abi.InputResponse{Input: []byte(`{"n":3}`), State: []byte(`{"i":1000}`), Segment: 1})
	valid("run.input", "response", "segment-empty-state", "an empty state is the empty byte string; the segment says the run continues",
		&abi.InputResponse{Input: []byte("in"), State: []byte{}, Segment: 7})
	valid("run.checkpoint", "request", "json", "", &abi.CheckpointRequest{State: []byte(`{"i":1000,"sum":499500}`)})
	valid("run.checkpoint", "request", "nil", "an empty state: a nil byte string is null", &abi.CheckpointRequest{})
	valid("run.checkpoint", "response", "first", "what the host journals; the guest never reads it", &abi.CheckpointResponse{Segment: 1, Clock: 123456000, Header: sha})
	valid("run.limit", "request", "two", "at most 3 more tool calls and $0.50 more from now on; amount 0 is written out",
		&abi.LimitRequest{Limits: []abi.BudgetLimit{{Dim: "tool_calls", Amount: 3}, {Dim: "micro_usd", Amount: 500000}, {Dim: "http_requests", Amount: 0}}})
	emptyBody("run.limit", "request", "no limits: changes nothing, and the response reports the ceilings")
	valid("run.limit", "response", "ceilings", "the absolute ceilings in force, in dimension order",
		&abi.LimitResponse{Ceilings: []abi.BudgetLimit{{Dim: "steps", Amount: 40}, {Dim: "tool_calls", Amount: 5}, {Dim: "http_requests", Amount: 2}}})
	emptyBody("run.limit", "response", "a run without ceilings")
	valid("run.set_output", "request", "json", "", &abi.SetOutputRequest{Output: []byte(`{"words":3}`)})
	valid("run.set_output", "request", "nil", "clears the output: a nil byte string is null", &abi.SetOutputRequest{})
	valid("run.set_output", "request", "binary", "", &abi.SetOutputRequest{Output: []byte{0, 1, 0xfe, 0xff}})
	valid("run.log", "request", "info", "", &abi.LogRequest{Level: abi.LevelInfo, Message: "counted 42 words"})
	valid("run.log", "request", "debug-utf8", "level 0 is encoded, not omitted; text is UTF-8", &abi.LogRequest{Level: abi.LevelDebug, Message: "grüße, 世界"})
	valid("run.log", "request", "level-out-of-range", "canonical, so it decodes; the host answers bad_request for a level above 3", &abi.LogRequest{Level: 9, Message: "x"})
	valid("run.introspect", "response", "full", "keys sorted by encoded length first: abi, steps, run_id, capabilities, module_sha256; the run id is 32 hex digits",
		&abi.IntrospectResponse{RunID: "0189c4f1d2a3b4c50123456789abcdef", ModuleSHA256: sha, ABI: abi.Version,
			Capabilities: []string{"run", "kv", "http"}, Steps: 7})

	// run.self (§9.15)
	valid("run.self", "response", "top-level", "a run started by hand: no task, no parent; depth 0 is written out",
		&abi.SelfResponse{ABI: abi.Version, Cell: "9f2c4e1a7b3d5f60", RunID: "0189c4f1d2a3b4c50123456789abcdef", ModuleSHA256: sha})
	valid("run.self", "response", "child-of-task", "a sub-agent two levels down in a task's attempt: parent and the spawning step",
		&abi.SelfResponse{ABI: abi.Version, Cell: "9f2c4e1a7b3d5f60", Depth: 2, RunID: "0189c4f1d2a3b4c50123456789abcdef",
			Parent: "0189c4f1d2a3b4c5fedcba9876543210", ParentStep: 4, ModuleSHA256: sha})
	valid("run.self", "response", "task-attempt", "the second attempt of task nightly-report",
		&abi.SelfResponse{ABI: abi.Version, Cell: "9f2c4e1a7b3d5f60", Task: "nightly-report", Attempt: 2, RunID: "0189c4f1d2a3b4c50123456789abcdef", ModuleSHA256: sha})
	valid("run.self_caps", "response", "kv-http", "the claims as JSON text, the capabilities in ABI order, the budget in the flag syntax",
		&abi.SelfCapsResponse{Caps: `{"run":{},"kv":{"namespaces":["notes"]},"http":{"hosts":["api.example.com"]}}`, Budget: "http=3,usd=0.50",
			Capabilities: []string{"run", "kv", "http"}})
	valid("run.self_caps", "response", "no-budget", "budget is omitempty", &abi.SelfCapsResponse{Caps: `{"run":{}}`, Capabilities: []string{"run"}})
	valid("run.self_may", "request", "http-get", "the op and its own request, as the op's call would send it",
		&abi.MayRequest{Op: "http.request", Request: marshalVector(t, &abi.HTTPRequest{Method: "GET", URL: "https://api.example.com/v1/items"})})
	valid("run.self_may", "request", "kv-put", "", &abi.MayRequest{Op: "kv.put", Request: marshalVector(t, &abi.KVPutRequest{Key: "report/1"})})
	valid("run.self_may", "request", "no-request", "an op without request fields: null", &abi.MayRequest{Op: "clock.now"})
	valid("run.self_may", "response", "allow", "every layer allows: no stage, no reason", &abi.MayResponse{Decision: abi.MayAllow})
	valid("run.self_may", "response", "deny-policy", "the layer that decided, the status the call would get, the gate's reason",
		&abi.MayResponse{Decision: abi.MayDeny, Stage: "policy", Status: abi.StatusDenied, Reason: "policy: denied by customer:acme.no-post (customer set)"})
	valid("run.self_may", "response", "deny-budget", "",
		&abi.MayResponse{Decision: abi.MayDeny, Stage: "budget", Status: abi.StatusBudget, Reason: "http.request: budget: http_requests: asked 1, 0 left of 2"})
	valid("run.self_may", "response", "ask", "a permission mode would park the call for approval",
		&abi.MayResponse{Decision: abi.MayAsk, Stage: "mode", Reason: `http.request would park for approval (permission mode rule "ask-post" asks)`})
	valid("run.self_budget", "response", "two", "a limited dimension with a carve for children, an unlimited one; spent and reserved are written out",
		&abi.SelfBudgetResponse{Dims: []abi.SelfBudget{
			{Dim: "steps", Spent: 12, Limited: true, Ceiling: 100, Left: 88},
			{Dim: "http_requests", Spent: 1, Reserved: 2, Children: 2, Limited: true, Ceiling: 5, Left: 2},
			{Dim: "model_calls"},
		}})
	valid("run.self_mode", "response", "rules", "",
		&abi.SelfModeResponse{Mode: "interactive", Modes: true, Default: "allow", Rules: []abi.ModeRule{
			{Name: "ask-post", Op: "http.request", Method: "POST", Effect: "ask"},
			{Name: "no-secrets", Op: "kv.*", Resource: "secrets", Effect: "deny"},
		}})
	valid("run.self_mode", "response", "unattended", "a cell without permission modes", &abi.SelfModeResponse{Mode: "unattended"})
	emptyBody("run.self_journal", "request", "from the start, the host's cap of entries, every op and phase")
	valid("run.self_journal", "request", "page", "", &abi.JournalRequest{From: 40, Limit: 20, Op: "kv.put", Phase: "completed"})
	valid("run.self_journal", "response", "page", "a lifecycle entry has no op, step or status; next is where the next page starts",
		&abi.JournalResponse{Next: 9, Entries: []abi.JournalEntry{
			{Seq: 0, Phase: "start", Hash: sha},
			{Seq: 1, Phase: "completed", Step: 1, Op: "run.input", Input: unhex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"), Output: sha, Hash: sha},
			{Seq: 8, Phase: "failed", Step: 6, Op: "http.request", Status: uint32(abi.StatusDenied), Input: sha, Output: sha, Hash: sha},
		}})
	valid("run.self_journal", "response", "last", "the end of the journal: no next; an empty page is an empty array", &abi.JournalResponse{Entries: []abi.JournalEntry{}})
	errorVector("run.self_journal", "over-cap", abi.StatusBadRequest, "run.self_journal: limit 500 is above the host's cap of 100 entries a page; ask for at most 100 and follow next to page on")
	invalid("run.self_journal", "request", "run-field", "unknown-field", "there is no run field: a run reads its own journal only",
		cborCat(cborMap(2), cborText("run"), cborText("0189c4f1d2a3b4c5fedcba9876543210"), cborText("limit"), cborUint(10)))

	// kv
	valid("kv.get", "request", "basic", "", &abi.KVGetRequest{Key: "total_words"})
	valid("kv.get", "response", "basic", "", &abi.KVGetResponse{Value: []byte("1234")})
	valid("kv.get", "response", "empty-value", "a key whose value is empty exists; a missing key is the not_found error", &abi.KVGetResponse{Value: []byte{}})
	valid("kv.put", "request", "basic", "", &abi.KVPutRequest{Key: "total_words", Value: []byte("1234")})
	valid("kv.put", "request", "nil-value", "a nil value is null; it stores an empty value", &abi.KVPutRequest{Key: "k"})
	valid("kv.put", "request", "empty-value", "", &abi.KVPutRequest{Key: "k", Value: []byte{}})
	valid("kv.delete", "request", "basic", "", &abi.KVDeleteRequest{Key: "session/42"})
	valid("kv.delete", "response", "existed", "", &abi.KVDeleteResponse{Existed: true})
	valid("kv.delete", "response", "absent", "false is encoded, not omitted", &abi.KVDeleteResponse{})
	valid("kv.list", "request", "prefix", "after and limit are omitempty: absent when zero", &abi.KVListRequest{Prefix: "session/"})
	valid("kv.list", "request", "page", "", &abi.KVListRequest{Prefix: "session/", After: "session/17", Limit: 100})
	emptyBody("kv.list", "request", "the zero request (every key, host's default limit)")
	valid("kv.list", "response", "page", "", &abi.KVListResponse{Keys: []string{"session/18", "session/19"}, More: true})
	valid("kv.list", "response", "none", "the reference host sends an empty array, not null", &abi.KVListResponse{Keys: []string{}})
	valid("kv.list", "response", "null-keys", "a nil list is null, and decodes", &abi.KVListResponse{})

	// http
	valid("http.request", "request", "get", "headers and body are omitempty: absent when empty", &abi.HTTPRequest{Method: "GET", URL: "https://example.com/"})
	valid("http.request", "request", "post", "headers are [name, value] pairs in order, repeats allowed",
		&abi.HTTPRequest{Method: "POST", URL: "http://127.0.0.1:8080/items?x=1",
			Headers: []abi.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "Accept", Value: "a"}, {Name: "Accept", Value: "b"}},
			Body:    []byte(`{"n":1}`)})
	valid("http.request", "response", "ok", "the reference host sorts header names; truncated is omitted when false",
		&abi.HTTPResponse{Status: 200, Headers: []abi.Header{{Name: "Content-Length", Value: "5"}, {Name: "Content-Type", Value: "text/plain"}}, Body: []byte("hello")})
	valid("http.request", "response", "cut-body", "the host cut the body at its limit", &abi.HTTPResponse{Status: 206, Headers: []abi.Header{}, Body: []byte("abc"), Truncated: true})
	valid("http.request", "response", "nil-lists", "nil headers and body are null", &abi.HTTPResponse{Status: 204})

	// timer and approval (waits)
	valid("timer.sleep", "request", "for", "a duration from the intent, ns", &abi.TimerSleepRequest{For: 90e9})
	valid("timer.sleep", "request", "until", "a wall-clock time, Unix ns", &abi.TimerSleepRequest{Until: 1767225600e9})
	valid("timer.sleep", "response", "woke", "the wake time and the real time the run went on", &abi.TimerSleepResponse{Due: 1767225600e9, Woke: 1767225600250000000})
	valid("approval.request", "request", "basic", "", &abi.ApprovalRequest{Action: "deploy v2 to production", Group: "release"})
	valid("approval.request", "response", "approved", "", &abi.ApprovalResponse{Approved: true, Digest: sha, Approvers: []string{"alice", "bob"}})
	valid("approval.request", "response", "denied", "approved is omitted when false", &abi.ApprovalResponse{Digest: sha, Reason: "denied by carol"})

	// mcp (§16)
	valid("mcp.list_tools", "request", "basic", "", &abi.MCPListToolsRequest{Server: "notes"})
	valid("mcp.list_tools", "response", "tools", "the granted tools: the server's annotations as JSON text, idempotent as the grant says, the definition's hash",
		&abi.MCPListToolsResponse{Tools: []abi.MCPTool{
			{Name: "add_note", Description: "Add a note", InputSchema: `{"properties":{"title":{"type":"string"}},"type":"object"}`, Hash: sha},
			{Name: "list_notes", Title: "List notes", InputSchema: `{"type":"object"}`, Annotations: `{"idempotentHint":true,"readOnlyHint":true}`, Idempotent: true, Hash: sha},
		}})
	valid("mcp.list_tools", "response", "none", "a server none of whose tools the grant allows", &abi.MCPListToolsResponse{Tools: []abi.MCPTool{}})
	invalid("mcp.list_tools", "response", "missing-hash", "not-canonical", "hash is not omitempty: it MUST be present",
		unhex("a165746f6f6c7381a2646e616d6561786c696e7075745f736368656d61627b7d")) // {"tools": [{"name": "x", "input_schema": "{}"}]}
	valid("mcp.call_tool", "request", "basic", "arguments are a JSON object, as text", &abi.MCPCallToolRequest{Server: "notes", Tool: "add_note", Arguments: `{"body":"milk","title":"shopping"}`})
	valid("mcp.call_tool", "request", "no-arguments", "arguments omitted: the tool takes none", &abi.MCPCallToolRequest{Server: "notes", Tool: "list_notes"})
	valid("mcp.call_tool", "response", "text", "", &abi.MCPCallToolResponse{Content: `[{"type":"text","text":"added note 1"}]`, Text: "added note 1"})
	valid("mcp.call_tool", "response", "tool-error", "the tool reported an error: a successful call with is_error", &abi.MCPCallToolResponse{IsError: true, Content: `[{"type":"text","text":"no such note"}]`, Text: "no such note"})
	valid("mcp.call_tool", "response", "structured", "", &abi.MCPCallToolResponse{Content: `[{"type":"text","text":"{"count":2}"}]`, Text: `{"count":2}`, Structured: `{"count":2}`})
	errorVector("mcp.call_tool", "denied", abi.StatusDenied, `mcp.call_tool: tool "delete_all" of mcp server notes is not in the grant (granted: add_note, list_notes)`)
	errorVector("mcp.call_tool", "pin-mismatch", abi.StatusDenied, "mcp.call_tool: mcp server notes: its tool definitions no longer match the grant's pin (changed: add_note); calls to it are refused until the pin is updated (agentrt mcp pin prints the current hashes)")
	errorVector("mcp.call_tool", "in-doubt", abi.StatusInDoubt, "mcp.call_tool: the call was in flight when the run stopped, and the grant does not list the tool as idempotent")
	valid("mcp.read_resource", "request", "basic", "", &abi.MCPReadResourceRequest{Server: "notes", URI: "notes://1"})
	valid("mcp.read_resource", "response", "text-and-blob", "", &abi.MCPReadResourceResponse{Contents: []abi.MCPResourceContents{
		{URI: "notes://1", MIMEType: "text/plain", Text: "milk"}, {URI: "notes://1/attachment", Blob: []byte{0, 1, 2}}}})
	valid("mcp.get_prompt", "request", "basic", "", &abi.MCPGetPromptRequest{Server: "notes", Name: "summarize", Arguments: []abi.MCPPrompt{{Name: "style", Value: "short"}}})
	valid("mcp.get_prompt", "response", "basic", "", &abi.MCPGetPromptResponse{Description: "Summarize the notes", Messages: []abi.MCPPromptMessage{
		{Role: "user", Content: `{"type":"text","text":"Summarize: milk"}`, Text: "Summarize: milk"}}})
	// agent (sub-agents)
	const child = "18ee4cab4e0d0000a04efd9b1a3fd4d7"
	valid("agent.spawn", "request", "basic", "caps is a YAML or JSON capabilities map; budget the flag syntax",
		&abi.SpawnRequest{Module: sha, Input: []byte(`{"q":1}`), Caps: "{run: {}, kv: {namespace: team}}", Budget: "steps=50"})
	valid("agent.spawn", "request", "no-budget", "input and budget are omitted when empty", &abi.SpawnRequest{Module: sha, Caps: "{run: {}}"})
	valid("agent.spawn", "request", "priority", "priority (1..9) comes last in canonical order; absent, the child runs at the caller's", &abi.SpawnRequest{Module: sha, Caps: "{run: {}}", Priority: 3})
	valid("agent.spawn", "response", "basic", "", &abi.SpawnResponse{Run: child, TokenHash: sha, Budget: "steps=50"})
	valid("agent.await", "request", "basic", "", &abi.RunRef{Run: child})
	valid("agent.await", "response", "completed", "", &abi.AwaitResponse{Run: child, Status: abi.ChildCompleted, Output: []byte("ok"), OutputHash: sha})
	valid("agent.await", "response", "failed", "output is omitted when empty; its hash is the empty string's", &abi.AwaitResponse{Run: child, Status: abi.ChildFailed, OutputHash: sha, Error: "guest exited with status 1"})
	valid("agent.cancel", "request", "basic", "", &abi.RunRef{Run: child})
	valid("agent.children", "response", "two", "", &abi.ChildrenResponse{Children: []abi.Child{{Run: child, Step: 2, Status: abi.ChildCompleted}, {Run: child, Step: 3, Status: abi.ChildRunning}}})
	valid("agent.children", "response", "none", "children is omitted when empty", &abi.ChildrenResponse{})

	// clock and random
	valid("clock.now", "response", "basic", "", &abi.ClockNowResponse{UnixNano: 1767225600123456789})
	valid("clock.now", "response", "before-1970", "a negative int64", &abi.ClockNowResponse{UnixNano: -1})
	valid("random.bytes", "request", "basic", "", &abi.RandomBytesRequest{N: 16})
	valid("random.bytes", "request", "zero", "n is encoded even when 0", &abi.RandomBytesRequest{})
	valid("random.bytes", "response", "basic", "", &abi.RandomBytesResponse{Bytes: unhex("000102030405060708090a0b0c0d0e0f")})

	// tool
	valid("tool.run", "request", "grep", "keys sorted: args, name (both 4 bytes, bytewise), stdin; stdin is omitempty",
		&abi.ToolRunRequest{Name: "grep", Args: []string{"-c", "TODO", "src/main.go"}})
	valid("tool.run", "request", "no-args", "args is omitempty: absent when there are none", &abi.ToolRunRequest{Name: "git-log"})
	valid("tool.run", "request", "stdin", "", &abi.ToolRunRequest{Name: "wc", Args: []string{"-l"}, Stdin: []byte("a\nb\n")})
	valid("tool.run", "request", "metacharacters", "arguments are data: the host passes them to the tool as they are, never to a shell",
		&abi.ToolRunRequest{Name: "grep", Args: []string{"$(id)", "a;b", "*", "|"}})
	valid("tool.run", "response", "ok", "the omitempty fields (files, limits, signal, timed_out, *_truncated) are absent when zero",
		&abi.ToolRunResponse{Stdout: []byte("3\n"), Stderr: []byte{}})
	valid("tool.run", "response", "exit-status", "a tool that ran is a successful call whatever its exit status",
		&abi.ToolRunResponse{Exit: 2, Stdout: []byte{}, Stderr: []byte("grep: x: No such file or directory\n")})
	valid("tool.run", "response", "files", "files written in the read-write area, sorted by path; keys path, size, sha256",
		&abi.ToolRunResponse{Stdout: []byte("done\n"), Stderr: []byte{},
			Files: []abi.ToolFile{{Path: "out/report.md", Size: 4, SHA256: sha}, {Path: "summary.txt", Size: 0, SHA256: unhex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")}}})
	valid("tool.run", "response", "killed", "every field present: the wall limit passed, the tool was killed, both streams were cut",
		&abi.ToolRunResponse{Exit: 137, Signal: "SIGKILL", TimedOut: true, Limits: []string{"wall", "output"},
			Stdout: []byte("aaaa"), Stderr: []byte("bb"), StdoutTruncated: true, StderrTruncated: true,
			Files: []abi.ToolFile{{Path: "partial.txt", Size: 4, SHA256: sha}}})
	valid("tool.run", "response", "nil-streams", "nil stdout and stderr are null", &abi.ToolRunResponse{Exit: -1})
	valid("tool.run", "response", "file-name-bytes", "a file name that is not UTF-8 (Latin-1 caf\\xe9.txt) is a byte string holding its bytes; a UTF-8 one stays text",
		&abi.ToolRunResponse{Exit: 3, Stdout: []byte("hi\n"), Stderr: []byte{}, Files: []abi.ToolFile{
			{Path: "caf\xe9.txt", Size: 4, SHA256: sha},
			{Path: "caf\u00e9.txt", Size: 4, SHA256: sha},
		}})
	valid("tool.run", "response", "unhashed", "files the host did not hash: no sha256, and unhashed says why (sparse: holes; hash: the hash limit, named in limits; stopped: the run stopped)",
		&abi.ToolRunResponse{Exit: 0, Limits: []string{"hash"}, Stdout: []byte{}, Stderr: []byte{}, Files: []abi.ToolFile{
			{Path: "big.bin", Size: 300 << 20, Unhashed: abi.UnhashedLimit},
			{Path: "disk.img", Size: 8 << 30, Unhashed: abi.UnhashedSparse},
			{Path: "out.txt", Size: 4, SHA256: sha},
			{Path: "rest.log", Size: 12, Unhashed: abi.UnhashedStopped},
		}})

	// Error opBodies, one per status that carries one.
	errorVector("run.log", "bad-request", abi.StatusBadRequest, "run.log: level 9 is not 0..3")
	errorVector("random.bytes", "too-large", abi.StatusTooLarge, "random.bytes: 100000 bytes asked, at most 65536")
	errorVector("http.request", "denied", abi.StatusDenied, "http.request: host evil.example is not in the grant (allowed: example.com)")
	errorVector("kv.get", "not-found", abi.StatusNotFound, `kv.get: no key "total_words"`)
	errorVector("http.request", "failed", abi.StatusFailed, "http.request: dial tcp 127.0.0.1:1: connection refused")
	errorVector("http.request", "in-doubt", abi.StatusInDoubt, "http.request: the outcome of step 3 is unknown")
	errorVector("kv.put", "internal", abi.StatusInternal, "")
	errorVector("tool.run", "denied", abi.StatusDenied, `tool.run: tool git-log: argument 1 "--output=/etc/passwd": flag --output is not in the tool's schema (allowed: --oneline, -n)`)
	errorVector("tool.run", "failed", abi.StatusFailed, "tool.run: tool git-log: sandbox: launch refused: bubblewrap (bwrap) is not installed")
	errorVector("tool.run", "in-doubt", abi.StatusInDoubt, "tool.run of step 5 was in flight when the run stopped; it may have taken effect, and is not re-run")

	// Invalid: not canonical.
	invalid("kv.put", "request", "unsorted-keys", "not-canonical", `keys out of order: "value" before "key"`,
		cborCat(cborMap(2), cborText("value"), cborBytes([]byte("v")), cborText("key"), cborText("k")))
	invalid("kv.list", "response", "unsorted-keys", "not-canonical", `"more" (4 bytes) before "keys": same length, so bytewise order decides`,
		cborCat(cborMap(2), cborText("more"), cborFalse, cborText("keys"), cborArray(0)))
	invalid("random.bytes", "request", "non-minimal-int", "not-canonical", "16 in two bytes (0x18 0x10)",
		cborCat(cborMap(1), cborText("n"), unhex("1810")))
	invalid("clock.now", "response", "non-minimal-int", "not-canonical", "a 4-byte value in 8 bytes",
		cborCat(cborMap(1), cborText("unix_nano"), unhex("1b0000000069000000")))
	invalid("run.log", "request", "non-minimal-length", "not-canonical", "a text length of 2 in two bytes",
		cborCat(cborMap(2), cborText("msg"), unhex("78026869"), cborText("level"), cborUint(1)))
	invalid("http.request", "response", "omitempty-false", "not-canonical", "truncated is omitempty: false MUST be absent",
		cborCat(cborMap(4), cborText("body"), cborBytes(nil), cborText("status"), cborUint(200), cborText("headers"), cborArray(0), cborText("truncated"), cborFalse))
	invalid("http.request", "request", "omitempty-empty-list", "not-canonical", "headers is omitempty: an empty list MUST be absent",
		cborCat(cborMap(3), cborText("url"), cborText("https://example.com/"), cborText("method"), cborText("GET"), cborText("headers"), cborArray(0)))
	invalid("kv.list", "request", "omitempty-empty-string", "not-canonical", "after is omitempty: the empty string MUST be absent",
		cborCat(cborMap(2), cborText("after"), cborText(""), cborText("prefix"), cborText("a")))
	invalid("kv.get", "response", "missing-field", "not-canonical", "value is not omitempty: it MUST be present",
		cborMap(0))
	invalid("run.introspect", "response", "null-string", "not-canonical", "null is allowed for byte strings and lists, never for text",
		cborCat(cborMap(5), cborText("abi"), cborUint(1), cborText("steps"), cborUint(0), cborText("run_id"), cborNull, cborText("capabilities"), cborNull, cborText("module_sha256"), cborNull))
	invalid("kv.delete", "response", "null-bool", "not-canonical", "null is never a boolean",
		cborCat(cborMap(1), cborText("existed"), cborNull))
	invalid("kv.get", "request", "null-body", "not-canonical", "a body is a map; the empty body, not null, is the zero value",
		cborNull)

	invalid("tool.run", "request", "omitempty-empty-args", "not-canonical", "args is omitempty: an empty list MUST be absent",
		cborCat(cborMap(2), cborText("args"), cborArray(0), cborText("name"), cborText("grep")))
	invalid("tool.run", "response", "omitempty-false", "not-canonical", "timed_out is omitempty: false MUST be absent",
		cborCat(cborMap(4), cborText("exit"), cborUint(0), cborText("stderr"), cborBytes(nil), cborText("stdout"), cborBytes(nil), cborText("timed_out"), cborFalse))
	// A file name that is not UTF-8 (Latin-1 "café.txt"), and the same
	// bytes spelled wrongly.
	fileResp := func(path []byte) []byte {
		return cborCat(cborMap(4), cborText("exit"), cborUint(0), cborText("files"), cborArray(1),
			cborMap(3), cborText("path"), path, cborText("size"), cborUint(1), cborText("sha256"), cborBytes(sha),
			cborText("stderr"), cborBytes(nil), cborText("stdout"), cborBytes(nil))
	}
	invalid("tool.run", "response", "file-name-bytes-utf8", "not-canonical", "a name that is valid UTF-8 MUST be a text string, not a byte string",
		fileResp(cborBytes([]byte("a.txt"))))
	invalid("tool.run", "response", "file-name-text-not-utf8", "invalid-utf8", "a name that is not UTF-8 cannot be a text string: it is a byte string",
		fileResp(append(cborHead(3, 8), "caf\xe9.txt"...)))
	invalid("tool.run", "response", "unhashed-empty", "not-canonical", `unhashed is omitempty: "" MUST be absent (and a file without a hash says why)`,
		cborCat(cborMap(4), cborText("exit"), cborUint(0), cborText("files"), cborArray(1),
			cborMap(3), cborText("path"), cborText("a"), cborText("size"), cborUint(1), cborText("unhashed"), cborText(""),
			cborText("stderr"), cborBytes(nil), cborText("stdout"), cborBytes(nil)))
	invalid("tool.run", "response", "file-keys-unsorted", "not-canonical", `a file's "sha256" (6 bytes) before "path" (4)`,
		cborCat(cborMap(4), cborText("exit"), cborUint(0), cborText("files"), cborArray(1),
			cborMap(3), cborText("sha256"), cborBytes(sha), cborText("path"), cborText("a"), cborText("size"), cborUint(1),
			cborText("stderr"), cborBytes(nil), cborText("stdout"), cborBytes(nil)))

	// Invalid: duplicate keys, unknown fields.
	invalid("kv.get", "request", "duplicate-key", "duplicate-key", "",
		cborCat(cborMap(2), cborText("key"), cborText("a"), cborText("key"), cborText("b")))
	invalid("kv.delete", "response", "duplicate-key", "duplicate-key", "",
		cborCat(cborMap(2), cborText("existed"), cborTrue, cborText("existed"), cborTrue))
	invalid("kv.get", "request", "unknown-field", "unknown-field", "a field v1 does not define, in canonical position",
		cborCat(cborMap(2), cborText("key"), cborText("a"), cborText("extra"), cborUint(1)))
	invalid("run.limit", "request", "missing-amount", "not-canonical", "amount is not omitempty: 0 MUST be written out",
		cborCat(cborMap(1), cborText("limits"), cborArray(1), cborMap(1), cborText("dim"), cborText("steps")))
	invalid("run.input", "response", "unknown-field", "unknown-field", "",
		cborCat(cborMap(2), cborText("input"), cborBytes([]byte("x")), cborText("input2"), cborBytes(nil)))
	invalid("kv.put", "error", "unknown-field", "unknown-field", "",
		cborCat(cborMap(3), cborText("code"), cborUint(8), cborText("detail"), cborText("x"), cborText("message"), cborText("")))

	// Invalid: indefinite lengths.
	invalid("kv.get", "request", "indefinite-map", "indefinite-length", "",
		cborCat(unhex("bf"), cborText("key"), cborText("a"), unhex("ff")))
	invalid("run.set_output", "request", "indefinite-bytes", "indefinite-length", "a chunked byte string",
		cborCat(cborMap(1), cborText("output"), unhex("5f41614162ff")))
	invalid("kv.list", "response", "indefinite-array", "indefinite-length", "",
		cborCat(cborMap(2), cborText("keys"), unhex("9f"), cborText("a"), unhex("ff"), cborText("more"), cborFalse))

	// Invalid: wrong types.
	invalid("kv.delete", "response", "int-for-bool", "wrong-type", "",
		cborCat(cborMap(1), cborText("existed"), cborUint(1)))
	invalid("random.bytes", "request", "text-for-uint", "wrong-type", "",
		cborCat(cborMap(1), cborText("n"), cborText("16")))
	invalid("random.bytes", "request", "negative", "wrong-type", "n is unsigned",
		cborCat(cborMap(1), cborText("n"), unhex("20")))
	invalid("http.request", "response", "status-overflow", "wrong-type", "status is a uint16; 70000 does not fit",
		cborCat(cborMap(3), cborText("body"), cborBytes(nil), cborText("status"), cborUint(70000), cborText("headers"), cborArray(0)))
	invalid("run.log", "request", "level-overflow", "wrong-type", "level is a uint8; 256 does not fit",
		cborCat(cborMap(2), cborText("msg"), cborText(""), cborText("level"), cborUint(256)))
	invalid("http.request", "response", "header-triple", "wrong-type", "a header is exactly [name, value]",
		cborCat(cborMap(3), cborText("body"), cborBytes(nil), cborText("status"), cborUint(200), cborText("headers"), cborArray(1), cborArray(3), cborText("a"), cborText("b"), cborText("c")))
	invalid("clock.now", "response", "float-for-int", "wrong-type", "1.0 as a float16 where an integer belongs",
		cborCat(cborMap(1), cborText("unix_nano"), unhex("f93c00")))
	invalid("kv.delete", "response", "undefined-for-bool", "not-canonical", "undefined (0xf7) is not a boolean; the Go decoder reads it as false, which re-encodes as 0xf4",
		cborCat(cborMap(1), cborText("existed"), unhex("f7")))
	invalid("kv.delete", "response", "float-for-bool", "wrong-type", "a float16 whose bits (0x0014) are those of the simple value false",
		cborCat(cborMap(1), cborText("existed"), unhex("f90014")))
	invalid("kv.get", "response", "text-for-bytes", "wrong-type", "value is a byte string",
		cborCat(cborMap(1), cborText("value"), cborText("1234")))
	invalid("kv.get", "request", "array-body", "wrong-type", "a body is a map",
		cborCat(cborArray(1), cborText("a")))
	invalid("tool.run", "response", "exit-as-text", "wrong-type", "exit is an integer",
		cborCat(cborMap(3), cborText("exit"), cborText("0"), cborText("stderr"), cborBytes(nil), cborText("stdout"), cborBytes(nil)))
	invalid("run.log", "error", "text-code", "wrong-type", "",
		cborCat(cborMap(2), cborText("code"), cborText("2"), cborText("message"), cborText("")))

	invalid("kv.delete", "response", "two-byte-false", "malformed", "false in the two-byte form (0xf8 0x14), which RFC 8949 makes not well-formed",
		cborCat(cborMap(1), cborText("existed"), unhex("f814")))

	// Invalid: text that is not UTF-8.
	invalid("run.log", "request", "invalid-utf8", "invalid-utf8", "0xff never occurs in UTF-8",
		cborCat(cborMap(2), cborText("msg"), unhex("62ff61"), cborText("level"), cborUint(1)))
	invalid("kv.list", "response", "invalid-utf8", "invalid-utf8", "an overlong encoding of '/'",
		cborCat(cborMap(2), cborText("keys"), cborArray(1), unhex("62c0af"), cborText("more"), cborFalse))

	// Invalid: truncated, trailing bytes, tags.
	invalid("kv.list", "request", "truncated", "truncated", "the text string ends early",
		cborCat(cborMap(1), cborText("prefix"), unhex("6561")))
	invalid("http.request", "response", "missing-pair", "truncated", "two of three pairs",
		cborCat(cborMap(3), cborText("body"), cborBytes(nil), cborText("status"), cborUint(200)))
	invalid("kv.get", "response", "trailing-bytes", "trailing-bytes", "a second item after the body",
		cborCat(cborMap(1), cborText("value"), cborBytes([]byte("v")), cborUint(0)))
	invalid("clock.now", "response", "tag", "tag", "tag 1 (epoch time) around the value",
		cborCat(cborMap(1), cborText("unix_nano"), unhex("c11a69000000")))
	invalid("kv.get", "request", "self-describe-tag", "tag", "tag 55799 (self-described CBOR) around the body",
		cborCat(unhex("d9d9f7"), cborMap(1), cborText("key"), cborText("a")))
	return out
}
