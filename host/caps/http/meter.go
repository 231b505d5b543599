package http

import (
	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/host/caps"
)

// request is the cost of one http.request: the gate's budget layer
// reserves it before the intent and charges it after dispatch.
var request = budget.Amounts{budget.HTTPRequests: 1}

// Estimate is one HTTP request, whatever its method or body: the budget
// counts requests sent, and the gate has checked the request before.
func (in *instance) Estimate(*caps.Call) (budget.Amounts, error) { return request, nil }

// Usage is one HTTP request for every request dispatched, answered or not:
// a request that failed on the network may still have reached its server.
func (in *instance) Usage(*caps.Call, abi.Status, []byte) (budget.Amounts, bool) {
	return request, false
}

var _ caps.Meter = (*instance)(nil)
