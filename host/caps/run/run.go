// Package run is the run capability (agentrt:run): the run's own input,
// output, log and identity. Every op is pure, and every run has it (a run
// started without a grant gets run: {} alone).
//
//	run.input      (abi.Empty) -> abi.InputResponse
//	               the run's input; in a segment after a checkpoint, the
//	               state it gave and the segment's number too
//	run.set_output (abi.SetOutputRequest) -> ()
//	               the run's output; the last call wins
//	run.log        (abi.LogRequest) -> ()
//	               a line for the run's event log, within its log quota
//	run.introspect (abi.Empty) -> abi.IntrospectResponse
//	               run id, module hash, ABI version, capabilities, steps
//	run.checkpoint (abi.CheckpointRequest) -> abi.CheckpointResponse
//	               journals the state; the host then ends the guest's
//	               instance and runs the module again from _start (the
//	               next segment), where run.input carries the state:
//	               continue-as-new
//	run.limit      (abi.LimitRequest) -> abi.LimitResponse
//	               lowers the run's own budget ceilings, never raises
//	               them: for each limit, to what is used of the dimension
//	               now plus the amount; answers the ceilings in force, which
//	               the host enforces from then on
//
// The run.self family (abi/SPEC.md §9.15), the run asking about itself;
// pure too, and each answer is journaled, so a replay feeds it back:
//
//	run.self         (abi.Empty) -> abi.SelfResponse
//	                 run id, task and attempt, parent and spawning step,
//	                 module hash, cell key id, depth
//	run.self_caps    (abi.Empty) -> abi.SelfCapsResponse
//	                 the capabilities the gate enforces, as token claims
//	run.self_may     (abi.MayRequest) -> abi.MayResponse
//	                 a dry run of the gate for a call the run could make
//	                 next: allow, deny or ask, and the layer and reason
//	                 that decided; nothing is reserved, asked or counted
//	run.self_budget  (abi.Empty) -> abi.SelfBudgetResponse
//	                 per budget dimension: ceiling, spent, reserved (and
//	                 carved for children), left
//	run.self_mode    (abi.Empty) -> abi.SelfModeResponse
//	                 the policy's mode and the permission-mode rules
//	run.self_journal (abi.JournalRequest) -> abi.JournalResponse
//	                 a page of the run's own journal, at most
//	                 abi.MaxJournalPage entries, filtered by op and phase
//
// Errors: StatusBadRequest for a malformed request, a log level not in
// 0..3, a budget dimension that does not exist, an unknown op in
// run.self_may, a journal page above abi.MaxJournalPage or an unknown
// phase; StatusInternal when the host cannot read what it answers with.
//
// The run's output and its checkpoints are the host's business (it watches
// a successful set_output and checkpoint); this package answers the calls,
// and reads what it answers with through Session.
package run

import (
	"context"
	"errors"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/caps"
)

// Grant allows the run capability. It has no members.
type Grant struct{}

// Check accepts the empty section.
func (*Grant) Check() error { return nil }

// Token sets the run capability of a token.
func (*Grant) Token(c *capability.Caps) error { c.Run = &capability.Unit{}; return nil }

// CheckToken has nothing beyond Within to check.
func (*Grant) CheckToken(capability.Caps) error { return nil }

// Session is what the run capability needs from the host's session: the
// run's input and segment, its checkpoint's answer, its event log and its
// grant. It is read at each call, since a checkpoint changes the segment.
type Session interface {
	// Input returns the run's input, and the state and number of the
	// segment the instance runs.
	Input() (input, state []byte, segment uint32)
	// Checkpoint returns the response of a checkpoint made now: the next
	// segment's number, the virtual clock, the run's start hash and the
	// bytes journaled so far.
	Checkpoint() abi.CheckpointResponse
	// Log adds a log line to the run's event log, within its log quota.
	Log(level uint8, msg string)
	// Capabilities lists the capabilities of the run's grant, in ABI order.
	Capabilities() []abi.Capability
	// ModuleSHA256 is the hash of the run's module.
	ModuleSHA256() []byte
	// Limit lowers the run's ceilings (run.limit); an error names what
	// in the request is wrong.
	Limit(limits []abi.BudgetLimit) (abi.LimitResponse, error)
	Self
}

// Self is what the run.self family reads of the host, at the asking
// call, whose step is step. A *BadRequestError is the guest's
// (StatusBadRequest), any other error the host's (StatusInternal).
type Self interface {
	// Self says who the run is.
	Self(ctx context.Context) (abi.SelfResponse, error)
	// SelfCaps lists what the run's grant allows, as the gate sees it.
	SelfCaps() (abi.SelfCapsResponse, error)
	// May runs the gate on the call r describes as the run's next step,
	// with no effect, and reports its decision.
	May(ctx context.Context, step uint64, r abi.MayRequest) (abi.MayResponse, error)
	// SelfBudget reports the run's ledger.
	SelfBudget(step uint64) (abi.SelfBudgetResponse, error)
	// SelfMode reports the mode and the permission modes.
	SelfMode() abi.SelfModeResponse
	// SelfJournal reads a page of the run's own journal; r.Limit is
	// within abi.MaxJournalPage.
	SelfJournal(ctx context.Context, r abi.JournalRequest) (abi.JournalResponse, error)
}

// BadRequestError is an error of Self that the guest's request caused:
// Msg is what the guest is told.
type BadRequestError struct{ Msg string }

func (e *BadRequestError) Error() string { return e.Msg }

// Capability is the run capability, as the host registers it.
type Capability struct{}

// Cap names the capability.
func (Capability) Cap() abi.Capability { return abi.CapRun }

// FromToken grants run: {} when the token's claims do.
func (Capability) FromToken(c capability.Caps) (*Grant, error) {
	if c.Run == nil {
		return nil, nil
	}
	return &Grant{}, nil
}

// Open returns the run's view of its session.
func (Capability) Open(_ *Grant, s Session, r *caps.Run) (caps.Instance, error) {
	return &instance{s: s, id: r.ID.String()}, nil
}

type instance struct {
	s  Session
	id string
}

func (in *instance) Handler(op abi.Op) caps.Handler {
	switch op.Code {
	case abi.OpRunInput:
		return caps.Handler{Serve: in.input}
	case abi.OpRunSetOutput:
		return caps.Handler{Serve: setOutput}
	case abi.OpRunLog:
		return caps.Handler{Serve: in.log}
	case abi.OpRunCheckpoint:
		return caps.Handler{Serve: in.checkpoint}
	case abi.OpRunIntrospect:
		return caps.Handler{Serve: in.introspect}
	case abi.OpRunLimit:
		return caps.Handler{Serve: in.limit}
	case abi.OpRunSelf:
		return caps.Handler{Serve: in.self}
	case abi.OpRunSelfCaps:
		return caps.Handler{Serve: in.selfCaps}
	case abi.OpRunSelfMay:
		return caps.Handler{Serve: in.may}
	case abi.OpRunSelfBudget:
		return caps.Handler{Serve: in.selfBudget}
	case abi.OpRunSelfMode:
		return caps.Handler{Serve: in.selfMode}
	case abi.OpRunSelfJournal:
		return caps.Handler{Serve: in.selfJournal}
	}
	return caps.Handler{}
}

func (in *instance) input(_ context.Context, c *caps.Call) (abi.Status, []byte) {
	if st, b, ok := caps.Decode(c, &abi.Empty{}); !ok {
		return st, b
	}
	input, state, seg := in.s.Input()
	return caps.OK(&abi.InputResponse{Input: input, State: state, Segment: seg})
}

// setOutput only checks the request: the host keeps the output of a
// successful call.
func setOutput(_ context.Context, c *caps.Call) (abi.Status, []byte) {
	var r abi.SetOutputRequest
	if st, b, ok := caps.Decode(c, &r); !ok {
		return st, b
	}
	return abi.StatusOK, nil
}

func (in *instance) log(_ context.Context, c *caps.Call) (abi.Status, []byte) {
	var r abi.LogRequest
	if st, b, ok := caps.Decode(c, &r); !ok {
		return st, b
	}
	if r.Level > abi.LevelError {
		return caps.Error(abi.StatusBadRequest, "run.log: level %d is not 0..3", r.Level)
	}
	in.s.Log(r.Level, r.Message)
	return abi.StatusOK, nil
}

func (in *instance) checkpoint(_ context.Context, c *caps.Call) (abi.Status, []byte) {
	var r abi.CheckpointRequest
	if st, b, ok := caps.Decode(c, &r); !ok {
		return st, b
	}
	resp := in.s.Checkpoint()
	return caps.OK(&resp)
}

func (in *instance) introspect(_ context.Context, c *caps.Call) (abi.Status, []byte) {
	if st, b, ok := caps.Decode(c, &abi.Empty{}); !ok {
		return st, b
	}
	var names []string
	for _, cp := range in.s.Capabilities() {
		names = append(names, string(cp))
	}
	return caps.OK(&abi.IntrospectResponse{
		RunID:        in.id,
		ModuleSHA256: in.s.ModuleSHA256(),
		ABI:          abi.Version,
		Capabilities: names,
		Steps:        c.Step - 1,
	})
}

func (*instance) Facts(c *caps.Call) (caps.Facts, error) { return caps.NoFacts(c) }
func (*instance) Idempotent(*caps.Call) bool             { return false }
func (*instance) Close()                                 {}

func (in *instance) limit(_ context.Context, c *caps.Call) (abi.Status, []byte) {
	var r abi.LimitRequest
	if st, b, ok := caps.Decode(c, &r); !ok {
		return st, b
	}
	resp, err := in.s.Limit(r.Limits)
	if err != nil {
		return caps.Error(abi.StatusBadRequest, "%v", err)
	}
	return caps.OK(&resp)
}

// answer is the response of a run.self call: v, or err as the guest's
// error (*BadRequestError) or the host's.
func answer[T any](c *caps.Call, v T, err error) (abi.Status, []byte) {
	var bad *BadRequestError
	switch {
	case errors.As(err, &bad):
		return caps.Error(abi.StatusBadRequest, "%s", bad.Msg)
	case err != nil:
		return caps.Error(abi.StatusInternal, "%s: %v", c.Op.Name, err)
	}
	return caps.OK(&v)
}

func (in *instance) self(ctx context.Context, c *caps.Call) (abi.Status, []byte) {
	if st, b, ok := caps.Decode(c, &abi.Empty{}); !ok {
		return st, b
	}
	r, err := in.s.Self(ctx)
	return answer(c, r, err)
}

func (in *instance) selfCaps(_ context.Context, c *caps.Call) (abi.Status, []byte) {
	if st, b, ok := caps.Decode(c, &abi.Empty{}); !ok {
		return st, b
	}
	r, err := in.s.SelfCaps()
	return answer(c, r, err)
}

func (in *instance) may(ctx context.Context, c *caps.Call) (abi.Status, []byte) {
	var req abi.MayRequest
	if st, b, ok := caps.Decode(c, &req); !ok {
		return st, b
	}
	r, err := in.s.May(ctx, c.Step, req)
	return answer(c, r, err)
}

func (in *instance) selfBudget(_ context.Context, c *caps.Call) (abi.Status, []byte) {
	if st, b, ok := caps.Decode(c, &abi.Empty{}); !ok {
		return st, b
	}
	r, err := in.s.SelfBudget(c.Step)
	return answer(c, r, err)
}

func (in *instance) selfMode(_ context.Context, c *caps.Call) (abi.Status, []byte) {
	if st, b, ok := caps.Decode(c, &abi.Empty{}); !ok {
		return st, b
	}
	return caps.OK(in.s.SelfMode())
}

func (in *instance) selfJournal(ctx context.Context, c *caps.Call) (abi.Status, []byte) {
	var req abi.JournalRequest
	if st, b, ok := caps.Decode(c, &req); !ok {
		return st, b
	}
	if req.Limit > abi.MaxJournalPage {
		return caps.Error(abi.StatusBadRequest, "run.self_journal: limit %d is above the host's cap of %d entries a page; ask for at most %d and follow next to page on", req.Limit, abi.MaxJournalPage, abi.MaxJournalPage)
	}
	r, err := in.s.SelfJournal(ctx, req)
	return answer(c, r, err)
}
