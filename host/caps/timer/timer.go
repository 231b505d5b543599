// Package timer is the durable sleep (agentrt:timer):
//
//	timer.sleep (abi.TimerSleepRequest) -> abi.TimerSleepResponse   a wait
//
// A sleep parks the run: its intent is journaled durably, the instance is
// closed, and the cell resumes the run at the wake time, across restarts,
// through the path of every resume; a wake time already past answers at
// once. The answer carries the wake time and the real time the run went
// on, journaled. WASI's own sleep (poll_oneoff) only advances the run's
// virtual clock; this op is the one that waits for the world's.
//
// The grant section is timer: {}; the policy sees no resource and no
// attributes. Errors: StatusBadRequest for a request with neither or both
// of for and until, or a negative one.
package timer

import (
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/caps"
)

// Grant allows durable sleeps. It has no members.
type Grant struct{}

// Check accepts the empty section.
func (*Grant) Check() error { return nil }

// Token sets the timer capability of a token.
func (*Grant) Token(c *capability.Caps) error { c.Timer = &capability.Unit{}; return nil }

// CheckToken has nothing beyond Within to check.
func (*Grant) CheckToken(capability.Caps) error { return nil }

// Capability is the timer capability, as the host registers it. It needs
// nothing from the cell: the host keeps the clock and the parking.
type Capability struct{}

// Cap names the capability.
func (Capability) Cap() abi.Capability { return abi.CapTimer }

// FromToken grants timer: {} when the token's claims do.
func (Capability) FromToken(c capability.Caps) (*Grant, error) {
	if c.Timer == nil {
		return nil, nil
	}
	return &Grant{}, nil
}

// Open returns the run's timer.
func (Capability) Open(*Grant, struct{}, *caps.Run) (caps.Instance, error) {
	return &instance{}, nil
}

type instance struct{ req abi.TimerSleepRequest }

func (in *instance) Handler(op abi.Op) caps.Handler {
	if op.Code != abi.OpTimerSleep {
		return caps.Handler{}
	}
	return caps.Handler{Check: in.check, Wait: in.wait}
}

func (in *instance) check(c *caps.Call) *caps.Denial {
	in.req = abi.TimerSleepRequest{}
	if st, b, ok := caps.Decode(c, &in.req); !ok {
		return &caps.Denial{Status: st, Body: b}
	}
	if (in.req.For == 0) == (in.req.Until == 0) || in.req.For < 0 || in.req.Until < 0 {
		return caps.Deny(abi.StatusBadRequest, "timer.sleep: set exactly one of for (ns, > 0) and until (Unix ns), got for=%d until=%d", in.req.For, in.req.Until)
	}
	return nil
}

// wait computes the wake time: until, or the intent's time plus for.
func (in *instance) wait(c *caps.Call, since time.Time) caps.Wait {
	var r abi.TimerSleepRequest
	_ = abi.Unmarshal(c.Request, &r) // checked (on resume, by the recording's input hash)
	if r.Until != 0 {
		return caps.Wait{Until: time.Unix(0, r.Until)}
	}
	return caps.Wait{Until: since.Add(time.Duration(r.For))}
}

func (*instance) Facts(c *caps.Call) (caps.Facts, error) { return caps.NoFacts(c) }
func (*instance) Idempotent(*caps.Call) bool             { return true }
func (*instance) Close()                                 {}
