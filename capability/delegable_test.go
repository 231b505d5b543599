package capability

import (
	"errors"
	"strings"
	"testing"
)

// delegating returns a tool capability that runs run and may delegate
// del, each bound to its test declaration.
func delegating(run, del []string) *Tool {
	t := tools(run...)
	if len(del) > 0 {
		t.Delegable = tools(del...).Tools
	}
	return t
}

// A child's tools, runnable or delegable, come from the parent's runnable
// or delegable ones, declared the same; nothing else.
func TestDelegableWithin(t *testing.T) {
	other := testDecl("deploy")
	other.Read = append(other.Read, "/etc")
	cases := []struct {
		name          string
		child, parent *Tool
		widens        string
	}{
		{"runs a tool the parent delegates", delegating([]string{"deploy"}, nil), delegating(nil, []string{"deploy"}), ""},
		{"delegates it on", delegating(nil, []string{"deploy"}), delegating(nil, []string{"deploy"}), ""},
		{"delegates a tool the parent runs", delegating(nil, []string{"grep"}), delegating([]string{"grep"}, nil), ""},
		{"runs a tool the parent neither runs nor delegates", delegating([]string{"rm"}, nil), delegating([]string{"grep"}, []string{"deploy"}), `tool "rm" is neither in the parent's tools nor delegable by it`},
		{"delegates a tool the parent lacks", delegating(nil, []string{"rm"}), delegating([]string{"grep"}, nil), `tool "rm" is not in the parent's tools`},
		{"declares a delegable tool otherwise", &Tool{Tools: map[string]Digest{"deploy": digestOf(other)}}, delegating(nil, []string{"deploy"}), `tool "deploy" is declared otherwise`},
	}
	for _, c := range cases {
		err := toolsWithin(c.child, c.parent)
		if c.widens == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrWidens) || !strings.Contains(err.Error(), c.widens) {
			t.Errorf("%s: %v, want a widening naming %q", c.name, err, c.widens)
		}
	}
	// A holder may run a tool or delegate it, not both; delegating alone
	// is a tool capability.
	if err := checkTools(delegating([]string{"grep"}, []string{"grep"})); err == nil || !strings.Contains(err.Error(), "both runnable and delegable") {
		t.Errorf("a tool both runnable and delegable: %v", err)
	}
	if err := checkTools(delegating(nil, []string{"deploy"})); err != nil {
		t.Errorf("delegable tools alone: %v", err)
	}
	if c := (Caps{Tool: delegating(nil, []string{"deploy"})}); c.AllowsTool("deploy") {
		t.Error("a delegable tool is allowed to its holder")
	}
}
