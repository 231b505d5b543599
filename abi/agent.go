package abi

// The sub-agent ops (SPEC.md §17), agentrt:agent: a run starts child runs
// of modules the cell holds, with powers that are an attenuation of its
// own, awaits their typed outcome (the await parks the parent), cancels
// them and lists them.

// Op codes of agentrt:agent.
const (
	OpAgentSpawn    uint32 = 1
	OpAgentAwait    uint32 = 2
	OpAgentCancel   uint32 = 3
	OpAgentChildren uint32 = 4
)

// MaxPriority is the highest priority of a spawn (SpawnRequest.Priority);
// priorities run from 1, the lowest, and 0 means none given.
const MaxPriority = 9

// SpawnRequest is the request of agent.spawn: the module to run, by the
// SHA-256 the cell holds it under (32 bytes), the child's input, and its
// powers: Caps, a capabilities document in YAML or JSON (the map under
// capabilities: of a token's caps file, e.g. `{run: {}, kv: {namespaces:
// [notes]}}`), which must be within the parent's token, and Budget, the
// child's budget ceilings in the flag syntax ("steps=100,usd=0.50"), which
// must be within the parent's.
type SpawnRequest struct {
	Module []byte `cbor:"module"`
	Input  []byte `cbor:"input,omitempty"`
	Caps   string `cbor:"caps"`
	Budget string `cbor:"budget,omitempty"`
	// Priority is the child's priority in its cell's queue, 1 (lowest)
	// to 9 (highest), at most the caller's; 0 (absent): the caller's.
	Priority uint8 `cbor:"priority,omitempty"`
}

// SpawnResponse answers agent.spawn: the child's run id (32 hex digits),
// the SHA-256 of the child's token, and the child's budget ceilings as
// granted, in the flag syntax ("" for none).
type SpawnResponse struct {
	Run       string `cbor:"run"`
	TokenHash []byte `cbor:"token_hash"`
	Budget    string `cbor:"budget,omitempty"`
}

// RunRef names a child run of the caller: the request of agent.await and
// agent.cancel.
type RunRef struct {
	Run string `cbor:"run"`
}

// Child outcome states, as AwaitResponse.Status and Child.Status say them.
const (
	ChildCompleted       = "completed"
	ChildFailed          = "failed"
	ChildCancelled       = "cancelled"
	ChildBudgetExhausted = "budget_exhausted"
	ChildInDoubt         = "in_doubt"
	// ChildRunning is a child that has not ended (Child.Status only).
	ChildRunning = "running"
)

// AwaitResponse answers agent.await once the child has reached a terminal
// state: its status (ChildCompleted, ChildFailed, ChildCancelled,
// ChildBudgetExhausted, ChildInDoubt), its output and the output's SHA-256,
// and, for any status but completed, why.
type AwaitResponse struct {
	Run        string `cbor:"run"`
	Status     string `cbor:"status"`
	Output     []byte `cbor:"output,omitempty"`
	OutputHash []byte `cbor:"output_hash"`
	Error      string `cbor:"error,omitempty"`
}

// Child is one child run in ChildrenResponse: its id, the parent's step
// that spawned it, and its state.
type Child struct {
	Run    string `cbor:"run"`
	Step   uint64 `cbor:"step"`
	Status string `cbor:"status"`
}

// ChildrenResponse answers agent.children: the caller's children, in the
// order they were spawned.
type ChildrenResponse struct {
	Children []Child `cbor:"children,omitempty"`
}
