package capability

import (
	"errors"
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
