package host

import (
	"crypto/ed25519"
	"fmt"
	"strings"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/caps/agent"
)

// SetAgents makes a the host's Spawner (Deps.Agents): the cell daemon
// sets it once, before it executes any run.
func (h *Host) SetAgents(a agent.Spawner) { h.deps.Agents = a }

// ChildClaims are the powers of a sub-agent: the claims of its token, and
// the grant it runs with (its caps document: what the token does not
// carry, such as its tools' declarations).
type ChildClaims struct {
	Caps   capability.Caps
	Budget capability.Budget
	Grant  *Grant
}

// ChildToken issues the token of a sub-agent of the run whose token is
// parent, at the request of its agent.spawn: capsDoc (the capabilities map
// of a caps file, YAML or JSON) and budget (the flag syntax; a ceiling it
// leaves out is the parent's). The token is signed by this cell's key, for
// this cell, in the parent's time window, and sealed. The cell enforces
// that it is never wider than the parent's (an error wrapping
// capability.ErrWidens names what widens), and that a child allowed to
// spawn has a max_depth below parentDepth, the parent's (agent.ErrDenied).
// A caps document or a budget that does not parse is an
// agent.ErrBadRequest.
func (h *Host) ChildToken(parent []byte, parentDepth uint32, capsDoc, budget string) ([]byte, ChildClaims, error) {
	pub := h.deps.Key.Public().(ed25519.PublicKey)
	now := h.deps.Now()
	roots := append([]ed25519.PublicKey{pub}, h.deps.TokenRoots...)
	v, err := capability.Verify(parent, roots, capability.Options{Now: now, Audience: pub})
	if err != nil {
		return nil, ChildClaims{}, fmt.Errorf("%w: the parent's token: %w", agent.ErrDenied, err)
	}
	caps, b, err := ParseCapsFile([]byte("capabilities:\n  " + strings.ReplaceAll(capsDoc, "\n", "\n  ") + "\n"))
	if err != nil {
		return nil, ChildClaims{}, fmt.Errorf("%w: caps: %w", agent.ErrBadRequest, err)
	}
	if b != (capability.Budget{}) {
		return nil, ChildClaims{}, fmt.Errorf("%w: caps: the budget goes in the spawn's budget, not in its caps", agent.ErrBadRequest)
	}
	want, err := childBudget(v.Claims.Budget, budget)
	if err != nil {
		return nil, ChildClaims{}, err
	}
	if caps.Tool != nil {
		for name, d := range caps.Tool.Tools {
			if d == nil {
				return nil, ChildClaims{}, fmt.Errorf("%w: caps: tool %q: declare it (tools: [{name: ..., exec: ...}], as the parent's grant does): the child runs it under its own declaration", agent.ErrBadRequest, name)
			}
		}
	}
	if caps.Agent != nil && caps.Agent.MaxDepth >= parentDepth {
		return nil, ChildClaims{}, fmt.Errorf("%w: the child's agent max_depth %d must be below its parent's %d", agent.ErrDenied, caps.Agent.MaxDepth, parentDepth)
	}
	c := capability.Claims{Subject: pub, Audience: pub, Caps: caps, Budget: want,
		NotBefore: v.Claims.NotBefore, Expires: v.Claims.Expires}
	c.Caps.Normalize()
	if err := c.Within(v.Claims); err != nil {
		return nil, ChildClaims{}, err
	}
	if err := CheckEnforced(want); err != nil {
		return nil, ChildClaims{}, fmt.Errorf("%w: budget: %w", agent.ErrBadRequest, err)
	}
	token, err := capability.Issue(h.deps.Key, c)
	if err == nil {
		token, err = capability.Seal(token, h.deps.Key)
	}
	if err != nil {
		return nil, ChildClaims{}, fmt.Errorf("host: the child's token: %w", err)
	}
	g, err := ParseGrant([]byte("capabilities:\n  " + strings.ReplaceAll(capsDoc, "\n", "\n  ") + "\n"))
	if err != nil {
		return nil, ChildClaims{}, fmt.Errorf("%w: caps: %w", agent.ErrBadRequest, err)
	}
	return token, ChildClaims{Caps: c.Caps, Budget: want, Grant: g}, nil
}

// childBudget returns the budget of a sub-agent whose parent's token has
// budget parent, at the request of its agent.spawn (the flag syntax; a
// ceiling it leaves out is the parent's). The child's token carries it,
// and the budget bridge reserves it in the parent's ledger.
func childBudget(parent capability.Budget, req string) (capability.Budget, error) {
	if req == "" {
		return parent, nil
	}
	over, err := capability.ParseBudget(req)
	if err != nil {
		return parent, fmt.Errorf("%w: budget: %w", agent.ErrBadRequest, err)
	}
	parent.Override(over)
	return parent, nil
}
