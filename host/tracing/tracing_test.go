package tracing_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentrt/agentrt/examples/crawler/site"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/caps/llm"
	"github.com/agentrt/agentrt/host/caps/llm/provider"
	"github.com/agentrt/agentrt/host/tracing"
	"github.com/agentrt/agentrt/internal/fakellm/fakellmtest"
	"github.com/agentrt/agentrt/internal/otlptest"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

type span = otlptest.Span

// traced starts a receiver and the tracing OTEL_* configures for it.
func traced(t *testing.T, payloads bool) (*otlptest.Receiver, *tracing.Tracing) {
	t.Helper()
	rcv := otlptest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "agentrt-trace-test")
	t.Setenv(tracing.EnvPayloads, fmt.Sprint(payloads))
	tr, err := tracing.FromEnv(context.Background())
	if err != nil || tr == nil {
		t.Fatalf("FromEnv = %v, %v; want tracing", tr, err)
	}
	return rcv, tr
}

// journalEntries returns the entries of run with their hashes, by seq.
func journalEntries(t *testing.T, env *testutil.Env, run journal.RunID) ([]*journal.Entry, []string) {
	t.Helper()
	var es []*journal.Entry
	var hashes []string
	err := env.Store.Records(context.Background(), run, 0, func(seq uint64, raw []byte) error {
		r, err := journal.DecodeRecord(raw)
		if err != nil {
			return err
		}
		e, err := journal.DecodeEntry(r.Entry)
		if err != nil {
			return err
		}
		if e.Seq != uint64(len(es)) {
			return fmt.Errorf("entry %d at %d", e.Seq, len(es))
		}
		es, hashes = append(es, e), append(hashes, hex.EncodeToString(journal.Sum(r.Entry)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return es, hashes
}

// checkLinks checks the spans of a run that ran once against its journal:
// one run span, named by the header, and one child span per call
// journaled, each naming the entry of its outcome (and an effect its
// intent) by seq and hash. It returns the call spans by op.
func checkLinks(t *testing.T, env *testutil.Env, rcv *otlptest.Receiver, run journal.RunID) map[string][]span {
	t.Helper()
	es, hashes := journalEntries(t, env, run)
	var root *span
	calls := map[string][]span{}
	ncalls := 0
	spans := rcv.Of(run.String())
	for i, s := range spans {
		if s.Scope != host.TracerName || s.Schema != "https://opentelemetry.io/schemas/"+host.GenAISemconv {
			t.Errorf("span %s: scope %q schema %q", s.Name, s.Scope, s.Schema)
		}
		if s.Name == "agentrt.run" {
			if root != nil {
				t.Fatalf("two run spans for run %s", run)
			}
			root = &spans[i]
			continue
		}
		calls[s.Str("agentrt.op")] = append(calls[s.Str("agentrt.op")], s)
		ncalls++
	}
	if root == nil {
		t.Fatalf("no run span for run %s among %d spans", run, len(spans))
	}
	tr := es[0].Header.Trace
	if tr == nil || !bytes.Equal(tr.ID, root.Trace) || !bytes.Equal(tr.Span, root.ID) {
		t.Fatalf("the header's trace %+v does not name the run span %x/%x", tr, root.Trace, root.ID)
	}
	if root.Num("agentrt.journal.seq") != 0 || root.Str("agentrt.journal.entry_hash") != hashes[0] ||
		root.Num("agentrt.journal.last_seq") != int64(len(es)-1) || root.Str("agentrt.journal.last_hash") != hashes[len(es)-1] {
		t.Errorf("run span links seq %d %s, last %d %s; the journal's start is %s and its end %d %s",
			root.Num("agentrt.journal.seq"), root.Str("agentrt.journal.entry_hash"), root.Num("agentrt.journal.last_seq"),
			root.Str("agentrt.journal.last_hash"), hashes[0], len(es)-1, hashes[len(es)-1])
	}
	outcomes := 0
	for _, e := range es {
		if e.Phase == journal.PhaseCompleted || e.Phase == journal.PhaseFailed {
			outcomes++
		}
	}
	if ncalls != outcomes {
		t.Errorf("%d call spans for %d calls journaled", ncalls, outcomes)
	}
	for _, list := range calls {
		for _, s := range list {
			if !bytes.Equal(s.Trace, root.Trace) || !bytes.Equal(s.Parent, root.ID) {
				t.Errorf("call span %s is not a child of the run span", s.Name)
			}
			seq := s.Num("agentrt.journal.seq")
			if seq <= 0 || seq >= int64(len(es)) {
				t.Fatalf("call span %s names seq %d of %d entries", s.Name, seq, len(es))
			}
			e := es[seq]
			if s.Str("agentrt.journal.entry_hash") != hashes[seq] || e.Op != s.Str("agentrt.op") ||
				int64(e.Step) != s.Num("agentrt.step") || hex.EncodeToString(e.InputHash) != s.Str("agentrt.input_hash") {
				t.Errorf("call span %s step %d names entry %d (%s step %d), hash %s; the entry's is %s",
					s.Name, s.Num("agentrt.step"), seq, e.Op, e.Step, s.Str("agentrt.journal.entry_hash"), hashes[seq])
			}
			if e.Phase != journal.PhaseCompleted && e.Phase != journal.PhaseFailed {
				t.Errorf("call span %s names a %s entry", s.Name, e.Phase)
			}
			if s.Str("agentrt.op.class") == "effect" {
				// A call the gate refused is one entry; every other
				// effect has an intent before its outcome.
				in := s.Num("agentrt.journal.intent_seq")
				if s.Str("agentrt.status") == "denied" && !s.Has("agentrt.journal.intent_seq") {
					continue
				}
				if in <= 0 || in >= seq || es[in].Phase != journal.PhaseIntent || es[in].Step != e.Step {
					t.Errorf("effect span %s names intent %d", s.Name, in)
				}
				if s.Kind != tracepb.Span_SPAN_KIND_CLIENT {
					t.Errorf("effect span %s is of kind %s", s.Name, s.Kind)
				}
			}
		}
	}
	return calls
}

// TestTraceOfACrawlAndAModelCall exports the spans of two runs to an
// in-process OTLP receiver: a crawl (the crawler example against its
// site: http.fetch and kv calls) and a tool-calling conversation with the
// fake model provider. Every call has a span under its run's, naming its
// journal entry by seq and hash; the run's header names the run's span;
// the llm calls carry the GenAI attributes; no payload is in any span.
func TestTraceOfACrawlAndAModelCall(t *testing.T) {
	rcv, tr := traced(t, false)
	crawler := testutil.BuildGo(t, "examples/crawler")
	agent := testutil.BuildGo(t, "host/testdata/agents/llm")
	siteSrv := httptest.NewServer(site.Handler())
	t.Cleanup(siteSrv.Close)
	provs := fakeProviders(t)
	env := testutil.NewEnv(t, host.Deps{Tracer: tr.Tracer(), TracePayloads: tr.TracePayloads(), LLM: provs}, host.Config{})
	ctx := context.Background()

	g, err := host.LoadGrant(testutil.RepoRoot() + "/examples/crawler/grant.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crawl, err := env.Host.Run(ctx, host.RunSpec{Code: crawler, Name: "crawler", Input: []byte(`{"start":"` + siteSrv.URL + `/"}`), Grant: g})
	if err != nil || crawl.Status != journal.StatusCompleted {
		t.Fatalf("crawl: %v %+v", err, crawl)
	}
	chat, err := env.Host.Run(ctx, host.RunSpec{Code: agent, Name: "llm", Input: []byte("complete"), Grant: llmGrant()})
	if err != nil || chat.Status != journal.StatusCompleted {
		t.Fatalf("chat: %v %+v", err, chat)
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	calls := checkLinks(t, env, rcv, crawl.Run)
	if n := len(calls["http.request"]); n < 3 {
		t.Errorf("%d http.request spans; the crawl fetched every page of the site", n)
	}
	if len(calls["kv.put"]) == 0 || len(calls["kv.get"]) == 0 {
		t.Errorf("no kv spans: %v", keys(calls))
	}
	chats := checkLinks(t, env, rcv, chat.Run)["llm.complete"]
	if len(chats) != 2 {
		t.Fatalf("%d llm.complete spans, want the conversation's 2", len(chats))
	}
	want := []struct {
		finish  string
		in, out int64
	}{{"tool_use", 120, 14}, {"end", 160, 9}}
	for i, s := range chats {
		if s.Name != "chat m-test" || s.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("llm span %d: %q kind %s, want \"chat m-test\", client", i, s.Name, s.Kind)
		}
		for k, v := range map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
			"gen_ai.request.model": "m-test", "gen_ai.response.model": "m-test"} {
			if s.Str(k) != v {
				t.Errorf("llm span %d: %s = %q, want %q", i, k, s.Str(k), v)
			}
		}
		reasons := s.Attrs["gen_ai.response.finish_reasons"].GetArrayValue().GetValues()
		if len(reasons) != 1 || reasons[0].GetStringValue() != want[i].finish ||
			s.Num("gen_ai.usage.input_tokens") != want[i].in || s.Num("gen_ai.usage.output_tokens") != want[i].out ||
			s.Num("gen_ai.request.max_tokens") != 256 || s.Str("gen_ai.response.id") == "" {
			t.Errorf("llm span %d: finish %v, usage %d/%d, max %d, id %q; want %s, %d/%d, 256",
				i, reasons, s.Num("gen_ai.usage.input_tokens"), s.Num("gen_ai.usage.output_tokens"),
				s.Num("gen_ai.request.max_tokens"), s.Str("gen_ai.response.id"), want[i].finish, want[i].in, want[i].out)
		}
		if s.Has("gen_ai.input.messages") || s.Has("gen_ai.output.messages") {
			t.Errorf("llm span %d holds messages, which were not asked for", i)
		}
	}
	// Payloads were not asked for: no request, response or page text went out.
	for _, s := range rcv.Spans() {
		if s.Has("agentrt.request") || s.Has("agentrt.response") {
			t.Errorf("span %s holds a payload", s.Name)
		}
	}
	all := bytes.Join(rcv.Raw(), nil)
	for _, secret := range []string{"How many people live in Paris", "Paris has 2.1 million", "<title>", fakeKey} {
		if bytes.Contains(all, []byte(secret)) {
			t.Errorf("the exported spans hold %q", secret)
		}
	}
}

// TestTracePayloadsWhenAsked: with AGENTRT_TRACE_PAYLOADS=true, the llm
// span carries the conversation as GenAI messages and the request and
// response.
func TestTracePayloadsWhenAsked(t *testing.T) {
	rcv, tr := traced(t, true)
	agent := testutil.BuildGo(t, "host/testdata/agents/llm")
	env := testutil.NewEnv(t, host.Deps{Tracer: tr.Tracer(), TracePayloads: tr.TracePayloads(), LLM: fakeProviders(t)}, host.Config{})
	ctx := context.Background()
	chat, err := env.Host.Run(ctx, host.RunSpec{Code: agent, Input: []byte("stream"), Grant: llmGrant()})
	if err != nil || chat.Status != journal.StatusCompleted {
		t.Fatalf("chat: %v %+v", err, chat)
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	calls := checkLinks(t, env, rcv, chat.Run)
	chats := calls["llm.complete"]
	if len(chats) != 2 {
		t.Fatalf("%d llm.complete spans", len(chats))
	}
	if in := chats[0].Str("gen_ai.input.messages"); !strings.Contains(in, `"content":"How many people live in Paris?"`) || !strings.Contains(in, `"role":"system"`) {
		t.Errorf("gen_ai.input.messages = %s", in)
	}
	if !chats[0].Has("agentrt.request") || !chats[0].Has("agentrt.response") {
		t.Errorf("the llm span lacks its payloads: %v", chats[0].Attrs)
	}
	// Streamed: the answer's attributes are on the call whose batch
	// closed the stream (the second turn's comes slowly, in llm.next
	// batches), with the messages it assembled.
	if len(calls["llm.next"]) == 0 {
		t.Fatal("the second turn's stream came in one batch; the test wants llm.next calls")
	}
	var closed []span
	for _, s := range append(calls["llm.complete"], calls["llm.next"]...) {
		if s.Has("gen_ai.response.model") {
			closed = append(closed, s)
		}
	}
	if len(closed) != 2 || closed[1].Str("agentrt.op") != "llm.next" ||
		!strings.Contains(closed[1].Str("gen_ai.output.messages"), "Paris has 2.1 million people.") ||
		closed[1].Num("gen_ai.usage.output_tokens") != 9 {
		t.Fatalf("%d calls close a stream, want the first turn's llm.complete and the second's last llm.next, with its answer", len(closed))
	}
}

// TestTraceOfAResumeJoinsTheRun: a run interrupted during an effect and
// resumed has two run spans in one trace, the resumption's a child of the
// span its header names.
func TestTraceOfAResumeJoinsTheRun(t *testing.T) {
	rcv, tr := traced(t, false)
	code := testutil.BuildGo(t, "host/testdata/agents/probe")
	env := testutil.NewEnv(t, host.Deps{Tracer: tr.Tracer()}, host.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cut := false
		if r.URL.Path == "/cut" {
			once.Do(func() { cut = true })
		}
		if cut {
			cancel() // the run goes away while this request is served
			<-r.Context().Done()
			return
		}
		fmt.Fprint(w, "served "+r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	g := &host.Grant{Run: &host.RunGrant{}, KV: &host.KVGrant{Namespace: "p"}, Clock: &host.ClockGrant{}, Random: &host.RandomGrant{},
		HTTP: &host.HTTPGrant{Hosts: []string{strings.TrimPrefix(srv.URL, "http://")}, Idempotent: true}}
	steps := fmt.Sprintf(`[{"op":"http","url":"%s/a"},{"op":"http","url":"%s/cut"},{"op":"kv.get","key":"k"}]`, srv.URL, srv.URL)
	res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Grant: g, Input: []byte(steps)})
	if !errors.Is(err, host.ErrInterrupted) {
		t.Fatalf("run: %v, want ErrInterrupted", err)
	}
	done, err := env.Host.Resume(context.Background(), res.Run)
	if err != nil || done.Status != journal.StatusCompleted {
		t.Fatalf("resume: %v %+v", err, done)
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	es, hashes := journalEntries(t, env, res.Run)
	hdr := es[0].Header.Trace
	var runs []span
	for _, s := range rcv.Of(res.Run.String()) {
		if s.Name == "agentrt.run" {
			runs = append(runs, s)
		}
	}
	if len(runs) != 2 || hdr == nil {
		t.Fatalf("%d run spans, header trace %v; want 2 and one", len(runs), hdr)
	}
	first, second := runs[0], runs[1]
	if first.Has("agentrt.run.resumed") {
		first, second = second, first
	}
	if !bytes.Equal(first.ID, hdr.Span) || first.Status != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("the interrupted execution's span %x (status %s) is not the header's %x, failed", first.ID, first.Status, hdr.Span)
	}
	if !bytes.Equal(second.Trace, hdr.ID) || !bytes.Equal(second.Parent, hdr.Span) || !second.Attrs["agentrt.run.resumed"].GetBoolValue() {
		t.Errorf("the resumption's span is in trace %x under %x; the header names %x/%x", second.Trace, second.Parent, hdr.ID, hdr.Span)
	}
	if second.Str("agentrt.journal.last_hash") != hashes[len(hashes)-1] {
		t.Errorf("the resumption's span ends at %s; the journal at %s", second.Str("agentrt.journal.last_hash"), hashes[len(hashes)-1])
	}
	// The call resumed live is a child of the resumption's span.
	for _, s := range rcv.Of(res.Run.String()) {
		if s.Str("agentrt.op") == "kv.get" && !bytes.Equal(s.Parent, second.ID) {
			t.Errorf("the resumed call's span is not under the resumption's")
		}
	}
}

// TestFromEnv: tracing is off unless OTEL_* asks for it, and a value it
// cannot honour is refused, naming the variable.
func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		on   bool
		err  string
	}{
		{"nothing set", nil, false, ""},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, true, ""},
		{"traces endpoint, grpc", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, true, ""},
		{"exporter otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, ""},
		{"exporter none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, false, ""},
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false, ""},
		{"zipkin", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, "OTEL_TRACES_EXPORTER"},
		{"http/json", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, false, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{"payloads maybe", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", tracing.EnvPayloads: "maybe"}, false, tracing.EnvPayloads},
		{"disabled maybe", map[string]string{"OTEL_SDK_DISABLED": "maybe"}, false, "OTEL_SDK_DISABLED"},
		{"batch settings", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "10",
			"OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_BSP_EXPORT_TIMEOUT": "1000"}, true, ""},
		{"queue size words", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_BSP_MAX_QUEUE_SIZE": "12lots"}, false, "OTEL_BSP_MAX_QUEUE_SIZE"},
		{"batch size zero", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "0"}, false, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"},
		{"delay negative", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_BSP_SCHEDULE_DELAY": "-5"}, false, "OTEL_BSP_SCHEDULE_DELAY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
				"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", tracing.EnvPayloads,
				"OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_EXPORT_TIMEOUT"} {
				t.Setenv(k, tc.env[k])
			}
			tr, err := tracing.FromEnv(context.Background())
			if tc.err != "" {
				if !errors.Is(err, tracing.ErrConfig) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want ErrConfig naming %s", err, tc.err)
				}
				return
			}
			if err != nil || (tr != nil) != tc.on {
				t.Fatalf("FromEnv = %v, %v; want on=%v", tr, err, tc.on)
			}
			if err := tr.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func keys(m map[string][]span) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

const fakeKey = "sk-fake-trace-Lq20Vd9Xw"

// conversation is the llm agent's two turns (host/caps/llm's test script).
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

func fakeProviders(t *testing.T) *llm.Providers {
	t.Helper()
	_, hs := fakellmtest.Serve(t, conversation)
	t.Setenv("AGENTRT_TEST_FAKE_KEY", fakeKey)
	cfg, err := provider.Parse("llm.yaml", []byte(fmt.Sprintf(`
providers:
  fake:
    kind: openai-chat
    base_url: %s/v1
    credential: {env: AGENTRT_TEST_FAKE_KEY}
    models:
      m-test: {input: "2.50", output: "10"}
`, hs.URL)))
	if err != nil {
		t.Fatal(err)
	}
	return llm.NewProviders(cfg, hs.Client(), nil)
}

func llmGrant() *host.Grant {
	return &host.Grant{Run: &host.RunGrant{}, LLM: &host.LLMGrant{Providers: []string{"fake"}, Models: []string{"m-test"}, MaxOutputTokens: 1024}}
}
