package host

import (
	"crypto/ed25519"
	"fmt"
	"slices"
	"time"

	"github.com/agentrt/agentrt/capability"
)

// A run's grant is the verified claims of its capability token
// (capability/SPEC.md): the link-time capability check and every per-call
// resource check consult them. A run started from a plain grant file (local
// development) gets a token issued on the fly by the cell's own key for
// exactly that grant, and verified like any other, so that nothing reaches
// the gate without passing verification.

// devTokenLife is how long a token issued on the fly for a plain grant is
// valid: it is verified at once and used for nothing else.
const devTokenLife = time.Hour

// capsOf returns the capability claims that grant g stands for.
func capsOf(g *Grant) capability.Caps {
	var c capability.Caps
	if g.Run != nil {
		c.Run = &capability.Unit{}
	}
	if g.KV != nil {
		c.KV = &capability.KV{Namespaces: []string{g.KV.Namespace}}
	}
	if g.HTTP != nil {
		c.HTTP = &capability.HTTP{Hosts: slices.Clone(g.HTTP.Hosts), Idempotent: g.HTTP.Idempotent}
	}
	if g.Clock != nil {
		c.Clock = &capability.Unit{}
	}
	if g.Random != nil {
		c.Random = &capability.Unit{}
	}
	if g.Tool != nil {
		c.Tool = &capability.Tool{}
		for _, t := range g.Tool.Tools {
			c.Tool.Names = append(c.Tool.Names, t.Name)
		}
	}
	c.Normalize()
	return c
}

// grantWithin returns the grant a run gets from its verified claims. defs,
// when not nil, is a grant file given with the token: it supplies what a
// token does not carry (tool definitions, which kv namespace to use) and
// must itself be within the claims. Without defs the grant is the claims
// as they are; the tool family then has no tool a run could call.
func grantWithin(claims capability.Claims, defs *Grant) (*Grant, error) {
	c := claims.Caps
	var budget *capability.Budget
	if b := claims.Budget; b != (capability.Budget{}) {
		budget = &b
	}
	if defs != nil {
		if err := capsOf(defs).Within(c); err != nil {
			return nil, fmt.Errorf("the grant file asks for more than the token allows: %w", err)
		}
		g := *defs
		g.Budget = budget
		return &g, nil
	}
	g := &Grant{Budget: budget}
	if c.Run != nil {
		g.Run = &RunGrant{}
	}
	if c.KV != nil {
		if len(c.KV.Namespaces) != 1 {
			return nil, fmt.Errorf("the token allows kv namespaces %q: a run uses one (attenuate the token to one, or pass a grant file naming it)", c.KV.Namespaces)
		}
		g.KV = &KVGrant{Namespace: c.KV.Namespaces[0]}
	}
	if c.HTTP != nil {
		g.HTTP = &HTTPGrant{Hosts: slices.Clone(c.HTTP.Hosts), Idempotent: c.HTTP.Idempotent}
	}
	if c.Clock != nil {
		g.Clock = &ClockGrant{}
	}
	if c.Random != nil {
		g.Random = &RandomGrant{}
	}
	if c.Tool != nil {
		// The token names tools; what they run comes from a grant file.
		g.Tool = &ToolGrant{}
	}
	return g, g.Check()
}

// verifyToken verifies a run's token for this cell at now and returns the
// grant it gives, with defs as grantWithin takes it. A nil token is issued
// on the fly from defs, signed by the cell's key.
func (h *Host) verifyToken(token []byte, defs *Grant, now time.Time) ([]byte, *Grant, error) {
	pub := h.deps.Key.Public().(ed25519.PublicKey)
	nonces := h.deps.Nonces
	if token == nil {
		// Made here for this run and never seen outside: there is no
		// replay to guard against, and no nonce to remember.
		nonces = nil
		if defs == nil {
			defs = DefaultGrant()
		}
		var err error
		token, err = capability.Issue(h.deps.Key, capability.Claims{Audience: pub, Caps: capsOf(defs),
			NotBefore: now.Add(-time.Minute), Expires: now.Add(devTokenLife)})
		if err != nil {
			return nil, nil, fmt.Errorf("host: token for the grant: %w", err)
		}
	}
	roots := append([]ed25519.PublicKey{pub}, h.deps.TokenRoots...)
	v, err := capability.Verify(token, roots, capability.Options{Now: now, Audience: pub, Nonces: nonces})
	if err != nil {
		return nil, nil, fmt.Errorf("host: %w", err)
	}
	g, err := grantWithin(v.Claims, defs)
	if err != nil {
		return nil, nil, fmt.Errorf("host: token: %w", err)
	}
	return token, g, nil
}
