package capability

import (
	"errors"
	"strings"
	"testing"
)

func TestHostsWithin(t *testing.T) {
	cases := []struct {
		child, parent []string
		within        bool
	}{
		{[]string{"example.com"}, []string{"example.com"}, true},
		{[]string{"example.com:443"}, []string{"example.com"}, true},
		{[]string{"example.com:443"}, []string{"example.com:443"}, true},
		{[]string{"example.com"}, []string{"example.com:443"}, false},
		{[]string{"example.com:8443"}, []string{"example.com:443"}, false},
		{[]string{"api.example.com"}, []string{"example.com"}, false},
		{[]string{"example.com:443", "other.org"}, []string{"example.com"}, false},
	}
	for _, tc := range cases {
		err := Caps{HTTP: &HTTP{Hosts: tc.child}}.Within(Caps{HTTP: &HTTP{Hosts: tc.parent}})
		if (err == nil) != tc.within || (err != nil && !errors.Is(err, ErrWidens)) {
			t.Errorf("%v within %v: got %v, want within=%v", tc.child, tc.parent, err, tc.within)
		}
	}
}

func TestAllowsHost(t *testing.T) {
	c := Caps{HTTP: &HTTP{Hosts: []string{"api.example.com:443", "example.com"}}}
	for hostport, want := range map[string]bool{
		"example.com":          true,
		"EXAMPLE.com.:8080":    true,
		"api.example.com":      true, // the default port, 443
		"api.example.com:443":  true,
		"api.example.com:80":   false,
		"evil.example.com:443": false,
	} {
		if got := c.AllowsHost(hostport, "443"); got != want {
			t.Errorf("AllowsHost(%q) = %v, want %v", hostport, got, want)
		}
	}
	if (Caps{}).AllowsHost("example.com", "443") {
		t.Error("no http capability allows a host")
	}
}

func TestParseCapsFile(t *testing.T) {
	c, b, err := ParseCapsFile([]byte(`
capabilities:
  run: {}
  kv: {namespace: crawler, namespaces: [notes, crawler]}
  http: {hosts: [Example.com, "api.example.com:443"], idempotent: true}
  tool: {names: [ls, grep]}
budget:
  steps: 10
  wall_seconds: 0
`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.String(), "run, kv[crawler notes], http[api.example.com:443 example.com] idempotent, tool[grep ls]"; got != want {
		t.Errorf("caps %q, want %q", got, want)
	}
	if got, want := b.String(), "steps=10,wall_seconds=0"; got != want {
		t.Errorf("budget %q, want %q", got, want)
	}
	// A grant file's tool registry gives the names a token carries.
	g, _, err := ParseCapsFile([]byte("capabilities:\n  tool:\n    tools:\n      - {name: count, exec: /usr/bin/grep, args: {fixed: [-c]}}\n      - {name: log, exec: /usr/bin/git}\n"))
	if err != nil || g.String() != "tool[count log]" {
		t.Errorf("a grant file's tools: %q, %v", g.String(), err)
	}
	for doc, want := range map[string]string{
		"capabilities: {tools: {names: [x]}}":          "field tools not found",
		"capabilities: {http: {hosts: []}}":            "list is empty",
		"capabilities: {http: {hosts: [a.com:99999]}}": "port",
		"budget: {steps: 1}":                           "no 'capabilities' map",
	} {
		if _, _, err := ParseCapsFile([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error naming %q", doc, err, want)
		}
	}
}

func TestParseBudget(t *testing.T) {
	b, err := ParseBudget("steps=5, http_requests=0,wall_seconds=1h")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "steps=5,http_requests=0,wall_seconds=3600"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, bad := range []string{"steps", "steps=-1", "gpus=3", "tool_calls=1h"} {
		if _, err := ParseBudget(bad); err == nil {
			t.Errorf("ParseBudget(%q) accepted", bad)
		}
	}
}
