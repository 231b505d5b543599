package agent

import "github.com/agentrt/agentrt/guest-sdk/abi"

// BudgetLimit caps one dimension of the run's budget (Limit).
type BudgetLimit = abi.BudgetLimit

// LimitResponse holds the ceilings in force after a Limit.
type LimitResponse = abi.LimitResponse

// Limit narrows the run's budget (run.limit): from now on at most each
// limit's Amount more of its Dim. The host's budget enforces them on every
// later call, so a limit holds even where the agent's own code forgets it;
// a limit never widens what the run's token or grant allows. The response
// holds the absolute ceilings now in force.
func Limit(limits ...BudgetLimit) (*LimitResponse, error) {
	var r abi.LimitResponse
	if err := call(runTransport, abi.CapRun, abi.OpRunLimit, &abi.LimitRequest{Limits: limits}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
