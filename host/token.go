package host

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/host/caps/tool"
	"github.com/agentrt/agentrt/internal/yamlkeys"
	"go.yaml.in/yaml/v3"
)

// A run's grant is the verified claims of its capability token
// (capability/SPEC.md): the link-time capability check and every per-call
// resource check consult them. A run started from a plain grant file (local
// development) gets a token issued on the fly by the cell's own key for
// exactly that grant, and verified like any other, so that nothing reaches
// the gate without passing verification. The run header records the token
// sealed: a cell never records a private key.

// devTokenLife is how long a token issued on the fly for a plain grant is
// valid: it is verified at once and used for nothing else.
const devTokenLife = time.Hour

// devTokenReuse is how long a token issued on the fly, once verified,
// serves the runs started from the same grant (by its canonical form).
// Issuing one and verifying it take two signatures and two verifications,
// some 0.25 to 0.5 ms of CPU here, which every submission of a daemon's
// known agent would otherwise pay. A minute is well inside the token's
// hour: a run recorded with a reused token verifies at its start as any
// other (replay's audit does), and what each run gets is its own grant,
// made from its own grant file (grantWithin copies defs).
const devTokenReuse = time.Minute

// devTokensMax bounds the grants whose tokens a host keeps.
const devTokensMax = 64

// devTokens keeps the tokens a host issued on the fly and verified, by
// their grant's canonical form.
type devTokens struct {
	mu sync.Mutex
	m  map[string]devToken
}

// devToken is a token issued on the fly at issued, and its verification.
type devToken struct {
	token  []byte
	v      *capability.Verified
	issued time.Time
}

// get returns the token kept for key when it was issued within
// devTokenReuse before now (not after it: a clock set back issues anew).
func (d *devTokens) get(key string, now time.Time) (devToken, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.m[key]
	if !ok || now.Before(t.issued) || now.Sub(t.issued) >= devTokenReuse {
		return devToken{}, false
	}
	return t, true
}

// put keeps t for key, dropping the tokens no longer reusable at t's
// issue when the host keeps devTokensMax already.
func (d *devTokens) put(key string, t devToken) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[string]devToken{}
	}
	if _, ok := d.m[key]; !ok && len(d.m) >= devTokensMax {
		for k, o := range d.m {
			if t.issued.Before(o.issued) || t.issued.Sub(o.issued) >= devTokenReuse {
				delete(d.m, k)
			}
		}
		if len(d.m) >= devTokensMax {
			clear(d.m)
		}
	}
	d.m[key] = t
}

// ErrUnenforcedCeiling is returned when a token carries a budget ceiling
// that no layer of this host enforces (a dimension this host does not
// know): the token is refused rather than run under a ceiling that would
// be ignored. Every dimension of host/budget is enforced: the reservable
// ones by the gate's budget layer (the model dimensions charged by the llm
// capability's meter), steps and wall_seconds by stopping the run.
var ErrUnenforcedCeiling = errors.New("budget ceiling not enforced by this host")

// CheckEnforced returns an error wrapping ErrUnenforcedCeiling, naming the
// ceilings, when b sets one that this host does not enforce. token issue
// and attenuate refuse to write such a token, and a cell refuses one
// presented to it.
func CheckEnforced(b capability.Budget) error {
	// By name, so that a dimension added to capability.Budget is refused
	// here until the ledger has it.
	var names []string
	for _, n := range b.Set() {
		if _, ok := budget.ParseDim(n); !ok {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s (this host enforces %s)", ErrUnenforcedCeiling, strings.Join(names, ", "), strings.Join(budget.DimNames(), ", "))
}

// ErrGrantWidensToken is returned when a grant file given with a token
// asks for a capability or a resource the token does not allow.
var ErrGrantWidensToken = errors.New("the grant file asks for more than the token allows")

// TokenCaps returns the capability claims that g stands for: its families,
// resources and each tool's declaration digest.
func (g *Grant) TokenCaps() (capability.Caps, error) {
	var c capability.Caps
	for i := range registry {
		if sec := registry[i].section(g); sec != nil {
			if err := sec.Token(&c); err != nil {
				return c, err
			}
		}
	}
	c.Normalize()
	return c, nil
}

// grantWithin returns the grant a run gets from its verified claims. defs,
// when not nil, is a grant file given with the token: it supplies what a
// token does not carry (tool declarations, which kv namespace to use) and
// must itself be within the claims, each tool declared exactly as the
// token binds it (a *ToolDeclarationError otherwise). Without defs the
// grant is the claims as they are; the tool family then has no tool a run
// could call.
func grantWithin(claims capability.Claims, defs *Grant) (*Grant, error) {
	c := claims.Caps
	var budget *capability.Budget
	if b := claims.Budget; b != (capability.Budget{}) {
		budget = &b
	}
	if defs != nil {
		for i := range registry {
			if sec := registry[i].section(defs); sec != nil {
				if err := sec.CheckToken(c); err != nil {
					return nil, err
				}
			}
		}
		caps, err := defs.TokenCaps()
		if err != nil {
			return nil, err
		}
		if err := caps.Within(c); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrGrantWidensToken, err)
		}
		g := *defs
		g.Budget = budget
		return &g, nil
	}
	g := &Grant{Budget: budget}
	for i := range registry {
		if err := registry[i].fromToken(c, g); err != nil {
			return nil, err
		}
	}
	return g, g.Check()
}

// WithinToken returns nil when g, a grant recorded with a run, is within
// the verified claims it was granted by: its capabilities and resources are
// the claims' or fewer, each tool it declares is declared as the claims bind
// it, and its budget ceilings are at most the claims'. An error wraps
// capability.ErrWidens and names the first widening. An audit checks a
// run's header so.
func (g *Grant) WithinToken(claims capability.Claims) error {
	caps, err := g.TokenCaps()
	if err != nil {
		return err
	}
	if err := caps.Within(claims.Caps); err != nil {
		return err
	}
	var b capability.Budget
	if g.Budget != nil {
		b = *g.Budget
	}
	return b.Within(claims.Budget)
}

// verifyToken verifies a run's token for this cell at now and returns it
// sealed, with the grant it gives (defs as grantWithin takes it). A nil
// token is issued on the fly from defs, signed and sealed by the cell's
// key. The token's nonce is recorded only once every check has passed, so
// that a token refused for a fixable reason (a grant file that does not
// match it) can be presented again.
func (h *Host) verifyToken(token []byte, defs *Grant, now time.Time) ([]byte, *Grant, error) {
	pub := h.deps.Key.Public().(ed25519.PublicKey)
	nonces := h.deps.Nonces
	var g *Grant
	accept := func(v *capability.Verified) error {
		if err := CheckEnforced(v.Claims.Budget); err != nil {
			return err
		}
		var err error
		g, err = grantWithin(v.Claims, defs)
		return err
	}
	var devKey []byte
	if token == nil {
		// Made here for this run and never seen outside: there is no
		// replay to guard against, and no nonce to remember.
		nonces = nil
		if defs == nil {
			defs = DefaultGrant()
		}
		var err error
		if devKey, err = defs.Canonical(); err != nil {
			return nil, nil, fmt.Errorf("host: token for the grant: %w", err)
		}
		if kept, ok := h.dev.get(string(devKey), now); ok {
			if err := accept(kept.v); err != nil {
				return nil, nil, fmt.Errorf("host: %w", err)
			}
			return kept.token, g, nil
		}
		caps, err := defs.TokenCaps()
		if err != nil {
			return nil, nil, fmt.Errorf("host: token for the grant: %w", err)
		}
		if token, err = capability.Issue(h.deps.Key, capability.Claims{Subject: pub, Audience: pub, Caps: caps,
			NotBefore: now.Add(-time.Minute), Expires: now.Add(devTokenLife)}); err == nil {
			token, err = capability.Seal(token, h.deps.Key)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("host: token for the grant: %w", err)
		}
	}
	roots := append([]ed25519.PublicKey{pub}, h.deps.TokenRoots...)
	v, err := capability.Verify(token, roots, capability.Options{Now: now, Audience: pub, Nonces: nonces, Accept: accept})
	if err != nil {
		var ce *capability.Error
		if errors.As(err, &ce) {
			return nil, nil, fmt.Errorf("host: %w", err)
		}
		return nil, nil, fmt.Errorf("host: token: %w", err)
	}
	if v.Proof == capability.ProofKey {
		// The journal is kept, exported and audited: it records the
		// token sealed by the key it carried, never the key.
		if token, err = capability.Seal(token, nil); err != nil {
			return nil, nil, fmt.Errorf("host: seal the token: %w", err)
		}
	}
	if devKey != nil {
		h.dev.put(string(devKey), devToken{token: token, v: v, issued: now})
	}
	return token, g, nil
}

// ParseCapsFile parses the capabilities (and optional budget) of a token
// to issue or attenuate, from YAML or JSON. The capabilities map is a grant
// file's, so a grant file can be used as it is, and its tools are full
// declarations, whose digests the token binds; kv also takes a list of
// namespaces, and tool a list of names (tool: {names: [grep]}), which keeps
// those tools with the parent's declarations when attenuating. Unknown keys
// are an error, so a misspelt capability never silently allows less or
// more.
//
//	capabilities:
//	  run: {}
//	  kv: {namespaces: [crawler]}      # or {namespace: crawler}
//	  http: {hosts: ["example.com", "127.0.0.1:8080"]}
//	  tool: {tools: [{name: count-todo, exec: /usr/bin/grep, ...}]}
//	budget:
//	  wall_seconds: 600
func ParseCapsFile(b []byte) (capability.Caps, capability.Budget, error) {
	var doc struct {
		Capabilities *struct {
			Run *capability.Unit `yaml:"run"`
			KV  *struct {
				Namespace  string   `yaml:"namespace"`
				Namespaces []string `yaml:"namespaces"`
			} `yaml:"kv"`
			HTTP   *capability.HTTP `yaml:"http"`
			Clock  *capability.Unit `yaml:"clock"`
			Random *capability.Unit `yaml:"random"`
			Tool   *struct {
				Names     []string   `yaml:"names"`
				Tools     []ToolSpec `yaml:"tools"`
				Delegable []ToolSpec `yaml:"delegable"`
			} `yaml:"tool"`
			LLM      *LLMGrant        `yaml:"llm"`
			Timer    *capability.Unit `yaml:"timer"`
			Approval *ApprovalGrant   `yaml:"approval"`
			MCP      *MCPGrant        `yaml:"mcp"`
			Agent    *AgentGrant      `yaml:"agent"`
		} `yaml:"capabilities"`
		Budget capability.Budget `yaml:"budget"`
	}
	// A typo names the key, the keys allowed there and the nearest one, as
	// in a grant file.
	if err := yamlkeys.Check(b, reflect.TypeOf(doc)); err != nil {
		var uk *yamlkeys.UnknownKeyError
		if errors.As(err, &uk) && uk.Path != "capabilities" {
			uk.Path = strings.TrimPrefix(uk.Path, "capabilities.")
		}
		return capability.Caps{}, capability.Budget{}, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return capability.Caps{}, capability.Budget{}, fmt.Errorf("parse: %w", err)
	}
	if doc.Capabilities == nil {
		return capability.Caps{}, capability.Budget{}, fmt.Errorf("no 'capabilities' map (write e.g. capabilities: {run: {}})")
	}
	d := doc.Capabilities
	c := capability.Caps{Run: d.Run, HTTP: d.HTTP, Clock: d.Clock, Random: d.Random, Timer: d.Timer}
	if d.Approval != nil {
		if err := d.Approval.Check(); err != nil {
			return capability.Caps{}, capability.Budget{}, err
		}
		_ = d.Approval.Token(&c)
	}
	if d.MCP != nil {
		if err := d.MCP.Check(); err != nil {
			return capability.Caps{}, capability.Budget{}, err
		}
		if err := d.MCP.Token(&c); err != nil {
			return capability.Caps{}, capability.Budget{}, err
		}
	}
	if d.Agent != nil {
		if err := d.Agent.Check(); err != nil {
			return capability.Caps{}, capability.Budget{}, err
		}
		_ = d.Agent.Token(&c)
	}
	if d.LLM != nil {
		if err := d.LLM.Check(); err != nil {
			return capability.Caps{}, capability.Budget{}, err
		}
		if err := d.LLM.Token(&c); err != nil {
			return capability.Caps{}, capability.Budget{}, err
		}
	}
	if d.Tool != nil {
		tg := &ToolGrant{Tools: d.Tool.Tools, Delegable: d.Tool.Delegable}
		if err := tg.Check(); err != nil {
			return capability.Caps{}, capability.Budget{}, err
		}
		var tc capability.Caps
		if err := tg.Token(&tc); err != nil {
			return capability.Caps{}, capability.Budget{}, err
		}
		tools := tc.Tool.Tools
		for _, name := range d.Tool.Names {
			if !tool.ValidName(name) {
				return capability.Caps{}, capability.Budget{}, fmt.Errorf("tool: names: %q must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
			}
			if _, declared := tools[name]; declared || tc.Tool.Delegable[name] != nil {
				return capability.Caps{}, capability.Budget{}, fmt.Errorf("tool %q: listed under both names and tools", name)
			}
			tools[name] = nil // the parent's declaration
		}
		if len(tools) == 0 && len(tc.Tool.Delegable) == 0 {
			return capability.Caps{}, capability.Budget{}, fmt.Errorf("tool: declare the tools (tools: [{name: ..., exec: ...}]), or name the parent's to keep (names: [...]); leave tool out to allow none")
		}
		c.Tool = &capability.Tool{Tools: tools, Delegable: tc.Tool.Delegable}
	}
	if d.KV != nil {
		c.KV = &capability.KV{Namespaces: d.KV.Namespaces}
		if d.KV.Namespace != "" {
			c.KV.Namespaces = append(c.KV.Namespaces, d.KV.Namespace)
		}
	}
	c.Normalize()
	// The tools are checked above: a name kept from the parent has no
	// digest yet, which Check would refuse.
	rest := c
	rest.Tool = nil
	if err := rest.Check(); err != nil {
		return capability.Caps{}, capability.Budget{}, err
	}
	return c, doc.Budget, nil
}
