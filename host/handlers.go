package host

import (
	"fmt"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host/caps"
)

// runIndex is the index of the run capability, whose set_output and
// checkpoint the session watches.
var runIndex = capIndex(abi.CapRun)

// slot is an op with its handler, found by capability index and op code in
// one array lookup on every call. The ops are the ABI's, the same for
// every run; the handlers are bound to the run's capability instances
// (session.open).
type slot struct {
	op    abi.Op
	h     caps.Handler
	known bool
}

// opSlots holds every op of the ABI, without handlers: a session copies it
// and fills in the handlers of the capabilities its grant has.
var opSlots = func() (t [numCaps][maxOpCode]slot) {
	for _, op := range abi.Ops {
		t[capIndex(op.Cap)][op.Code] = slot{op: op, known: true}
	}
	return t
}()

// capIndex returns the index of c in abi.Capabilities.
func capIndex(c abi.Capability) int {
	for i, k := range abi.Capabilities {
		if k == c {
			return i
		}
	}
	panic("host: unknown capability " + string(c))
}

// lookup returns the slot of a code in capability ci. An unknown code gets
// a placeholder op, which the gate answers with StatusBadRequest.
func (s *session) lookup(ci int, code uint32) *slot {
	if code < maxOpCode {
		if sl := &s.slots[ci][code]; sl.known {
			return sl
		}
	}
	c := abi.Capabilities[ci]
	return &slot{op: abi.Op{Cap: c, Code: code, Name: fmt.Sprintf("%s.#%d", c, code), Class: abi.Pure, Idempotent: true}}
}

// open makes the instance of every capability the run's grant has and
// binds their handlers into the session's slots. The instances hold what
// the run holds (its HTTP connections) until close.
func (s *session) open() error {
	s.slots = new([numCaps][maxOpCode]slot)
	*s.slots = opSlots
	r := &caps.Run{ID: s.run, Now: s.deps.Now, Halt: s.halt, Deadline: func() time.Time { return s.wallDeadline }}
	if s.events != nil {
		r.Stderr = s.events.writer(EventStderr)
	}
	for i := range registry {
		e := &registry[i]
		if e.section(s.grant) == nil {
			continue
		}
		inst, err := e.open(s, r)
		if err != nil {
			s.close()
			return fmt.Errorf("host: capability %s: %w", e.cap, err)
		}
		s.inst[i] = inst
		for code := range s.slots[i] {
			if sl := &s.slots[i][code]; sl.known {
				sl.h = inst.Handler(sl.op)
			}
		}
	}
	return nil
}

// close closes the run's capability instances; the run is over.
func (s *session) close() {
	for i, inst := range s.inst {
		if inst != nil {
			inst.Close()
			s.inst[i] = nil
		}
	}
}
