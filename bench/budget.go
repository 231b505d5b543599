package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/agentrt/agentrt/host/budget"
)

// budgetCall is the worst case of a model call: what the gate reserves.
var budgetCall = budget.Amounts{budget.ModelCalls: 1, budget.InputTokens: 4000, budget.OutputTokens: 1000, budget.MicroUSD: 27_000}

// budgetLedger has every model ceiling set, far above what the figure
// spends, so that every check runs and none refuses.
func budgetLedger() *budget.Ledger {
	c := budget.Ceilings{}
	for _, d := range []budget.Dim{budget.ModelCalls, budget.InputTokens, budget.OutputTokens, budget.MicroUSD} {
		c = c.With(d, 1<<62)
	}
	return budget.New(c)
}

// Figure 12: the cost of a budget reservation.
func (h *harness) budget(ctx context.Context) ([]Figure, error) {
	n := h.cfg.BudgetCalls
	pairs := func(goroutines int) ([]float64, error) {
		var out []float64
		for range h.cfg.Reps {
			l := budgetLedger()
			var wg sync.WaitGroup
			errs := make([]error, goroutines)
			start := time.Now()
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := g; i < n; i += goroutines {
						r, err := l.Reserve(uint64(i+1), budgetCall)
						if err == nil {
							_, err = l.Settle(r, budgetCall)
						}
						if err != nil {
							errs[g] = err
							return
						}
					}
				}()
			}
			wg.Wait()
			out = append(out, float64(time.Since(start).Nanoseconds())/float64(n))
			for _, err := range errs {
				if err != nil {
					return nil, err
				}
			}
			if spent, _ := l.Spent(); spent[budget.ModelCalls] != uint64(n) {
				return nil, fmt.Errorf("figure 12: %d model calls settled, want %d", spent[budget.ModelCalls], n)
			}
		}
		return out, nil
	}
	// The floor: the same two critical sections on a bare mutex, adding
	// the same amounts to an array, without checks or the map of open
	// reservations.
	bare := func(goroutines int) []float64 {
		var out []float64
		for range h.cfg.Reps {
			var mu sync.Mutex
			var held, spent budget.Amounts
			var wg sync.WaitGroup
			start := time.Now()
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := g; i < n; i += goroutines {
						mu.Lock()
						for d := range held {
							held[d] += budgetCall[d]
						}
						mu.Unlock()
						mu.Lock()
						for d := range held {
							held[d] -= budgetCall[d]
							spent[d] += budgetCall[d]
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			out = append(out, float64(time.Since(start).Nanoseconds())/float64(n))
			if spent[budget.ModelCalls] != uint64(n) {
				panic("figure 12 floor miscounted")
			}
		}
		return out
	}
	one, err := pairs(1)
	if err != nil {
		return nil, err
	}
	two, err := pairs(2)
	if err != nil {
		return nil, err
	}
	rec, err := h.budgetRecord()
	if err != nil {
		return nil, err
	}
	bare1, bare2 := bare(1), bare(2)
	h.logf("12 budget: %.0f ns uncontended, %.0f ns with 2 goroutines, %.0f ns to encode a reserve record", median(one), median(two), median(rec))
	what := fmt.Sprintf("budget.Ledger.Reserve of a model call's worst case (model calls, input and output tokens, micro-USD, each under a ceiling) then Settle at the same amounts, %d times, wall time / pairs", n)
	return []Figure{
		{ID: "12a", Name: "budget reservation: reserve + settle, uncontended", Unit: "ns", Better: "lower", Value: median(one), Samples: one,
			Measures: what + ", one goroutine. The budget layer's work for one costly call, without journaling its records (the reserve record rides on the intent the call writes anyway; encoding it is extra.record_encode_ns).",
			Extra:    map[string]float64{"record_encode_ns": median(rec)},
			Floor:    &Floor{Name: "two bare mutex sections", Unit: "ns", Value: median(bare1), Samples: bare1, Measures: "sync.Mutex Lock, the amounts added to an array, Unlock, twice: the lock and the sums alone."},
			Goal:     &Goal{Text: "<= 1000 ns (a model call takes milliseconds)", MaxValue: ptr(1000)}},
		{ID: "12b", Name: "budget reservation: reserve + settle, 2 goroutines on one ledger", Unit: "ns", Better: "lower", Value: median(two), Samples: two,
			Measures: what + ", the pairs split between 2 goroutines sharing the ledger (as a parent's ledger is shared by its children): contention on its lock shows as a higher figure.",
			Floor:    &Floor{Name: "two bare mutex sections, 2 goroutines", Unit: "ns", Value: median(bare2), Samples: bare2, Measures: "the floor of 12a, split between 2 goroutines sharing the mutex."},
			Goal:     &Goal{Text: "<= 1000 ns", MaxValue: ptr(1000)}},
	}, nil
}

// budgetRecord times budget.EncodeRecord of one reserve.
func (h *harness) budgetRecord() ([]float64, error) {
	o := budget.Op{Kind: budget.OpReserve, ID: 1, Step: 3, Amounts: budgetCall}
	n := max(h.cfg.BudgetCalls/10, 1)
	var out []float64
	for range h.cfg.Reps {
		start := time.Now()
		for range n {
			if _, err := budget.EncodeRecord(o); err != nil {
				return nil, err
			}
		}
		out = append(out, float64(time.Since(start).Nanoseconds())/float64(n))
	}
	return out, nil
}
