package tracing_test

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/agentrt/agentrt/host"
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
// untraced (Deps.Tracer nil, the default) and traced through the SDK's
// batch processor.
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
		for _, traced := range []bool{false, true} {
			name := g.name + "/untraced"
			var deps host.Deps
			if traced {
				name = g.name + "/traced"
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
				b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
				deps.Tracer = tp
			}
			b.Run(name, func(b *testing.B) {
				env := testutil.NewEnv(b, deps, host.Config{})
				b.ResetTimer()
				res, err := env.Host.Run(context.Background(), host.RunSpec{Code: code, Grant: g.grant,
					Input: binary.LittleEndian.AppendUint64(nil, uint64(b.N))})
				if err != nil || res.Status != journal.StatusCompleted {
					b.Fatalf("%v %+v", err, res)
				}
			})
		}
	}
}
