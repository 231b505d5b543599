package plan

import (
	"github.com/agentrt/agentrt/guest-sdk/agent"
)

// Host is what Execute needs of the host: spawning and awaiting children,
// logging and reading the budget. SDK is the agent's own host; a test
// supplies a fake.
//
// A module imports only the capabilities whose functions it can reach, and
// its grant must hold each of them: Execute reaches agent (spawn, await)
// and run; Bandit and Reflect, through Memory, kv and random; an Approver
// made by ApproveBy, approval. So a planner that never asks approvals
// needs no approval capability.
type Host interface {
	// Spawn, Await: agent.Spawn and agent.Await.
	Spawn(module, input []byte, opts agent.SpawnOptions) (*agent.Child, error)
	Await(run string) (*agent.Outcome, error)
	// Log is agent.Log.
	Log(level agent.Level, msg string) error
	// Budget reports the run's import calls so far and its ceiling on
	// them (0: none).
	Budget() (used, ceiling uint64, err error)
}

// Memory is what Bandit and Reflect need of the host: kv, and random
// bytes for the bandit's draws.
type Memory interface {
	// KVGet, KVPut: agent.KVGet and agent.KVPut.
	KVGet(key string) ([]byte, error)
	KVPut(key string, value []byte) error
	// RandomBytes is agent.RandomBytes.
	RandomBytes(n uint32) ([]byte, error)
}

// SDK returns the host of the agent SDK, a Host and a Memory: each method
// is the agent package's function. Budget reads run.introspect (the calls
// so far) and run.limit with no limits (the "steps" ceiling, unchanged);
// the run's import calls are the budget dimension every run has, and both
// answers are journaled.
func SDK() SDKHost { return SDKHost{} }

// SDKHost is the agent SDK as a Host and a Memory.
type SDKHost struct{}

// Spawn is agent.Spawn.
func (SDKHost) Spawn(module, input []byte, opts agent.SpawnOptions) (*agent.Child, error) {
	return agent.Spawn(module, input, opts)
}

// Await is agent.Await.
func (SDKHost) Await(run string) (*agent.Outcome, error) { return agent.Await(run) }

// KVGet is agent.KVGet.
func (SDKHost) KVGet(key string) ([]byte, error) { return agent.KVGet(key) }

// KVPut is agent.KVPut.
func (SDKHost) KVPut(key string, value []byte) error { return agent.KVPut(key, value) }

// RandomBytes is agent.RandomBytes.
func (SDKHost) RandomBytes(n uint32) ([]byte, error) { return agent.RandomBytes(n) }

// Log is agent.Log.
func (SDKHost) Log(level agent.Level, msg string) error { return agent.Log(level, msg) }

// Budget is the run's import calls (run.introspect) and its "steps"
// ceiling (run.limit), 0 when it has none.
func (SDKHost) Budget() (uint64, uint64, error) {
	in, err := agent.Introspect()
	if err != nil {
		return 0, 0, err
	}
	lim, err := agent.Limit()
	if err != nil {
		return 0, 0, err
	}
	for _, c := range lim.Ceilings {
		if c.Dim == "steps" {
			return in.Steps, c.Amount, nil
		}
	}
	return in.Steps, 0, nil
}

// Approver asks for the approval of a step (Step.Approval).
type Approver func() (*agent.Approval, error)

// ApproveBy is the Approver that asks group's approvers to approve action
// (agent.RequestApproval); the run parks until they decide.
func ApproveBy(group, action string) Approver {
	return func() (*agent.Approval, error) { return agent.RequestApproval(action, group) }
}
