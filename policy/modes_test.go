package policy

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"pgregory.net/rapid"
)

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true},
		{"*", "anything/at all", true},
		{"kv.*", "kv.get", true},
		{"kv.*", "kvx.get", false},
		{"kv.?et", "kv.get", true},
		{"kv.?et", "kv.gget", false},
		{"prod-*", "prod-orders", true},
		{"prod-*", "staging-prod-orders", false},
		{"*.example.com", "api.example.com", true},
		{"*.example.com", "example.com", false},
		{"a*b*c", "aXXbYYc", true},
		{"a*b*c", "aXXbYY", false},
		{"team/*", "team/a/b", true}, // "*" crosses slashes, unlike path.Match
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{"**", "x", true},
		{"é?", "éa", true}, // runes, not bytes
	} {
		if got := glob(c.pattern, c.s); got != c.want {
			t.Errorf("glob(%q, %q) = %v, want %v", c.pattern, c.s, got, c.want)
		}
	}
}

func TestParseModesErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"rules:\n  - name: a\n    op: kv.get\n    effect: allow\n    methd: GET\n", "field methd not found"},
		{"defualt: ask\n", "field defualt not found"},
		{"rules:\n  - name: a\n    op: kv.get\n    effect: maybe\n", `effect "maybe"`},
		{"rules:\n  - op: kv.get\n    effect: ask\n", "name is required"},
		{"rules:\n  - name: a\n    op: kv.get\n    effect: ask\n  - name: a\n    op: kv.put\n    effect: ask\n", "used twice"},
		{"rules:\n  - name: a\n    op: http.reqest\n    effect: ask\n", `op "http.reqest" matches no action`},
		{"rules:\n  - name: a\n    effect: ask\n", "op is required"},
		{"default: sometimes\n", `default "sometimes"`},
	} {
		_, err := ParseModes([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.yaml, err, c.want)
		}
	}
	m, err := ParseModes(nil)
	if err != nil || m.Default != Allow || len(m.Rules) != 0 {
		t.Errorf("an empty file: %+v, %v; want default allow, no rules", m, err)
	}
}

// genModes draws a rule set from a small alphabet so that rules often match
// the calls drawn by genCall, and encodes it as YAML so that the loader is
// exercised too.
func genModes(t *rapid.T) *Modes {
	ops := []string{"*", "kv.*", "kv.get", "kv.put", "http.request", "tool.run", "tool.*", "run.?og"}
	resources := []string{"", "*", "prod-*", "search", "api.example.com", "*.example.com"}
	methods := []string{"", "GET", "POST", "post"}
	effects := []Effect{Allow, Ask, Deny}
	m := Modes{Default: rapid.SampledFrom(effects).Draw(t, "default")}
	n := rapid.IntRange(0, 6).Draw(t, "rules")
	for i := range n {
		m.Rules = append(m.Rules, Rule{
			Name:     "r" + strings.Repeat("x", i),
			Op:       rapid.SampledFrom(ops).Draw(t, "op"),
			Resource: rapid.SampledFrom(resources).Draw(t, "resource"),
			Method:   rapid.SampledFrom(methods).Draw(t, "method"),
			Effect:   rapid.SampledFrom(effects).Draw(t, "effect"),
		})
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := ParseModes(b)
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return parsed
}

func genCall(t *rapid.T) Call {
	return Call{
		Op:       rapid.SampledFrom(Actions()).Draw(t, "call op"),
		Resource: rapid.SampledFrom([]string{"prod-orders", "crawler", "search", "api.example.com", "x.example.com"}).Draw(t, "call resource"),
		Method:   rapid.SampledFrom([]string{"", "GET", "POST"}).Draw(t, "call method"),
	}
}

func genDecision(t *rapid.T, allowed bool) Decision {
	by := ByPlatform
	if !allowed {
		by = rapid.SampledFrom([]By{ByRequest, ByPlatform, ByCustomer}).Draw(t, "by")
	} else if rapid.Bool().Draw(t, "customer layer") {
		by = ByBoth
	}
	return Decision{Allowed: allowed, By: by}
}

// TestModesNeverLiftDeny is invariant 6 for permission modes: no rule set
// turns a denied decision into ask or allow.
func TestModesNeverLiftDeny(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m, c := genModes(t), genCall(t)
		if v := m.Apply(genDecision(t, false), c); v.Effect != Deny || v.Rule != "" {
			t.Fatalf("a denied call became %+v under %+v", v, m)
		}
	})
}

// TestModesOnlyNarrow: on an allowed call, adding a deny rule never makes
// the outcome more permissive, nor does adding an ask rule where a rule
// (not the default) decided; a matching added rule is at least as strict as
// its own effect; and the order of the rules never changes the effect. (An
// ask rule may loosen a deny default: a rule is an exception to the default,
// as an allow rule is to an ask default.)
func TestModesOnlyNarrow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m, c := genModes(t), genCall(t)
		d := genDecision(t, true)
		before := m.Apply(d, c)

		extra := Rule{
			Name:     "added",
			Op:       rapid.SampledFrom([]string{"*", c.Op, "kv.*"}).Draw(t, "added op"),
			Resource: rapid.SampledFrom([]string{"", "*", c.Resource, "nothing"}).Draw(t, "added resource"),
			Effect:   rapid.SampledFrom([]Effect{Ask, Deny}).Draw(t, "added effect"),
		}
		at := rapid.IntRange(0, len(m.Rules)).Draw(t, "at")
		narrowed := &Modes{Default: m.Default, Rules: append(append(append([]Rule{}, m.Rules[:at]...), extra), m.Rules[at:]...)}
		after := narrowed.Apply(d, c)
		if (extra.Effect == Deny || before.Rule != "") && after.Effect.rank() < before.Effect.rank() {
			t.Fatalf("adding %+v loosened %s to %s", extra, before.Effect, after.Effect)
		}
		if extra.matches(c) && after.Effect.rank() < extra.Effect.rank() {
			t.Fatalf("a matching %s rule gave %s", extra.Effect, after.Effect)
		}

		shuffled := &Modes{Default: m.Default, Rules: rapid.Permutation(m.Rules).Draw(t, "order")}
		if got := shuffled.Apply(d, c); got.Effect != before.Effect {
			t.Fatalf("reordering the rules changed %s to %s", before.Effect, got.Effect)
		}
	})
}

// TestModesApply pins the documented choices on a hand-written rule set.
func TestModesApply(t *testing.T) {
	m, err := ParseModes([]byte(`
default: ask
rules:
  - name: auto-search
    op: tool.run
    resource: search
    effect: allow
  - name: ask-post
    op: http.request
    method: POST
    effect: ask
  - name: no-prod
    op: "kv.*"
    resource: "prod-*"
    effect: deny
  - name: also-no-prod
    op: kv.put
    resource: "prod-*"
    effect: deny
`))
	if err != nil {
		t.Fatal(err)
	}
	allowed := Decision{Allowed: true, By: ByPlatform}
	for _, c := range []struct {
		call Call
		want Verdict
	}{
		{Call{Op: "tool.run", Resource: "search"}, Verdict{Effect: Allow, Rule: "auto-search"}},
		{Call{Op: "tool.run", Resource: "shell"}, Verdict{Effect: Ask, Rule: ""}},
		{Call{Op: "http.request", Resource: "a.example", Method: "POST"}, Verdict{Effect: Ask, Rule: "ask-post"}},
		{Call{Op: "kv.put", Resource: "prod-orders"}, Verdict{Effect: Deny, Rule: "no-prod"}}, // first of the strictest
		{Call{Op: "kv.get", Resource: "crawler"}, Verdict{Effect: Ask, Rule: ""}},
	} {
		if got := m.Apply(allowed, c.call); got != c.want {
			t.Errorf("%+v: got %+v, want %+v", c.call, got, c.want)
		}
	}
}
