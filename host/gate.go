package host

import "github.com/agentrt/agentrt/abi"

// The gate decides whether a call may run. Its stages run in this order, and
// a call is dispatched only if every stage allows it:
//
//  1. capability: the run's grant includes the op's capability and the
//     resource the request names (an HTTP host, a kv namespace). The
//     capability half is enforced at link time; the resource half by the
//     capability's handler, which alone can read its request.
//  2. policy, 3. budget, 4. approval: later stages, each added by its own
//     change as a stage here.
//
// A denial is journaled as the call's failed entry and returned to the guest
// with StatusDenied.
type denial struct {
	status abi.Status
	body   []byte
}

// gate runs the stages that apply before anything is journaled as intent:
// today the capability stage, that is the op itself and then the op's own
// resource check. An unknown op is a bad request.
func (s *session) gate(c *Call, h handler) *denial {
	if c.TooLarge {
		st, b := errorResponse(abi.StatusTooLarge, "request exceeds the limit of %d bytes", s.maxRequest)
		return &denial{st, b}
	}
	if !c.known {
		st, b := errorResponse(abi.StatusBadRequest, "unknown op %d in capability %s", c.Op.Code, c.Op.Cap)
		return &denial{st, b}
	}
	if !s.grant.Has(c.Op.Cap) {
		st, b := errorResponse(abi.StatusDenied, "capability %s is not granted", c.Op.Cap)
		return &denial{st, b}
	}
	if h.check != nil {
		return h.check(s, c)
	}
	return nil
}
