package agent

import (
	"errors"

	"github.com/agentrt/agentrt/guest-sdk/abi"
)

// SpawnOptions are a sub-agent's powers. Caps is its capabilities, a YAML
// or JSON map as under capabilities: in a grant ("{run: {}, kv:
// {namespaces: [notes]}}"); it must be within the caller's token, or the
// spawn is refused (ErrDenied). Budget is its budget ceilings in the flag
// syntax ("steps=100,usd=0.50"); a ceiling it leaves out is the caller's,
// and one it sets must be at most the caller's. It is carved out of the
// caller's budget in every dimension: its steps, money, tokens and calls
// are reserved from what the caller has left (a spawn that does not fit
// fails with ErrBudget; a steps ceiling left out is the caller's whole,
// so give a child of a caller with a steps ceiling its own), and come
// back, less what the child spent, when it ends; its wall_seconds is at
// most what the caller has left of its own, and cut to that when left
// out. While a child runs, the caller's calls and the steps the child
// holds count together against the caller's steps ceiling. Priority is the child's
// priority in the cell's queue, 1 (lowest) to 9 (highest): at most the
// caller's, or the spawn is refused (ErrDenied); 0: the caller's.
type SpawnOptions struct {
	Caps     string
	Budget   string
	Priority uint8
}

// Child is a sub-agent, as Spawn returns it.
type Child struct {
	// Run is the child's run id (32 hex digits).
	Run string
	// TokenHash is the SHA-256 of the child's capability token, as its
	// journal and the caller's record it.
	TokenHash []byte
	// Budget is the child's budget ceilings as granted ("" for none).
	Budget string
}

// Outcome is a sub-agent's terminal state: Status is one of
// abi.ChildCompleted, abi.ChildFailed, abi.ChildCancelled,
// abi.ChildBudgetExhausted, abi.ChildInDoubt; Err says why, for any status
// but completed.
type Outcome struct {
	Run        string
	Status     string
	Output     []byte
	OutputHash []byte
	Err        string
}

// Spawn starts a sub-agent (agent.spawn): a run of its own of the module
// the cell holds under the SHA-256 module, with input and the powers of
// opts, which the cell never lets be wider than the caller's. Its journal
// names the caller and the step; the caller's records the child's id, the
// hash of its token and its budget. Spawn needs the agent capability
// (agent: {max_children: N, max_depth: D} in the grant); a spawn past
// max_children is refused.
func Spawn(module []byte, input []byte, opts SpawnOptions) (*Child, error) {
	if len(module) != 32 {
		return nil, errors.New("agent: Spawn needs the module's 32-byte SHA-256")
	}
	var r abi.SpawnResponse
	req := &abi.SpawnRequest{Module: module, Input: input, Caps: opts.Caps, Budget: opts.Budget, Priority: opts.Priority}
	if err := call(agentTransport, abi.CapAgent, abi.OpAgentSpawn, req, &r); err != nil {
		return nil, err
	}
	return &Child{Run: r.Run, TokenHash: r.TokenHash, Budget: r.Budget}, nil
}

// Await waits for the caller's child run to reach a terminal state
// (agent.await): the caller parks, holding no memory, and the cell
// resumes it when the child ends, across restarts. A child that failed is
// an Outcome, not an error; the error is for a run that is not the
// caller's child.
func Await(run string) (*Outcome, error) {
	var r abi.AwaitResponse
	if err := call(agentTransport, abi.CapAgent, abi.OpAgentAwait, &abi.RunRef{Run: run}, &r); err != nil {
		return nil, err
	}
	return &Outcome{Run: r.Run, Status: r.Status, Output: r.Output, OutputHash: r.OutputHash, Err: r.Error}, nil
}

// Cancel cancels the caller's child run and every run below it
// (agent.cancel); cancelling one that ended changes nothing.
func Cancel(run string) error {
	return call(agentTransport, abi.CapAgent, abi.OpAgentCancel, &abi.RunRef{Run: run}, nil)
}

// Children lists the caller's children, in spawn order, with their states
// (abi.ChildRunning for one that has not ended).
func Children() ([]abi.Child, error) {
	var r abi.ChildrenResponse
	if err := call(agentTransport, abi.CapAgent, abi.OpAgentChildren, &abi.Empty{}, &r); err != nil {
		return nil, err
	}
	return r.Children, nil
}
