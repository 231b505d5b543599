package llm_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/caps/llm"
	"github.com/agentrt/agentrt/host/caps/llm/provider"
	"github.com/agentrt/agentrt/internal/fakellm/fakellmtest"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

// forkScript is the agent's two turns on m-test, then the fork's second
// turn, which only m-fork may ask.
const forkScript = `
api_key: ` + fakeKey + `
turns:
  - expect: {model: m-test, tools: [lookup]}
    reply:
      tool_calls: [{name: lookup, arguments: {city: Paris}}]
    usage: {input_tokens: 120, output_tokens: 14}
  - expect: {model: m-test}
    reply: {text: "Paris has 2.1 million people."}
    usage: {input_tokens: 160, output_tokens: 9}
  - expect: {model: m-fork}
    reply: {text: "About two million."}
    usage: {input_tokens: 160, output_tokens: 5}
`

// TestForkReplacesTheModelOfTheLiveCalls: a fork of the llm agent after
// its first model call, with --model m-fork, answers that call from the
// parent's journal (the fake is not asked again), sends the second to
// m-fork, records the override in its header, and replays from its own
// journal, where the request is the guest's.
func TestForkReplacesTheModelOfTheLiveCalls(t *testing.T) {
	srv, hs := fakellmtest.Serve(t, forkScript)
	t.Setenv("AGENTRT_TEST_FAKE_KEY", fakeKey)
	cfg, err := provider.Parse("llm.yaml", []byte(fmt.Sprintf(`
providers:
  fake:
    kind: %s
    base_url: %s/v1
    credential: {env: AGENTRT_TEST_FAKE_KEY}
    models:
      m-test: {input: "2.50", output: "10"}
      m-fork: {input: "1", output: "4"}
`, provider.OpenAIChat, hs.URL)))
	if err != nil {
		t.Fatal(err)
	}
	env := testutil.NewEnv(t, host.Deps{LLM: llm.NewProviders(cfg, hs.Client(), nil)}, host.Config{})
	code := testutil.BuildGo(t, "host/testdata/agents/llm")
	ctx := context.Background()
	grant := &host.Grant{Run: &host.RunGrant{}, LLM: &host.LLMGrant{Providers: []string{"fake"}, Models: []string{"m-test", "m-fork"}, MaxOutputTokens: 1024}}
	parent, err := env.Host.Run(ctx, host.RunSpec{Code: code, Name: "llm", Input: []byte("complete"), Grant: grant})
	if err != nil || parent.Status != journal.StatusCompleted {
		t.Fatalf("parent: %v %+v", err, parent)
	}
	var at uint64 // the completed entry of the first llm.complete
	err = journal.ReadEntries(ctx, env.Store, parent.Run, func(e *journal.Entry, _ *journal.Record) error {
		if at == 0 && e.Op == "llm.complete" && e.Phase == journal.PhaseCompleted {
			at = e.Seq
		}
		return nil
	})
	if err != nil || at == 0 {
		t.Fatalf("no completed llm.complete in the parent: %v", err)
	}

	// An override the grant does not allow is refused before anything runs.
	if _, err := env.Host.Fork(ctx, host.ForkSpec{Parent: parent.Run, At: at, Model: "m-other"}); !errors.Is(err, host.ErrOverride) ||
		!strings.Contains(err.Error(), `model "m-other" is not in the run's grant (granted: m-test, m-fork)`) {
		t.Fatalf("fork with a model outside the grant: %v", err)
	}

	st, err := env.Host.Fork(ctx, host.ForkSpec{Parent: parent.Run, At: at, Model: "m-fork"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Execute(ctx)
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("fork: %v %+v", err, res)
	}
	if out := string(res.Output); !strings.Contains(out, `tool lookup({"city":"Paris"})`) || !strings.Contains(out, `turn 1: stop=end text="About two million."`) {
		t.Fatalf("fork output:\n%s", out)
	}
	reqs := fakellmtest.Settled(t, srv).Requests
	if len(reqs) != 3 || reqs[2].Model != "m-fork" {
		t.Fatalf("the fake got %d requests (want the parent's 2 and the fork's 1, to m-fork): %+v", len(reqs), reqs)
	}
	var hdr *journal.Header
	journal.ReadEntries(ctx, env.Store, res.Run, func(e *journal.Entry, _ *journal.Record) error {
		if e.Header != nil {
			hdr = e.Header
		}
		return nil
	})
	if f := hdr.Fork; f == nil || f.Model != "m-fork" || f.Provider != "" || f.Parent != parent.Run {
		t.Fatalf("fork header %+v, want the override of model m-fork", hdr.Fork)
	}
	// The fork's journal holds the guest's requests: its replay matches
	// without a request, and the comparison with the parent sees the same
	// calls, the second answered otherwise.
	j, err := replay.Load(ctx, env.Store, res.Run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := j.Replay(ctx, env.Engine, code, replay.Options{})
	if err != nil || string(rep.Output) != string(res.Output) {
		t.Fatalf("replay of the fork: %v, output %q", err, rep.Output)
	}
	cmp, err := replay.CompareFork(ctx, env.Store, res.Run)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cmp.Calls {
		if c.Op == "llm.complete" && (!c.Match || c.SameOutput) {
			t.Fatalf("the fork's live llm.complete %+v: want the guest's request, another answer", c)
		}
	}
	if n := len(fakellmtest.Settled(t, srv).Requests); n != 3 {
		t.Fatalf("replay sent %d requests", n-3)
	}
}
