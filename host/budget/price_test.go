package budget

import (
	"errors"
	"math/big"
	"math/rand/v2"
	"testing"
)

func TestCost(t *testing.T) {
	// $3 / $15 per million, cache read $0.30, cache write $3.75.
	p := Price{Input: 3_000_000, Output: 15_000_000, CacheRead: 300_000, CacheWrite: 3_750_000}
	for _, tc := range []struct {
		u    Usage
		want uint64
	}{
		{Usage{}, 0},
		{Usage{Input: 1_000_000}, 3_000_000},
		{Usage{Input: 1}, 3},
		{Usage{CacheRead: 1}, 1},                // 0.3 micro-USD, rounded up
		{Usage{CacheRead: 3, CacheWrite: 1}, 5}, // 0.9 + 3.75 = 4.65: the sum is rounded, once
		{Usage{Input: 1200, Output: 212, CacheRead: 5000, CacheWrite: 100}, 3600 + 3180 + 1500 + 375},
	} {
		got, err := p.Cost(tc.u)
		if err != nil || got != tc.want {
			t.Errorf("Cost(%+v) = %d, %v; want %d", tc.u, got, err, tc.want)
		}
	}
	if _, err := (Price{Output: 1 << 63}).Cost(Usage{Output: 1 << 63}); !errors.Is(err, ErrOverflow) {
		t.Errorf("a cost above 2^64 micro-USD: %v", err)
	}
	if _, err := (Price{Input: 1<<64 - 1, Output: 1<<64 - 1}).Cost(Usage{Input: 1<<64 - 1, Output: 1<<64 - 1}); !errors.Is(err, ErrOverflow) {
		t.Errorf("a 128-bit overflow: %v", err)
	}
}

// TestCostIsExact compares Cost with big-integer arithmetic.
func TestCostIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 10_000 {
		p := Price{rng.Uint64N(1 << 30), rng.Uint64N(1 << 30), rng.Uint64N(1 << 30), rng.Uint64N(1 << 30)}
		u := Usage{rng.Uint64N(1 << 32), rng.Uint64N(1 << 32), rng.Uint64N(1 << 32), rng.Uint64N(1 << 32)}
		sum := new(big.Int)
		for _, t := range [][2]uint64{{u.Input, p.Input}, {u.Output, p.Output}, {u.CacheRead, p.CacheRead}, {u.CacheWrite, p.CacheWrite}} {
			sum.Add(sum, new(big.Int).Mul(new(big.Int).SetUint64(t[0]), new(big.Int).SetUint64(t[1])))
		}
		m := big.NewInt(1_000_000)
		want := new(big.Int).Div(new(big.Int).Add(sum, new(big.Int).Sub(m, big.NewInt(1))), m)
		got, err := p.Cost(u)
		if !want.IsUint64() {
			if !errors.Is(err, ErrOverflow) {
				t.Fatalf("Cost(%+v, %+v) = %d, %v; want ErrOverflow", u, p, got, err)
			}
			continue
		}
		if err != nil || got != want.Uint64() {
			t.Fatalf("Cost(%+v, %+v) = %d, %v; want %s", u, p, got, err, want)
		}
	}
}

func TestWorstCaseCoversTheCall(t *testing.T) {
	p := Price{Input: 3_000_000, Output: 15_000_000, CacheRead: 300_000, CacheWrite: 3_750_000}
	w, err := WorstCase(10_000, 1000, p)
	if err != nil {
		t.Fatal(err)
	}
	if w != (Amounts{ModelCalls: 1, InputTokens: 10_000, OutputTokens: 1000, MicroUSD: 37_500 + 15_000}) {
		t.Fatalf("WorstCase = %v", w)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 1000 {
		in, out := rng.Uint64N(100_000), rng.Uint64N(8000)
		w, _ := WorstCase(in, out, p)
		// Any split of the estimated input among plain and cached
		// tokens, and any output up to the maximum, costs no more.
		a := rng.Uint64N(in + 1)
		b := rng.Uint64N(in - a + 1)
		actual, err := Charge(Usage{Input: a, CacheRead: b, CacheWrite: in - a - b, Output: rng.Uint64N(out + 1)}, p)
		if err != nil {
			t.Fatal(err)
		}
		for d := range NumDims {
			if actual[d] > w[d] {
				t.Fatalf("%s: actual %d above the worst case %d", d, actual[d], w[d])
			}
		}
	}
}
