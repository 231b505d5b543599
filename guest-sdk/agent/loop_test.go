//go:build !wasip1

package agent

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/guest-sdk/abi"
)

// The loop against the fake host (fakehost_test.go): every model call and
// run.limit crosses the transport as the ABI's bytes and is decoded, and
// validated, as the host does. Each test scripts the model's answers.

// model scripts the fake host's llm.complete: turn i (from 0) is answered
// by answer(i, req). It resets what the host recorded.
func model(t *testing.T, answer func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *fakeError)) {
	t.Helper()
	h := testHost
	h.limits, h.limitErr, h.llmCalls = nil, nil, nil
	h.llm = func(req *abi.LLMRequest) (*abi.LLMResponse, *fakeError) {
		return answer(len(h.llmCalls)-1, req)
	}
	t.Cleanup(func() { h.llm, h.limits, h.limitErr, h.llmCalls = nil, nil, nil, nil })
}

func text(s string, usage LLMUsage) *abi.LLMResponse {
	return &abi.LLMResponse{ID: "r", Model: "m", Usage: usage, StopReason: abi.StopEnd, Content: []LLMPart{{Type: abi.PartText, Text: s}}}
}

func callTool(id, name, args string, usage LLMUsage) *abi.LLMResponse {
	return &abi.LLMResponse{ID: "r", Model: "m", Usage: usage, StopReason: abi.StopToolUse,
		Content: []LLMPart{{Type: abi.PartToolCall, ID: id, Name: name, Arguments: []byte(args)}}}
}

var schema = []byte(`{"type":"object","properties":{"q":{"type":"string"}}}`)

func config() LoopConfig {
	return LoopConfig{
		Request: LLMRequest{Model: "m", MaxOutputTokens: 100,
			Tools: []LLMTool{{Name: "search", Schema: schema}, {Name: "fetch", Schema: schema}},
			Messages: []LLMMessage{
				{Role: abi.RoleSystem, Content: []LLMPart{{Type: abi.PartText, Text: "You research."}}},
				{Role: abi.RoleUser, Content: []LLMPart{{Type: abi.PartText, Text: "What is agentrt?"}}},
			}},
		MaxIterations: 10,
	}
}

// counted returns tools whose calls are counted in *n, each answering
// "<name> <arguments>".
func counted(n *int) map[string]ToolFunc {
	f := func(name string) ToolFunc {
		return func(_ context.Context, args []byte) (string, error) {
			*n++
			return name + " " + string(args), nil
		}
	}
	return map[string]ToolFunc{"search": f("search"), "fetch": f("fetch")}
}

// lastUser returns the parts of the last message of req, which must be the
// user's.
func lastUser(t *testing.T, req abi.LLMRequest) []LLMPart {
	t.Helper()
	m := req.Messages[len(req.Messages)-1]
	if m.Role != abi.RoleUser {
		t.Fatalf("the last message is the %s's, want the user's", m.Role)
	}
	return m.Content
}

// checkConcluding checks that req is a concluding call: no tools, no tool
// parts, and a last user message ending with the note naming reason.
func checkConcluding(t *testing.T, req abi.LLMRequest, reason LoopReason) {
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
	if note.Type != abi.PartText || !strings.Contains(note.Text, "Give your final answer now") || !strings.Contains(note.Text, "("+reason.String()) {
		t.Errorf("the concluding note is %+v, want the final-answer note naming %s", note, reason)
	}
}

func TestLoopDone(t *testing.T) {
	model(t, func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *fakeError) {
		if i == 0 {
			return callTool("c1", "search", `{"q":"agentrt"}`, LLMUsage{Input: 50, Output: 10}), nil
		}
		return text("a runtime", LLMUsage{Input: 80, Output: 5, CacheRead: 20}), nil
	})
	cfg := config()
	cfg.MaxInputTokens, cfg.MaxOutputTokens, cfg.MaxMicroUSD = 100000, 1000, 5000
	var runs int
	res, err := Loop(context.Background(), cfg, ToolStep(counted(&runs)))
	if err != nil {
		t.Fatal(err)
	}
	want := &LoopResult{Reason: LoopDone, Response: text("a runtime", LLMUsage{Input: 80, Output: 5, CacheRead: 20}),
		Iterations: 2, ToolCalls: 1, Usage: LLMUsage{Input: 130, Output: 15, CacheRead: 20}}
	if !reflect.DeepEqual(res, want) {
		t.Errorf("result %+v, want %+v", res, want)
	}
	if runs != 1 {
		t.Errorf("the tool ran %d times, want 1", runs)
	}
	limits := []abi.LimitRequest{{Limits: []BudgetLimit{{Dim: "model_calls", Amount: 11}, {Dim: "input_tokens", Amount: 100000},
		{Dim: "output_tokens", Amount: 1000}, {Dim: "micro_usd", Amount: 5000}}}}
	if !reflect.DeepEqual(testHost.limits, limits) {
		t.Errorf("run.limit got %+v, want %+v", testHost.limits, limits)
	}
	calls := testHost.llmCalls
	if len(calls) != 2 {
		t.Fatalf("%d model calls, want 2", len(calls))
	}
	// The second call carries the answer and the tool's result.
	got := calls[1].Messages[2:]
	wantMsgs := []LLMMessage{
		{Role: abi.RoleAssistant, Content: []LLMPart{{Type: abi.PartToolCall, ID: "c1", Name: "search", Arguments: []byte(`{"q":"agentrt"}`)}}},
		{Role: abi.RoleUser, Content: []LLMPart{{Type: abi.PartToolResult, ID: "c1", Text: `search {"q":"agentrt"}`}}},
	}
	if !reflect.DeepEqual(got, wantMsgs) {
		t.Errorf("the second call's new messages are %+v, want %+v", got, wantMsgs)
	}
	if len(calls[1].Tools) != 2 {
		t.Errorf("the second call offers %d tools, want 2", len(calls[1].Tools))
	}
}

func TestLoopMaxIterations(t *testing.T) {
	model(t, func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *fakeError) {
		if req.Tools == nil {
			return text("what I found", LLMUsage{Input: 10, Output: 3}), nil
		}
		return callTool(fmt.Sprint("c", i), "search", fmt.Sprintf(`{"q":"page %d"}`, i), LLMUsage{Input: 10, Output: 1}), nil
	})
	cfg := config()
	cfg.MaxIterations = 3
	var runs int
	res, err := Loop(context.Background(), cfg, ToolStep(counted(&runs)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != LoopMaxIterations || !res.Concluded || res.Response.Text() != "what I found" || res.Iterations != 3 || res.ToolCalls != 3 {
		t.Errorf("result %+v, want max_iterations after 3, concluded with %q", res, "what I found")
	}
	if runs != 3 || len(testHost.llmCalls) != 4 {
		t.Errorf("%d tool runs and %d model calls, want 3 and 4", runs, len(testHost.llmCalls))
	}
	if got := res.Usage; got != (LLMUsage{Input: 40, Output: 6}) {
		t.Errorf("usage %+v, want every call's, the concluding one included", got)
	}
	last := testHost.llmCalls[3]
	checkConcluding(t, last, LoopMaxIterations)
	// Every tool call was answered, so the note is all the last message holds.
	if parts := lastUser(t, last); len(parts) != 1 {
		t.Errorf("the concluding message has %d parts, want the note alone", len(parts))
	}
	if got := testHost.limits[0].Limits[0]; got != (BudgetLimit{Dim: "model_calls", Amount: 4}) {
		t.Errorf("run.limit's first limit is %+v, want model_calls 4 (3 steps and the concluding call)", got)
	}
}

// The batch that would exceed MaxToolCalls does not run, and the concluding
// call tells the model so.
func TestLoopMaxToolCalls(t *testing.T) {
	model(t, func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *fakeError) {
		if req.Tools == nil {
			return text("partial", LLMUsage{}), nil
		}
		return callTool(fmt.Sprint("c", i), "fetch", fmt.Sprintf(`{"q":"%d"}`, i), LLMUsage{}), nil
	})
	cfg := config()
	cfg.MaxToolCalls = 2
	var runs int
	res, err := Loop(context.Background(), cfg, ToolStep(counted(&runs)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != LoopMaxToolCalls || !res.Concluded || res.ToolCalls != 2 || res.Iterations != 3 {
		t.Errorf("result %+v, want max_tool_calls with 2 calls after 3 steps", res)
	}
	if runs != 2 {
		t.Errorf("the tools ran %d times, want 2", runs)
	}
	last := testHost.llmCalls[len(testHost.llmCalls)-1]
	checkConcluding(t, last, LoopMaxToolCalls)
	parts := lastUser(t, last)
	if r := parts[0]; r.Text != "[tool result c2, failed: not run: the loop stopped (max_tool_calls: 1 tool calls asked with 2 made of 2)]" {
		t.Errorf("the unanswered call c2 is answered with %+v, want a failed result saying it did not run", r)
	}
	// The calls that ran, and their results, are the conversation's text.
	want := []LLMMessage{
		{Role: abi.RoleAssistant, Content: []LLMPart{{Type: abi.PartText, Text: `[tool call c0: fetch {"q":"0"}]`}}},
		{Role: abi.RoleUser, Content: []LLMPart{{Type: abi.PartText, Text: `[tool result c0: fetch {"q":"0"}]`}}},
	}
	if got := last.Messages[2:4]; !reflect.DeepEqual(got, want) {
		t.Errorf("the concluding call's first step is %+v, want %+v", got, want)
	}
}

// The same call three times, however its JSON is spaced and ordered, is a
// repeat; the third does not run.
func TestLoopRepeat(t *testing.T) {
	args := []string{`{"q":"x","n":1}`, `{ "n": 1, "q": "x" }`, "{\"n\":1,\n\"q\":\"x\"}"}
	model(t, func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *fakeError) {
		if req.Tools == nil {
			return text("stuck", LLMUsage{}), nil
		}
		return callTool(fmt.Sprint("c", i), "search", args[i], LLMUsage{}), nil
	})
	var runs int
	res, err := Loop(context.Background(), config(), ToolStep(counted(&runs)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != LoopRepeat || !res.Concluded || runs != 2 || res.ToolCalls != 2 {
		t.Errorf("result %+v after %d runs, want repeat after 2", res, runs)
	}
	if !strings.Contains(res.Detail, `search asked a third time with the same arguments {"n":1,"q":"x"}`) {
		t.Errorf("detail %q does not name the call", res.Detail)
	}
	checkConcluding(t, testHost.llmCalls[3], LoopRepeat)
}

// A, B, A, B is a ping-pong: the fourth call does not run.
func TestLoopPingPong(t *testing.T) {
	model(t, func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *fakeError) {
		if req.Tools == nil {
			return text("going round", LLMUsage{}), nil
		}
		return callTool(fmt.Sprint("c", i), []string{"search", "fetch"}[i%2], `{"q":"x"}`, LLMUsage{}), nil
	})
	var runs int
	res, err := Loop(context.Background(), config(), ToolStep(counted(&runs)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != LoopPingPong || !res.Concluded || runs != 3 {
		t.Errorf("result %+v after %d runs, want ping_pong after 3", res, runs)
	}
	checkConcluding(t, testHost.llmCalls[4], LoopPingPong)
}

// Two calls in one answer count as two, in order: [A, B] then [A, B] is a
// ping-pong too, and the second batch does not run at all.
func TestLoopBatchAdmittedWhole(t *testing.T) {
	model(t, func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *fakeError) {
		if req.Tools == nil {
			return text("done", LLMUsage{}), nil
		}
		r := callTool(fmt.Sprint("a", i), "search", `{"q":"x"}`, LLMUsage{})
		r.Content = append(r.Content, LLMPart{Type: abi.PartToolCall, ID: fmt.Sprint("b", i), Name: "fetch", Arguments: []byte(`{"q":"y"}`)})
		return r, nil
	})
	var runs int
	res, err := Loop(context.Background(), config(), ToolStep(counted(&runs)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != LoopPingPong || runs != 2 || res.ToolCalls != 2 {
		t.Errorf("result %+v after %d runs, want ping_pong after the first batch of 2", res, runs)
	}
	parts := lastUser(t, testHost.llmCalls[2])
	if len(parts) != 3 || !strings.HasPrefix(parts[0].Text, "[tool result a1, failed: not run: ") || !strings.HasPrefix(parts[1].Text, "[tool result b1, failed: not run: ") {
		t.Errorf("the concluding message is %+v, want both calls of the refused batch answered as not run, then the note", parts)
	}
	checkConcluding(t, testHost.llmCalls[2], LoopPingPong)
}

// The loop stops before a step whose call and the concluding call would
// not both fit in MaxOutputTokens, so the concluding call fits.
func TestLoopMaxOutputTokens(t *testing.T) {
	model(t, func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *fakeError) {
		if req.Tools == nil {
			return text("short", LLMUsage{Output: 100}), nil
		}
		return callTool(fmt.Sprint("c", i), "search", fmt.Sprint(i), LLMUsage{Output: 100}), nil
	})
	cfg := config()
	cfg.MaxOutputTokens = 350
	var runs int
	res, err := Loop(context.Background(), cfg, ToolStep(counted(&runs)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != LoopMaxTokens || !res.Concluded || res.Iterations != 2 || res.Usage.Output != 300 {
		t.Errorf("result %+v, want max_tokens after 2 steps, 300 output tokens with the concluding call", res)
	}
	checkConcluding(t, testHost.llmCalls[2], LoopMaxTokens)
}

func TestLoopMaxInputTokens(t *testing.T) {
	model(t, func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *fakeError) {
		if req.Tools == nil {
			return text("short", LLMUsage{Input: 10}), nil
		}
		return callTool(fmt.Sprint("c", i), "search", fmt.Sprint(i), LLMUsage{Input: 2000, CacheRead: 1000}), nil
	})
	cfg := config()
	cfg.MaxInputTokens = 6500
	var runs int
	res, err := Loop(context.Background(), cfg, ToolStep(counted(&runs)))
	if err != nil {
		t.Fatal(err)
	}
	// 3000 a step (cached tokens count): after two, 6000 and the worst
	// case of a step (some 370 tokens by the host's bound) leave no room
	// for the concluding call's.
	if res.Reason != LoopMaxTokens || !res.Concluded || res.Iterations != 2 {
		t.Errorf("result %+v, want max_tokens after 2 steps", res)
	}
	if !strings.Contains(res.Detail, "6000 input tokens used of 6500") {
		t.Errorf("detail %q, want the input used and the cap", res.Detail)
	}
}

func TestLoopMaxWall(t *testing.T) {
	model(t, func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *fakeError) {
		if req.Tools == nil {
			return text("late", LLMUsage{}), nil
		}
		return callTool(fmt.Sprint("c", i), "search", fmt.Sprint(i), LLMUsage{}), nil
	})
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	reads := 0
	cfg := config()
	cfg.MaxWall = 2500 * time.Millisecond
	// Each read is a second later: the loop reads once at the start and
	// once before each step.
	cfg.Clock = func() (time.Time, error) {
		reads++
		return base.Add(time.Duration(reads-1) * time.Second), nil
	}
	var runs int
	res, err := Loop(context.Background(), cfg, ToolStep(counted(&runs)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != LoopMaxWall || !res.Concluded || res.Iterations != 2 {
		t.Errorf("result %+v, want max_wall after 2 steps", res)
	}
	if got := testHost.limits[0].Limits[1]; got != (BudgetLimit{Dim: "wall_seconds", Amount: 3}) {
		t.Errorf("run.limit got %+v, want wall_seconds 3 (2.5 s, rounded up)", got)
	}
}

func budgetError(msg string) *fakeError { return &fakeError{abi.StatusBudget, msg} }

// A model call the host refuses for its budget ends the loop without a
// concluding call, which the host would refuse too.
func TestLoopBudget(t *testing.T) {
	for _, c := range []struct {
		name   string
		msg    string
		money  uint64
		reason LoopReason
	}{
		{"tokens", "llm.complete: budget exceeded: input_tokens: asked 900, 100 left of 1000 (900 spent, 0 reserved)", 5000, LoopBudget},
		{"money", "llm.complete: budget exceeded: micro_usd: asked $0.002, $0.001 left of $0.005 (...)", 5000, LoopMaxMoney},
		// Money the loop did not cap is the run's budget.
		{"grant-money", "llm.complete: budget exceeded: micro_usd: asked $0.002, $0.001 left of $0.005 (...)", 0, LoopBudget},
	} {
		t.Run(c.name, func(t *testing.T) {
			model(t, func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *fakeError) {
				if i == 0 {
					return callTool("c0", "search", `{}`, LLMUsage{Input: 5}), nil
				}
				return nil, budgetError(c.msg)
			})
			cfg := config()
			cfg.MaxMicroUSD = c.money
			var runs int
			res, err := Loop(context.Background(), cfg, ToolStep(counted(&runs)))
			if err != nil {
				t.Fatal(err)
			}
			if res.Reason != c.reason || res.Concluded || res.Response == nil || res.Response.ToolCalls()[0].ID != "c0" || res.Iterations != 2 {
				t.Errorf("result %+v, want %s with the first answer and no concluding call", res, c.reason)
			}
			if !strings.Contains(res.Detail, c.msg) {
				t.Errorf("detail %q, want the host's message", res.Detail)
			}
			if n := len(testHost.llmCalls); n != 2 {
				t.Errorf("%d model calls, want 2 (none after the refusal)", n)
			}
		})
	}
}

// A concluding call the host refuses for its budget is no error: the loop
// returns its reason and the last answer.
func TestLoopConclusionRefused(t *testing.T) {
	model(t, func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *fakeError) {
		if req.Tools == nil {
			return nil, budgetError("llm.complete: budget exceeded: model_calls: asked 1, 0 left of 2 (2 spent, 0 reserved)")
		}
		return callTool("c", "search", fmt.Sprint(i), LLMUsage{}), nil
	})
	cfg := config()
	cfg.MaxIterations = 1
	var runs int
	res, err := Loop(context.Background(), cfg, ToolStep(counted(&runs)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != LoopMaxIterations || res.Concluded || res.Response.ToolCalls()[0].Name != "search" ||
		!strings.Contains(res.Detail, "the host refused the concluding call: budget: ") {
		t.Errorf("result %+v, want max_iterations, not concluded, with the last answer", res)
	}
}

// A tool function's error is the model's to read; one matching ErrBudget
// ends the loop.
func TestLoopToolErrors(t *testing.T) {
	model(t, func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *fakeError) {
		switch i {
		case 0:
			return callTool("c0", "search", `{}`, LLMUsage{}), nil
		case 1:
			return callTool("c1", "missing", `{}`, LLMUsage{}), nil
		}
		return callTool("c2", "fetch", `{}`, LLMUsage{}), nil
	})
	tools := map[string]ToolFunc{
		"search": func(context.Context, []byte) (string, error) { return "", errors.New("index offline") },
		"fetch": func(context.Context, []byte) (string, error) {
			return "", &HostError{Code: abi.StatusBudget, Message: "http.request: budget exceeded: http_requests: asked 1, 0 left of 3"}
		},
	}
	cfg := config()
	res, err := Loop(context.Background(), cfg, ToolStep(tools))
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != LoopBudget || res.Iterations != 3 {
		t.Errorf("result %+v, want budget after 3 steps", res)
	}
	want := []LLMPart{{Type: abi.PartToolResult, ID: "c0", Text: "index offline", IsError: true}}
	if got := lastUser(t, testHost.llmCalls[1]); !reflect.DeepEqual(got, want) {
		t.Errorf("the failed tool's result is %+v, want %+v", got, want)
	}
	want = []LLMPart{{Type: abi.PartToolResult, ID: "c1", Text: `no tool named "missing" (tools: fetch, search)`, IsError: true}}
	if got := lastUser(t, testHost.llmCalls[2]); !reflect.DeepEqual(got, want) {
		t.Errorf("the unknown tool's result is %+v, want %+v", got, want)
	}
}

// A config that cannot hold its caps is refused before anything is sent.
func TestLoopConfigRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*LoopConfig)
		want string
	}{
		{"no-iterations", func(c *LoopConfig) { c.MaxIterations = 0 }, "MaxIterations is 0: a loop needs a bound on its steps"},
		{"negative-tools", func(c *LoopConfig) { c.MaxToolCalls = -1 }, "MaxToolCalls is -1"},
		{"wall-without-clock", func(c *LoopConfig) { c.MaxWall = time.Minute }, "MaxWall needs a Clock: set LoopConfig.Clock to agent.Now"},
		{"output-too-small", func(c *LoopConfig) { c.MaxOutputTokens = 150 }, "MaxOutputTokens 150 leaves no room for one step and the concluding call, of Request.MaxOutputTokens 100 each: raise it to 200"},
		{"input-too-small", func(c *LoopConfig) { c.MaxInputTokens = 10 }, "MaxInputTokens 10 leaves no room"},
		{"bad-request", func(c *LoopConfig) { c.Request.MaxOutputTokens = 0 }, "Request: max_output_tokens is 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			model(t, func(int, *abi.LLMRequest) (*abi.LLMResponse, *fakeError) { return text("x", LLMUsage{}), nil })
			cfg := config()
			c.edit(&cfg)
			var runs int
			_, err := Loop(context.Background(), cfg, ToolStep(counted(&runs)))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
			if len(testHost.limits) != 0 || len(testHost.llmCalls) != 0 {
				t.Errorf("%d run.limit and %d model calls were sent, want none", len(testHost.limits), len(testHost.llmCalls))
			}
		})
	}
}

// A host that does not take the caps runs no loop: they would be the
// guest's word alone.
func TestLoopLimitRefused(t *testing.T) {
	model(t, func(int, *abi.LLMRequest) (*abi.LLMResponse, *fakeError) { return text("x", LLMUsage{}), nil })
	testHost.limitErr = &fakeError{abi.StatusBadRequest, "run: unknown op 6"}
	var runs int
	_, err := Loop(context.Background(), config(), ToolStep(counted(&runs)))
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "the host did not take the loop's caps (run.limit)") {
		t.Errorf("error %v, want the host's refusal of run.limit", err)
	}
	if len(testHost.llmCalls) != 0 {
		t.Errorf("%d model calls, want none", len(testHost.llmCalls))
	}
}

func TestLoopOneModelCallPerStep(t *testing.T) {
	model(t, func(int, *abi.LLMRequest) (*abi.LLMResponse, *fakeError) { return text("x", LLMUsage{}), nil })
	_, err := Loop(context.Background(), config(), func(ctx context.Context, s *LoopState) error {
		if _, err := s.Complete(); err != nil {
			return err
		}
		_, err := s.Complete()
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "a step makes at most one model call") {
		t.Errorf("error %v, want the second model call of a step refused", err)
	}
	if n := len(testHost.llmCalls); n != 1 {
		t.Errorf("%d model calls, want 1", n)
	}
}

// A custom step and Done: the loop ends when Done says so, whatever the
// model asks for.
func TestLoopDonePredicate(t *testing.T) {
	model(t, func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *fakeError) {
		return text(fmt.Sprint("draft ", i), LLMUsage{Output: 1}), nil
	})
	cfg := config()
	cfg.Request.Tools = nil
	cfg.Done = func(s *LoopState) bool { return s.Last.Text() == "draft 2" }
	res, err := Loop(context.Background(), cfg, func(ctx context.Context, s *LoopState) error {
		if _, err := s.Complete(); err != nil {
			return err
		}
		s.Conversation.Messages = append(s.Conversation.Messages, LLMMessage{Role: abi.RoleUser, Content: []LLMPart{{Type: abi.PartText, Text: "improve it"}}})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != LoopDone || res.Iterations != 3 || res.Response.Text() != "draft 2" || res.Concluded {
		t.Errorf("result %+v, want done after 3 steps with draft 2", res)
	}
}

func TestToolStepNeedsEveryTool(t *testing.T) {
	model(t, func(int, *abi.LLMRequest) (*abi.LLMResponse, *fakeError) { return text("x", LLMUsage{}), nil })
	_, err := Loop(context.Background(), config(), ToolStep(map[string]ToolFunc{"search": func(context.Context, []byte) (string, error) { return "", nil }}))
	if err == nil || !strings.Contains(err.Error(), `the request's tool "fetch" has no ToolFunc (functions for: search)`) {
		t.Errorf("error %v, want the tool without a function named", err)
	}
}

func TestLoopContextCanceled(t *testing.T) {
	model(t, func(i int, req *abi.LLMRequest) (*abi.LLMResponse, *fakeError) {
		return callTool(fmt.Sprint("c", i), "search", fmt.Sprint(i), LLMUsage{}), nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	tools := map[string]ToolFunc{
		"search": func(context.Context, []byte) (string, error) { cancel(); return "", nil },
		"fetch":  func(context.Context, []byte) (string, error) { return "", nil },
	}
	_, err := Loop(ctx, config(), ToolStep(tools))
	if !errors.Is(err, context.Canceled) || len(testHost.llmCalls) != 1 {
		t.Errorf("error %v after %d model calls, want context.Canceled after 1", err, len(testHost.llmCalls))
	}
}

func TestLoopReasonNames(t *testing.T) {
	want := []string{"done", "max_iterations", "max_tokens", "max_money", "max_wall", "max_tool_calls", "repeat", "ping_pong", "budget"}
	for i, w := range want {
		if got := LoopReason(i).String(); got != w {
			t.Errorf("LoopReason(%d) is %q, want %q", i, got, w)
		}
	}
	if got := LoopReason(len(want)).String(); got != "LoopReason(9)" {
		t.Errorf("an unknown reason prints as %q", got)
	}
}

// TestFingerprintVectors runs testdata/fingerprints.jsonl, which the C
// loop's test runs too.
func TestFingerprintVectors(t *testing.T) {
	b, err := os.ReadFile("testdata/fingerprints.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		var v [4]string
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		n++
		name, args, canon := v[0], []byte(v[1]), v[2]
		if got := string(canonicalArguments(args)); got != canon {
			t.Errorf("line %d (%s): canonical form of %q is %q, want %q", i+1, v[3], args, got, canon)
		}
		want := sha256.Sum256([]byte(name + "\x00" + canon))
		if got := Fingerprint(LLMPart{Type: abi.PartToolCall, Name: name, Arguments: args}); got != want {
			t.Errorf("line %d (%s): Fingerprint is %x, want %x", i+1, v[3], got, want)
		}
	}
	if n < 20 {
		t.Errorf("%d vectors, want the file's 20", n)
	}
}
