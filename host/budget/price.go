package budget

import (
	"errors"
	"math/bits"
)

// Price is a model's price, in integer micro-USD per million tokens, as a
// cell's llm.yaml price table gives it.
type Price struct {
	Input, Output, CacheRead, CacheWrite uint64
}

// Usage is what a model call used, as the provider reported it, in the
// provider-neutral shape of the llm capability: Input counts the input
// tokens read neither from nor into the prompt cache (the providers that
// count cached tokens inside their input total are normalized to this),
// Output every output token, reasoning included.
type Usage struct {
	Input, Output, CacheRead, CacheWrite uint64
}

// ErrOverflow is returned when a cost does not fit in a uint64 of
// micro-USD (over 18 trillion dollars): no ceiling can admit it, and no
// rounding is applied to make it fit.
var ErrOverflow = errors.New("cost overflows a uint64 of micro-USD")

// Cost returns what u costs at p, in micro-USD: the sum of tokens times
// price per million over the four kinds, divided by a million and rounded
// up once, computed exactly in 128 bits (never in floats). A call that
// used a token costs at least one micro-USD when its price is not zero.
func (p Price) Cost(u Usage) (uint64, error) {
	var hi, lo uint64
	for _, t := range [...][2]uint64{{u.Input, p.Input}, {u.Output, p.Output}, {u.CacheRead, p.CacheRead}, {u.CacheWrite, p.CacheWrite}} {
		h, l := bits.Mul64(t[0], t[1])
		var c uint64
		lo, c = bits.Add64(lo, l, 0)
		hi, c = bits.Add64(hi, h, c)
		if c != 0 {
			return 0, ErrOverflow
		}
	}
	const million = 1_000_000
	if hi >= million {
		return 0, ErrOverflow
	}
	q, r := bits.Div64(hi, lo, million)
	if r != 0 {
		if q == 1<<64-1 {
			return 0, ErrOverflow
		}
		q++
	}
	return q, nil
}

// Charge returns the amounts a model call's usage settles: one model call,
// its input tokens (cached ones included), its output tokens and its cost
// at p.
func Charge(u Usage, p Price) (Amounts, error) {
	c, err := p.Cost(u)
	if err != nil {
		return Amounts{}, err
	}
	in := sat(sat(u.Input, u.CacheRead), u.CacheWrite)
	return Amounts{ModelCalls: 1, InputTokens: in, OutputTokens: u.Output, MicroUSD: c}, nil
}

// WorstCase returns the amounts a model call reserves before it is sent:
// one model call, input input tokens (the estimate of an offline
// tokenizer) and maxOutput output tokens (the request's max output
// tokens), the input priced at the dearest of the input and cache prices
// (a cache write usually costs more than plain input), so that an exact
// estimate never reserves less than the call can cost. An estimate below
// the provider's count can still be overspent; Settle records that.
func WorstCase(input, maxOutput uint64, p Price) (Amounts, error) {
	worst := Price{Input: max(p.Input, p.CacheRead, p.CacheWrite), Output: p.Output}
	c, err := worst.Cost(Usage{Input: input, Output: maxOutput})
	if err != nil {
		return Amounts{}, err
	}
	return Amounts{ModelCalls: 1, InputTokens: input, OutputTokens: maxOutput, MicroUSD: c}, nil
}
