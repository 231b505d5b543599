// Package clock is the clock capability (agentrt:clock): the host's real
// wall time, on explicit request.
//
//	clock.now () -> abi.ClockNowResponse   pure (no effect), journaled
//
// The guest's ordinary clock (WASI clock_time_get) is virtual and
// deterministic; this op is how an agent asks for the real time, and its
// answer is recorded so replay returns the same instant. Errors:
// StatusBadRequest for a request that is not the empty map.
//
// The grant section is clock: {} (Grant); the policy sees no resource and
// no attributes. It needs the host's clock (Deps.Now) and nothing else.
package clock

import (
	"context"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/caps"
)

// Grant allows reading the host's real wall time. It has no members.
type Grant struct{}

// Check accepts the empty section.
func (*Grant) Check() error { return nil }

// Token sets the clock capability of a token.
func (*Grant) Token(c *capability.Caps) error { c.Clock = &capability.Unit{}; return nil }

// CheckToken has nothing beyond Within to check.
func (*Grant) CheckToken(capability.Caps) error { return nil }

// Deps is what the capability needs from its host.
type Deps struct {
	// Now is the real clock.
	Now func() time.Time
}

// Capability is the clock capability, as the host registers it.
type Capability struct{}

// Cap names the capability.
func (Capability) Cap() abi.Capability { return abi.CapClock }

// FromToken grants clock: {} when the token's claims do.
func (Capability) FromToken(c capability.Caps) (*Grant, error) {
	if c.Clock == nil {
		return nil, nil
	}
	return &Grant{}, nil
}

// Open returns the run's clock.
func (Capability) Open(_ *Grant, d Deps, _ *caps.Run) (caps.Instance, error) {
	return &instance{now: d.Now}, nil
}

type instance struct{ now func() time.Time }

func (in *instance) Handler(op abi.Op) caps.Handler {
	if op.Code != abi.OpClockNow {
		return caps.Handler{}
	}
	return caps.Handler{Serve: in.serveNow}
}

func (in *instance) serveNow(_ context.Context, c *caps.Call) (abi.Status, []byte) {
	if st, b, ok := caps.Decode(c, &abi.Empty{}); !ok {
		return st, b
	}
	return caps.OK(&abi.ClockNowResponse{UnixNano: in.now().UnixNano()})
}

func (*instance) Facts(c *caps.Call) (caps.Facts, error) { return caps.NoFacts(c) }
func (*instance) Idempotent(*caps.Call) bool             { return false }
func (*instance) Close()                                 {}
