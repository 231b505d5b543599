package llm_test

import (
	"context"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/host/caps/llm/provider"
	"github.com/agentrt/agentrt/internal/fakellm/fakellmtest"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// budgetRows returns the run's budget report by dimension.
func budgetRows(t *testing.T, env *testutil.Env, run journal.RunID) (map[budget.Dim]budget.Row, int) {
	t.Helper()
	rep, err := host.LoadBudget(context.Background(), env.Store, run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[budget.Dim]budget.Row{}
	for _, r := range rep.Rows {
		rows[r.Dim] = r
	}
	return rows, rep.Open
}

// The gate's budget layer charges each model call of the test agent's
// conversation what the fake reported, at the model's prices, whether the
// answer came whole or streamed (a stream's reservation held until its
// last batch settles it): no reservation stays open.
func TestLedgerChargesEveryModelCall(t *testing.T) {
	code := testutil.BuildGo(t, "host/testdata/agents/llm")
	// Turn 1: 120+40+8 in, 14 out; turn 2: 160+120 in, 9 out (reasoning
	// included in output by the provider's count).
	for _, mode := range []string{"complete", "stream"} {
		t.Run(mode, func(t *testing.T) {
			provs, _ := fakeProviders(t, provider.OpenAIChat, "/v1", conversation)
			env := testutil.NewEnv(t, host.Deps{LLM: provs}, host.Config{})
			res, err := env.Host.Run(context.Background(), host.RunSpec{Code: code, Input: []byte(mode), Grant: llmGrant()})
			if err != nil || res.Status != journal.StatusCompleted {
				t.Fatalf("run: %v %+v", err, res)
			}
			rows, open := budgetRows(t, env, res.Run)
			if r := rows[budget.ModelCalls]; r.Spent != 2 || r.Reserved != 0 || open != 0 {
				t.Fatalf("model_calls %+v with %d open, want 2 spent and none held", r, open)
			}
			if rows[budget.InputTokens].Spent == 0 || rows[budget.OutputTokens].Spent == 0 || rows[budget.MicroUSD].Spent == 0 {
				t.Fatalf("tokens or money not charged: %+v", rows)
			}
		})
	}
}

// A token's model_calls ceiling of 1 refuses the conversation's second
// turn with status budget: the fake sees one request.
func TestModelCallsCeilingRefusesTheSecondTurn(t *testing.T) {
	code := testutil.BuildGo(t, "host/testdata/agents/llm")
	provs, srv := fakeProviders(t, provider.OpenAIChat, "/v1", conversation)
	env := testutil.NewEnv(t, host.Deps{LLM: provs}, host.Config{})
	cell := env.Key.Public().(ed25519.PublicKey)
	g := llmGrant()
	caps, err := g.TokenCaps()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := capability.Issue(env.Key, capability.Claims{Audience: cell, Caps: caps, Budget: capability.Budget{ModelCalls: capability.Limit(1)},
		NotBefore: time.Now().Add(-time.Minute), Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: code, Input: []byte("complete"), Grant: g, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	// The agent gives up on the error: it fails, and the journal holds
	// the refusal.
	if res.Status != journal.StatusFailed {
		t.Fatalf("run ended %s, want the agent to fail on its refused turn", res.Status)
	}
	var refused []string
	err = journal.ReadEntries(context.Background(), env.Store, res.Run, func(e *journal.Entry, _ *journal.Record) error {
		if e.Op == "llm.complete" && abi.Status(e.Status) == abi.StatusBudget {
			var ae abi.Error
			if err := abi.Unmarshal(e.Response, &ae); err != nil {
				return err
			}
			refused = append(refused, ae.Message)
		}
		return nil
	})
	if err != nil || len(refused) != 1 || !strings.Contains(refused[0], "budget exceeded: model_calls: asked 1, 0 left of 1") {
		t.Fatalf("refusals %q (%v), want the second turn refused with budget naming model_calls", refused, err)
	}
	if n := len(fakellmtest.Settled(t, srv).Requests); n != 1 {
		t.Fatalf("the fake saw %d requests, want 1", n)
	}
	rows, _ := budgetRows(t, env, res.Run)
	if r := rows[budget.ModelCalls]; r.Spent != 1 || *r.Ceiling != 1 {
		t.Fatalf("model_calls %+v", r)
	}
}

// A stream lost with its process holds its reservation in the journal (a
// reserve, no settle). The resumed run keeps it held, and the resumed
// stream's last batch settles it at the usage the provider reported, not
// at its worst case (the request's max output tokens): the ledger after the resume is
// the one an uninterrupted run would have.
func TestResumedStreamSettlesItsHeldReservationAtItsUsage(t *testing.T) {
	code := testutil.BuildGo(t, "host/testdata/agents/llm")
	provs, _ := fakeProvidersWith(t, provider.OpenAIResponses, "/v1", slowAnswer, "    background: true\n")
	env := testutil.NewEnv(t, host.Deps{LLM: provs}, host.Config{})
	run := stopMidStream(t, env, code)
	if rows, open := budgetRows(t, env, run); open != 1 || rows[budget.OutputTokens].Reserved <= 19 {
		t.Fatalf("before the resume: %d open, output_tokens %+v; want the lost stream's worst case held", open, rows[budget.OutputTokens])
	}
	res, err := env.Host.Resume(context.Background(), run)
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("resume: %v %+v", err, res)
	}
	rows, open := budgetRows(t, env, run)
	if open != 0 || rows[budget.ModelCalls].Spent != 2 || rows[budget.OutputTokens].Spent != 14+19 || rows[budget.OutputTokens].Reserved != 0 {
		t.Fatalf("after the resume: %d open, model_calls %+v, output_tokens %+v; want 2 calls and 33 output tokens, nothing held",
			open, rows[budget.ModelCalls], rows[budget.OutputTokens])
	}
}
