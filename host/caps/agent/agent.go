// Package agent is the sub-agent capability (agentrt:agent): a run starts
// child runs, each a run of its own with its own journal and its own
// token, awaits their outcome, cancels them and lists them.
//
//	agent.spawn    (abi.SpawnRequest) -> abi.SpawnResponse       effect
//	               starts a child run of a module the cell holds, with
//	               powers within the caller's token; sent again after a
//	               crash, it finds the child the same step started
//	agent.await    (abi.RunRef) -> abi.AwaitResponse             a wait
//	               the child's terminal state, output and output hash;
//	               the caller parks until the child ends
//	agent.cancel   (abi.RunRef) -> ()                            effect
//	               cancels the child and, through their own parents,
//	               every run below it
//	agent.children (abi.Empty) -> abi.ChildrenResponse           pure
//	               the caller's children and their states
//
// The grant section is agent: {max_children: N, max_depth: D}; the policy
// sees no resource and no attributes. What a child may
// do, and whether it may be started at all, is the cell's to decide
// (Spawner): this package checks the requests' form and maps the
// Spawner's errors to statuses.
//
// Errors: StatusBadRequest for a malformed request (a module hash that is
// not 32 bytes, a run id that is not 32 hex digits, a caps document or a
// budget that does not parse); StatusDenied for a child wider than the
// caller (ErrWidens), a spawn past max_children or max_depth, a run that
// is not the caller's child, or a cell that runs no sub-agents;
// StatusNotFound for a module the cell does not hold. The gate's budget
// layer answers StatusBudget for a child whose ceilings do not fit in
// what the caller's budget has left: agent.spawn is a caps.Carver, and
// its child's budget is reserved in the caller's ledger while it runs
// (the budget bridge, host/budget.go).
package agent

import (
	"context"
	"errors"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/host/caps"
	"github.com/agentrt/agentrt/journal"
)

// Grant allows sub-agents: at most MaxChildren children of the run, and
// at most MaxDepth generations below it.
type Grant struct {
	MaxChildren uint32 `yaml:"max_children" cbor:"max_children"`
	MaxDepth    uint32 `yaml:"max_depth" cbor:"max_depth"`
}

// Check requires both bounds.
func (g *Grant) Check() error {
	return (capability.Caps{Agent: &capability.Agent{MaxChildren: g.MaxChildren, MaxDepth: g.MaxDepth}}).Check()
}

// Token sets the agent capability of a token.
func (g *Grant) Token(c *capability.Caps) error {
	c.Agent = &capability.Agent{MaxChildren: g.MaxChildren, MaxDepth: g.MaxDepth}
	return nil
}

// CheckToken has nothing beyond Within to check.
func (*Grant) CheckToken(capability.Caps) error { return nil }

// Errors a Spawner returns, which the capability maps to statuses.
var (
	// ErrDenied: the child would be wider than its parent, the run has
	// spawned max_children already, max_depth is reached, the run named
	// is not the caller's child, or the cell runs no sub-agents.
	ErrDenied = errors.New("agent: denied")
	// ErrBadRequest: a caps document or a budget that does not parse.
	ErrBadRequest = errors.New("agent: bad request")
	// ErrNotFound: the cell does not hold the module.
	ErrNotFound = errors.New("agent: not found")
)

// Spawn is a spawn as the Spawner sees it: the request and who asks.
type Spawn struct {
	// Parent is the calling run, Step its spawning call and Token its
	// capability token (its header's).
	Parent journal.RunID
	Step   uint64
	Token  []byte
	// Grant is the parent's agent section: its bounds.
	Grant Grant
	Req   abi.SpawnRequest
	// Budget, when set, is the child's budget as the parent's budget
	// layer carved it (caps.Call.Child), to issue its token with instead
	// of Req.Budget.
	Budget *capability.Budget
}

// Spawner starts and follows the children of runs: the cell's (host/cell).
// Every method is told the calling run, and answers only about its own
// children.
type Spawner interface {
	// Spawn starts the child of s, or, when the step already started one
	// (a spawn sent again after a crash), returns that child.
	Spawn(ctx context.Context, s Spawn) (abi.SpawnResponse, error)
	// Outcome returns the terminal state of child; done false while it
	// has not reached one.
	Outcome(ctx context.Context, parent, child journal.RunID) (r abi.AwaitResponse, done bool, err error)
	// Cancel cancels child and its descendants.
	Cancel(ctx context.Context, parent, child journal.RunID) error
	// Children lists parent's children in spawn order.
	Children(ctx context.Context, parent journal.RunID) ([]abi.Child, error)
	// Spend returns what became of the child parent's call at step
	// started: none, running, or ended with what it spent (its settles,
	// and what it still held when it stopped, at their worst case), read
	// from its journal. The host settles the child's carve with it.
	Spend(ctx context.Context, parent journal.RunID, step uint64) (ChildSpend, error)
}

// ChildSpend is what Spawner.Spend says of the child a step started.
type ChildSpend struct {
	// Started is false when the step started no child.
	Started bool
	// Ended says the child reached a terminal state; Spent is then what it
	// spent and still held.
	Ended bool
	Spent budget.Amounts
}

// Deps are what the capability needs from the cell and the run: the cell's
// Spawner (nil: the cell runs no sub-agents) and the run's token.
type Deps struct {
	Spawner Spawner
	Token   []byte
}

// Capability is the agent capability, as the host registers it.
type Capability struct{}

// Cap names the capability.
func (Capability) Cap() abi.Capability { return abi.CapAgent }

// FromToken grants the token's agent bounds.
func (Capability) FromToken(c capability.Caps) (*Grant, error) {
	if c.Agent == nil {
		return nil, nil
	}
	return &Grant{MaxChildren: c.Agent.MaxChildren, MaxDepth: c.Agent.MaxDepth}, nil
}

// Open returns the run's view of its children.
func (Capability) Open(g *Grant, d Deps, r *caps.Run) (caps.Instance, error) {
	return &instance{g: *g, d: d, run: r.ID}, nil
}

type instance struct {
	g   Grant
	d   Deps
	run journal.RunID
}

func (in *instance) Handler(op abi.Op) caps.Handler {
	switch op.Code {
	case abi.OpAgentSpawn:
		return caps.Handler{Check: checkSpawn, Serve: in.spawn}
	case abi.OpAgentAwait:
		return caps.Handler{Check: checkRef, Wait: in.await}
	case abi.OpAgentCancel:
		return caps.Handler{Check: checkRef, Serve: in.cancel}
	case abi.OpAgentChildren:
		return caps.Handler{Serve: in.children}
	}
	return caps.Handler{}
}

func checkSpawn(c *caps.Call) *caps.Denial {
	var r abi.SpawnRequest
	if d := caps.DecodeCheck(c, &r); d != nil {
		return d
	}
	if len(r.Module) != 32 {
		return caps.Deny(abi.StatusBadRequest, "agent.spawn: module is %d bytes, want the module's 32-byte SHA-256 (agentrt module push prints it)", len(r.Module))
	}
	if r.Caps == "" {
		return caps.Deny(abi.StatusBadRequest, "agent.spawn: caps is empty (write the child's capabilities, e.g. {run: {}})")
	}
	if r.Priority > abi.MaxPriority {
		return caps.Deny(abi.StatusBadRequest, "agent.spawn: priority %d is out of range 1..%d (leave it out for the caller's)", r.Priority, abi.MaxPriority)
	}
	return nil
}

func checkRef(c *caps.Call) *caps.Denial {
	var r abi.RunRef
	if d := caps.DecodeCheck(c, &r); d != nil {
		return d
	}
	if _, err := journal.ParseRunID(r.Run); err != nil {
		return caps.Deny(abi.StatusBadRequest, "%s: run %q: %v", c.Op.Name, r.Run, err)
	}
	return nil
}

// status maps a Spawner's error to the call's outcome.
func status(op string, err error) (abi.Status, []byte) {
	code := abi.StatusInternal
	switch {
	case errors.Is(err, ErrDenied), errors.Is(err, capability.ErrWidens):
		code = abi.StatusDenied
	case errors.Is(err, ErrBadRequest):
		code = abi.StatusBadRequest
	case errors.Is(err, ErrNotFound):
		code = abi.StatusNotFound
	}
	return caps.Error(code, "%s: %v", op, err)
}

func (in *instance) spawner(op string) (Spawner, abi.Status, []byte) {
	if in.d.Spawner == nil {
		st, b := caps.Error(abi.StatusDenied, "%s: this cell runs no sub-agents (run the parent under agentrt cell serve)", op)
		return nil, st, b
	}
	return in.d.Spawner, abi.StatusOK, nil
}

func (in *instance) spawn(ctx context.Context, c *caps.Call) (abi.Status, []byte) {
	sp, st, b := in.spawner(c.Op.Name)
	if sp == nil {
		return st, b
	}
	var r abi.SpawnRequest
	if st, b, ok := caps.Decode(c, &r); !ok {
		return st, b
	}
	resp, err := sp.Spawn(ctx, Spawn{Parent: in.run, Step: c.Step, Token: in.d.Token, Grant: in.g, Req: r, Budget: c.Child})
	if err != nil {
		return status(c.Op.Name, err)
	}
	return caps.OK(&resp)
}

// await waits for the child: Answer says whether it has ended, and with
// what.
func (in *instance) await(c *caps.Call, _ time.Time) caps.Wait {
	var r abi.RunRef
	_ = abi.Unmarshal(c.Request, &r) // checked
	child, _ := journal.ParseRunID(r.Run)
	op := c.Op.Name
	return caps.Wait{Run: child, Answer: func(ctx context.Context) (bool, abi.Status, []byte) {
		sp, st, b := in.spawner(op)
		if sp == nil {
			return true, st, b
		}
		resp, done, err := sp.Outcome(ctx, in.run, child)
		if err != nil {
			st, b := status(op, err)
			return true, st, b
		}
		if !done {
			return false, 0, nil
		}
		st, b = caps.OK(&resp)
		return true, st, b
	}}
}

func (in *instance) cancel(ctx context.Context, c *caps.Call) (abi.Status, []byte) {
	sp, st, b := in.spawner(c.Op.Name)
	if sp == nil {
		return st, b
	}
	var r abi.RunRef
	if st, b, ok := caps.Decode(c, &r); !ok {
		return st, b
	}
	child, _ := journal.ParseRunID(r.Run)
	if err := sp.Cancel(ctx, in.run, child); err != nil {
		return status(c.Op.Name, err)
	}
	return abi.StatusOK, nil
}

func (in *instance) children(ctx context.Context, c *caps.Call) (abi.Status, []byte) {
	sp, st, b := in.spawner(c.Op.Name)
	if sp == nil {
		return st, b
	}
	if st, b, ok := caps.Decode(c, &abi.Empty{}); !ok {
		return st, b
	}
	kids, err := sp.Children(ctx, in.run)
	if err != nil {
		return status(c.Op.Name, err)
	}
	return caps.OK(&abi.ChildrenResponse{Children: kids})
}

// CarveBudget makes agent.spawn a caps.Carver: the child's budget is
// reserved in its parent's ledger while it runs.
func (in *instance) CarveBudget(c *caps.Call) (string, bool) {
	if c.Op.Code != abi.OpAgentSpawn {
		return "", false
	}
	var r abi.SpawnRequest
	if abi.Unmarshal(c.Request, &r) != nil {
		return "", false
	}
	return r.Budget, true
}

func (*instance) Facts(c *caps.Call) (caps.Facts, error) { return caps.NoFacts(c) }
func (*instance) Idempotent(*caps.Call) bool             { return true }
func (*instance) Close()                                 {}
