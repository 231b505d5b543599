package plan

import (
	"github.com/agentrt/agentrt/guest-sdk/agent"
)

// Host is what the planner needs of the host. SDK is the agent's own
// host; a test supplies a fake.
type Host interface {
	// Spawn, Await: agent.Spawn and agent.Await.
	Spawn(module, input []byte, opts agent.SpawnOptions) (*agent.Child, error)
	Await(run string) (*agent.Outcome, error)
	// RequestApproval is agent.RequestApproval.
	RequestApproval(action, group string) (*agent.Approval, error)
	// KVGet, KVPut: agent.KVGet and agent.KVPut.
	KVGet(key string) ([]byte, error)
	KVPut(key string, value []byte) error
	// RandomBytes is agent.RandomBytes.
	RandomBytes(n uint32) ([]byte, error)
	// Log is agent.Log.
	Log(level agent.Level, msg string) error
	// Budget reports the run's import calls so far and its ceiling on
	// them (0: none).
	Budget() (used, ceiling uint64, err error)
}

// SDK returns the host of the agent SDK: each method is the agent
// package's function. Budget reads run.introspect (the calls so far) and
// run.limit with no limits (the "steps" ceiling, unchanged); the run's
// import calls are the budget dimension every run has, and both answers
// are journaled.
func SDK() Host { return sdkHost{} }

type sdkHost struct{}

func (sdkHost) Spawn(module, input []byte, opts agent.SpawnOptions) (*agent.Child, error) {
	return agent.Spawn(module, input, opts)
}
func (sdkHost) Await(run string) (*agent.Outcome, error) { return agent.Await(run) }
func (sdkHost) RequestApproval(action, group string) (*agent.Approval, error) {
	return agent.RequestApproval(action, group)
}
func (sdkHost) KVGet(key string) ([]byte, error)        { return agent.KVGet(key) }
func (sdkHost) KVPut(key string, value []byte) error    { return agent.KVPut(key, value) }
func (sdkHost) RandomBytes(n uint32) ([]byte, error)    { return agent.RandomBytes(n) }
func (sdkHost) Log(level agent.Level, msg string) error { return agent.Log(level, msg) }

func (sdkHost) Budget() (uint64, uint64, error) {
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
