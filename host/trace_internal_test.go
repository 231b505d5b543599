package host

import (
	"context"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host/tracing"
	"github.com/agentrt/agentrt/internal/cputime"
	"github.com/agentrt/agentrt/internal/otlptest"
	"github.com/agentrt/agentrt/journal"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// BenchmarkCallSpan is what tracing adds to one journaled effect (a
// kv.put), alone: its span started, its intent seq, its outcome (seq,
// entry hash, status) and its end, exported through the real OTLP/HTTP
// client to a receiver on loopback that reads each request and drops it,
// as bench figure 20a traces; the spans are flushed within the timing.
// "wire" is the path host/tracing gives the host (the span written in
// OTLP's encoding, internal/otlpwire, and batched), with a queue of 2^18
// spans, each goroutine flushing it every 2^10 spans it makes, within the
// timing, so that none is dropped however fast the benchmark makes them
// (it fails if one is); "sdk" is
// an SDK span through the SDK's batch processor (default settings but for
// WithBlocking, for the same reason) and its OTLP exporter, the path a
// provider without the wire exporter takes. "parallel" makes the spans
// from 64 goroutines, as figure 4a's agents do. Besides ns/op, it reports
// the process's CPU time per op (cpu-ns/op), which the machine's load
// moves less.
func BenchmarkCallSpan(b *testing.B) {
	url := otlptest.StartDiscarding(b)
	ctx := context.Background()
	run := journal.NewRunID(time.Now())
	op, _ := abi.LookupOp(abi.CapKV, abi.OpKVPut)
	req, err := abi.Marshal(abi.KVPutRequest{Key: "k", Value: []byte("v")})
	if err != nil {
		b.Fatal(err)
	}
	hash := journal.Sum([]byte("entry"))

	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
	b.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "262144")
	wire, err := tracing.FromEnv(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer wire.Shutdown(ctx)
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(url+"/v1/traces"))
	if err != nil {
		b.Fatal(err)
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBlocking()))
	defer sdk.Shutdown(ctx)

	for _, p := range []struct {
		name  string
		tp    trace.TracerProvider
		flush func(context.Context) error
	}{
		{"wire", wire.Tracer(), wire.ForceFlush},
		{"sdk", sdk, sdk.ForceFlush},
	} {
		tr := newTracer(&Deps{Tracer: p.tp})
		if (tr.wire != nil) != (p.name == "wire") {
			b.Fatalf("%s: wire exporter %v", p.name, tr.wire)
		}
		// The run's span: the calls' spans are its children.
		ctx, runSpan := tr.t.Start(ctx, "agentrt.run")
		// call is what livePath.serve and add do of a traced effect.
		call := func(cs *callSpan, c *Call, step uint64) {
			c.Step = step
			tr.startCall(cs, run, c)
			cs.intent = int64(2*step - 1)
			tr.outcome(cs, c, abi.StatusOK, nil, 2*step, hash)
			tr.endCall(ctx, cs)
			if step%(1<<10) == 0 && p.name == "wire" {
				_ = p.flush(ctx)
			}
		}
		flush := func(b *testing.B) {
			if err := p.flush(ctx); err != nil {
				b.Fatal(err)
			}
			if n := wire.Dropped(); n > 0 {
				b.Fatalf("%d spans dropped", n)
			}
		}
		b.Run(p.name+"/serial", func(b *testing.B) {
			c, cs := &Call{Op: &op, Request: req}, &callSpan{}
			b.ReportAllocs()
			cpu := cputime.Process()
			for i := range b.N {
				call(cs, c, uint64(i+1))
			}
			flush(b)
			b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N), "cpu-ns/op")
		})
		b.Run(p.name+"/parallel", func(b *testing.B) {
			b.SetParallelism(32)
			b.ReportAllocs()
			cpu := cputime.Process()
			b.RunParallel(func(pb *testing.PB) {
				c, cs := &Call{Op: &op, Request: req}, &callSpan{}
				step := uint64(0)
				for pb.Next() {
					step++
					call(cs, c, step)
				}
			})
			flush(b)
			b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N), "cpu-ns/op")
		})
		runSpan.End()
	}
}

// TestNoopTracerIsOff: a host given the API's no-op tracer provider traces
// nothing, as one given none: its calls gather no span.
func TestNoopTracerIsOff(t *testing.T) {
	if tr := newTracer(&Deps{Tracer: noop.NewTracerProvider()}); tr != nil {
		t.Fatalf("a no-op provider made a tracer: %+v", tr)
	}
	if tr := newTracer(&Deps{Tracer: sdktrace.NewTracerProvider()}); tr == nil {
		t.Fatal("the SDK's provider made no tracer")
	}
}

// TestTracerClockFollowsTheWallClock: a span's times come from the
// monotonic clock and a wall clock reading; one older than a second is
// read again, so that a step of the system's clock shows within a second.
func TestTracerClockFollowsTheWallClock(t *testing.T) {
	tr := newTracer(&Deps{Tracer: sdktrace.NewTracerProvider()})
	if d := time.Since(tr.now()); d < -time.Millisecond || d > 100*time.Millisecond {
		t.Fatalf("now is %v off time.Now", d)
	}
	// A reading from half a second ago serves: now is it plus the
	// monotonic time since.
	half := time.Now().Add(-500 * time.Millisecond)
	tr.epoch.Store(&half)
	if got := tr.now(); tr.epoch.Load() != &half || got.Sub(half) < 500*time.Millisecond {
		t.Fatalf("now %v from a reading %v", got, half)
	}
	// One two seconds old is read again.
	old := time.Now().Add(-2 * time.Second)
	tr.epoch.Store(&old)
	if d := time.Since(tr.now()); d < -time.Millisecond || d > 100*time.Millisecond {
		t.Fatalf("a reading 2 s old was not read again: now is %v off", d)
	}
	if e := tr.epoch.Load(); time.Since(*e) > time.Second {
		t.Fatalf("the reading kept is %v old", time.Since(*e))
	}
}
