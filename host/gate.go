package host

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host/caps"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/policy"
	"github.com/cedar-policy/cedar-go/types"
)

// The gate decides whether a call may run. Its layers run in this order, and
// a call is dispatched only if every layer allows it:
//
//  1. capability: the run's grant, the verified claims of its capability
//     token, includes the op's capability and the resource the request
//     names (an HTTP host, a kv namespace, a tool). The capability half is
//     enforced at link time; the resource half by the capability's handler
//     (its check stage), which alone can read its request.
//  2. policy: the cell's Cedar policies (Deps.Policy), platform and
//     customer sets, both of which must allow the call.
//  3. budget: when the call's capability meters it (caps.Meter: a tool
//     launch, an HTTP request, a model call), its worst case is reserved
//     in the run's ledger (host/budget.go), whose ceilings are the
//     token's, lowered by the run's own run.limit calls. One that does not
//     fit is refused with StatusBudget, naming the dimension and the
//     amounts, and nothing is reserved or sent. This layer runs whether or
//     not the cell has a policy or modes. The reserve is journaled on the
//     call's first entry, and settled at the actual usage on its outcome
//     (released when the approval layer then refuses).
//  4. approval: the permission modes (Deps.Modes) can turn an allow into
//     ask or deny, never a deny into allow; ask parks the call until the
//     Approver answers.
//
// Then the journal. A denial is journaled as the call's failed entry, with
// the reason in its response, and returned to the guest with StatusDenied
// (StatusBadRequest, StatusTooLarge for malformed calls). When the cell runs
// a policy or modes, or when the budget layer refuses, the gate's record of
// the decision (GateRecord) is journaled with the call: on an effect's
// intent, or on a pure or refused call's one entry.
//
// The capability layer's resource check, the policy layer's facts and the
// budget layer's costs come from the call's capability (caps.Handler.Check,
// caps.Instance.Facts, caps.Meter).
type denial = caps.Denial

// Gate layers, as GateRecord names the one that refused a call.
const (
	LayerCapability = "capability"
	LayerPolicy     = "policy"
	LayerMode       = "mode"
	LayerBudget     = "budget"
)

// GateRecord is what the gate decided on a call, as the journal records it
// (journal.Entry.Gate, gate-record in journal/SPEC.md).
type GateRecord struct {
	Allow bool `cbor:"allow" json:"allow"`
	// Layer is the layer that refused the call; empty when it was allowed.
	Layer  string           `cbor:"layer,omitempty" json:"layer,omitempty"`
	Policy *policy.Decision `cbor:"policy,omitempty" json:"policy,omitempty"`
	// Mode is the permission modes' verdict, Rule the rule that set it.
	Mode policy.Effect `cbor:"mode,omitempty" json:"mode,omitempty"`
	Rule string        `cbor:"rule,omitempty" json:"rule,omitempty"`
	// Approved and Approver are the answer to an ask.
	Approved bool   `cbor:"approved,omitempty" json:"approved,omitempty"`
	Approver string `cbor:"approver,omitempty" json:"approver,omitempty"`
	// Reason is a denial's reason, as the guest got it.
	Reason string `cbor:"reason,omitempty" json:"reason,omitempty"`
}

// Approval is a call parked by a permission mode's ask.
type Approval struct {
	Run      journal.RunID
	Step     uint64
	Op       string
	Resource string
	Method   string
	// Rule is the mode rule that asked.
	Rule string
}

// An Approver answers the calls the permission modes park (the approval
// seam): today a person at the terminal of `agentrt run`, or the API of
// `agentrt cell serve`; a later change adds signed quorum approvals.
// Approve blocks until someone answers or ctx ends; who says who answered.
type Approver interface {
	Approve(ctx context.Context, a Approval) (approved bool, who string, err error)
}

// ErrNoApprover is the reason an ask is refused when no one can answer.
var ErrNoApprover = errors.New("the permission modes ask for approval, and no one can answer (run it on a terminal or in a cell daemon)")

// gate runs the layers before anything is journaled as intent. It returns
// the denial, if any, and the record to journal (nil when the cell runs no
// policy or modes). An error is a stop: the run's context ended while the
// call waited for an approval; nothing of the call is journaled.
func (s *session) gate(ctx context.Context, c *Call, h caps.Handler) (*denial, []byte, error) {
	s.reserved = false
	gated := s.deps.Policy != nil || s.deps.Modes != nil
	if d := s.capabilityLayer(c, h); d != nil || !gated {
		if d != nil && gated && s.known {
			return d, s.record(&GateRecord{Layer: LayerCapability, Reason: errorMessage(d.Body)}), nil
		}
		if d == nil {
			if d = s.budgetLayer(c); d != nil {
				return d, s.record(&GateRecord{Layer: LayerBudget, Reason: errorMessage(d.Body)}), nil
			}
		}
		return d, nil, nil
	}
	if s.entities == nil {
		s.initPolicy()
	}
	f, err := s.facts(c)
	if err != nil {
		// The capability layer checked the request; this is ours.
		return caps.Deny(abi.StatusInternal, "gate: %v", err), nil, nil
	}
	call := policy.Call{Op: c.Op.Name, Resource: string(f.resource.ID), Method: f.method}
	if f.resource == (types.EntityUID{}) {
		call.Resource = s.run.String()
	}
	rec := &GateRecord{Allow: true}
	cd := &cachedDecision{dec: policy.Decision{Allowed: true}}
	if s.deps.Policy != nil {
		cd = s.decide(c, &f)
		rec.Policy = &cd.dec
		if !cd.dec.Allowed {
			rec.Allow, rec.Layer, rec.Reason = false, LayerPolicy, policyReason(&cd.dec)
			return caps.Deny(abi.StatusDenied, "%s", rec.Reason), s.record(rec), nil
		}
	}
	if d := s.budgetLayer(c); d != nil {
		rec.Allow, rec.Layer, rec.Reason = false, LayerBudget, errorMessage(d.Body)
		return d, s.record(rec), nil
	}
	v := policy.Verdict{}
	if s.deps.Modes != nil {
		v = s.deps.Modes.Apply(cd.dec, call)
	}
	rec.Mode, rec.Rule = v.Effect, v.Rule
	switch v.Effect {
	case "", policy.Allow:
		// The record of an allowed call depends on nothing the cache key
		// does not hold: it is encoded once.
		if cd.allowed == nil {
			cd.allowed = s.record(rec)
		}
		return nil, cd.allowed, nil
	case policy.Ask:
		if s.dry {
			// A dry run (run.self_may) says that the call would park; it
			// neither parks nor asks.
			return nil, s.record(rec), nil
		}
		if s.deps.Approvals != nil {
			// The call parks for its approvers' quorum, durably, once its
			// intent is journaled (park.go); the record says the mode asked.
			s.asking = &askState{rule: v.Rule, group: v.Group, action: describeCall(call),
				quorum: v.Quorum, twoPerson: v.TwoPerson, expires: v.Expires}
			return nil, s.record(rec), nil
		}
		ok, who, err := s.ask(ctx, c, call, v.Rule)
		if err != nil {
			// Nothing of the call is journaled: a resume asks again, and
			// reserves again.
			s.dropReserve()
			return nil, nil, err
		}
		rec.Approved, rec.Approver = ok, who
		if ok {
			return nil, s.record(rec), nil
		}
		rec.Reason = fmt.Sprintf("%s was not approved (permission mode rule %q asked; %s answered no)", c.Op.Name, v.Rule, who)
		if who == "" {
			rec.Reason = fmt.Sprintf("%s was not approved: %v", c.Op.Name, ErrNoApprover)
		}
	default:
		rec.Reason = fmt.Sprintf("%s is denied by permission mode rule %q", c.Op.Name, v.Rule)
	}
	rec.Allow, rec.Layer = false, LayerMode
	s.releaseBudget()
	return caps.Deny(abi.StatusDenied, "%s", rec.Reason), s.record(rec), nil
}

// capabilityLayer is the gate's first layer: the request's size and op,
// the capability, and the op's own resource check.
func (s *session) capabilityLayer(c *Call, h caps.Handler) *denial {
	if c.TooLarge {
		return caps.Deny(abi.StatusTooLarge, "request exceeds the limit of %d bytes", s.maxRequest)
	}
	if !s.known {
		return caps.Deny(abi.StatusBadRequest, "unknown op %d in capability %s", c.Op.Code, c.Op.Cap)
	}
	if s.inst[s.ci] == nil {
		return caps.Deny(abi.StatusDenied, "capability %s is not granted", c.Op.Cap)
	}
	if h.Check != nil {
		return h.Check(c)
	}
	return nil
}

// ask parks the call until the approver answers. With no approver the
// answer is no.
func (s *session) ask(ctx context.Context, c *Call, call policy.Call, rule string) (bool, string, error) {
	if s.deps.Approver == nil {
		return false, "", nil
	}
	// A stop asked while the call waits (cancel, drain) ends the wait: the
	// call is not journaled, and a resume asks again.
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.halt:
			cancel()
		case <-actx.Done():
		}
	}()
	ok, who, err := s.deps.Approver.Approve(actx, Approval{Run: s.run, Step: c.Step, Op: c.Op.Name,
		Resource: call.Resource, Method: call.Method, Rule: rule})
	if actx.Err() != nil {
		return false, "", fmt.Errorf("%w while step %d (%s) waited for approval", ErrInterrupted, c.Step, c.Op.Name)
	}
	if err != nil {
		return false, "", fmt.Errorf("host: approval of step %d: %w", c.Step, err)
	}
	return ok, who, nil
}

// describeCall says what a call the modes ask about does, for the approvers
// to read: its op, its method and its resource, quoted (they come from the
// guest).
func describeCall(c policy.Call) string {
	s := c.Op
	if c.Method != "" {
		s += " " + strconv.Quote(c.Method)
	}
	if c.Resource != "" {
		s += " " + strconv.Quote(c.Resource)
	}
	return s
}

// record encodes a gate record for the journal.
func (s *session) record(r *GateRecord) []byte {
	b, err := abi.Marshal(r)
	if err != nil {
		panic(err) // a GateRecord always encodes
	}
	return b
}

// policyReason says why the policy denied, for the guest and the journal.
func policyReason(d *policy.Decision) string {
	switch {
	case d.Reason != "":
		return "policy: " + d.Reason
	case len(d.Errors) > 0:
		return fmt.Sprintf("policy: denied: policy %s failed to evaluate (%s)", d.Errors[0].Policy, d.Errors[0].Message)
	case len(d.Determining) > 0:
		return fmt.Sprintf("policy: denied by %s (%s set)", d.Determining[0], d.By)
	}
	return fmt.Sprintf("policy: denied: no policy of the %s set permits it", d.By)
}

// errorMessage returns the message of an Error body.
func errorMessage(body []byte) string {
	var e abi.Error
	if abi.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Message
}
