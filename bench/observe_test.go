package bench

import (
	"context"
	"fmt"
	"syscall"
	"testing"

	"github.com/agentrt/agentrt/host/tracing"
	"github.com/agentrt/agentrt/journal/badgerstore"
)

// BenchmarkObserved is figure 20's setup as a Go benchmark, one op being
// one durable kv.put call: figure 3a (one agent) and figure 4a (64 agents
// on one store), each plain, traced (as OTEL_EXPORTER_OTLP_ENDPOINT sets
// it up, host/tracing: the call spans on the wire path, the run spans
// through the SDK, both sent by the real OTLP/HTTP client to a loopback
// receiver in a process of its own that drops what it reads, flushed within the
// timing) and metered (cell.NewMetrics
// watching the store). Besides ns/op (wall time, which the machine's load
// moves), it reports the process's CPU time per call (cpu-ns/call), the
// figure's steadier measure. Profile one case alone, e.g.
//
//	go test -run '^$' -bench 'Observed/3a/traced' -cpuprofile cpu.out ./bench/
func BenchmarkObserved(b *testing.B) {
	g := guests(b, false)
	ctx := context.Background()
	sink, err := startOTLPSink()
	if err != nil {
		b.Fatal(err)
	}
	defer sink.close()
	for _, fig := range []string{"3a", "4a"} {
		for _, name := range observed {
			b.Run(fig+"/"+name, func(b *testing.B) {
				var tp *tracing.Tracing
				if name == "traced" {
					var err error
					if tp, err = tracingTo(ctx, sink.URL); err != nil {
						b.Fatal(err)
					}
					defer tp.Shutdown(ctx)
				}
				st, err := badgerstore.Open(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				c, err := observedCell(st, engine(b), tp.Tracer(), name == "metered")
				if err != nil {
					b.Fatal(err)
				}
				if _, err := c.run(ctx, g.KVPut, countInput(20), kvGrant("warmup"), 21); err != nil {
					b.Fatal(err)
				}
				if tp != nil {
					if err := tp.ForceFlush(ctx); err != nil {
						b.Fatal(err)
					}
				}
				agents, per := 1, b.N
				if fig == "4a" {
					agents, per = 64, max(1, b.N/64)
				}
				b.ReportAllocs()
				b.ResetTimer()
				u0, s0 := rusage()
				mt := startMeter()
				_, err = concurrently(agents, func(a int) error {
					_, err := c.run(ctx, g.KVPut, countInput(per), kvGrant(fmt.Sprintf("a%d-%d", a, b.N)), uint64(per)+1)
					return err
				})
				if err == nil && tp != nil {
					err = tp.ForceFlush(ctx)
				}
				if err == nil && tp.Dropped() > 0 {
					err = fmt.Errorf("%d call spans dropped", tp.Dropped())
				}
				if err != nil {
					b.Fatal(err)
				}
				rd := mt.stop()
				u1, s1 := rusage()
				b.StopTimer()
				calls := float64(agents * per)
				b.ReportMetric(float64(rd.CPU.Nanoseconds())/calls, "cpu-ns/call")
				b.ReportMetric(float64(u1-u0)/calls, "user-ns/call")
				b.ReportMetric(float64(s1-s0)/calls, "sys-ns/call")
			})
		}
	}
}

// rusage returns the user and system CPU time of this process so far, in
// nanoseconds.
func rusage() (user, sys int64) {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		return 0, 0
	}
	return r.Utime.Nano(), r.Stime.Nano()
}
