package host

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/internal/cputime"
	"github.com/agentrt/agentrt/journal"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// BenchmarkCallSpan is what tracing adds to one journaled effect (a
// kv.put), alone: its span started, its intent seq, its outcome (seq,
// entry hash, status) and its end, through the SDK's batch processor
// (default settings but for WithBlocking: a span that finds the queue
// full waits rather than being dropped, so that every span is exported
// however fast the benchmark makes them) and the real OTLP/HTTP exporter to a receiver on
// loopback that reads each request and drops it, as bench figure 20a
// traces; the spans are flushed within the timing. "parallel" makes the
// spans from 64 goroutines, as figure 4a's agents do. Besides ns/op, it
// reports the process's CPU time per op (cpu-ns/op), which the machine's
// load moves less.
func BenchmarkCallSpan(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(srv.URL+"/v1/traces"))
	if err != nil {
		b.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBlocking()))
	defer tp.Shutdown(ctx)
	tr := newTracer(&Deps{Tracer: tp})
	run := journal.NewRunID(time.Now())
	op, _ := abi.LookupOp(abi.CapKV, abi.OpKVPut)
	req, err := abi.Marshal(abi.KVPutRequest{Key: "k", Value: []byte("v")})
	if err != nil {
		b.Fatal(err)
	}
	hash := journal.Sum([]byte("entry"))
	// call is what livePath.serve and add do of a traced effect.
	call := func(ctx context.Context, cs *callSpan, c *Call, step uint64) {
		c.Step = step
		tr.startCall(cs, run, c)
		cs.intent = int64(2*step - 1)
		tr.outcome(cs, c, abi.StatusOK, nil, 2*step, hash)
		tr.endCall(ctx, cs)
	}
	b.Run("serial", func(b *testing.B) {
		c, cs := &Call{Op: &op, Request: req}, &callSpan{}
		b.ReportAllocs()
		cpu := cputime.Process()
		for i := range b.N {
			call(ctx, cs, c, uint64(i+1))
		}
		if err := tp.ForceFlush(ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N), "cpu-ns/op")
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(32)
		b.ReportAllocs()
		cpu := cputime.Process()
		b.RunParallel(func(pb *testing.PB) {
			c, cs := &Call{Op: &op, Request: req}, &callSpan{}
			step := uint64(0)
			for pb.Next() {
				step++
				call(ctx, cs, c, step)
			}
		})
		if err := tp.ForceFlush(ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N), "cpu-ns/op")
	})
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
