package budget

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// seeds is how many seeded runs each property makes; -short makes fewer.
func seeds(t *testing.T) int {
	if testing.Short() {
		return 20
	}
	return 300
}

// atNineNinety returns a ledger of $10 with $9.90 spent (settled, as a
// rebuilt ledger would have it).
func atNineNinety(t *testing.T) *Ledger {
	t.Helper()
	l := New(Ceilings{}.With(MicroUSD, ten))
	r, err := l.Reserve(1, usd(9_900_000))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Settle(r, usd(9_900_000)); err != nil {
		t.Fatal(err)
	}
	return l
}

// reserveAll makes one concurrent reservation per amount, all released at
// once, and returns which were admitted and the errors of the others.
func reserveAll(l *Ledger, amounts []uint64) ([]bool, []error) {
	admitted, errs := make([]bool, len(amounts)), make([]error, len(amounts))
	var start, done sync.WaitGroup
	start.Add(1)
	for i, a := range amounts {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			_, errs[i] = l.Reserve(uint64(i+2), usd(a))
			admitted[i] = errs[i] == nil
		}()
	}
	start.Done()
	done.Wait()
	return admitted, errs
}

// TestConcurrentReservationsNeverOverspend: 50 concurrent reservations of
// random amounts at $9.90 spent of $10. The admitted ones fit in the $0.10
// left; every refused one names micro_usd and would not fit after all the
// admitted ones (so some serial order of the calls gives exactly this
// result); what the ledger holds is what was admitted.
func TestConcurrentReservationsNeverOverspend(t *testing.T) {
	const left = 100_000
	for seed := range seeds(t) {
		rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
		l := atNineNinety(t)
		amounts := make([]uint64, 50)
		for i := range amounts {
			// Up to a fifth of what is left: some fit, not all.
			amounts[i] = 1 + rng.Uint64N(left/5)
		}
		admitted, errs := reserveAll(l, amounts)
		var sum uint64
		for i, ok := range admitted {
			if ok {
				sum += amounts[i]
			}
		}
		if sum > left {
			t.Fatalf("seed %d: admitted %d micro-USD, only %d were left", seed, sum, left)
		}
		for i, ok := range admitted {
			if ok {
				continue
			}
			var ex *ExceededError
			if !errors.As(errs[i], &ex) || ex.Dim != MicroUSD || ex.Asked != amounts[i] || ex.Left >= amounts[i] {
				t.Fatalf("seed %d: reservation %d of %d refused with %v", seed, i, amounts[i], errs[i])
			}
			if sum+amounts[i] <= left {
				t.Fatalf("seed %d: %d micro-USD refused, yet it fits after the %d admitted", seed, amounts[i], sum)
			}
		}
		spent, reserved := l.Spent()
		if spent[MicroUSD] != 9_900_000 || reserved[MicroUSD] != sum || len(l.Open()) != count(admitted) {
			t.Fatalf("seed %d: spent %d reserved %d open %d; admitted %d in %d", seed, spent[MicroUSD], reserved[MicroUSD], len(l.Open()), sum, count(admitted))
		}
	}
}

// TestConcurrentEqualReservationsAdmitExactlyWhatFits: 50 concurrent
// reservations of 3 cents at $9.90 of $10: exactly 3 fit.
func TestConcurrentEqualReservationsAdmitExactlyWhatFits(t *testing.T) {
	for _, tc := range []struct{ each, want uint64 }{{30_000, 3}, {3_000, 33}, {2_000, 50}, {100_001, 0}, {1, 50}} {
		l := atNineNinety(t)
		amounts := slices.Repeat([]uint64{tc.each}, 50)
		admitted, _ := reserveAll(l, amounts)
		if n := count(admitted); uint64(n) != tc.want {
			t.Errorf("50 reservations of %d micro-USD with 100000 left: %d admitted, want %d", tc.each, n, tc.want)
		}
	}
}

func count(b []bool) int {
	n := 0
	for _, ok := range b {
		if ok {
			n++
		}
	}
	return n
}

// TestRandomMixesAcrossDimensions: goroutines reserve random amounts of
// random dimensions under random ceilings, then settle (at most the
// reserve) or release. A watcher checks, all along, that no limited
// dimension ever holds more than its ceiling (spent + reserved); at the
// end, spent is exactly the sum of the settles, nothing is held, and
// Replay of the records gives the same ledger.
func TestRandomMixesAcrossDimensions(t *testing.T) {
	reservable := []Dim{ModelCalls, InputTokens, OutputTokens, MicroUSD, ToolCalls, HTTPRequests}
	for seed := range seeds(t) / 5 {
		rng := rand.New(rand.NewPCG(uint64(seed), 0x313))
		var c Ceilings
		for _, d := range reservable {
			if rng.IntN(4) > 0 {
				c = c.With(d, rng.Uint64N(2000))
			}
		}
		l := New(c)
		const workers, each = 8, 40
		var mu sync.Mutex
		var ops []Op
		var settled Amounts
		stop := make(chan struct{})
		watched := make(chan error, 1)
		go func() {
			for {
				spent, reserved := l.Spent()
				for d := range NumDims {
					if max, ok := c.Get(d); ok && spent[d]+reserved[d] > max {
						watched <- fmt.Errorf("%s holds %d spent + %d reserved, ceiling %d", d, spent[d], reserved[d], max)
						return
					}
				}
				select {
				case <-stop:
					watched <- nil
					return
				default:
				}
			}
		}()
		var wg sync.WaitGroup
		for w := range workers {
			wrng := rand.New(rand.NewPCG(uint64(seed), uint64(w)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					var a Amounts
					for _, d := range reservable {
						if wrng.IntN(3) == 0 {
							a[d] = wrng.Uint64N(300)
						}
					}
					r, err := l.Reserve(1, a)
					if err != nil {
						if !errors.Is(err, ErrBudget) {
							t.Errorf("reserve: %v", err)
						}
						continue
					}
					var o Op
					var actual Amounts
					if wrng.IntN(4) == 0 {
						o, err = l.Release(r)
					} else {
						for d := range a {
							if a[d] > 0 {
								actual[d] = wrng.Uint64N(a[d] + 1)
							}
						}
						o, err = l.Settle(r, actual)
					}
					if err != nil {
						t.Errorf("closing %d: %v", r.ID, err)
						return
					}
					mu.Lock()
					ops = append(ops, r.Op(), o)
					settled = settled.add(actual)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(stop)
		if err := <-watched; err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		spent, reserved := l.Spent()
		if spent != settled || !reserved.IsZero() {
			t.Fatalf("seed %d: spent %v reserved %v; settled %v", seed, spent, reserved, settled)
		}
		// A journal order: each reserve in id order, its close after it.
		slices.SortStableFunc(ops, func(a, b Op) int {
			ka, kb := 2*a.ID, 2*b.ID
			if a.Kind != OpReserve {
				ka++
			}
			if b.Kind != OpReserve {
				kb++
			}
			return cmpUint(ka, kb)
		})
		r, err := Replay(c, 0, ops)
		if err != nil {
			t.Fatalf("seed %d: replay: %v", seed, err)
		}
		if rs, rr := r.Spent(); rs != spent || rr != reserved {
			t.Fatalf("seed %d: replayed spent %v reserved %v, live %v %v", seed, rs, rr, spent, reserved)
		}
	}
}
