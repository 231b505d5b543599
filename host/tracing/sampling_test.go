package tracing_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// runsOut samples out every run span and would sample in every other span:
// a sampler no standard OTEL_TRACES_SAMPLER gives, which tells whether the
// host asks for call spans under a run sampled out. It counts what it is
// asked.
type runsOut struct{ asked atomic.Int64 }

func (s *runsOut) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	s.asked.Add(1)
	if p.Name == "agentrt.run" {
		return sdktrace.SamplingResult{Decision: sdktrace.Drop}
	}
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
}

func (s *runsOut) Description() string { return "runsOut" }

// TestSampledOutRunMakesNoCallSpans: sampling is by run. A run whose span
// is sampled out makes no span for its calls and gathers nothing for
// them; a run sampled in still gets one span per call (TestTraceOfACrawl
// checks those).
func TestSampledOutRunMakesNoCallSpans(t *testing.T) {
	ctx := context.Background()
	code := testutil.BuildWAT(t, "host/testdata/wat/kvput.wat")
	for _, tc := range []struct {
		name    string
		sampler sdktrace.Sampler
		// asked is how many spans the sampler is asked about; spans, how
		// many are exported.
		asked, spans func(calls int) int
	}{
		{"run sampled out", &runsOut{}, func(int) int { return 1 }, func(int) int { return 0 }},
		{"run sampled in", sdktrace.AlwaysSample(), nil, func(calls int) int { return 1 + calls }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(tc.sampler), sdktrace.WithSyncer(exp))
			env := testutil.NewEnv(t, host.Deps{Tracer: tp}, host.Config{})
			res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Grant: &host.Grant{KV: &host.KVGrant{Namespace: "ns"}}})
			if err != nil || res.Status != journal.StatusCompleted {
				t.Fatalf("run: %v %+v", err, res)
			}
			t.Cleanup(func() { _ = tp.Shutdown(ctx) }) // which empties exp
			es, _ := journalEntries(t, env, res.Run)
			calls := 0
			for _, e := range es {
				if e.Phase == journal.PhaseCompleted || e.Phase == journal.PhaseFailed {
					calls++
				}
			}
			if calls < 10 {
				t.Fatalf("the run journaled %d calls; kvput.wat makes 50", calls)
			}
			if got, want := len(exp.GetSpans()), tc.spans(calls); got != want {
				t.Errorf("%d spans exported for a run of %d calls, want %d", got, calls, want)
			}
			if s, ok := tc.sampler.(*runsOut); ok {
				if got, want := int(s.asked.Load()), tc.asked(calls); got != want {
					t.Errorf("the sampler was asked about %d spans for a run of %d calls sampled out, want %d (the run's alone)", got, calls, want)
				}
			}
		})
	}
}
