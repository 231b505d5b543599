package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/capability"
	"github.com/cedar-policy/cedar-go/types"
)

// TestHostLiteralsMustBeCanonical: a customer policy that names a host in
// a form no request has would never match; it is refused at load, naming
// the spelling to write, and the canonical one loads.
func TestHostLiteralsMustBeCanonical(t *testing.T) {
	for src, want := range map[string]string{
		`forbid (principal, action, resource == Host::"LOCALHOST.");`:                           `write Host::"localhost"`,
		`forbid (principal, action, resource) when { resource == Host::"bücher.example" };`:     `write Host::"xn--bcher-kva.example"`,
		`forbid (principal, action, resource) when { resource == Host::"[::ffff:127.0.0.1]" };`: `write Host::"127.0.0.1"`,
		`forbid (principal, action, resource == Host::"0x7f.1");`:                               "can never match",
	} {
		_, err := NewEngine(Platform(), []Source{{Name: "c.cedar", Text: []byte(src)}})
		var le *LoadError
		if !errors.As(err, &le) || le.Set != SetCustomer || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want a customer load error naming %q", src, err, want)
		}
	}
	ok := `forbid (principal, action, resource == Host::"localhost") when { resource.name == "Host::\"X\"" };`
	if _, err := NewEngine(Platform(), []Source{{Name: "c.cedar", Text: []byte(ok)}}); err != nil {
		t.Errorf("a canonical host (and a quoted Host:: in a string) refused: %v", err)
	}
}

// TestModesHostPatternsMustBeCanonical: the same for permission modes, on
// rules whose op names only HTTP actions (a kv namespace may be upper case).
func TestModesHostPatternsMustBeCanonical(t *testing.T) {
	for rule, want := range map[string]string{
		"{name: a, op: http.request, resource: LOCALHOST., effect: deny}":   `write "localhost"`,
		"{name: a, op: http.*, resource: Bücher.example, effect: deny}":     `write "xn--bcher-kva.example"`,
		"{name: a, op: http.request, resource: '*.Internal', effect: ask}":  "lower case",
		"{name: a, op: http.request, resource: '*.internal.', effect: ask}": `write "*.internal"`,
	} {
		if _, err := ParseModes([]byte("rules:\n  - " + rule + "\n")); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error naming %q", rule, err, want)
		}
	}
	for _, rule := range []string{
		"{name: a, op: http.request, resource: '*.internal', effect: ask}",
		"{name: a, op: '*', resource: Prod-*, effect: deny}",
		"{name: a, op: kv.*, resource: Prod-Orders, effect: deny}",
	} {
		if _, err := ParseModes([]byte("rules:\n  - " + rule + "\n")); err != nil {
			t.Errorf("%s: %v", rule, err)
		}
	}
}

// TestDecideRefusesANonCanonicalHost: a request built by hand with a host
// the gate would never send is denied by request, not decided under
// another name; ParseRequest canonicalizes.
func TestDecideRefusesANonCanonicalHost(t *testing.T) {
	e, err := NewEngine(Platform(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"METADATA.google.internal.", "localhost.", "[::1]"} {
		r := hostRequest(netipMust("10.0.0.1"), false)
		host := types.NewEntityUID("Host", types.String(id))
		delete(r.Entities, r.Resource)
		r.Resource = host
		r.Entities[host] = types.Entity{UID: host, Attributes: types.NewRecord(types.RecordMap{"name": types.String(id)})}
		if d := e.Decide(r); d.Allowed || d.By != ByRequest || !strings.Contains(d.Reason, "canonical") {
			t.Errorf("%s: %+v, want denied by request as not canonical", id, d)
		}
		if err := CanonicalizeHosts(&r); err != nil {
			t.Fatal(err)
		}
		want, _ := capability.CanonicalHost(id)
		if string(r.Resource.ID) != want {
			t.Errorf("CanonicalizeHosts: %s, want %s", r.Resource.ID, want)
		}
		if d := e.Decide(r); d.By == ByRequest {
			t.Errorf("%s canonicalized: still denied by request: %s", id, d.Reason)
		}
	}
	// An IP literal host whose ip attribute is another address.
	r := hostRequest(netipMust("127.0.0.1"), true)
	r.Entities[r.Resource] = types.Entity{UID: r.Resource, Attributes: types.NewRecord(types.RecordMap{"name": types.String("127.0.0.1"), "ip": mustIP("8.8.8.8"), "explicit": types.False})}
	if d := e.Decide(r); d.By != ByRequest || !strings.Contains(d.Reason, "ip attribute") {
		t.Errorf("an IP host with another ip: %+v", d)
	}
}
