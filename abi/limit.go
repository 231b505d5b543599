package abi

// run.limit (agentrt:run code 6): a guest narrows its own budget, so that
// the host enforces the caps its loop controller keeps, whether or not the
// guest then keeps them itself. Limits only narrow: a limit above what the
// run's token or grant leaves changes nothing. Its op joins Ops with the
// host's handler (the budget stage).

// OpRunLimit is the op code of run.limit in agentrt:run.
const OpRunLimit uint32 = 6

// BudgetLimit caps one dimension: from the call on, at most Amount more
// of Dim, one of "steps", "model_calls", "input_tokens", "output_tokens",
// "micro_usd", "tool_calls", "http_requests", "wall_seconds".
type BudgetLimit struct {
	Dim    string `cbor:"dim"`
	Amount uint64 `cbor:"amount"`
}

// LimitRequest is the request of run.limit.
type LimitRequest struct {
	Limits []BudgetLimit `cbor:"limits,omitempty"`
}

// LimitResponse answers run.limit with the absolute ceilings now in force
// for the dimensions the request named.
type LimitResponse struct {
	Ceilings []BudgetLimit `cbor:"ceilings,omitempty"`
}
