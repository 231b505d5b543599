package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/host/caps"
	"github.com/agentrt/agentrt/journal"
	"github.com/cedar-policy/cedar-go/types"
)

// A Source serves import calls from a recorded journal instead of
// dispatching them; it is how replay feeds recorded results back. Serve
// returns the recorded status and response, or an error (a divergence) that
// stops the run. It must not keep c or c.Request after it returns.
type Source interface {
	Serve(ctx context.Context, c *Call) (abi.Status, []byte, error)
}

// callPath journals or replays calls: the live path or a resumed one.
type callPath interface {
	serve(ctx context.Context, s *session, c *Call, h caps.Handler) (abi.Status, []byte, error)
}

// session is the host-side state of one running instance.
type session struct {
	run        journal.RunID
	header     *journal.Header
	grant      *Grant
	path       callPath
	deps       *Deps
	maxRequest int
	steps      uint64
	// slots are the ops of the ABI with the handlers of the run's
	// capabilities (session.open), found by capability index and op code;
	// &opSlots (no handlers) until the run opens, and in a replay.
	slots *[numCaps][maxOpCode]slot
	// inst and pending are indexed by capability (capIndex): the run's
	// capability instances (nil: not granted) and the response left for
	// take.
	inst    [numCaps]caps.Instance
	pending [numCaps]pendingResponse
	// ci and known are the capability index of the call being served and
	// whether its op is one of the ABI (not a placeholder for an unknown
	// code).
	ci    int
	known bool
	// src, when set, serves every call (replay); path is not used then.
	src Source
	// cur is reused by every call of the session.
	cur    Call
	output []byte
	events *eventBuffer
	// done is the run context's Done channel: checked at every step
	// boundary and every yield (wasmModule.rewrite), so an interrupted run
	// stops between two calls.
	done <-chan struct{}
	// halt is closed when the host asks the run to stop (Cancel, Drain,
	// the wall-time budget; in a replay, the bound after the last
	// recorded call): checked where done is, but it does not cut a step
	// short.
	halt <-chan struct{}
	// haltStop, when set, is how a halt ends the guest: a stop it caused
	// (a replay re-enacting a budget stop), instead of an interruption.
	haltStop *stopError
	// limits are the run's limits; journaled counts the bytes of
	// requests and responses its journal holds (Limits.JournalBytes).
	limits    Limits
	journaled uint64
	// fatal is the first error that stopped the run from inside a call.
	fatal error
	// asking is set by the gate for the call the permission modes asked
	// about, when the cell keeps an approvals book: the call parks for its
	// approvers (park.go). park is what the run parked for.
	asking *askState
	park   *parking
	// dry is set while the gate decides a call the run only asks about
	// (run.self_may, self.go): the budget layer holds nothing and the
	// approval layer asks no one.
	dry bool
	// depth is the run's number of ancestors, found on the first run.self
	// (depthKnown).
	depth      uint32
	depthKnown bool
	// seg is the segment the instance runs: the checkpoints before it, the
	// state it starts from and its clock. clock is the instance's clock.
	seg   segment
	clock *virtualClock
	// mem is the memory of the instance running the segment, set by the
	// engine adapter when it instantiates the module.
	mem memory
	// next, set by a checkpoint, is the segment to start when the
	// instance has ended.
	next *segment
	// startHash is the hash of the run's start entry, named by every
	// checkpoint.
	startHash []byte
	// entities and runUID are the policy entities of the run (gate_policy.go),
	// built on the first call that needs them; decisions caches the
	// policy's decisions, and policyUses says which varying context
	// attributes its key must hold.
	entities   types.EntityMap
	runUID     types.EntityUID
	decisions  map[string]*cachedDecision
	policyUses struct{ time, spent bool }
	// wallDeadline is when the run's wall-time budget runs out (zero:
	// none): a tool launched now may run only until then (caps.Run.Deadline).
	wallDeadline time.Time
	// ledger is the run's budget (host/budget.go); nil in a replay, whose
	// answers are recorded. resv is the reservation of the call being
	// served when reserved is set; held are the reservations calls left
	// open for a later call to settle, by step; blog holds the records
	// for the next entry.
	ledger   *budget.Ledger
	resv     budget.Reservation
	reserved bool
	held     map[uint64]budget.Reservation
	blog     *budgetLog
	// stepCap is the most steps the run's budget allows (its steps
	// ceiling, lowered by run.limit); math.MaxUint64 for none.
	stepCap uint64
	// started is the run's start, Unix ns (wall-clock seconds count from
	// it); setWall, set while the run executes, moves its wall-time
	// deadline.
	started int64
	setWall func(deadline time.Time)
}

// segment is where a segment of a run starts: a run that checkpoints is
// continued as new, from the state it gave, in a fresh instance.
type segment struct {
	// number counts the checkpoints before the segment.
	number uint32
	state  []byte
	// clock is the virtual monotonic clock at the start, ns.
	clock int64
	// journaled is the bytes of requests and responses journaled before
	// the segment (session.journaled), the checkpoint's own included.
	journaled uint64
}

// errSegmentEnd ends the instance of a segment after its checkpoint was
// journaled; execute starts the next segment.
var errSegmentEnd = errors.New("host: segment ended by a checkpoint")

// checkpoint ends the current segment after a successful run.checkpoint:
// req and resp are the call's journaled request and response, so a replay
// starts the next segment exactly as the recorded run did.
func (s *session) checkpoint(req, resp []byte) {
	next, err := checkpointSegment(req, resp)
	if err != nil {
		s.stop(err)
	}
	s.next = next
	panic(errSegmentEnd)
}

// checkpointSegment returns the segment a checkpoint call with req and resp
// starts.
func checkpointSegment(req, resp []byte) (*segment, error) {
	var rq abi.CheckpointRequest
	var rs abi.CheckpointResponse
	if err := abi.Unmarshal(req, &rq); err != nil {
		return nil, fmt.Errorf("host: checkpoint request: %w", err)
	}
	if err := abi.Unmarshal(resp, &rs); err != nil {
		return nil, fmt.Errorf("host: checkpoint response: %w", err)
	}
	if rs.Segment == 0 {
		return nil, errors.New("host: checkpoint response names segment 0")
	}
	return &segment{number: rs.Segment, state: bytes.Clone(rq.State), clock: rs.Clock,
		journaled: rs.Journal + uint64(len(req)) + uint64(len(resp))}, nil
}

// nextSegment moves the session to the segment its checkpoint started. The
// new segment starts with no output: the run's output is what its last
// segment sets (continue-as-new).
func (s *session) nextSegment() {
	s.seg, s.next = *s.next, nil
	s.output = nil
	s.pending = [numCaps]pendingResponse{}
}

type pendingResponse struct {
	ok     bool
	status abi.Status
	body   []byte
}

// sessionKey is a pointer so that finding it in a context compares
// pointers, on every call.
var sessionKey = new(int)

func withSession(ctx context.Context, s *session) context.Context {
	return context.WithValue(ctx, sessionKey, s)
}

func sessionFrom(ctx context.Context) *session {
	s, _ := ctx.Value(sessionKey).(*session)
	if s == nil {
		panic("agentrt host function called outside a run")
	}
	return s
}

// stop aborts the guest because the host cannot go on (the journal failed,
// replay diverged): the engine adapter turns the panic into an error
// returned from the guest's entry point, with the wasm stack trace of the
// call site.
func (s *session) stop(err error) {
	if s.fatal == nil {
		s.fatal = err
	}
	panic(err)
}

// fault traps the guest for breaking the calling convention (a buffer
// outside its memory). It is the guest's failure, recorded as such, and
// replays identically.
func (s *session) fault(err error) { panic(err) }

// stopError ends a guest for using up what its run may use: a quota or its
// wall-time budget. The run ends failed with the reason, and its journal
// records that end ("stopped: " and the reason, see GuestError).
type stopError struct{ reason string }

func (e *stopError) Error() string { return "stopped: " + e.reason }

// interruption is the error that stops the guest when the run's context
// ended or the host asked it to stop: a stop of the host's, kept in
// s.fatal.
func (s *session) interruption() error {
	err := fmt.Errorf("%w after %d calls", ErrInterrupted, s.steps)
	if s.fatal == nil {
		s.fatal = err
	}
	return err
}

// haltError is the error that stops the guest when halt is closed: an
// interruption, or in a replay the stop the recorded run ended with.
func (s *session) haltError() error {
	if s.haltStop != nil {
		return s.haltStop
	}
	return s.interruption()
}

func (s *session) interrupted() { panic(s.interruption()) }
func (s *session) halted()      { panic(s.haltError()) }

// checkStop is the check of a yield (wasmModule.rewrite, or wasmtime's
// epoch callback): the error to stop the guest with when the run must
// stop, as at a call; nil to go on.
func (s *session) checkStop() error {
	select {
	case <-s.done:
		return s.interruption()
	default:
	}
	select {
	case <-s.halt:
		return s.haltError()
	default:
	}
	return nil
}

// overQuota ends the guest at a call its run's limits do not allow: the
// call is not journaled.
func (s *session) overQuota(format string, args ...any) {
	panic(&stopError{reason: "quota: " + fmt.Sprintf(format, args...)})
}

// noMemory is a session's memory before its instance exists: every access
// is outside it, so a call faults.
type noMemory struct{}

func (noMemory) Read(uint32, uint32) ([]byte, bool) { return nil, false }
func (noMemory) Write(uint32, []byte) bool          { return false }

// call implements the call import of every capability module.
func (s *session) call(ctx context.Context, ci int, opcode, reqPtr, reqLen, respPtr, respCap uint32) abi.Result {
	// Two one-case selects, not one of two cases: each compiles to a
	// non-blocking receive, where a select of several cases goes through
	// the runtime's select, a cost every call would pay.
	select {
	case <-s.done:
		s.interrupted()
	default:
	}
	select {
	case <-s.halt:
		s.halted()
	default:
	}
	// A response left pending is dropped by the next call: take only ever
	// returns the response of the latest call.
	if s.pending[ci].ok {
		s.pending[ci] = pendingResponse{}
	}
	slot := s.lookup(ci, opcode)
	c := &s.cur
	*c = Call{Step: s.steps + 1, Op: &slot.op}
	s.ci, s.known = ci, slot.known
	mem := s.mem
	req, ok := mem.Read(reqPtr, reqLen)
	if !ok {
		s.fault(fmt.Errorf("request buffer [%d, +%d) is outside guest memory", reqPtr, reqLen))
	}
	h := slot.h
	var journaled uint64
	if reqLen > uint32(s.maxRequest) {
		// Refused without a copy; the gate answers StatusTooLarge.
		c.TooLarge, h = true, caps.Handler{}
		c.SetInputHash(journal.Sum(req))
	} else {
		c.Request, journaled = req, uint64(reqLen)
	}
	// The quotas are checked before anything of the call is journaled, in
	// replay as live, so that a replay stops where the run stopped.
	if s.steps >= s.limits.Calls {
		s.overQuota("calls: the run has made its %d calls (limits.calls)", s.limits.Calls)
	}
	if s.steps >= s.stepCap {
		panic(&stopError{reason: fmt.Sprintf("budget: steps: the run has made its %d calls (its token's steps, or run.limit)", s.stepCap)})
	}
	if !s.recordedCall() {
		if held, over := s.childStepsOver(s.steps); over {
			panic(&stopError{reason: fmt.Sprintf("budget: steps: the run has made %d calls and its children hold or made %d of its %d steps (its token's steps, or run.limit)", s.steps, held, s.stepCap)})
		}
	}
	if s.journaled+journaled > s.limits.JournalBytes {
		s.overQuota("journal: the call's %d-byte request would take the run's journal past %d bytes of requests and responses (limits.journal)", journaled, s.limits.JournalBytes)
	}
	// A call counts as a step once it is served: one that faulted before
	// (its request outside memory, a quota) is in no journal.
	s.steps = c.Step
	if c.Op.Class == abi.Effect {
		c.Key = s.run.String() + "-" + strconv.FormatUint(c.Step, 10)
	}
	var status abi.Status
	var resp []byte
	var err error
	if s.src != nil {
		status, resp, err = s.src.Serve(ctx, c) // replay: straight to the recording
	} else {
		status, resp, err = s.path.serve(ctx, s, c, h)
	}
	if err != nil {
		s.stop(err)
	}
	s.journaled += journaled + uint64(len(resp))
	if ci == runIndex && status == abi.StatusOK {
		switch opcode {
		case abi.OpRunSetOutput:
			var r abi.SetOutputRequest
			if abi.Unmarshal(c.Request, &r) == nil {
				s.output = r.Output
			}
		case abi.OpRunCheckpoint:
			s.checkpoint(c.Request, resp)
		case abi.OpRunLimit:
			// The ceilings the answer names apply, whoever gave it: the
			// handler (which applied them already: lowering again is a
			// no-op), a replay's or a resume's recording, a fork's
			// parent. So a replay stops where the run stopped.
			s.applyLimit(resp)
		}
	}
	return s.deliver(mem, ci, respPtr, respCap, pendingResponse{true, status, resp})
}

// deliver copies a response into the guest's buffer, or keeps it pending
// for take when it does not fit.
func (s *session) deliver(mem memory, ci int, ptr, capacity uint32, r pendingResponse) abi.Result {
	n := uint32(len(r.body))
	if n > capacity {
		s.pending[ci] = r
		return abi.Pack(abi.StatusPending, n)
	}
	if n > 0 && !mem.Write(ptr, r.body) {
		s.fault(fmt.Errorf("response buffer [%d, +%d) is outside guest memory", ptr, n))
	}
	return abi.Pack(r.status, n)
}

// take implements the take import: it hands over a pending response.
func (s *session) take(ci int, ptr, capacity uint32) abi.Result {
	r := s.pending[ci]
	if !r.ok {
		return abi.Pack(abi.StatusNoPending, 0)
	}
	if uint32(len(r.body)) > capacity {
		return abi.Pack(abi.StatusBufferTooSmall, uint32(len(r.body)))
	}
	s.pending[ci] = pendingResponse{}
	return s.deliver(s.mem, ci, ptr, capacity, r)
}

// errorResponse builds the status and CBOR Error body of a failed call.
func errorResponse(code abi.Status, format string, args ...any) (abi.Status, []byte) {
	return caps.Error(code, format, args...)
}

// The session as the run capability sees it (run.Session).

// Input returns the run's input and the segment the instance runs.
func (s *session) Input() (input, state []byte, segment uint32) {
	return s.header.Input, s.seg.state, s.seg.number
}

// Checkpoint returns the response of a checkpoint made now.
func (s *session) Checkpoint() abi.CheckpointResponse {
	return abi.CheckpointResponse{Segment: s.seg.number + 1, Clock: s.clock.now, Header: s.startHash, Journal: s.journaled,
		Budget: checkpointBudget(s.ledger)}
}

// Log adds a guest's log line to the run's event log.
func (s *session) Log(level uint8, msg string) {
	s.events.add(Event{Kind: EventRunLog, Level: level, Data: []byte(msg)})
}

// Capabilities lists the capabilities of the run's grant.
func (s *session) Capabilities() []abi.Capability { return s.grant.Capabilities() }

// ModuleSHA256 is the hash of the run's module.
func (s *session) ModuleSHA256() []byte { return s.header.ModuleSHA256 }

// recordedCall reports whether the call being served is answered from a
// recording (a replay, or a resumed or forked run short of its last
// recorded call) rather than made live.
func (s *session) recordedCall() bool {
	if s.src != nil {
		return true
	}
	switch p := s.path.(type) {
	case *resumePath:
		return !p.past && p.rec.Served() < p.rec.Len()
	case *forkPath:
		return !p.past && p.rec.Served() < p.rec.Len()
	}
	return false
}
