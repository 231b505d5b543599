package looptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/caps/llm"
	"github.com/agentrt/agentrt/host/caps/llm/provider"
	"github.com/agentrt/agentrt/internal/fakellm"
	"github.com/agentrt/agentrt/internal/fakellm/fakellmtest"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/internal/wasmbuild"
	"github.com/agentrt/agentrt/journal"
)

const fakeKey = "sk-fake-loop-Qm41Vz8Tk"

// repeating is a model that asks for the same lookup three times, then,
// offered no tools and asked for a final answer, gives one.
const repeating = `
api_key: ` + fakeKey + `
turns:
  - expect: {model: m-test, tools: [lookup]}
    reply: {tool_calls: [{name: lookup, arguments: {city: Paris}}]}
    usage: {input_tokens: 120, output_tokens: 14}
  - expect: {model: m-test, tools: [lookup]}
    reply: {tool_calls: [{name: lookup, arguments: {city: Paris}}]}
    usage: {input_tokens: 160, output_tokens: 14}
  - expect: {model: m-test, tools: [lookup]}
    reply: {tool_calls: [{name: lookup, arguments: {city: Paris}}]}
    usage: {input_tokens: 200, output_tokens: 14}
  - expect: {model: m-test, tools: [], last_text_contains: "Give your final answer now"}
    reply: {text: "Paris has 2.1 million people."}
    usage: {input_tokens: 240, output_tokens: 9}
`

var kinds = []struct {
	kind provider.Kind
	base string
}{
	{provider.OpenAIChat, "/v1"},
	{provider.OpenAIResponses, "/v1"},
	{provider.Anthropic, ""},
}

func fakeProviders(t *testing.T, kind provider.Kind, base, script string) (*llm.Providers, *fakellm.Server) {
	t.Helper()
	srv, hs := fakellmtest.Serve(t, script)
	t.Setenv("AGENTRT_TEST_FAKE_KEY", fakeKey)
	cfg, err := provider.Parse("llm.yaml", []byte(fmt.Sprintf(`
providers:
  fake:
    kind: %s
    base_url: %s%s
    credential: {env: AGENTRT_TEST_FAKE_KEY}
    retry: {attempts: 1, max_wait: 1s}
    models:
      m-test: {input: "2.50", output: "10"}
`, kind, hs.URL, base)))
	if err != nil {
		t.Fatal(err)
	}
	return llm.NewProviders(cfg, hs.Client(), nil), srv
}

func grant() *host.Grant {
	return &host.Grant{Run: &host.RunGrant{}, LLM: &host.LLMGrant{Providers: []string{"fake"}, Models: []string{"m-test"}, MaxOutputTokens: 1024}}
}

// limits returns the requests of the run's run.limit calls, from its
// journal.
func limits(t *testing.T, env *testutil.Env, run journal.RunID) []abi.LimitRequest {
	t.Helper()
	var out []abi.LimitRequest
	err := env.Store.Records(context.Background(), run, 0, func(_ uint64, raw []byte) error {
		r, err := journal.DecodeRecord(raw)
		if err != nil {
			return err
		}
		e, err := journal.DecodeEntry(r.Entry)
		if err != nil {
			return err
		}
		if e.Op == "run.limit" && e.Phase == journal.PhaseCompleted {
			var l abi.LimitRequest
			if err := abi.Unmarshal(e.Request, &l); err != nil {
				return fmt.Errorf("entry %d: %w", e.Seq, err)
			}
			out = append(out, l)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func amount(ls []abi.BudgetLimit, dim string) (uint64, bool) {
	for _, l := range ls {
		if l.Dim == dim {
			return l.Amount, true
		}
	}
	return 0, false
}

// TestGoLoop: a Go agent's loop finds the repeated call, concludes without
// tools, and the host, holding the caps the loop gave it, refuses the
// model call the agent makes afterwards on its own.
func TestGoLoop(t *testing.T) {
	code := testutil.BuildGo(t, "internal/looptest/testdata/goloop")
	for _, k := range kinds {
		t.Run(string(k.kind), func(t *testing.T) {
			provs, srv := fakeProviders(t, k.kind, k.base, repeating)
			env := testutil.NewEnv(t, host.Deps{LLM: provs}, host.Config{})
			res, err := env.Host.Run(context.Background(), host.RunSpec{Code: code, Name: "goloop",
				Input: []byte(`{"max_iterations": 3, "max_output_tokens": 2048}`), Grant: grant()})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != journal.StatusCompleted {
				t.Fatalf("status %s: %v", res.Status, res.Err)
			}
			var out struct {
				Reason     string `json:"reason"`
				Concluded  bool   `json:"concluded"`
				Iterations int    `json:"iterations"`
				ToolCalls  int    `json:"tool_calls"`
				Lookups    int    `json:"lookups"`
				Text       string `json:"text"`
				Output     uint64 `json:"output_tokens"`
				After      string `json:"after"`
			}
			if err := json.Unmarshal(res.Output, &out); err != nil {
				t.Fatalf("output %s: %v", res.Output, err)
			}
			if out.Reason != "repeat" || !out.Concluded || out.Iterations != 3 || out.ToolCalls != 2 || out.Lookups != 2 ||
				out.Text != "Paris has 2.1 million people." || out.Output != 51 {
				t.Errorf("the loop gave %s, want repeat after 3 steps, 2 lookups, concluded with the model's answer, 51 output tokens", res.Output)
			}
			// The loop's caps: model calls for 3 steps and the concluding
			// call, the output tokens.
			ls := limits(t, env, res.Run)
			if len(ls) != 1 {
				t.Fatalf("%d run.limit calls journaled, want 1", len(ls))
			}
			if n, _ := amount(ls[0].Limits, "model_calls"); n != 4 {
				t.Errorf("run.limit %+v: model_calls %d, want 4", ls[0].Limits, n)
			}
			if n, _ := amount(ls[0].Limits, "output_tokens"); n != 2048 {
				t.Errorf("run.limit %+v: output_tokens %d, want 2048", ls[0].Limits, n)
			}
			// The host holds the caps: the call after the loop is refused
			// and never sent.
			if !strings.Contains(out.After, "budget") || !strings.Contains(out.After, "model_calls") {
				t.Errorf("the call after the loop gave %q, want the host's budget refusal for model_calls", out.After)
			}
			st := fakellmtest.Settled(t, srv)
			if len(st.Requests) != 4 {
				t.Fatalf("the fake got %d requests, want 4 (3 steps and the concluding call)", len(st.Requests))
			}
			for _, r := range st.Requests {
				if r.Outcome != fakellm.OutcomeCompleted {
					t.Errorf("request %d: %s %s (a request the script did not expect)", r.Seq, r.Outcome, r.Error)
				}
			}
		})
	}
}

// TestCLoop: the same loop in C, built by clang, on the same host and
// model.
func TestCLoop(t *testing.T) {
	wasm := filepath.Join(t.TempDir(), "cloop.wasm")
	if err := wasmbuild.CFiles(context.Background(), wasm, []string{"testdata/cloop/main.c"}, "-Werror", "-Wextra", "-Wpedantic"); err != nil {
		var te *wasmbuild.ToolchainError
		if errors.As(err, &te) {
			t.Fatalf("building the C agent: %v\nhint: %s", err, te.Hint)
		}
		t.Fatal(err)
	}
	code, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	provs, srv := fakeProviders(t, provider.OpenAIChat, "/v1", repeating)
	env := testutil.NewEnv(t, host.Deps{LLM: provs}, host.Config{})
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: code, Name: "cloop", Grant: grant()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != journal.StatusCompleted {
		t.Fatalf("status %s: %v", res.Status, res.Err)
	}
	want := "reason=repeat concluded=1 iterations=3 tool_calls=2 lookups=2 text=Paris has 2.1 million people."
	if string(res.Output) != want {
		t.Errorf("output %q, want %q", res.Output, want)
	}
	ls := limits(t, env, res.Run)
	if len(ls) != 1 {
		t.Fatalf("%d run.limit calls journaled, want 1", len(ls))
	}
	if n, _ := amount(ls[0].Limits, "model_calls"); n != 4 {
		t.Errorf("run.limit %+v: model_calls %d, want 4", ls[0].Limits, n)
	}
	if st := fakellmtest.Settled(t, srv); len(st.Requests) != 4 {
		t.Errorf("the fake got %d requests, want 4", len(st.Requests))
	}
}
