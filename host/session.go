package host

import (
	"context"
	"fmt"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
	"github.com/tetratelabs/wazero/api"
)

// Call is one import call on its way through the host: what the gate checks,
// what the journal records and what a Source replays.
type Call struct {
	// Step is the call's ordinal in the run, from 1.
	Step uint64
	Op   abi.Op
	// Request is the CBOR request as the guest sent it; nil when it was
	// refused as too large.
	Request   []byte
	InputHash []byte
	// Key is the idempotency key of an effect, derived from (run, step).
	Key string
	// TooLarge marks a request refused for its size; Request is nil and
	// InputHash covers the whole request.
	TooLarge bool
}

// A Source serves import calls from a recorded journal instead of
// dispatching them; it is how replay feeds recorded results back. Serve
// returns the recorded status and response, or an error (a divergence) that
// stops the run.
type Source interface {
	Serve(ctx context.Context, c *Call) (abi.Status, []byte, error)
}

// path journals or replays calls.
type path interface {
	serve(ctx context.Context, s *session, c *Call, h handler) (abi.Status, []byte, error)
}

// handler serves one op. check, when set, is the op's stage of the
// capability gate: it inspects the request before anything is journaled
// as intent, and a denial it returns is the call's outcome. An effect on the
// agent's own state has stage instead of serve: it computes the response
// and the state change, which the journal commits together.
type handler struct {
	check func(s *session, c *Call) *denial
	serve func(ctx context.Context, s *session, c *Call) (abi.Status, []byte)
	stage func(s *session, c *Call) (abi.Status, []byte, journal.KVWrite)
}

// session is the host-side state of one running instance.
type session struct {
	run        journal.RunID
	header     *journal.Header
	grant      *Grant
	path       path
	deps       *Deps
	maxRequest int
	steps      uint64
	pending    map[abi.Capability]pendingResponse
	output     []byte
	events     *eventBuffer
	// fatal is the first error that stopped the run from inside a call.
	fatal error
}

type pendingResponse struct {
	status abi.Status
	body   []byte
}

type sessionKey struct{}

func withSession(ctx context.Context, s *session) context.Context {
	return context.WithValue(ctx, sessionKey{}, s)
}

func sessionFrom(ctx context.Context) *session {
	s, _ := ctx.Value(sessionKey{}).(*session)
	if s == nil {
		panic("agentrt host function called outside a run")
	}
	return s
}

// stop aborts the guest because the host cannot go on (the journal failed,
// replay diverged): wazero turns the panic into an error returned from the
// guest's entry point, with the wasm stack trace of the call site.
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

// call implements the call import of every capability module.
func (s *session) call(ctx context.Context, mem api.Memory, c abi.Capability, opcode, reqPtr, reqLen, respPtr, respCap uint32) abi.Result {
	// A response left pending is dropped by the next call: take only ever
	// returns the response of the latest call.
	delete(s.pending, c)
	if reqLen > uint32(s.maxRequest) {
		return s.deliver(mem, c, respPtr, respCap, s.refuse(ctx, c, opcode, reqPtr, reqLen, mem))
	}
	req, ok := mem.Read(reqPtr, reqLen)
	if !ok {
		s.fault(fmt.Errorf("request buffer [%d, +%d) is outside guest memory", reqPtr, reqLen))
	}
	req = append(make([]byte, 0, len(req)), req...)
	s.steps++
	call := &Call{Step: s.steps, Op: opOf(c, opcode), Request: req, InputHash: journal.Sum(req)}
	if call.Op.Class == abi.Effect {
		call.Key = fmt.Sprintf("%s-%d", s.run, call.Step)
	}
	status, resp, err := s.path.serve(ctx, s, call, handlerOf(call.Op))
	if err != nil {
		s.stop(err)
	}
	if call.Op == opSetOutput && status == abi.StatusOK {
		var r abi.SetOutputRequest
		if abi.Unmarshal(req, &r) == nil {
			s.output = r.Output
		}
	}
	return s.deliver(mem, c, respPtr, respCap, pendingResponse{status, resp})
}

// refuse journals a request over the size limit without copying it.
// The gate answers it with StatusTooLarge.
func (s *session) refuse(ctx context.Context, c abi.Capability, opcode, reqPtr, reqLen uint32, mem api.Memory) pendingResponse {
	req, ok := mem.Read(reqPtr, reqLen)
	if !ok {
		s.fault(fmt.Errorf("request buffer [%d, +%d) is outside guest memory", reqPtr, reqLen))
	}
	s.steps++
	call := &Call{Step: s.steps, Op: opOf(c, opcode), InputHash: journal.Sum(req), TooLarge: true}
	status, resp, err := s.path.serve(ctx, s, call, handler{})
	if err != nil {
		s.stop(err)
	}
	return pendingResponse{status, resp}
}

// deliver copies a response into the guest's buffer, or keeps it pending
// for take when it does not fit.
func (s *session) deliver(mem api.Memory, c abi.Capability, ptr, capacity uint32, r pendingResponse) abi.Result {
	n := uint32(len(r.body))
	if n > capacity {
		s.pending[c] = r
		return abi.Pack(abi.StatusPending, n)
	}
	if n > 0 && !mem.Write(ptr, r.body) {
		s.fault(fmt.Errorf("response buffer [%d, +%d) is outside guest memory", ptr, n))
	}
	return abi.Pack(r.status, n)
}

// take implements the take import: it hands over a pending response.
func (s *session) take(mem api.Memory, c abi.Capability, ptr, capacity uint32) abi.Result {
	r, ok := s.pending[c]
	if !ok {
		return abi.Pack(abi.StatusNoPending, 0)
	}
	if uint32(len(r.body)) > capacity {
		return abi.Pack(abi.StatusBufferTooSmall, uint32(len(r.body)))
	}
	delete(s.pending, c)
	return s.deliver(mem, c, ptr, capacity, r)
}

// opOf returns the op for a code, or a placeholder op that the call path
// answers with StatusBadRequest.
func opOf(c abi.Capability, code uint32) abi.Op {
	if op, ok := abi.LookupOp(c, code); ok {
		return op
	}
	return abi.Op{Cap: c, Code: code, Name: fmt.Sprintf("%s.#%d", c, code), Class: abi.Pure, Idempotent: true}
}

// errorResponse builds the status and CBOR Error body of a failed call.
func errorResponse(code abi.Status, format string, args ...any) (abi.Status, []byte) {
	b, err := abi.Marshal(&abi.Error{Code: code, Message: fmt.Sprintf(format, args...)})
	if err != nil {
		panic(err) // an Error always encodes
	}
	return code, b
}

// okResponse encodes v as the body of a successful call.
func okResponse(v any) (abi.Status, []byte) {
	if v == nil {
		return abi.StatusOK, nil
	}
	b, err := abi.Marshal(v)
	if err != nil {
		return errorResponse(abi.StatusInternal, "encode response: %v", err)
	}
	return abi.StatusOK, b
}

// decodeRequest decodes req into v, or returns the BadRequest response.
func decodeRequest(c *Call, v any) (abi.Status, []byte, bool) {
	if err := abi.Unmarshal(c.Request, v); err != nil {
		st, b := errorResponse(abi.StatusBadRequest, "%s: %v", c.Op.Name, err)
		return st, b, false
	}
	return abi.StatusOK, nil, true
}
