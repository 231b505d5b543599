package tracing_test

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/tracing"
	"github.com/agentrt/agentrt/internal/cputime"
	"github.com/agentrt/agentrt/internal/otlptest"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// discard is an exporter that drops every span: the benchmark measures
// making spans, not sending them.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkCallTracing is the cost of tracing on the path of a call: a
// pure call (bench's figure 2 guest) and a durable kv.put (figure 3's),
// untraced (Deps.Tracer nil, the default), traced through the SDK's batch
// processor to an exporter that drops the spans ("sdk"), and traced as
// FromEnv sets it up ("wire": the call spans written by the host and sent
// by the OTLP/HTTP client to a loopback receiver that drops them).
func BenchmarkCallTracing(b *testing.B) {
	guests := []struct {
		name  string
		file  string
		grant *host.Grant
	}{
		{"pure", "bench/testdata/loop.wat", host.DefaultGrant()},
		{"durable", "bench/testdata/kvput.wat", &host.Grant{Run: &host.RunGrant{}, KV: &host.KVGrant{Namespace: "b"}}},
	}
	for _, g := range guests {
		code := testutil.BuildWAT(b, g.file)
		for _, how := range []string{"untraced", "sdk", "wire"} {
			var deps host.Deps
			var flush func(context.Context) error
			switch how {
			case "sdk":
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
				b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
				deps.Tracer, flush = tp, tp.ForceFlush
			case "wire":
				b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlptest.StartDiscarding(b))
				b.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "1000000")
				tr, err := tracing.FromEnv(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() {
					if n := tr.Dropped(); n > 0 {
						b.Errorf("%d spans dropped", n)
					}
					_ = tr.Shutdown(context.Background())
				})
				deps.Tracer, flush = tr.Tracer(), tr.ForceFlush
			}
			b.Run(g.name+"/"+how, func(b *testing.B) {
				env := testutil.NewEnv(b, deps, host.Config{})
				b.ResetTimer()
				cpu := cputime.Process()
				res, err := env.Host.Run(context.Background(), host.RunSpec{Code: code, Grant: g.grant,
					Input: binary.LittleEndian.AppendUint64(nil, uint64(b.N))})
				if err != nil || res.Status != journal.StatusCompleted {
					b.Fatalf("%v %+v", err, res)
				}
				if flush != nil {
					if err := flush(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
