package approval

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/agentrt/agentrt/internal/yamlkeys"
)

// authorizedLine is a's authorized_keys line with comment.
func authorizedLine(a approver, comment string) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(a.signer.PublicKey()))) + " " + comment
}

// TestParseGroup reads members in file order and refuses each bad line,
// naming it.
func TestParseGroup(t *testing.T) {
	alice, bob := newApprover(t, "alice"), newApprover(t, "bob")
	file := "# release approvers\n\n" + authorizedLine(alice, "alice") + "\r\n  " + authorizedLine(bob, "bob.smith") + "\n"
	g, err := ParseGroup("release", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Members) != 2 || g.Members[0].Name != "alice" || g.Members[1].Name != "bob.smith" || !g.Members[1].Key.Equal(bob.member().Key) {
		t.Fatalf("members %+v", g.Members)
	}
	keygenRSA := "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQC7 carol"
	cases := []struct{ name, file, want string }{
		{"options", `command="x" ` + authorizedLine(alice, "alice"), `line 1: options before the key (command="x")`},
		{"no name", authorizedLine(alice, ""), "line 1: no name after the key"},
		{"a name with a space", authorizedLine(alice, "alice smith"), `line 1: the name "alice smith" has ' '`},
		{"a control character", authorizedLine(alice, "al\x01ice"), `has '\x01'`},
		{"a name twice", authorizedLine(alice, "alice") + "\n" + authorizedLine(bob, "alice"), `line 2: the name "alice" again (first on line 1)`},
		{"a key twice", authorizedLine(alice, "alice") + "\n#\n" + authorizedLine(alice, "alice2"), "line 3: the key of line 1 again (SHA256:"},
		{"not a key", "hello world", "line 1: ssh: no key found"},
		{"an RSA key", authorizedLine(alice, "alice") + "\n" + keygenRSA, "line 2:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseGroup("release", []byte(c.file))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if !strings.HasPrefix(err.Error(), "approver group release, line ") {
				t.Fatalf("%v does not name the file and line", err)
			}
		})
	}
	if _, err := ParseGroup("Release", nil); err == nil || !strings.Contains(err.Error(), `group name "Release"`) {
		t.Errorf("bad group name: %v", err)
	}
}

// TestParseGroupRefusesOtherKeyTypes uses keys of other types as
// ssh-keygen writes them.
func TestParseGroupRefusesOtherKeyTypes(t *testing.T) {
	keygen := sshKeygen(t)
	for _, typ := range []string{"rsa", "ecdsa"} {
		pub, err := os.ReadFile(newKey(t, keygen, typ, "") + ".pub")
		if err != nil {
			t.Fatal(err)
		}
		_, err = ParseGroup("ops", pub)
		if err == nil || !strings.Contains(err.Error(), "approver group ops, line 1: a ") || !strings.Contains(err.Error(), "key; approvers sign with ssh-ed25519 keys") {
			t.Errorf("%s: %v", typ, err)
		}
	}
}

// writeCell writes a data directory with the given group files and rules.
func writeCell(t *testing.T, groups map[string]string, rules string) string {
	t.Helper()
	dir := t.TempDir()
	if groups != nil {
		if err := os.MkdirAll(filepath.Join(dir, ApproversDir), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range groups {
		if err := os.WriteFile(filepath.Join(dir, ApproversDir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if rules != "" {
		if err := os.WriteFile(filepath.Join(dir, RulesFile), []byte(rules), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestLoadConfig reads groups and rules; a field a group leaves out takes
// the default's.
func TestLoadConfig(t *testing.T) {
	alice, bob, carol := newApprover(t, "alice"), newApprover(t, "bob"), newApprover(t, "carol")
	three := authorizedLine(alice, "alice") + "\n" + authorizedLine(bob, "bob") + "\n" + authorizedLine(carol, "carol") + "\n"
	dir := writeCell(t, map[string]string{"release": three, "ops": authorizedLine(alice, "alice") + "\n", ".keep": ""}, `
default:
  quorum: 1
  expires: 72h
groups:
  release:
    quorum: 2
    two_person: true
    ordered: true
    expires: 24h
`)
	c, err := LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Groups(), ","); got != "ops,release" {
		t.Fatalf("groups %s", got)
	}
	g, r, err := c.Group("release")
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Members) != 3 || g.Members[2].Name != "carol" || r != (Rule{Quorum: 2, TwoPerson: true, Ordered: true, Expires: 24 * time.Hour}) {
		t.Fatalf("release: %d members, rule %+v", len(g.Members), r)
	}
	if _, r, _ := c.Group("ops"); r != (Rule{Quorum: 1, Expires: 72 * time.Hour}) {
		t.Fatalf("ops takes the default, got %+v", r)
	}
	if _, _, err := c.Group("prod"); err == nil || !strings.Contains(err.Error(), `no approver group "prod" (groups: ops, release)`) {
		t.Fatalf("unknown group: %v", err)
	}

	// No approvers directory, no rules: an empty configuration.
	empty, err := LoadConfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := empty.Group("release"); err == nil || !strings.Contains(err.Error(), "(groups: none)") {
		t.Fatalf("empty config: %v", err)
	}
	// Without approvals.yaml, the default rule: quorum 1, no expiry.
	plain, err := LoadConfig(writeCell(t, map[string]string{"ops": three}, ""))
	if err != nil {
		t.Fatal(err)
	}
	if _, r, _ := plain.Group("ops"); r != (Rule{Quorum: 1}) {
		t.Fatalf("default rule %+v", r)
	}
}

// TestLoadConfigRefuses: each bad configuration is refused when it is
// loaded, with an error that names the file and what to change.
func TestLoadConfigRefuses(t *testing.T) {
	alice, bob := newApprover(t, "alice"), newApprover(t, "bob")
	two := map[string]string{"release": authorizedLine(alice, "alice") + "\n" + authorizedLine(bob, "bob") + "\n"}
	cases := []struct {
		name   string
		groups map[string]string
		rules  string
		want   string
	}{
		{"quorum 0", two, "groups:\n  release:\n    quorum: 0\n", "groups.release: quorum 0; a quorum is at least 1"},
		{"quorum over the members", two, "groups:\n  release:\n    quorum: 3\n", "groups.release: quorum 3, but the group has 2 member(s)"},
		{"default quorum over a group's members", two, "default:\n  quorum: 5\n", "default (for group release): quorum 5"},
		{"a rule for no group", two, "groups:\n  prod:\n    quorum: 1\n", "groups.prod: no such group (no file approvers/prod; groups: release)"},
		{"a bad expiry", two, "groups:\n  release:\n    expires: tomorrow\n", `groups.release: expires "tomorrow"`},
		{"a negative expiry", two, "groups:\n  release:\n    expires: -1h\n", `expires "-1h" is negative`},
		{"an unknown key", two, "groups:\n  release:\n    qorum: 1\n", `approvals.yaml:3: unknown key "qorum" in groups.release; allowed: quorum, two_person, ordered, expires (did you mean quorum?)`},
		{"a bad file name", map[string]string{"Release": ""}, "", `approvers/Release: group name "Release"`},
		{"an empty group", map[string]string{"release": "# nobody\n"}, "", "approvers/release: no approvers"},
		{"a bad line", map[string]string{"release": "ssh-ed25519 AAAA"}, "", "approvers/release: approver group release, line 1:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadConfig(writeCell(t, c.groups, c.rules))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
	_, err := LoadConfig(writeCell(t, two, "x: 1\n"))
	var uk *yamlkeys.UnknownKeyError
	if !errors.As(err, &uk) || uk.Key != "x" {
		t.Fatalf("unknown top-level key: %v", err)
	}
}

// TestStricter takes the stricter of each part of two rules.
func TestStricter(t *testing.T) {
	h, d := time.Hour, 24*time.Hour
	cases := []struct{ a, b, want Rule }{
		{Rule{Quorum: 1}, Rule{Quorum: 2}, Rule{Quorum: 2}},
		{Rule{Quorum: 3, TwoPerson: true}, Rule{Quorum: 2, Ordered: true}, Rule{Quorum: 3, TwoPerson: true, Ordered: true}},
		{Rule{Quorum: 1, Expires: d}, Rule{Quorum: 1, Expires: h}, Rule{Quorum: 1, Expires: h}},
		{Rule{Quorum: 1, Expires: h}, Rule{Quorum: 1}, Rule{Quorum: 1, Expires: h}},
		{Rule{Quorum: 1}, Rule{Quorum: 1, Expires: d}, Rule{Quorum: 1, Expires: d}},
	}
	for _, c := range cases {
		if got := c.a.Stricter(c.b); got != c.want {
			t.Errorf("%+v.Stricter(%+v) = %+v, want %+v", c.a, c.b, got, c.want)
		}
		if got := c.b.Stricter(c.a); got != c.want {
			t.Errorf("Stricter is not symmetric for %+v, %+v: %+v", c.a, c.b, got)
		}
	}
}
