package policy

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/agentrt/agentrt/approval"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/agentrt/agentrt/capability"
	"github.com/cedar-policy/cedar-go/types"
	"go.yaml.in/yaml/v3"
)

// Effect is the outcome of the permission modes for one call.
type Effect string

// The effects, from the most to the least permissive.
const (
	Allow Effect = "allow" // run the call
	Ask   Effect = "ask"   // park the call until a person answers
	Deny  Effect = "deny"  // refuse the call
)

// rank orders effects by strictness.
func (e Effect) rank() int {
	switch e {
	case Allow:
		return 0
	case Ask:
		return 1
	}
	return 2 // Deny, and anything unknown, is the strictest
}

func (e Effect) valid() bool { return e == Allow || e == Ask || e == Deny }

// Rule is one permission-mode rule. Op and Resource are globs: "*" matches
// any run of characters (slashes and dots included), "?" any one character,
// everything else itself. Method, when set, matches the HTTP method of the
// call, case-insensitively, and never a call without one.
type Rule struct {
	Name     string `yaml:"name" json:"name"`
	Op       string `yaml:"op" json:"op"`
	Resource string `yaml:"resource,omitempty" json:"resource,omitempty"`
	Method   string `yaml:"method,omitempty" json:"method,omitempty"`
	Effect   Effect `yaml:"effect" json:"effect"`
	// Group, on an ask rule, names the cell's approvers' group that
	// answers (DATA/approvers/<group>); empty: the group "default".
	Group string `yaml:"group,omitempty" json:"group,omitempty"`
	// Quorum, TwoPerson and Expires, on an ask rule, tighten the group's
	// own rule (DATA/approvals.yaml) for the calls this rule asks about:
	// the larger quorum, either two-person flag, the shorter expiry (a Go
	// duration, "24h"). They never loosen it.
	Quorum    int    `yaml:"quorum,omitempty" json:"quorum,omitempty"`
	TwoPerson bool   `yaml:"two_person,omitempty" json:"two_person,omitempty"`
	Expires   string `yaml:"expires,omitempty" json:"expires,omitempty"`
	expires   time.Duration
}

// Modes are the allow / ask / deny rules a person sets for convenience
// ("auto-run this tool", "always ask before an HTTP POST"). They are applied
// after the policy decision and can only narrow it.
type Modes struct {
	// Default is the effect when no rule matches an allowed call.
	Default Effect `yaml:"default,omitempty" json:"default,omitempty"`
	Rules   []Rule `yaml:"rules" json:"rules"`
}

// Call is what a mode rule matches: the op, the resource's name and, for
// HTTP, the method.
type Call struct {
	Op       string
	Resource string
	Method   string
}

// CallOf returns the Call of a request: its action, its resource's entity
// id and, when the context has a string "method", that method.
func CallOf(r Request) Call {
	c := Call{Op: r.Action, Resource: string(r.Resource.ID)}
	if v, ok := r.Context.Get("method"); ok {
		if s, ok := v.(types.String); ok {
			c.Method = string(s)
		}
	}
	return c
}

// Verdict is the outcome of Apply: the effect, and the name of the rule
// that set it ("" when the policy decision denied or no rule matched and
// the default applied).
type Verdict struct {
	Effect Effect `cbor:"effect" json:"effect"`
	Rule   string `cbor:"rule,omitempty" json:"rule,omitempty"`
	// Group is the ask rule's approvers' group; Quorum, TwoPerson and
	// Expires its tightening of the group's rule.
	Group     string        `cbor:"group,omitempty" json:"group,omitempty"`
	Quorum    int           `cbor:"quorum,omitempty" json:"quorum,omitempty"`
	TwoPerson bool          `cbor:"two_person,omitempty" json:"two_person,omitempty"`
	Expires   time.Duration `cbor:"expires,omitempty" json:"expires,omitempty"`
}

// ParseModes reads modes from YAML. Unknown keys, a missing or unknown
// effect, a rule without a name, two rules with one name, a bad glob, an
// op pattern that matches no action, and a resource pattern of an HTTP-only
// rule that no canonical host can match (LOCALHOST.) are errors.
func ParseModes(b []byte) (*Modes, error) {
	var m Modes
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("modes: %w", err)
	}
	if m.Default == "" {
		m.Default = Allow
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return &m, nil
}

func (m *Modes) check() error {
	if !m.Default.valid() {
		return fmt.Errorf("modes: default %q: want allow, ask or deny", m.Default)
	}
	names := map[string]bool{}
	actions := Actions()
	for i, r := range m.Rules {
		where := fmt.Sprintf("modes: rule %d (%q)", i+1, r.Name)
		switch {
		case r.Name == "":
			return fmt.Errorf("modes: rule %d: name is required", i+1)
		case names[r.Name]:
			return fmt.Errorf("%s: the name is used twice", where)
		case !r.Effect.valid():
			return fmt.Errorf("%s: effect %q: want allow, ask or deny", where, r.Effect)
		case r.Group != "" && r.Effect != Ask:
			return fmt.Errorf("%s: group %q is for an ask rule (the approvers who answer), not a rule that says %s", where, r.Group, r.Effect)
		case r.Group != "" && !approval.ValidGroupName(r.Group):
			return fmt.Errorf("%s: group %q: want 1-64 of a-z 0-9 . _ -, starting with a letter or digit", where, r.Group)
		case (r.Quorum != 0 || r.TwoPerson || r.Expires != "") && r.Effect != Ask:
			return fmt.Errorf("%s: quorum, two_person and expires are for an ask rule (they tighten its approvers' rule), not a rule that says %s", where, r.Effect)
		case r.Quorum < 0:
			return fmt.Errorf("%s: quorum %d: want at least 1 (or leave it out for the group's)", where, r.Quorum)
		case r.Op == "":
			return fmt.Errorf("%s: op is required (an op name such as http.request, or a glob such as kv.*)", where)
		case !slices.ContainsFunc(actions, func(a string) bool { return glob(r.Op, a) }):
			return fmt.Errorf("%s: op %q matches no action (actions: %s)", where, r.Op, strings.Join(actions, ", "))
		}
		if err := r.checkHostPattern(actions); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if r.Expires != "" {
			d, err := time.ParseDuration(r.Expires)
			if err != nil || d <= 0 {
				return fmt.Errorf("%s: expires %q: want a duration above 0, such as 30m or 24h", where, r.Expires)
			}
			m.Rules[i].expires = d
		}
		names[r.Name] = true
	}
	return nil
}

// checkHostPattern refuses a resource pattern that can never match the
// host of an HTTP call, when the rule's op names only HTTP actions: calls
// name hosts in canonical form (lower case, no trailing dot, IDNA A-labels),
// so a rule on "LOCALHOST." would silently never apply.
func (r Rule) checkHostPattern(actions []string) error {
	if r.Resource == "" || slices.ContainsFunc(actions, func(a string) bool { return glob(r.Op, a) && !strings.HasPrefix(a, "http.") }) {
		return nil
	}
	if !strings.ContainsAny(r.Resource, "*?") {
		canon, err := capability.CanonicalHost(r.Resource)
		if err != nil {
			return fmt.Errorf("resource %q can never match an HTTP call's host: %w", r.Resource, err)
		}
		if canon != r.Resource {
			return fmt.Errorf("resource %q can never match: HTTP calls name hosts in canonical form; write %q", r.Resource, canon)
		}
		return nil
	}
	for _, c := range r.Resource {
		if c >= 0x80 || c >= 'A' && c <= 'Z' {
			return fmt.Errorf("resource %q can never match: HTTP calls name hosts in canonical form (lower case, IDNA A-labels such as xn--bcher-kva.example)", r.Resource)
		}
	}
	if strings.HasSuffix(r.Resource, ".") {
		return fmt.Errorf("resource %q can never match: HTTP calls name hosts without the trailing dot; write %q", r.Resource, strings.TrimSuffix(r.Resource, "."))
	}
	return nil
}

// matches reports whether rule r applies to call c.
func (r Rule) matches(c Call) bool {
	if !glob(r.Op, c.Op) {
		return false
	}
	if r.Resource != "" && !glob(r.Resource, c.Resource) {
		return false
	}
	if r.Method != "" && !strings.EqualFold(r.Method, c.Method) {
		return false
	}
	return true
}

// Apply returns what the modes make of decision d on call c. A denied
// decision is Deny whatever the rules say. Otherwise the strictest effect
// among the rules that match wins (deny, then ask, then allow), named by
// the first such rule in file order; with no match, the default applies.
// The order of the rules therefore never changes the effect.
func (m *Modes) Apply(d Decision, c Call) Verdict {
	if !d.Allowed {
		return Verdict{Effect: Deny}
	}
	best := -1
	for i, r := range m.Rules {
		if r.matches(c) && (best < 0 || r.Effect.rank() > m.Rules[best].Effect.rank()) {
			best = i
		}
	}
	if best < 0 {
		def := m.Default
		if def == "" {
			def = Allow
		}
		return Verdict{Effect: def}
	}
	r := &m.Rules[best]
	return Verdict{Effect: r.Effect, Rule: r.Name, Group: r.Group, Quorum: r.Quorum, TwoPerson: r.TwoPerson, Expires: r.expires}
}

// glob matches s against pattern: "*" any run of characters, "?" any one
// character, anything else itself. It is kept this small so that another
// implementation (the edge runtime) matches exactly the same way.
func glob(pattern, s string) bool {
	p, t := []rune(pattern), []rune(s)
	// Iterative matching with one backtrack point: the last star.
	pi, ti, star, mark := 0, 0, -1, 0
	for ti < len(t) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == t[ti]) && p[pi] != '*':
			pi++
			ti++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ti
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			ti = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
