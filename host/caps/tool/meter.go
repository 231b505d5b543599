package tool

import (
	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/host/caps"
)

// launch is the cost of one tool.run: the gate's budget layer reserves it
// before the intent and charges it after dispatch.
var launch = budget.Amounts{budget.ToolCalls: 1}

// Estimate is one tool call, whatever the tool: the budget counts launches.
func (in *instance) Estimate(*caps.Call) (budget.Amounts, error) { return launch, nil }

// Usage is one tool call for every call dispatched, a launch that failed
// (a sandbox that could not be set up) included: the host does not tell a
// launch that never started from one that started and died, so it charges
// both and never counts less than ran.
func (in *instance) Usage(*caps.Call, abi.Status, []byte) (budget.Amounts, bool) {
	return launch, false
}

var _ caps.Meter = (*instance)(nil)
