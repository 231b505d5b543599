package ctest

// The C loop controller, guest-sdk/c/agentrt_loop.h, built by clang into
// testdata/loop.c's agent and run under wazero against a host in this
// test: agentrt:run (run.limit), agentrt:llm (llm.complete, answered by a
// script per scenario) and agentrt:clock. The host decodes every request
// with the ABI's own codec, refuses one that is not canonical or that
// LLMRequest.Validate refuses, as the real host does, and keeps responses
// that do not fit pending for take. The scenarios are those of the Go
// SDK's loop tests (guest-sdk/agent/loop_test.go), with the same reasons,
// caps and fingerprints.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/internal/abivectors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// loopHost is the host of one run of the agent.
type loopHost struct {
	t        *testing.T
	model    func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *abi.Error)
	limitErr *abi.Error
	limits   []abi.LimitRequest
	calls    []abi.LLMRequest
	pending  []byte
	pendingS abi.Status
	// raw, when set, answers llm.complete with these bytes as they are.
	raw     *abi.Status
	rawBody []byte
}

// serve answers one call: a status and its body.
func (h *loopHost) serve(c abi.Capability, op uint32, req []byte) (abi.Status, any) {
	fail := func(e *abi.Error) (abi.Status, any) { return e.Code, e }
	decode := func(v any) *abi.Error {
		if err := abi.Unmarshal(req, v); err != nil {
			return &abi.Error{Code: abi.StatusBadRequest, Message: err.Error()}
		}
		// Strict decoding accepts the canonical form alone; check it
		// byte for byte anyway.
		if b, err := abi.Marshal(v); err != nil || !bytes.Equal(b, req) {
			return &abi.Error{Code: abi.StatusBadRequest, Message: fmt.Sprintf("request x%x is not canonical", req)}
		}
		return nil
	}
	switch {
	case c == abi.CapRun && op == abi.OpRunLimit:
		var r abi.LimitRequest
		if e := decode(&r); e != nil {
			return fail(e)
		}
		h.limits = append(h.limits, r)
		if h.limitErr != nil {
			return fail(h.limitErr)
		}
		return abi.StatusOK, &abi.LimitResponse{Ceilings: r.Limits}
	case c == abi.CapLLM && op == abi.OpLLMComplete && h.raw != nil:
		return *h.raw, rawBytes(h.rawBody)
	case c == abi.CapLLM && op == abi.OpLLMComplete:
		var r abi.LLMRequest
		if e := decode(&r); e != nil {
			return fail(e)
		}
		if err := r.Validate(); err != nil {
			return fail(&abi.Error{Code: abi.StatusBadRequest, Message: "llm.complete: " + err.Error()})
		}
		h.calls = append(h.calls, r)
		resp, e := h.model(len(h.calls)-1, &r)
		if e != nil {
			return fail(e)
		}
		return abi.StatusOK, resp
	}
	return fail(&abi.Error{Code: abi.StatusBadRequest, Message: fmt.Sprintf("%s: unknown op %d", c, op)})
}

// rawBytes is a body sent as it is, not encoded.
type rawBytes []byte

// current is the host of the run under way; the host modules call it.
var current *loopHost

func instantiateHost(ctx context.Context, t *testing.T, rt wazero.Runtime) {
	for _, c := range []abi.Capability{abi.CapRun, abi.CapLLM} {
		c := c
		_, err := rt.NewHostModuleBuilder(c.Module()).
			NewFunctionBuilder().WithFunc(func(ctx context.Context, m api.Module, op, reqPtr, reqLen, respPtr, respCap uint32) uint64 {
			req, ok := m.Memory().Read(reqPtr, reqLen)
			if !ok {
				panic("request outside memory")
			}
			status, body := current.serve(c, op, append([]byte(nil), req...))
			b, ok := body.(rawBytes)
			if !ok {
				var err error
				if b, err = abi.Marshal(body); err != nil {
					panic(err)
				}
			}
			if uint32(len(b)) > respCap {
				current.pending, current.pendingS = b, status
				return uint64(abi.Pack(abi.StatusPending, uint32(len(b))))
			}
			m.Memory().Write(respPtr, b)
			return uint64(abi.Pack(status, uint32(len(b))))
		}).Export("call").
			NewFunctionBuilder().WithFunc(func(ctx context.Context, m api.Module, respPtr, respCap uint32) uint64 {
			b := current.pending
			if b == nil {
				return uint64(abi.Pack(abi.StatusNoPending, 0))
			}
			current.pending = nil
			m.Memory().Write(respPtr, b)
			return uint64(abi.Pack(current.pendingS, uint32(len(b))))
		}).Export("take").
			Instantiate(ctx)
		if err != nil {
			t.Fatal(err)
		}
	}
}

// loopAgent builds testdata/loop.c and a runtime with the host's modules.
func loopAgent(t *testing.T) (context.Context, wazero.Runtime, wazero.CompiledModule) {
	t.Helper()
	ctx := context.Background()
	wasm := build(t, filepath.Join(t.TempDir(), "loop.wasm"), []string{"testdata/loop.c"},
		append([]string{"-DAGENTRT_RESPONSE_HINT=64"}, strict...)...)
	rt := wazero.NewRuntime(ctx)
	t.Cleanup(func() { rt.Close(ctx) })
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	instantiateHost(ctx, t, rt)
	mod, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	// A loop imports run (run.limit) and llm; clock only with
	// agentrt_clock_now as its clock, which this agent does not pass.
	var imports []string
	for _, f := range mod.ImportedFunctions() {
		if m, name, _ := f.Import(); strings.HasPrefix(m, abi.ModulePrefix) {
			imports = append(imports, m+"."+name)
		}
	}
	slices.Sort(imports)
	if want := []string{"agentrt:llm.call", "agentrt:llm.take", "agentrt:run.call", "agentrt:run.take"}; !slices.Equal(imports, want) {
		t.Errorf("the loop agent imports %v, want %v", imports, want)
	}
	return ctx, rt, mod
}

// runAgent runs the agent on scenario with h as its host and returns what
// it printed, as fields.
func runAgent(t *testing.T, ctx context.Context, rt wazero.Runtime, mod wazero.CompiledModule, h *loopHost, scenario string, stdin []byte) map[string]string {
	t.Helper()
	current = h
	var stdout, stderr bytes.Buffer
	cfg := wazero.NewModuleConfig().WithArgs("loop", scenario).WithStdout(&stdout).WithStderr(&stderr).
		WithStdin(bytes.NewReader(stdin)).WithName("")
	m, err := rt.InstantiateModule(ctx, mod, cfg)
	var exit *sys.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 0) {
		t.Fatalf("%s: %v\nstderr: %s", scenario, err, stderr.String())
	}
	if m != nil {
		m.Close(ctx)
	}
	out := map[string]string{"": stdout.String()}
	for _, f := range strings.Fields(stdout.String()) {
		k, v, _ := strings.Cut(f, "=")
		if k == "text" || k == "detail" || k == "error" {
			b, err := hex.DecodeString(v)
			if err != nil {
				t.Fatalf("%s: field %s: %v", scenario, k, err)
			}
			v = string(b)
		}
		out[k] = v
	}
	return out
}

// text and callTool are answers as the host gives them, naming the
// provider and the credential's id.
func text(s string, usage abi.LLMUsage) *abi.LLMResponse {
	return &abi.LLMResponse{ID: "r", Model: "m", Usage: usage, StopReason: abi.StopEnd, Content: []abi.LLMPart{{Type: abi.PartText, Text: s}},
		Provider: "fake", Credential: "env:FAKE_KEY"}
}

func callTool(id, name, args string, usage abi.LLMUsage) *abi.LLMResponse {
	return &abi.LLMResponse{ID: "r", Model: "m", Usage: usage, StopReason: abi.StopToolUse,
		Content: []abi.LLMPart{{Type: abi.PartToolCall, ID: id, Name: name, Arguments: []byte(args)}}, Provider: "fake", Credential: "env:FAKE_KEY"}
}

func budget(msg string) *abi.Error { return &abi.Error{Code: abi.StatusBudget, Message: msg} }

// lastUser returns the parts of the last message of req, the user's.
func lastUser(t *testing.T, req abi.LLMRequest) []abi.LLMPart {
	t.Helper()
	m := req.Messages[len(req.Messages)-1]
	if m.Role != abi.RoleUser {
		t.Fatalf("the last message is the %s's, want the user's", m.Role)
	}
	return m.Content
}

// concluding checks that req is a concluding call naming reason: no
// tools, no tool parts, the note last.
func concluding(t *testing.T, req abi.LLMRequest, reason string) {
	t.Helper()
	if req.Tools != nil {
		t.Errorf("the concluding call offers %d tools, want none", len(req.Tools))
	}
	for i, m := range req.Messages {
		for _, p := range m.Content {
			if p.Type != abi.PartText {
				t.Errorf("message %d of the concluding call holds a %s part, want text alone", i, p.Type)
			}
		}
	}
	parts := lastUser(t, req)
	note := parts[len(parts)-1]
	if note.Type != abi.PartText || !strings.Contains(note.Text, "Give your final answer now") || !strings.Contains(note.Text, "(the loop stopped ("+reason) {
		t.Errorf("the concluding note is %+v, want the final-answer note naming %s", note, reason)
	}
}

// TestCLoop builds the agent once and runs its scenarios, a host that
// refuses the caps, and the fingerprint vectors.
func TestCLoop(t *testing.T) {
	ctx, rt, mod := loopAgent(t)
	t.Run("scenarios", func(t *testing.T) { scenarios(t, ctx, rt, mod) })
	t.Run("limit-refused", func(t *testing.T) { limitRefused(t, ctx, rt, mod) })
	t.Run("fingerprints", func(t *testing.T) { fingerprints(t, ctx, rt, mod) })
	t.Run("llm-vectors", func(t *testing.T) { llmVectors(t, ctx, rt, mod) })
}

// llmVectors answers agentrt_llm_complete with every llm.complete
// response and error vector of abi/testdata/llm: the C SDK reads a valid
// one as the Go codec does and refuses an invalid one.
func llmVectors(t *testing.T, ctx context.Context, rt wazero.Runtime, mod wazero.CompiledModule) {
	vs, err := abivectors.Read(filepath.Join("..", "..", "..", "abi", "testdata", "llm"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range vs {
		if v.Op != "llm.complete" || (v.Kind != "response" && v.Kind != "error") {
			continue
		}
		n++
		t.Run(v.File, func(t *testing.T) {
			status := abi.StatusOK
			want := ""
			switch {
			case v.Kind == "error":
				var e abi.Error
				if err := abi.Unmarshal(v.Data, &e); err != nil {
					t.Fatal(err)
				}
				status = e.Code
				want = fmt.Sprintf("status=%s error=%x\n", e.Code, e.Message)
			case v.Expect != "valid":
				want = fmt.Sprintf("status=sdk_malformed error=%x\n", "malformed llm.complete response")
			default:
				var r abi.LLMResponse
				if err := abi.Unmarshal(v.Data, &r); err != nil {
					t.Fatal(err)
				}
				u := r.Usage
				want = fmt.Sprintf("ok id=%x model=%x stop=%x provider=%x credential=%x usage=%d/%d/%d/%d/%d",
					r.ID, r.Model, r.StopReason, r.Provider, r.Credential, u.Input, u.Output, u.Reasoning, u.CacheRead, u.CacheWrite)
				for _, p := range r.Content {
					want += fmt.Sprintf(" part=%s,%x,%x,%x,%x", p.Type, p.ID, p.Name, p.Text, p.Arguments)
				}
				want += "\n"
			}
			h := &loopHost{t: t, raw: &status, rawBody: v.Data}
			if out := runAgent(t, ctx, rt, mod, h, "complete", nil); out[""] != want {
				t.Errorf("%s (%s): the C SDK printed\n%s want\n%s", v.File, v.Comment, out[""], want)
			}
		})
	}
	if n < 5 {
		t.Errorf("%d llm.complete response and error vectors, want the directory's", n)
	}
	// Bodies the Go codec refuses, which the C SDK must refuse too: a zero
	// omitempty field written out, and a truncated body.
	type zeroUsage struct {
		Input     uint64 `cbor:"input"`
		Output    uint64 `cbor:"output"`
		Reasoning uint64 `cbor:"reasoning"`
	}
	type response struct {
		ID         string        `cbor:"id"`
		Model      string        `cbor:"model"`
		Usage      zeroUsage     `cbor:"usage"`
		Content    []abi.LLMPart `cbor:"content"`
		StopReason string        `cbor:"stop_reason"`
	}
	zero, err := abi.Marshal(&response{ID: "r", Model: "m", Content: []abi.LLMPart{{Type: abi.PartText, Text: "hi"}}, StopReason: "end"})
	if err != nil {
		t.Fatal(err)
	}
	good, err := abi.Marshal(text("hi", abi.LLMUsage{Input: 1}))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"zero-reasoning": zero, "truncated": good[:len(good)-1]} {
		if abi.Unmarshal(b, new(abi.LLMResponse)) == nil {
			t.Fatalf("%s: the Go codec accepts it", name)
		}
		ok := abi.StatusOK
		h := &loopHost{t: t, raw: &ok, rawBody: b}
		if out := runAgent(t, ctx, rt, mod, h, "complete", nil); out["status"] != "sdk_malformed" {
			t.Errorf("%s: the C SDK printed %q, want sdk_malformed", name, out[""])
		}
	}
}

func scenarios(t *testing.T, ctx context.Context, rt wazero.Runtime, mod wazero.CompiledModule) {
	schema := []byte(`{"type":"object","properties":{"q":{"type":"string"}}}`)
	tools := []abi.LLMTool{{Name: "search", Schema: schema}, {Name: "fetch", Schema: schema}}
	// distinct asks for search with arguments of its own each turn, and
	// answers final once the tools are gone.
	distinct := func(final string, usage abi.LLMUsage) func(int, *abi.LLMRequest) (*abi.LLMResponse, *abi.Error) {
		return func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *abi.Error) {
			if req.Tools == nil {
				return text(final, abi.LLMUsage{Input: 10, Output: 3}), nil
			}
			return callTool(fmt.Sprint("c", i), "search", fmt.Sprintf(`{"q":"page %d"}`, i), usage), nil
		}
	}
	for _, c := range []struct {
		scenario string
		model    func(int, *abi.LLMRequest) (*abi.LLMResponse, *abi.Error)
		want     map[string]string
		check    func(t *testing.T, h *loopHost, out map[string]string)
	}{
		{
			scenario: "done",
			model: func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *abi.Error) {
				if i == 0 {
					return callTool("c1", "search", `{"q":"agentrt"}`, abi.LLMUsage{Input: 50, Output: 10}), nil
				}
				return text("a runtime", abi.LLMUsage{Input: 80, Output: 5, CacheRead: 20}), nil
			},
			want: map[string]string{"status": "ok", "reason": "done", "concluded": "0", "iterations": "2", "tool_calls": "1", "runs": "1",
				"usage": "130/15/20", "text": "a runtime"},
			check: func(t *testing.T, h *loopHost, _ map[string]string) {
				limits := []abi.LimitRequest{{Limits: []abi.BudgetLimit{{Dim: "model_calls", Amount: 11}, {Dim: "input_tokens", Amount: 100000},
					{Dim: "output_tokens", Amount: 1000}, {Dim: "micro_usd", Amount: 5000}}}}
				if !reflect.DeepEqual(h.limits, limits) {
					t.Errorf("run.limit got %+v, want %+v", h.limits, limits)
				}
				first := h.calls[0]
				if first.Model != "m" || first.MaxOutputTokens != 100 || !reflect.DeepEqual(first.Tools, tools) || len(first.Messages) != 2 {
					t.Errorf("the first call is %+v, want the config's request and tools", first)
				}
				got := h.calls[1].Messages[2:]
				want := []abi.LLMMessage{
					{Role: abi.RoleAssistant, Content: []abi.LLMPart{{Type: abi.PartToolCall, ID: "c1", Name: "search", Arguments: []byte(`{"q":"agentrt"}`)}}},
					{Role: abi.RoleUser, Content: []abi.LLMPart{{Type: abi.PartToolResult, ID: "c1", Text: `search {"q":"agentrt"}`}}},
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("the second call's new messages are %+v, want %+v", got, want)
				}
			},
		},
		{
			scenario: "max_iterations",
			model:    distinct("what I found", abi.LLMUsage{Input: 10, Output: 1}),
			want: map[string]string{"status": "ok", "reason": "max_iterations", "concluded": "1", "iterations": "3", "tool_calls": "3", "runs": "3",
				"usage": "40/6/0", "text": "what I found", "detail": "3 iterations of 3"},
			check: func(t *testing.T, h *loopHost, _ map[string]string) {
				if len(h.calls) != 4 {
					t.Fatalf("%d model calls, want 4", len(h.calls))
				}
				concluding(t, h.calls[3], "max_iterations: 3 iterations of 3")
				if parts := lastUser(t, h.calls[3]); len(parts) != 1 {
					t.Errorf("the concluding message has %d parts, want the note alone", len(parts))
				}
				if got := h.limits[0].Limits[0]; got != (abi.BudgetLimit{Dim: "model_calls", Amount: 4}) {
					t.Errorf("run.limit's first limit is %+v, want model_calls 4", got)
				}
			},
		},
		{
			scenario: "max_tool_calls",
			model:    distinct("partial", abi.LLMUsage{}),
			want:     map[string]string{"status": "ok", "reason": "max_tool_calls", "concluded": "1", "iterations": "3", "tool_calls": "2", "runs": "2", "text": "partial"},
			check: func(t *testing.T, h *loopHost, _ map[string]string) {
				last := h.calls[len(h.calls)-1]
				concluding(t, last, "max_tool_calls")
				if r := lastUser(t, last)[0]; r.Text != "[tool result c2, failed: not run: the loop stopped (max_tool_calls: 1 tool calls asked with 2 made of 2)]" {
					t.Errorf("the unanswered call c2 is answered with %+v, want a failed result saying it did not run", r)
				}
				// The steps that ran are the conversation's text, as the Go SDK writes it.
				want := []abi.LLMMessage{
					{Role: abi.RoleAssistant, Content: []abi.LLMPart{{Type: abi.PartText, Text: `[tool call c0: search {"q":"page 0"}]`}}},
					{Role: abi.RoleUser, Content: []abi.LLMPart{{Type: abi.PartText, Text: `[tool result c0: search {"q":"page 0"}]`}}},
				}
				if got := last.Messages[2:4]; !reflect.DeepEqual(got, want) {
					t.Errorf("the concluding call's first step is %+v, want %+v", got, want)
				}
			},
		},
		{
			scenario: "repeat",
			model: func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *abi.Error) {
				if req.Tools == nil {
					return text("stuck", abi.LLMUsage{}), nil
				}
				args := []string{`{"q":"x","n":1}`, `{ "n": 1, "q": "x" }`, "{\"n\":1,\n\"q\":\"x\"}"}
				return callTool(fmt.Sprint("c", i), "search", args[i], abi.LLMUsage{}), nil
			},
			want: map[string]string{"status": "ok", "reason": "repeat", "concluded": "1", "tool_calls": "2", "runs": "2", "text": "stuck",
				"detail": "search asked a third time with the same arguments"},
			check: func(t *testing.T, h *loopHost, _ map[string]string) { concluding(t, h.calls[3], "repeat") },
		},
		{
			scenario: "ping_pong",
			model: func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *abi.Error) {
				if req.Tools == nil {
					return text("going round", abi.LLMUsage{}), nil
				}
				return callTool(fmt.Sprint("c", i), []string{"search", "fetch"}[i%2], `{"q":"x"}`, abi.LLMUsage{}), nil
			},
			want:  map[string]string{"status": "ok", "reason": "ping_pong", "concluded": "1", "tool_calls": "3", "runs": "3", "text": "going round"},
			check: func(t *testing.T, h *loopHost, _ map[string]string) { concluding(t, h.calls[4], "ping_pong") },
		},
		{
			scenario: "batch",
			model: func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *abi.Error) {
				if req.Tools == nil {
					return text("done", abi.LLMUsage{}), nil
				}
				r := callTool(fmt.Sprint("a", i), "search", `{"q":"x"}`, abi.LLMUsage{})
				r.Content = append(r.Content, abi.LLMPart{Type: abi.PartToolCall, ID: fmt.Sprint("b", i), Name: "fetch", Arguments: []byte(`{"q":"y"}`)})
				return r, nil
			},
			want: map[string]string{"status": "ok", "reason": "ping_pong", "tool_calls": "2", "runs": "2"},
			check: func(t *testing.T, h *loopHost, _ map[string]string) {
				parts := lastUser(t, h.calls[2])
				if len(parts) != 3 || !strings.HasPrefix(parts[0].Text, "[tool result a1, failed: not run: ") || !strings.HasPrefix(parts[1].Text, "[tool result b1, failed: not run: ") {
					t.Errorf("the concluding message is %+v, want both calls of the refused batch answered as not run, then the note", parts)
				}
				concluding(t, h.calls[2], "ping_pong")
			},
		},
		{
			scenario: "max_output_tokens",
			model:    distinct("short", abi.LLMUsage{Output: 100}),
			want:     map[string]string{"status": "ok", "reason": "max_tokens", "concluded": "1", "iterations": "2", "usage": "10/203/0"},
		},
		{
			scenario: "max_input_tokens",
			model:    distinct("short", abi.LLMUsage{Input: 2000, CacheRead: 1000}),
			want:     map[string]string{"status": "ok", "reason": "max_tokens", "concluded": "1", "iterations": "2"},
			check: func(t *testing.T, _ *loopHost, out map[string]string) {
				if !strings.HasPrefix(out["detail"], "6000 input tokens used of 6500") {
					t.Errorf("detail %q, want the input used and the cap", out["detail"])
				}
			},
		},
		{
			scenario: "max_wall",
			model:    distinct("late", abi.LLMUsage{}),
			want:     map[string]string{"status": "ok", "reason": "max_wall", "concluded": "1", "iterations": "2", "detail": "3000000000 ns elapsed of 2500000000"},
			check: func(t *testing.T, h *loopHost, _ map[string]string) {
				if got := h.limits[0].Limits[1]; got != (abi.BudgetLimit{Dim: "wall_seconds", Amount: 3}) {
					t.Errorf("run.limit got %+v, want wall_seconds 3", got)
				}
			},
		},
		{
			scenario: "budget_tokens",
			model: func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *abi.Error) {
				if i == 0 {
					return callTool("c0", "search", `{}`, abi.LLMUsage{Input: 5}), nil
				}
				return nil, budget("llm.complete: budget exceeded: input_tokens: asked 900, 100 left of 1000 (900 spent, 0 reserved)")
			},
			want: map[string]string{"status": "ok", "reason": "budget", "concluded": "0", "iterations": "2", "text": "c0",
				"detail": "llm.complete: budget exceeded: input_tokens: asked 900, 100 left of 1000 (900 spent, 0 reserved)"},
			check: func(t *testing.T, h *loopHost, _ map[string]string) {
				if len(h.calls) != 2 {
					t.Errorf("%d model calls, want 2 (none after the refusal)", len(h.calls))
				}
			},
		},
		{
			scenario: "budget_money",
			model: func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *abi.Error) {
				return nil, budget("llm.complete: budget exceeded: micro_usd: asked $0.002, $0.001 left of $0.005")
			},
			want: map[string]string{"status": "ok", "reason": "max_money", "concluded": "0", "iterations": "1", "text": ""},
		},
		{
			scenario: "conclusion_refused",
			model: func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *abi.Error) {
				if req.Tools == nil {
					return nil, budget("llm.complete: budget exceeded: model_calls: asked 1, 0 left of 2 (2 spent, 0 reserved)")
				}
				return callTool("c", "search", fmt.Sprint(i), abi.LLMUsage{}), nil
			},
			want: map[string]string{"status": "ok", "reason": "max_iterations", "concluded": "0", "text": "c",
				"detail": "1 iterations of 1; the host refused the concluding call: budget: llm.complete: budget exceeded: model_calls: asked 1, 0 left of 2 (2 spent, 0 reserved)"},
		},
		{
			scenario: "tool_errors",
			model: func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *abi.Error) {
				return callTool(fmt.Sprint("c", i), []string{"search", "missing", "fetch"}[i], `{}`, abi.LLMUsage{}), nil
			},
			want: map[string]string{"status": "ok", "reason": "budget", "iterations": "3", "runs": "2"},
			check: func(t *testing.T, h *loopHost, _ map[string]string) {
				want := []abi.LLMPart{{Type: abi.PartToolResult, ID: "c0", Text: "index offline", IsError: true}}
				if got := lastUser(t, h.calls[1]); !reflect.DeepEqual(got, want) {
					t.Errorf("the failed tool's result is %+v, want %+v", got, want)
				}
				want = []abi.LLMPart{{Type: abi.PartToolResult, ID: "c1", Text: `no tool named "missing" (tools: fetch, search)`, IsError: true}}
				if got := lastUser(t, h.calls[2]); !reflect.DeepEqual(got, want) {
					t.Errorf("the unknown tool's result is %+v, want %+v", got, want)
				}
			},
		},
		{
			scenario: "done_predicate",
			model: func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *abi.Error) {
				return text(fmt.Sprint("draft ", i), abi.LLMUsage{Output: 1}), nil
			},
			want: map[string]string{"status": "ok", "reason": "done", "iterations": "3", "text": "draft 2", "concluded": "0"},
		},
		{
			scenario: "no_iterations",
			want:     map[string]string{"status": "sdk_invalid", "error": "agentrt_loop: max_iterations is 0: a loop needs a bound on its steps (set it to 1 or more)"},
		},
		{
			scenario: "wall_without_clock",
			want: map[string]string{"status": "sdk_invalid", "error": "agentrt_loop: max_wall_ns needs a clock: set clock to agentrt_clock_now (the clock capability); " +
				"the WASI clock is the virtual one, which does not advance while the host waits"},
		},
		{
			scenario: "output_too_small",
			want: map[string]string{"status": "sdk_invalid", "error": "agentrt_loop: max_output_tokens 150 leaves no room for one step and the concluding call, " +
				"of request.max_output_tokens 100 each: raise it to 200 or lower request.max_output_tokens"},
		},
		{
			scenario: "input_too_small",
			want:     map[string]string{"status": "sdk_invalid"},
			check: func(t *testing.T, _ *loopHost, out map[string]string) {
				if !strings.HasPrefix(out["error"], "agentrt_loop: max_input_tokens 10 leaves no room") {
					t.Errorf("error %q, want the input cap refused", out["error"])
				}
			},
		},
	} {
		t.Run(c.scenario, func(t *testing.T) {
			h := &loopHost{t: t, model: c.model}
			if h.model == nil {
				h.model = func(int, *abi.LLMRequest) (*abi.LLMResponse, *abi.Error) { return text("x", abi.LLMUsage{}), nil }
			}
			out := runAgent(t, ctx, rt, mod, h, c.scenario, nil)
			for k, want := range c.want {
				if out[k] != want {
					t.Errorf("%s = %q, want %q (the agent printed %q)", k, out[k], want, out[""])
				}
			}
			if out["status"] == "sdk_invalid" && (len(h.limits) != 0 || len(h.calls) != 0) {
				t.Errorf("%d run.limit and %d model calls sent for a config refused, want none", len(h.limits), len(h.calls))
			}
			if c.check != nil {
				c.check(t, h, out)
			}
		})
	}
}

// A host that does not take the caps runs no loop.
func limitRefused(t *testing.T, ctx context.Context, rt wazero.Runtime, mod wazero.CompiledModule) {
	h := &loopHost{t: t, limitErr: &abi.Error{Code: abi.StatusBadRequest, Message: "run: unknown op 6"},
		model: func(int, *abi.LLMRequest) (*abi.LLMResponse, *abi.Error) { return text("x", abi.LLMUsage{}), nil }}
	out := runAgent(t, ctx, rt, mod, h, "limit_refused", nil)
	if out["status"] != "bad_request" || out["error"] != "agentrt_loop: the host did not take the loop's caps (run.limit): run: unknown op 6" {
		t.Errorf("the agent printed %q, want the host's refusal of run.limit", out[""])
	}
	if len(h.calls) != 0 {
		t.Errorf("%d model calls, want none", len(h.calls))
	}
}

// fingerprints runs the Go SDK's fingerprint vectors through
// agentrt_fingerprint: the C loop and the Go loop name calls alike.
func fingerprints(t *testing.T, ctx context.Context, rt wazero.Runtime, mod wazero.CompiledModule) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "guest-sdk", "agent", "testdata", "fingerprints.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var in bytes.Buffer
	var want []string
	var notes []string
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		var v [4]string
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&in, "%x %x\n", v[0], v[1])
		fp := sha256.Sum256([]byte(v[0] + "\x00" + v[2]))
		want = append(want, "fp="+hex.EncodeToString(fp[:]))
		notes = append(notes, v[3])
	}
	out := runAgent(t, ctx, rt, mod, &loopHost{t: t}, "fingerprints", in.Bytes())
	got := strings.Fields(out[""])
	if len(got) != len(want) {
		t.Fatalf("%d fingerprints printed, want %d:\n%s", len(got), len(want), out[""])
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("vector %d (%s): C gives %s, want %s", i+1, notes[i], got[i], want[i])
		}
	}
}
