package tracing_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/tracing"
	"github.com/agentrt/agentrt/internal/otlptest"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"go.opentelemetry.io/otel"
	"google.golang.org/protobuf/encoding/prototext"
)

// shape is what a call span says that does not change from one run of the
// same guest to the next: its name, kind, status, and every attribute but
// those naming the run, its entries' hashes and a model's response id.
func shape(s span) string {
	var keys []string
	for k := range s.Attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s kind=%s status=%s scope=%s schema=%s service=%s", s.Name, s.Kind, s.Status, s.Scope, s.Schema, s.Service)
	for _, k := range keys {
		switch k {
		case "agentrt.run.id", "agentrt.journal.entry_hash", "gen_ai.response.id":
			fmt.Fprintf(&b, " %s=(%T)", k, s.Attrs[k].GetValue())
		default:
			fmt.Fprintf(&b, " %s=%s", k, prototext.MarshalOptions{}.Format(s.Attrs[k]))
		}
	}
	return b.String()
}

// callShapes runs a kv guest and the llm conversation on a host traced as
// the environment (and extra) configures, and returns the shapes of their
// call spans, in the order of their journal seqs.
func callShapes(t *testing.T, extra map[string]string) []string {
	t.Helper()
	for k, v := range extra {
		t.Setenv(k, v)
	}
	rcv, tr := traced(t, false)
	env := testutil.NewEnv(t, host.Deps{Tracer: tr.Tracer(), LLM: fakeProviders(t)}, host.Config{})
	ctx := context.Background()
	kv, err := env.Host.Run(ctx, host.RunSpec{Code: testutil.BuildWAT(t, "host/testdata/wat/kvput.wat"),
		Grant: &host.Grant{KV: &host.KVGrant{Namespace: "ns"}}})
	if err != nil || kv.Status != journal.StatusCompleted {
		t.Fatalf("kv run: %v %+v", err, kv)
	}
	chat, err := env.Host.Run(ctx, host.RunSpec{Code: testutil.BuildGo(t, "host/testdata/agents/llm"), Name: "llm",
		Input: []byte("complete"), Grant: llmGrant()})
	if err != nil || chat.Status != journal.StatusCompleted {
		t.Fatalf("chat: %v %+v", err, chat)
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, run := range []journal.RunID{kv.Run, chat.Run} {
		checkLinks(t, env, rcv, run)
		spans := rcv.Of(run.String())
		slices.SortFunc(spans, func(a, b span) int { return int(a.Num("agentrt.journal.seq") - b.Num("agentrt.journal.seq")) })
		for _, s := range spans {
			if s.Name != "agentrt.run" {
				out = append(out, shape(s))
			}
		}
	}
	return out
}

// TestWireSpansAreTheSDKs: the call spans host/tracing has the host write
// itself (the wire path) say what the SDK's spans of the same calls say:
// the same names, kinds, statuses, scope, schema, resource and attributes
// with the same values (GenAI ones of a model call included), linked to
// their journal entries (checkLinks). The SDK's path is the one taken when
// a span limit is set (here a value length limit no attribute reaches).
// The wire path's batches go out through its own sender, or through the
// OTLP client when a variable only the client honours is set (here
// INSECURE, true of an http endpoint anyway).
func TestWireSpansAreTheSDKs(t *testing.T) {
	var wire, wireClient, sdk []string
	t.Run("wire", func(t *testing.T) { wire = callShapes(t, nil) })
	t.Run("wire through the client", func(t *testing.T) {
		wireClient = callShapes(t, map[string]string{"OTEL_EXPORTER_OTLP_INSECURE": "true"})
	})
	t.Run("sdk", func(t *testing.T) {
		sdk = callShapes(t, map[string]string{"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "100000"})
	})
	if len(wire) < 50 || len(wire) != len(sdk) || len(wireClient) != len(sdk) {
		t.Fatalf("%d call spans on the wire path, %d on it through the client, %d through the SDK", len(wire), len(wireClient), len(sdk))
	}
	for i := range wire {
		if wire[i] != sdk[i] || wireClient[i] != sdk[i] {
			t.Errorf("call span %d:\nwire:   %s\nclient: %s\nsdk:    %s", i, wire[i], wireClient[i], sdk[i])
		}
	}
}

// TestWireSamplingIsByRun: under a sampler that keeps half the traces
// (OTEL_TRACES_SAMPLER=traceidratio), a run's call spans are exported
// exactly when its run span is, as a parent-based sampler decides for
// children; and some runs are kept, some not.
func TestWireSamplingIsByRun(t *testing.T) {
	t.Setenv("OTEL_TRACES_SAMPLER", "traceidratio")
	t.Setenv("OTEL_TRACES_SAMPLER_ARG", "0.5")
	rcv, tr := traced(t, false)
	env := testutil.NewEnv(t, host.Deps{Tracer: tr.Tracer()}, host.Config{})
	ctx := context.Background()
	code := testutil.BuildWAT(t, "host/testdata/wat/kvput.wat")
	var runs []journal.RunID
	for range 16 {
		res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Grant: &host.Grant{KV: &host.KVGrant{Namespace: "ns"}}})
		if err != nil || res.Status != journal.StatusCompleted {
			t.Fatalf("run: %v %+v", err, res)
		}
		runs = append(runs, res.Run)
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, run := range runs {
		spans := rcv.Of(run.String())
		if len(spans) == 0 {
			continue
		}
		kept++
		checkLinks(t, env, rcv, run)
	}
	if kept == 0 || kept == len(runs) {
		t.Errorf("%d of %d runs kept under a ratio of 0.5", kept, len(runs))
	}
}

// TestWireQueueFullDropsAndCounts: with the collector stalled, call spans
// beyond OTEL_BSP_MAX_QUEUE_SIZE are dropped (the call never waits on the
// network), counted and told of through the OpenTelemetry error handler;
// the ones queued are sent once it answers, and every span is either
// received or counted as dropped.
func TestWireQueueFullDropsAndCounts(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	var stalled atomic.Bool
	rcv := otlptest.Start(t)
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stalled.CompareAndSwap(false, true) {
			<-release
		}
		rcv.ServeHTTP(w, r)
	}))
	t.Cleanup(stall.Close)
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	var logged []string
	var logMu sync.Mutex
	prev := otel.GetErrorHandler()
	t.Cleanup(func() { otel.SetErrorHandler(prev) })
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logMu.Lock()
		logged = append(logged, err.Error())
		logMu.Unlock()
	}))
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", stall.URL)
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "8")
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4")
	tr, err := tracing.FromEnv(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	env := testutil.NewEnv(t, host.Deps{Tracer: tr.Tracer()}, host.Config{})
	ctx := context.Background()
	res, err := env.Host.Run(ctx, host.RunSpec{Code: testutil.BuildWAT(t, "host/testdata/wat/kvput.wat"),
		Grant: &host.Grant{KV: &host.KVGrant{Namespace: "ns"}}})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run: %v %+v", err, res)
	}
	dropped := tr.Dropped()
	once.Do(func() { close(release) })
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	es, _ := journalEntries(t, env, res.Run)
	calls := 0
	for _, e := range es {
		if e.Phase == journal.PhaseCompleted || e.Phase == journal.PhaseFailed {
			calls++
		}
	}
	got := 0
	for _, s := range rcv.Of(res.Run.String()) {
		if s.Name != "agentrt.run" {
			got++
		}
	}
	// At most the batch held by the stalled request and a full queue got
	// through while the collector was stalled.
	if dropped == 0 || dropped > uint64(calls) || got+int(dropped) != calls || got > 4+8 {
		t.Errorf("%d calls: %d call spans received, %d dropped; want the rest dropped beyond 4 in flight and 8 queued", calls, got, dropped)
	}
	// The drops were told of, all of them.
	logMu.Lock()
	defer logMu.Unlock()
	told := uint64(0)
	for _, l := range logged {
		var n, q uint64
		if _, err := fmt.Sscanf(l, "agentrt tracing: %d call spans dropped, the queue of %d was full", &n, &q); err == nil && q == 8 {
			told += n
		}
	}
	if told != dropped {
		t.Errorf("the error handler was told of %d dropped spans, want %d: %q", told, dropped, logged)
	}
}
