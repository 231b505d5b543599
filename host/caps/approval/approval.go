// Package approval is the explicit request for a person's approval
// (agentrt:approval):
//
//	approval.request (abi.ApprovalRequest) -> abi.ApprovalResponse   a wait
//
// A request parks the run until the cell's approvers of the group decide,
// by signed votes counted towards the group's quorum (package approval at
// the repository's root, approval/SPEC.md), or until it expires. The
// answer says whether it was approved, the action digest the votes were
// bound to and who approved; it is journaled with the votes, so an auditor
// checks them. A call the permission modes answer with ask waits the same
// way, in the gate, without this capability.
//
// The grant section is approval: {groups: [...]}, the groups the run may
// ask; the policy sees the group. Errors: StatusBadRequest for an empty or
// oversized action or a malformed group, StatusDenied for a group the
// grant does not list.
package approval

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentrt/agentrt/abi"
	rootapproval "github.com/agentrt/agentrt/approval"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/caps"
)

// MaxAction is the longest action text a request may carry.
const MaxAction = 4 << 10

// Grant allows asking the listed groups.
type Grant struct {
	Groups []string `yaml:"groups" cbor:"groups"`
}

// Check validates the groups and sorts them.
func (g *Grant) Check() error {
	if len(g.Groups) == 0 {
		return fmt.Errorf("approval: list the groups the run may ask (groups: [...]); leave approval out to allow none")
	}
	for _, n := range g.Groups {
		if !rootapproval.ValidGroupName(n) {
			return fmt.Errorf("approval: group %q: want 1-64 of a-z 0-9 . _ -, starting with a letter or digit", n)
		}
	}
	slices.Sort(g.Groups)
	g.Groups = slices.Compact(g.Groups)
	return nil
}

// Token sets the approval capability of a token.
func (g *Grant) Token(c *capability.Caps) error {
	c.Approval = &capability.Approval{Groups: slices.Clone(g.Groups)}
	return nil
}

// CheckToken has nothing beyond Within to check.
func (*Grant) CheckToken(capability.Caps) error { return nil }

// Capability is the approval capability, as the host registers it. It
// needs nothing from the cell: the host keeps the parking and asks the
// cell's approvals book.
type Capability struct{}

// Cap names the capability.
func (Capability) Cap() abi.Capability { return abi.CapApproval }

// FromToken grants the token's groups.
func (Capability) FromToken(c capability.Caps) (*Grant, error) {
	if c.Approval == nil {
		return nil, nil
	}
	g := &Grant{Groups: slices.Clone(c.Approval.Groups)}
	return g, g.Check()
}

// Open returns the run's instance.
func (Capability) Open(g *Grant, _ struct{}, _ *caps.Run) (caps.Instance, error) {
	return &instance{groups: g.Groups}, nil
}

type instance struct {
	groups []string
	req    abi.ApprovalRequest
}

func (in *instance) Handler(op abi.Op) caps.Handler {
	if op.Code != abi.OpApprovalRequest {
		return caps.Handler{}
	}
	return caps.Handler{Check: in.check, Wait: in.wait}
}

func (in *instance) check(c *caps.Call) *caps.Denial {
	in.req = abi.ApprovalRequest{}
	if st, b, ok := caps.Decode(c, &in.req); !ok {
		return &caps.Denial{Status: st, Body: b}
	}
	switch a := in.req.Action; {
	case strings.TrimSpace(a) == "":
		return caps.Deny(abi.StatusBadRequest, "approval.request: the action is empty (say what the person approves)")
	case len(a) > MaxAction:
		return caps.Deny(abi.StatusBadRequest, "approval.request: the action is %d bytes, at most %d", len(a), MaxAction)
	case !utf8.ValidString(a):
		return caps.Deny(abi.StatusBadRequest, "approval.request: the action is not UTF-8")
	case !rootapproval.ValidGroupName(in.req.Group):
		return caps.Deny(abi.StatusBadRequest, "approval.request: group %q: want 1-64 of a-z 0-9 . _ -", in.req.Group)
	case !slices.Contains(in.groups, in.req.Group):
		return caps.Deny(abi.StatusDenied, "approval.request: group %q is not granted (granted: %s)", in.req.Group, strings.Join(in.groups, ", "))
	}
	return nil
}

func (in *instance) wait(c *caps.Call, _ time.Time) caps.Wait {
	var r abi.ApprovalRequest
	_ = abi.Unmarshal(c.Request, &r)
	return caps.Wait{Group: r.Group, Action: r.Action}
}

// Facts gives the policy the group asked.
func (in *instance) Facts(c *caps.Call) (caps.Facts, error) {
	return caps.Facts{Attrs: []caps.Fact{{Name: "group", Kind: caps.FactString, Str: in.req.Group}}}, nil
}

func (*instance) Idempotent(*caps.Call) bool { return true }
func (*instance) Close()                     {}
