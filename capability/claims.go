package capability

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits on the resources a link may name. They bound the work of Within
// (quadratic in the list lengths) and the memory of a decoded token.
const (
	// MaxListLen is the most entries one resource list (namespaces, hosts,
	// tools) may hold.
	MaxListLen = 256
	// MaxNameLen is the longest namespace, host or tool name, in bytes.
	MaxNameLen = 255
)

// Unit is the value of a capability family that has no resources: its
// presence is the whole grant.
type Unit struct{}

// KV allows durable key/value state in the listed namespaces.
type KV struct {
	// Namespaces scope the keys; agents sharing a namespace share state.
	Namespaces []string `cbor:"namespaces" json:"namespaces" yaml:"namespaces"`
}

// HTTP allows HTTP requests to the listed hosts.
type HTTP struct {
	// Hosts are "host" (any port) or "host:port" entries, lower case.
	Hosts []string `cbor:"hosts" json:"hosts" yaml:"hosts"`
	// Idempotent says the servers honour the Idempotency-Key header, so a
	// request a crash left in doubt may be sent again. It is a permission
	// (to re-send), so a child may drop it but never add it.
	Idempotent bool `cbor:"idempotent,omitempty" json:"idempotent,omitempty" yaml:"idempotent,omitempty"`
}

// LLM allows model calls to the listed providers (names of the cell's
// llm.yaml) and models, each answer at most MaxOutputTokens long.
type LLM struct {
	Providers       []string `cbor:"providers" json:"providers" yaml:"providers"`
	Models          []string `cbor:"models" json:"models" yaml:"models"`
	MaxOutputTokens uint32   `cbor:"max_output_tokens" json:"max_output_tokens" yaml:"max_output_tokens"`
}

// Approval allows asking the listed groups of the cell's approvers
// (approval.request).
type Approval struct {
	Groups []string `cbor:"groups" json:"groups" yaml:"groups"`
}

// Agent allows starting sub-agents (agentrt:agent): at most MaxChildren
// children of one run, and at most MaxDepth generations below it (1:
// children, which cannot spawn). A child's own MaxDepth is below its
// parent's, which the cell enforces at spawn.
type Agent struct {
	MaxChildren uint32 `cbor:"max_children" json:"max_children" yaml:"max_children"`
	MaxDepth    uint32 `cbor:"max_depth" json:"max_depth" yaml:"max_depth"`
}

// Caps are the capability families a token allows and the resources within
// each. A nil family is not allowed. The families mirror the host's grant
// (run, kv, http, clock, random) plus tool.
type Caps struct {
	Run    *Unit `cbor:"run,omitempty" json:"run,omitempty" yaml:"run,omitempty"`
	KV     *KV   `cbor:"kv,omitempty" json:"kv,omitempty" yaml:"kv,omitempty"`
	HTTP   *HTTP `cbor:"http,omitempty" json:"http,omitempty" yaml:"http,omitempty"`
	Clock  *Unit `cbor:"clock,omitempty" json:"clock,omitempty" yaml:"clock,omitempty"`
	Random *Unit `cbor:"random,omitempty" json:"random,omitempty" yaml:"random,omitempty"`
	Tool   *Tool `cbor:"tool,omitempty" json:"tool,omitempty" yaml:"tool,omitempty"`
	LLM    *LLM  `cbor:"llm,omitempty" json:"llm,omitempty" yaml:"llm,omitempty"`
	// Timer allows durable sleeps (timer.sleep).
	Timer    *Unit     `cbor:"timer,omitempty" json:"timer,omitempty" yaml:"timer,omitempty"`
	Approval *Approval `cbor:"approval,omitempty" json:"approval,omitempty" yaml:"approval,omitempty"`
	// MCP allows the listed MCP servers (mcp.go).
	MCP *MCP `cbor:"mcp,omitempty" json:"mcp,omitempty" yaml:"mcp,omitempty"`
	// Agent allows sub-agents (agent.spawn and the ops on its children).
	Agent *Agent `cbor:"agent,omitempty" json:"agent,omitempty" yaml:"agent,omitempty"`
}

// Capability family names, as the ABI spells them (plus "tool").
const (
	FamilyRun      = "run"
	FamilyKV       = "kv"
	FamilyHTTP     = "http"
	FamilyClock    = "clock"
	FamilyRandom   = "random"
	FamilyTool     = "tool"
	FamilyLLM      = "llm"
	FamilyTimer    = "timer"
	FamilyApproval = "approval"
	FamilyMCP      = "mcp"
	FamilyAgent    = "agent"
)

// Families lists the families c allows, in a stable order.
func (c Caps) Families() []string {
	var out []string
	for _, f := range []struct {
		name string
		on   bool
	}{
		{FamilyRun, c.Run != nil}, {FamilyKV, c.KV != nil}, {FamilyHTTP, c.HTTP != nil},
		{FamilyClock, c.Clock != nil}, {FamilyRandom, c.Random != nil}, {FamilyTool, c.Tool != nil},
		{FamilyLLM, c.LLM != nil}, {FamilyTimer, c.Timer != nil}, {FamilyApproval, c.Approval != nil},
		{FamilyMCP, c.MCP != nil},
		{FamilyAgent, c.Agent != nil},
	} {
		if f.on {
			out = append(out, f.name)
		}
	}
	return out
}

// Has reports whether c allows the family named family.
func (c Caps) Has(family string) bool { return slices.Contains(c.Families(), family) }

// AllowsKV reports whether c allows the kv namespace ns.
func (c Caps) AllowsKV(ns string) bool { return c.KV != nil && slices.Contains(c.KV.Namespaces, ns) }

// AllowsTool reports whether c allows the tool name (as declared by the
// digest ToolDigest returns).
func (c Caps) AllowsTool(name string) bool {
	_, ok := c.ToolDigest(name)
	return ok
}

// AllowsHost reports whether c allows an HTTP request to hostport (as in a
// URL, with or without a port; defaultPort is used when it has none).
func (c Caps) AllowsHost(hostport, defaultPort string) bool {
	if c.HTTP == nil {
		return false
	}
	host, port, err := CanonicalHostPort(hostport)
	if err != nil {
		return false
	}
	if port == "" {
		port = defaultPort
	}
	return slices.ContainsFunc(c.HTTP.Hosts, func(allowed string) bool {
		ah, ap := splitHost(allowed)
		return ah == host && (ap == "" || ap == port)
	})
}

// splitHost splits an entry of HTTP.Hosts into host and port ("" for any).
func splitHost(entry string) (host, port string) {
	if h, p, err := net.SplitHostPort(entry); err == nil {
		return h, p
	}
	return entry, ""
}

// Normalize sorts and de-duplicates every resource list and puts the hosts
// in canonical form (CanonicalHostEntry), giving the one form Check
// accepts; a host that has none is left for Check to refuse. Issue and
// Attenuate call it.
func (c *Caps) Normalize() {
	if c.KV != nil {
		c.KV.Namespaces = sortUnique(c.KV.Namespaces)
	}
	if c.HTTP != nil {
		for i, h := range c.HTTP.Hosts {
			if canon, err := CanonicalHostEntry(h); err == nil {
				c.HTTP.Hosts[i] = canon
			}
		}
		c.HTTP.Hosts = sortUnique(c.HTTP.Hosts)
	}
	if c.LLM != nil {
		c.LLM.Providers = sortUnique(c.LLM.Providers)
		c.LLM.Models = sortUnique(c.LLM.Models)
	}
	if c.Approval != nil {
		c.Approval.Groups = sortUnique(c.Approval.Groups)
	}
}

func sortUnique(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// errUnsorted marks a resource list out of order or with duplicates: the
// same set has one encoding only, so Verify reports it as ErrNonCanonical.
var errUnsorted = errors.New("not sorted, or has duplicates")

// Check validates the resources in c: each list non-empty, sorted, without
// duplicates, of bounded length, with valid names.
func (c Caps) Check() error {
	if c.KV != nil {
		if err := checkList("kv namespaces", c.KV.Namespaces, checkName); err != nil {
			return err
		}
	}
	if c.HTTP != nil {
		if err := checkList("http hosts", c.HTTP.Hosts, checkHost); err != nil {
			return err
		}
	}
	if c.Tool != nil {
		if err := checkTools(c.Tool); err != nil {
			return err
		}
	}
	if c.LLM != nil {
		if err := checkList("llm providers", c.LLM.Providers, checkName); err != nil {
			return err
		}
		if err := checkList("llm models", c.LLM.Models, checkName); err != nil {
			return err
		}
		if c.LLM.MaxOutputTokens == 0 {
			return errors.New("llm: max_output_tokens is 0 (every model call needs a bound)")
		}
	}
	if c.Approval != nil {
		if err := checkList("approval groups", c.Approval.Groups, checkName); err != nil {
			return err
		}
	}
	if c.MCP != nil {
		if err := checkMCP(c.MCP); err != nil {
			return err
		}
	}
	if c.Agent != nil && (c.Agent.MaxChildren == 0 || c.Agent.MaxDepth == 0) {
		return fmt.Errorf("agent: max_children %d and max_depth %d must both be above 0 (leave the capability out to allow no sub-agents)", c.Agent.MaxChildren, c.Agent.MaxDepth)
	}
	return nil
}

func checkList(what string, list []string, check func(string) error) error {
	if len(list) == 0 {
		return fmt.Errorf("%s: the list is empty (leave the capability out to allow none)", what)
	}
	if len(list) > MaxListLen {
		return fmt.Errorf("%s: %d entries, at most %d", what, len(list), MaxListLen)
	}
	for i, s := range list {
		if err := check(s); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if i > 0 && list[i-1] >= s {
			return fmt.Errorf("%s: %w", what, errUnsorted)
		}
	}
	return nil
}

func checkName(s string) error {
	if s == "" || len(s) > MaxNameLen || strings.ContainsRune(s, 0) || !utf8.ValidString(s) {
		return fmt.Errorf("%q: want 1 to %d bytes of UTF-8 without NUL", s, MaxNameLen)
	}
	return nil
}

func checkHost(s string) error {
	if err := checkName(s); err != nil {
		return err
	}
	canon, err := CanonicalHostEntry(s)
	if err != nil {
		return err
	}
	if canon != s {
		return fmt.Errorf("%q: not in canonical form (write %q)", s, canon)
	}
	return nil
}

// Within returns nil when c allows nothing that parent does not, and
// otherwise an error wrapping ErrWidens that names the first widening: a
// family absent in parent, a resource not covered by parent's list, a tool
// declared otherwise than in parent, or the idempotent flag added.
func (c Caps) Within(parent Caps) error {
	if err := unitWithin(FamilyRun, c.Run, parent.Run); err != nil {
		return err
	}
	if err := unitWithin(FamilyClock, c.Clock, parent.Clock); err != nil {
		return err
	}
	if err := unitWithin(FamilyRandom, c.Random, parent.Random); err != nil {
		return err
	}
	if err := unitWithin(FamilyTimer, c.Timer, parent.Timer); err != nil {
		return err
	}
	if c.Approval != nil {
		if parent.Approval == nil {
			return widens("capability approval is not in the parent")
		}
		for _, g := range c.Approval.Groups {
			if !slices.Contains(parent.Approval.Groups, g) {
				return widens("approval group %q is not in the parent's", g)
			}
		}
	}
	if c.Agent != nil {
		switch {
		case parent.Agent == nil:
			return widens("capability agent is not in the parent")
		case c.Agent.MaxChildren > parent.Agent.MaxChildren:
			return widens("agent max_children %d is above the parent's %d", c.Agent.MaxChildren, parent.Agent.MaxChildren)
		case c.Agent.MaxDepth > parent.Agent.MaxDepth:
			return widens("agent max_depth %d is above the parent's %d", c.Agent.MaxDepth, parent.Agent.MaxDepth)
		}
	}
	if c.KV != nil {
		if parent.KV == nil {
			return widens("capability kv is not in the parent")
		}
		for _, ns := range c.KV.Namespaces {
			if !slices.Contains(parent.KV.Namespaces, ns) {
				return widens("kv namespace %q is not in the parent's", ns)
			}
		}
	}
	if c.HTTP != nil {
		if parent.HTTP == nil {
			return widens("capability http is not in the parent")
		}
		for _, h := range c.HTTP.Hosts {
			if !hostWithin(h, parent.HTTP.Hosts) {
				return widens("http host %q is not covered by the parent's hosts", h)
			}
		}
		if c.HTTP.Idempotent && !parent.HTTP.Idempotent {
			return widens("http idempotent is set but the parent's is not")
		}
	}
	if c.Tool != nil {
		if err := toolsWithin(c.Tool, parent.Tool); err != nil {
			return err
		}
	}
	if c.MCP != nil {
		if err := mcpWithin(c.MCP, parent.MCP); err != nil {
			return err
		}
	}
	if c.LLM != nil {
		if parent.LLM == nil {
			return widens("capability llm is not in the parent")
		}
		for _, p := range c.LLM.Providers {
			if !slices.Contains(parent.LLM.Providers, p) {
				return widens("llm provider %q is not in the parent's", p)
			}
		}
		for _, m := range c.LLM.Models {
			if !slices.Contains(parent.LLM.Models, m) {
				return widens("llm model %q is not in the parent's", m)
			}
		}
		if c.LLM.MaxOutputTokens > parent.LLM.MaxOutputTokens {
			return widens("llm max_output_tokens %d is above the parent's %d", c.LLM.MaxOutputTokens, parent.LLM.MaxOutputTokens)
		}
	}
	return nil
}

func unitWithin(name string, c, parent *Unit) error {
	if c != nil && parent == nil {
		return widens("capability %s is not in the parent", name)
	}
	return nil
}

// hostWithin reports whether the host entry h is covered by one of parent:
// the same entry, or h is "host:port" and parent has "host" (any port).
func hostWithin(h string, parent []string) bool {
	hh, hp := splitHost(h)
	return slices.ContainsFunc(parent, func(p string) bool {
		ph, pp := splitHost(p)
		return ph == hh && (pp == "" || pp == hp)
	})
}

func widens(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrWidens, fmt.Sprintf(format, args...))
}

// Budget holds the ceilings a token sets on a run. A nil field has no
// ceiling (unlimited); a non-nil field is the most allowed, and a pointer to
// zero allows none. A child's ceiling must be at most its parent's, so a
// child of a limited parent must be limited too.
type Budget struct {
	// Steps is the most import calls the run may make.
	Steps *uint64 `cbor:"steps,omitempty" json:"steps,omitempty" yaml:"steps,omitempty"`
	// HTTPRequests is the most HTTP requests.
	HTTPRequests *uint64 `cbor:"http,omitempty" json:"http_requests,omitempty" yaml:"http_requests,omitempty"`
	// ToolCalls is the most native tool calls.
	ToolCalls *uint64 `cbor:"tool,omitempty" json:"tool_calls,omitempty" yaml:"tool_calls,omitempty"`
	// WallSeconds is the most wall-clock time the run may take, in seconds.
	WallSeconds *uint64 `cbor:"wall,omitempty" json:"wall_seconds,omitempty" yaml:"wall_seconds,omitempty"`
	// ModelCalls is the most model (llm) calls.
	ModelCalls *uint64 `cbor:"llm,omitempty" json:"model_calls,omitempty" yaml:"model_calls,omitempty"`
	// InputTokens is the most model input tokens, cached ones included.
	InputTokens *uint64 `cbor:"input_tokens,omitempty" json:"input_tokens,omitempty" yaml:"input_tokens,omitempty"`
	// OutputTokens is the most model output tokens, reasoning included.
	OutputTokens *uint64 `cbor:"output_tokens,omitempty" json:"output_tokens,omitempty" yaml:"output_tokens,omitempty"`
	// MicroUSD is the most money the run may spend, in integer micro-USD
	// (1 USD = 1 000 000): an integer, so that a ceiling has one encoding
	// and every sum against it is exact. The flag syntax writes it in
	// dollars (usd=9.90, see ParseUSD).
	MicroUSD *uint64 `cbor:"micro_usd,omitempty" json:"micro_usd,omitempty" yaml:"micro_usd,omitempty"`
}

// Limit returns a pointer to n, for the fields of Budget.
func Limit(n uint64) *uint64 { return &n }

// budgetFields lists the fields of b by name, in a stable order.
func (b *Budget) fields() []struct {
	name string
	p    **uint64
} {
	return []struct {
		name string
		p    **uint64
	}{{"steps", &b.Steps}, {"http_requests", &b.HTTPRequests}, {"tool_calls", &b.ToolCalls}, {"wall_seconds", &b.WallSeconds},
		{"model_calls", &b.ModelCalls}, {"input_tokens", &b.InputTokens}, {"output_tokens", &b.OutputTokens}, {"micro_usd", &b.MicroUSD}}
}

// Set names the ceilings b sets, in the order of the flag syntax: what a
// host that enforces only some dimensions must check before it runs a
// token.
func (b Budget) Set() []string {
	var out []string
	for _, f := range b.fields() {
		if *f.p != nil {
			out = append(out, f.name)
		}
	}
	return out
}

// Override sets in b every ceiling that over sets, leaving the others.
func (b *Budget) Override(over Budget) {
	of := over.fields()
	for i, f := range b.fields() {
		if v := *of[i].p; v != nil {
			*f.p = Limit(*v)
		}
	}
}

// Within returns nil when every ceiling of b is at most parent's, and
// otherwise an error wrapping ErrWidens naming the first that is not.
func (b Budget) Within(parent Budget) error {
	pf := parent.fields()
	for i, f := range b.fields() {
		pv := *pf[i].p
		if pv == nil {
			continue
		}
		cv := *f.p
		if cv == nil {
			return widens("budget %s is unlimited but the parent's is %d", f.name, *pv)
		}
		if *cv > *pv {
			return widens("budget %s is %d but the parent's is %d", f.name, *cv, *pv)
		}
	}
	return nil
}

// inherit fills the nil fields of b from parent.
func (b *Budget) inherit(parent Budget) {
	pf := parent.fields()
	for i, f := range b.fields() {
		if *f.p == nil && *pf[i].p != nil {
			*f.p = Limit(**pf[i].p)
		}
	}
}

// String writes the ceilings as Budget's flag syntax.
func (b Budget) String() string {
	var parts []string
	for _, f := range b.fields() {
		switch {
		case *f.p == nil:
		case f.p == &b.MicroUSD:
			parts = append(parts, "usd="+FormatUSD(**f.p))
		default:
			parts = append(parts, fmt.Sprintf("%s=%d", f.name, **f.p))
		}
	}
	if len(parts) == 0 {
		return "unlimited"
	}
	return strings.Join(parts, ",")
}

// ParseBudget parses "steps=N,http_requests=N,tool_calls=N,wall_seconds=N,
// model_calls=N,input_tokens=N,output_tokens=N,usd=D" (any subset, in any
// order; wall_seconds also takes a duration like 1h; usd takes dollars
// with at most six decimals, micro_usd=N the same ceiling in micro-USD).
func ParseBudget(s string) (Budget, error) {
	var b Budget
	if strings.TrimSpace(s) == "" {
		return b, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return b, fmt.Errorf("budget %q: want name=value", part)
		}
		if name == "usd" {
			n, err := ParseUSD(val)
			if err != nil {
				return b, fmt.Errorf("budget usd=%q: %w", val, err)
			}
			b.MicroUSD = Limit(n)
			continue
		}
		var field **uint64
		for _, f := range b.fields() {
			if f.name == name {
				field = f.p
			}
		}
		if field == nil {
			return b, fmt.Errorf("budget %q: unknown ceiling (want steps, http_requests, tool_calls, wall_seconds, model_calls, input_tokens, output_tokens or usd)", name)
		}
		n, err := strconv.ParseUint(val, 10, 64)
		if err != nil && name == "wall_seconds" {
			d, derr := time.ParseDuration(val)
			if derr == nil && d >= 0 {
				n, err = uint64(d/time.Second), nil
			}
		}
		if err != nil {
			return b, fmt.Errorf("budget %s=%q: want a whole number", name, val)
		}
		*field = Limit(n)
	}
	return b, nil
}

// Claims are what one link states. The effective claims of a token are its
// leaf's, which Verify has checked to be within every link above.
type Claims struct {
	// Issuer signed the link: a trusted root for the root link, the
	// parent's Subject for every other. Issue and Attenuate set it.
	Issuer ed25519.PublicKey
	// Subject holds the token: the key that may attenuate it further, and
	// whose possession a leaf's presenter proves (the token's Proof).
	Subject ed25519.PublicKey
	// Audience is the public key of the one cell the token may be
	// presented to; nil means any cell.
	Audience ed25519.PublicKey
	Caps     Caps
	Budget   Budget
	// NotBefore and Expires bound the time window, to the second:
	// valid from NotBefore (inclusive) until Expires (exclusive).
	NotBefore, Expires time.Time
	// Nonce makes the link unique; Issue and Attenuate draw 16 random
	// bytes when it is nil.
	Nonce []byte
	// Parent is the SHA-256 of the parent link's bytes; nil in the root.
	Parent []byte
	// Depth is the link's index in the chain, 0 for the root.
	Depth int
}

// NonceSize is the length of a link's nonce.
const NonceSize = 16

// check validates the claims of one link on their own.
func (c *Claims) check() error {
	for _, k := range []struct {
		name string
		key  []byte
		need bool
	}{{"issuer", c.Issuer, true}, {"subject", c.Subject, true}, {"audience", c.Audience, false}} {
		if (k.need || k.key != nil) && len(k.key) != ed25519.PublicKeySize {
			return fmt.Errorf("%s: want a %d-byte ed25519 public key, have %d bytes", k.name, ed25519.PublicKeySize, len(k.key))
		}
	}
	if len(c.Nonce) != NonceSize {
		return fmt.Errorf("nonce: want %d bytes, have %d", NonceSize, len(c.Nonce))
	}
	if (c.Depth == 0) != (c.Parent == nil) {
		return fmt.Errorf("parent hash: present exactly when the depth is above 0")
	}
	if c.Parent != nil && len(c.Parent) != 32 {
		return fmt.Errorf("parent hash: want 32 bytes, have %d", len(c.Parent))
	}
	if !c.Expires.After(c.NotBefore) {
		return fmt.Errorf("time window: expires (%s) must be after not-before (%s)", c.Expires.UTC().Format(time.RFC3339), c.NotBefore.UTC().Format(time.RFC3339))
	}
	return c.Caps.Check()
}

// Within returns nil when c is within parent, and otherwise an error
// wrapping ErrWidens naming what widens: capabilities or resources, a
// budget ceiling, the time window, or the audience.
func (c Claims) Within(parent Claims) error {
	if err := c.Caps.Within(parent.Caps); err != nil {
		return err
	}
	if err := c.Budget.Within(parent.Budget); err != nil {
		return err
	}
	if c.NotBefore.Before(parent.NotBefore) {
		return widens("not-before %s is earlier than the parent's %s", stamp(c.NotBefore), stamp(parent.NotBefore))
	}
	if c.Expires.After(parent.Expires) {
		return widens("expiry %s is later than the parent's %s", stamp(c.Expires), stamp(parent.Expires))
	}
	if parent.Audience != nil && !bytes.Equal(c.Audience, parent.Audience) {
		if c.Audience == nil {
			return widens("audience is any cell but the parent's is one cell")
		}
		return widens("audience is another cell than the parent's")
	}
	return nil
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// String writes c in one line, e.g. "run, kv[crawler], http[example.com:443]".
func (c Caps) String() string {
	var parts []string
	for _, f := range c.Families() {
		switch f {
		case FamilyKV:
			parts = append(parts, "kv["+strings.Join(c.KV.Namespaces, " ")+"]")
		case FamilyHTTP:
			s := "http[" + strings.Join(c.HTTP.Hosts, " ") + "]"
			if c.HTTP.Idempotent {
				s += " idempotent"
			}
			parts = append(parts, s)
		case FamilyTool:
			s := "tool[" + strings.Join(c.Tool.Names(), " ") + "]"
			if len(c.Tool.Delegable) > 0 {
				s += " delegable[" + strings.Join(c.Tool.DelegableNames(), " ") + "]"
			}
			parts = append(parts, s)
		case FamilyLLM:
			parts = append(parts, fmt.Sprintf("llm[%s: %s ≤%d]", strings.Join(c.LLM.Providers, " "), strings.Join(c.LLM.Models, " "), c.LLM.MaxOutputTokens))
		case FamilyApproval:
			parts = append(parts, "approval["+strings.Join(c.Approval.Groups, " ")+"]")
		case FamilyMCP:
			parts = append(parts, "mcp["+strings.Join(c.MCP.Names(), " ")+"]")
		case FamilyAgent:
			parts = append(parts, fmt.Sprintf("agent[children ≤%d depth ≤%d]", c.Agent.MaxChildren, c.Agent.MaxDepth))
		default:
			parts = append(parts, f)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
