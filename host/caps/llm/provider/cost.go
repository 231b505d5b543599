package provider

import (
	"math/bits"

	"github.com/agentrt/agentrt/abi"
)

// Cost returns what usage costs at these prices, in micro-USD, rounded up
// to the next micro-USD so that a settlement never undercounts. The sum
// is computed in 128 bits: no count and price of this package overflow.
func (m ModelPrice) Cost(u abi.LLMUsage) uint64 {
	var hi, lo uint64
	add := func(n uint64, p Price) {
		h, l := bits.Mul64(n, uint64(p))
		var c uint64
		lo, c = bits.Add64(lo, l, 0)
		hi += h + c
	}
	add(u.Input, m.Input)
	add(u.Output, m.Output)
	add(u.CacheRead, m.CacheRead)
	add(u.CacheWrite, m.CacheWrite)
	const perMillion = 1_000_000
	if hi >= perMillion {
		return ^uint64(0)
	}
	q, r := bits.Div64(hi, lo, perMillion)
	if r != 0 {
		q++
	}
	return q
}
