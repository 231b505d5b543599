package provider

import "github.com/agentrt/agentrt/host/budget"

// Price returns the model's prices as the budget ledger takes them
// (integer micro-USD per million tokens), which computes every cost.
func (m ModelPrice) Price() budget.Price {
	return budget.Price{Input: uint64(m.Input), Output: uint64(m.Output), CacheRead: uint64(m.CacheRead), CacheWrite: uint64(m.CacheWrite)}
}
