package budget

import (
	"sync"
	"testing"
)

// benchCall is a model call's worst case.
var benchCall = Amounts{ModelCalls: 1, InputTokens: 4000, OutputTokens: 1000, MicroUSD: 27_000}

func benchLedger() *Ledger {
	return New(Ceilings{}.With(MicroUSD, 1<<62).With(ModelCalls, 1<<62).With(InputTokens, 1<<62).With(OutputTokens, 1<<62))
}

// BenchmarkReserve times Reserve and Settle of one model call, the budget
// layer's work for a costly call, without the journal.
func BenchmarkReserve(b *testing.B) {
	b.Run("uncontended", func(b *testing.B) {
		l := benchLedger()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			r, err := l.Reserve(uint64(i+1), benchCall)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := l.Settle(r, benchCall); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Two goroutines share the ledger, each making half the calls: ns/op
	// is wall time per call, so contention shows as a higher figure.
	b.Run("2 goroutines", func(b *testing.B) {
		l := benchLedger()
		b.ReportAllocs()
		var wg sync.WaitGroup
		for g := range 2 {
			n := b.N / 2
			if g == 0 {
				n = b.N - b.N/2
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range n {
					r, err := l.Reserve(1, benchCall)
					if err != nil {
						b.Error(err)
						return
					}
					if _, err := l.Settle(r, benchCall); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	})
}

// BenchmarkRecord times encoding a reserve record, what the host adds to
// the intent entry of a costly call.
func BenchmarkRecord(b *testing.B) {
	o := Op{Kind: OpReserve, ID: 1, Step: 3, Amounts: benchCall}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeRecord(o); err != nil {
			b.Fatal(err)
		}
	}
}
