package cell_test

import (
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/cputime"
)

// BenchmarkMetricsCall is what the cell's metrics add to one journaled
// call alone, as the host tells them of a durable kv.put (bench figure
// 20b): its outcome (Observer.Call) and its commit's latency
// (Observer.Commit). "parallel" tells them from 64 goroutines, as figure
// 4a's agents do. Besides ns/op, it reports the process's CPU time per op
// (cpu-ns/op).
func BenchmarkMetricsCall(b *testing.B) {
	m := cell.NewMetrics()
	op, _ := abi.LookupOp(abi.CapKV, abi.OpKVPut)
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		cpu := cputime.Process()
		for range b.N {
			m.Call(op, abi.StatusOK)
			m.Commit(300*time.Microsecond, true)
		}
		b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N), "cpu-ns/op")
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(32)
		b.ReportAllocs()
		cpu := cputime.Process()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.Call(op, abi.StatusOK)
				m.Commit(300*time.Microsecond, true)
			}
		})
		b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N), "cpu-ns/op")
	})
}
