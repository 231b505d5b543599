package llm_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/host/caps/llm"
	"github.com/agentrt/agentrt/host/caps/llm/provider"
	"github.com/agentrt/agentrt/internal/fakellm"
	"github.com/agentrt/agentrt/internal/fakellm/fakellmtest"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

const fakeKey = "sk-fake-host-Wq73Jd0Pz"

// conversation is the test agent's two turns: the model asks for a tool,
// then answers from its result.
const conversation = `
api_key: ` + fakeKey + `
turns:
  - expect: {model: m-test, last_role: user, tools: [lookup]}
    reply:
      tool_calls: [{name: lookup, arguments: {city: Paris}, chunks: 3}]
    usage: {input_tokens: 120, output_tokens: 14, cache_read_tokens: 40, cache_write_tokens: 8}
  - expect: {model: m-test}
    reply: {text: "Paris has 2.1 million people.", chunks: 4, chunk_delay: 40ms}
    usage: {input_tokens: 160, output_tokens: 9, cache_read_tokens: 120, reasoning_tokens: 3}
`

// kinds are the provider kinds with the fake's base URL suffix for each.
var kinds = []struct {
	kind provider.Kind
	base string
}{
	{provider.OpenAIChat, "/v1"},
	{provider.OpenAIResponses, "/v1"},
	{provider.Anthropic, ""},
}

// fakeProviders serves script on a loopback fake of kind and returns the
// cell's providers for it.
func fakeProviders(t *testing.T, kind provider.Kind, base, script string) (*llm.Providers, *fakellm.Server) {
	t.Helper()
	return fakeProvidersWith(t, kind, base, script, "")
}

// fakeProvidersWith is fakeProviders with more lines of the provider's
// llm.yaml entry.
func fakeProvidersWith(t *testing.T, kind provider.Kind, base, script, more string) (*llm.Providers, *fakellm.Server) {
	t.Helper()
	srv, hs := fakellmtest.Serve(t, script)
	t.Setenv("AGENTRT_TEST_FAKE_KEY", fakeKey)
	cfg, err := provider.Parse("llm.yaml", []byte(fmt.Sprintf(`
providers:
  fake:
    kind: %s
    base_url: %s%s
    credential: {env: AGENTRT_TEST_FAKE_KEY}
    retry: {attempts: 2, max_wait: 1s}
%s    models:
      m-test: {input: "2.50", output: "10", cache_read: "1.25", cache_write: "3.75"}
`, kind, hs.URL, base, more)))
	if err != nil {
		t.Fatal(err)
	}
	return llm.NewProviders(cfg, hs.Client(), nil), srv
}

func llmGrant() *host.Grant {
	return &host.Grant{Run: &host.RunGrant{}, LLM: &host.LLMGrant{Providers: []string{"fake"}, Models: []string{"m-test"}, MaxOutputTokens: 1024}}
}

// TestAgentCallsEachProvider: a wasm agent holds a tool-calling
// conversation through llm.complete, unstreamed and streamed, against the
// fake of each API: it gets the tool call and the answer, each call is
// sent once, the journal stores the conversation's requests by hash, and
// a replay from the journal gives the same output without a request.
func TestAgentCallsEachProvider(t *testing.T) {
	code := testutil.BuildGo(t, "host/testdata/agents/llm")
	for _, k := range kinds {
		for _, mode := range []string{"complete", "stream"} {
			t.Run(string(k.kind)+"/"+mode, func(t *testing.T) {
				provs, srv := fakeProviders(t, k.kind, k.base, conversation)
				env := testutil.NewEnv(t, host.Deps{LLM: provs}, host.Config{})
				ctx := context.Background()
				res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Name: "llm", Input: []byte(mode), Grant: llmGrant()})
				if err != nil {
					t.Fatal(err)
				}
				if res.Status != journal.StatusCompleted {
					t.Fatalf("status %s: %v", res.Status, res.Err)
				}
				out := string(res.Output)
				for _, want := range []string{"turn 0: stop=tool_use", `tool lookup({"city":"Paris"})`, `turn 1: stop=end text="Paris has 2.1 million people."`} {
					if !strings.Contains(out, want) {
						t.Errorf("output lacks %q:\n%s", want, out)
					}
				}
				if mode == "stream" && !strings.Contains(out, "streamed: true") {
					t.Errorf("no chunk reached the guest:\n%s", out)
				}
				st := fakellmtest.Settled(t, srv)
				if len(st.Requests) != 2 || len(st.ResentAfterCompletion()) != 0 {
					t.Fatalf("the fake got %d requests (%d sent again), want 2", len(st.Requests), len(st.ResentAfterCompletion()))
				}
				for _, r := range st.Requests {
					if r.Stream != (mode == "stream") {
						t.Errorf("request %d: stream %v in mode %s", r.Seq, r.Stream, mode)
					}
				}
				trust := journal.TrustKeys(env.Key.Public().(ed25519.PublicKey))
				ops, forms, named := map[string]int{}, 0, 0
				err = env.Store.Records(ctx, res.Run, 0, func(_ uint64, raw []byte) error {
					r, err := journal.DecodeRecord(raw)
					if err != nil {
						return err
					}
					e, err := journal.DecodeEntry(r.Entry)
					if err != nil {
						return err
					}
					if e.Phase == journal.PhaseCompleted || e.Phase == journal.PhaseFailed {
						ops[e.Op]++
					}
					if e.Op == "llm.complete" && e.Phase == journal.PhaseIntent && journal.IsBlobForm(e.Request) {
						forms++
					}
					// The answers name the provider and the credential's id.
					if bytes.Contains(e.Response, []byte("env:AGENTRT_TEST_FAKE_KEY")) && bytes.Contains(e.Response, []byte("fake")) {
						named++
					}
					if bytes.Contains(raw, []byte(fakeKey)) {
						t.Errorf("entry %d holds the API key", e.Seq)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if ops["llm.complete"] != 2 || forms != 2 {
					t.Errorf("journal: %d llm.complete outcomes, %d requests in blob form; want 2 and 2 (%v)", ops["llm.complete"], forms, ops)
				}
				if named != 2 {
					t.Errorf("%d answers name the provider and credential id, want 2", named)
				}
				if mode == "stream" && ops["llm.next"] == 0 {
					t.Errorf("a streamed run journaled no llm.next (%v)", ops)
				}
				j, err := replay.Load(ctx, env.Store, res.Run, trust)
				if err != nil {
					t.Fatal(err)
				}
				rep, err := j.Replay(ctx, env.Engine, code, replay.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(rep.Output, res.Output) {
					t.Errorf("replay output differs:\n%s\nrecorded:\n%s", rep.Output, res.Output)
				}
				if n := len(srv.Stats().Requests); n != 2 {
					t.Errorf("the replay sent requests: the fake has %d", n)
				}
			})
		}
	}
}

// slowAnswer is conversation with a second turn streamed slowly enough for
// a test to stop the run in the middle of it.
const slowAnswer = `
api_key: ` + fakeKey + `
turns:
  - expect: {model: m-test, last_role: user, tools: [lookup]}
    reply:
      tool_calls: [{name: lookup, arguments: {city: Paris}}]
    usage: {input_tokens: 120, output_tokens: 14}
  - expect: {model: m-test}
    reply: {text: "Paris has 2.1 million people, and its metropolitan area about 13 million.", chunks: 8, chunk_delay: 120ms}
    usage: {input_tokens: 160, output_tokens: 19}
`

// stopMidStream runs the agent streamed and cancels it once the journal
// holds a batch of the second turn's stream: the run stops with that
// stream lost.
func stopMidStream(t *testing.T, env *testutil.Env, code []byte) journal.RunID {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := env.Host.Start(ctx, host.RunSpec{Code: code, Name: "llm", Input: []byte("stream"), Grant: llmGrant()})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ctx.Err() == nil {
			n := 0
			env.Store.Records(context.Background(), st.Run, 0, func(_ uint64, raw []byte) error {
				r, _ := journal.DecodeRecord(raw)
				if e, err := journal.DecodeEntry(r.Entry); err == nil && e.Op == "llm.next" {
					n++
				}
				return nil
			})
			if n >= 2 {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	if _, err := st.Execute(ctx); err == nil {
		t.Fatal("the run finished before it could be stopped mid-stream")
	}
	return st.Run
}

// TestResumeContinuesAResumableStream: a run stopped in the middle of a
// stream from a provider that keeps background responses is resumed
// there: the resumed run reads the stored stream again, the guest gets
// every chunk once, and the call is not sent again.
func TestResumeContinuesAResumableStream(t *testing.T) {
	code := testutil.BuildGo(t, "host/testdata/agents/llm")
	provs, srv := fakeProvidersWith(t, provider.OpenAIResponses, "/v1", slowAnswer, "    background: true\n")
	env := testutil.NewEnv(t, host.Deps{LLM: provs}, host.Config{})
	run := stopMidStream(t, env, code)
	res, err := env.Host.Resume(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != journal.StatusCompleted {
		t.Fatalf("status %s: %v", res.Status, res.Err)
	}
	out := string(res.Output)
	if !strings.Contains(out, `text="Paris has 2.1 million people, and its metropolitan area about 13 million."`) || strings.Contains(out, "interrupted") {
		t.Fatalf("the resumed stream did not give the whole answer once:\n%s", out)
	}
	st := fakellmtest.Settled(t, srv)
	var posts, gets int
	for _, r := range st.Requests {
		switch r.API {
		case fakellm.APIResponses:
			posts++
		case fakellm.APIResponsesGet:
			gets++
		}
	}
	if posts != 2 || gets != 1 || len(st.ResentAfterCompletion()) != 0 {
		t.Fatalf("the fake got %d calls and %d stream reads, want 2 and 1: %+v", posts, gets, st.Requests)
	}
}

// TestResumeInterruptsALostStream: without a resumable provider, the
// guest of a run resumed in the middle of a stream gets the recorded
// batches and then ErrStreamInterrupted; it asks again, and the answer it
// gets is whole.
func TestResumeInterruptsALostStream(t *testing.T) {
	code := testutil.BuildGo(t, "host/testdata/agents/llm")
	provs, srv := fakeProviders(t, provider.OpenAIChat, "/v1", slowAnswer)
	env := testutil.NewEnv(t, host.Deps{LLM: provs}, host.Config{})
	run := stopMidStream(t, env, code)
	res, err := env.Host.Resume(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Output)
	if res.Status != journal.StatusCompleted || !strings.Contains(out, "interrupted: failed: stream_interrupted: the stream of step") ||
		!strings.Contains(out, `text="Paris has 2.1 million people, and its metropolitan area about 13 million."`) {
		t.Fatalf("status %s (%v), output:\n%s", res.Status, res.Err, out)
	}
	if st := fakellmtest.Settled(t, srv); len(st.Requests) != 3 || len(st.ResentAfterCompletion()) != 0 {
		t.Fatalf("the fake got %d requests (%d sent again after an answer), want 3", len(st.Requests), len(st.ResentAfterCompletion()))
	}
}

// TestForgedCursorIsNotResumed: a guest that names a response of its own
// choosing in an llm.next cursor (a stored response of another run) gets
// stream_interrupted; the host reads nothing from the provider.
func TestForgedCursorIsNotResumed(t *testing.T) {
	code := testutil.BuildGo(t, "host/testdata/agents/llmcursor")
	provs, srv := fakeProvidersWith(t, provider.OpenAIResponses, "/v1", conversation, "    background: true\n")
	env := testutil.NewEnv(t, host.Deps{LLM: provs}, host.Config{})
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: code, Name: "forger", Input: []byte("resp_2"), Grant: llmGrant()})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Output), "stream_interrupted") {
		t.Fatalf("a forged cursor was answered: %s (%v)", res.Output, res.Err)
	}
	if n := len(srv.Stats().Requests); n != 0 {
		t.Fatalf("the fake got %d requests for a forged cursor", n)
	}
}

// TestResumeSendsACallInDoubtAgain: a run stopped while a model call was
// in flight (its intent durable, no answer journaled) is resumed by
// sending the call again, with the same request; the run completes and no
// answered call is sent twice.
func TestResumeSendsACallInDoubtAgain(t *testing.T) {
	code := testutil.BuildGo(t, "host/testdata/agents/llm")
	const slowFirst = `
api_key: ` + fakeKey + `
turns:
  - expect: {model: m-test, last_role: user, tools: [lookup]}
    reply:
      tool_calls: [{name: lookup, arguments: {city: Paris}}]
      delay: 1s
    usage: {input_tokens: 120, output_tokens: 14}
  - expect: {model: m-test}
    reply: {text: "Paris has 2.1 million people."}
    usage: {input_tokens: 160, output_tokens: 9}
`
	provs, srv := fakeProviders(t, provider.Anthropic, "", slowFirst)
	env := testutil.NewEnv(t, host.Deps{LLM: provs}, host.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	st, err := env.Host.Start(ctx, host.RunSpec{Code: code, Name: "llm", Input: []byte("complete"), Grant: llmGrant()})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for len(srv.Stats().Requests) == 0 {
			time.Sleep(2 * time.Millisecond)
		}
		cancel()
	}()
	if _, err := st.Execute(ctx); !errors.Is(err, host.ErrInterrupted) {
		t.Fatalf("run: %v, want ErrInterrupted", err)
	}
	res, err := env.Host.Resume(context.Background(), st.Run)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != journal.StatusCompleted || !strings.Contains(string(res.Output), `turn 1: stop=end text="Paris has 2.1 million people."`) {
		t.Fatalf("status %s (%v):\n%s", res.Status, res.Err, res.Output)
	}
	s := fakellmtest.Settled(t, srv)
	if len(s.Requests) != 3 || s.Requests[0].Outcome != fakellm.OutcomeCanceled || s.Requests[1].MatchKey != s.Requests[0].MatchKey || len(s.ResentAfterCompletion()) != 0 {
		t.Fatalf("want the call in doubt sent again once, then the next: %+v", s.Requests)
	}
}

// TestAuditOfAnLLMRun: the bundle of a streamed tool-calling run verifies
// offline, its replay identical, with the conversation's blobs carried and
// checked; one byte changed in a blob of the conversation fails
// verification, naming the blob.
func TestAuditOfAnLLMRun(t *testing.T) {
	code := testutil.BuildGo(t, "host/testdata/agents/llm")
	provs, _ := fakeProviders(t, provider.OpenAIResponses, "/v1", conversation)
	env := testutil.NewEnv(t, host.Deps{LLM: provs}, host.Config{})
	ctx := context.Background()
	res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Name: "llm", Input: []byte("stream"), Grant: llmGrant()})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run: %v %v", err, res)
	}
	var buf bytes.Buffer
	erep, err := replay.ExportTo(ctx, env.Store, res.Run, env.Key, replay.EngineSettings{}, &buf)
	if err != nil || erep.Blobs == 0 {
		t.Fatalf("export: %v, %+v (want the conversation's blobs)", err, erep)
	}
	opts := replay.VerifyOptions{Trusted: []ed25519.PublicKey{env.Key.Public().(ed25519.PublicKey)}, Engine: env.Engine}
	rep, err := replay.VerifyBundle(ctx, buf.Bytes(), opts)
	if err != nil || !rep.OK || !rep.ReplayIdentical || rep.Blobs != erep.Blobs {
		t.Fatalf("verify: %v %+v", err, rep)
	}
	b, err := replay.DecodeBundle(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	// The system message's blob: its text is in the bundle once.
	var blob replay.BundleBlob
	for _, bl := range b.Blobs {
		if bytes.Contains(bl.Data, []byte("Answer with numbers.")) {
			blob = bl
		}
	}
	if blob.Sum == nil {
		t.Fatal("no blob holds the system message")
	}
	changed := bytes.Clone(buf.Bytes())
	pos := bytes.LastIndex(changed, blob.Data) // the module holds the text too, not the blob
	if pos < 0 {
		t.Fatal("the blob is not in the bundle")
	}
	changed[pos+bytes.Index(blob.Data, []byte("Answer with numbers."))] ^= 0x20
	rep, err = replay.VerifyBundle(ctx, changed, opts)
	if err == nil || rep.Failure == nil || rep.Failure.Class != "blob" || !strings.Contains(rep.Failure.Message, journal.SumHex(blob.Sum)) {
		t.Fatalf("a changed blob: %v, %+v (want class blob naming %s)", err, rep.Failure, journal.SumHex(blob.Sum))
	}
}

// TestAuditRefusesALedgerNoHostWrites: a journal whose budget records no
// ledger writes (the settle of the first model call names a reservation
// never made), re-chained and re-sealed by the cell's own key so that
// every hash and seal holds, fails the audit with class budget.
func TestAuditRefusesALedgerNoHostWrites(t *testing.T) {
	code := testutil.BuildGo(t, "host/testdata/agents/llm")
	provs, _ := fakeProviders(t, provider.OpenAIChat, "/v1", conversation)
	env := testutil.NewEnv(t, host.Deps{LLM: provs}, host.Config{})
	ctx := context.Background()
	res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Name: "llm", Input: []byte("complete"), Grant: llmGrant()})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run: %v %v", err, res)
	}
	opts := replay.VerifyOptions{Trusted: []ed25519.PublicKey{env.Key.Public().(ed25519.PublicKey)}, Engine: env.Engine}
	export := func() []byte {
		var buf bytes.Buffer
		if _, err := replay.ExportTo(ctx, env.Store, res.Run, env.Key, replay.EngineSettings{}, &buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	if rep, err := replay.VerifyBundle(ctx, export(), opts); err != nil || !rep.OK {
		t.Fatalf("the untouched run: %v", err)
	}
	forged := false
	err = env.Store.RewriteJournal(res.Run, func(recs [][]byte) [][]byte {
		var prev []byte
		for i, raw := range recs {
			rec, err := journal.DecodeRecord(raw)
			if err != nil {
				t.Fatal(err)
			}
			e, err := journal.DecodeEntry(rec.Entry)
			if err != nil {
				t.Fatal(err)
			}
			if !forged && e.Op == "llm.complete" && e.Phase == journal.PhaseCompleted {
				ops, err := budget.DecodeRecord(e.Budget)
				if err != nil || len(ops) != 1 || ops[0].Kind != budget.OpSettle {
					t.Fatalf("the first answer's budget record: %v %v", ops, err)
				}
				ops[0].ID = 99
				if e.Budget, err = budget.EncodeRecord(ops...); err != nil {
					t.Fatal(err)
				}
				forged = true
			}
			if prev != nil {
				e.Prev = prev
			}
			rec.Entry, _ = journal.EncodeEntry(e)
			prev = journal.Sum(rec.Entry)
			if rec.Seal != nil {
				rec.Seal = &journal.Seal{Cell: env.Key.Public().(ed25519.PublicKey), Sig: ed25519.Sign(env.Key, journal.SealMessage(e.Run, e.Seq, prev))}
			}
			recs[i], _ = journal.EncodeRecord(rec)
		}
		return recs
	})
	if err != nil || !forged {
		t.Fatalf("rewrite: %v (forged %v)", err, forged)
	}
	if _, err := journal.VerifyStore(ctx, env.Store, res.Run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey))); err != nil {
		t.Fatalf("the re-sealed journal must pass the journal's own checks: %v", err)
	}
	rep, err := replay.VerifyBundle(ctx, export(), opts)
	if err == nil || rep.Failure == nil || rep.Failure.Class != "budget" {
		t.Fatalf("a ledger no host writes: %v, %+v (want class budget)", err, rep.Failure)
	}
}
