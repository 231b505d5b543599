package approval

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/crypto/ssh"
)

// MaxName is the longest approver name, in bytes.
const MaxName = 64

// maxItems bounds the arrays and maps DecodeRecord takes (members, votes),
// as abi's decoder bounds a request's.
const maxItems = 1 << 16

// Member is one approver of a group: a name (the comment of its
// authorized_keys line) and its ed25519 key.
type Member struct {
	Name string            `cbor:"1,keyasint"`
	Key  ed25519.PublicKey `cbor:"2,keyasint"`
}

// Group is an approver group as its DATA/approvers/<group> file lists it,
// members in file order (the order an ordered rule follows).
type Group struct {
	Name    string
	Members []Member
}

// ParseGroup reads the group file of group name: OpenSSH authorized_keys
// lines, one per approver, "ssh-ed25519 AAAA... name". Blank lines and
// lines starting with # are skipped. It refuses, naming the line: options
// before the key, a key that is not ssh-ed25519, a missing name, a name
// with spaces or control characters, a name or a key listed twice.
func ParseGroup(name string, b []byte) (*Group, error) {
	if err := checkGroupName(name); err != nil {
		return nil, fmt.Errorf("approver group: %w", err)
	}
	members, err := parseMembers("approver group "+name, b)
	if err != nil {
		return nil, err
	}
	return &Group{Name: name, Members: members}, nil
}

// ParseTrust reads an auditor's trusted approvers file, in the format of a
// group file (ParseGroup): the keys whose votes the auditor accepts.
func ParseTrust(b []byte) ([]Member, error) {
	return parseMembers("trusted approvers", b)
}

// parseMembers reads authorized_keys lines of named ed25519 keys; what
// names the file in its errors.
func parseMembers(what string, b []byte) ([]Member, error) {
	var members []Member
	names := map[string]int{}
	keys := map[string]int{}
	for i, raw := range bytes.Split(b, []byte("\n")) {
		n := i + 1
		line := strings.TrimSpace(string(bytes.TrimSuffix(raw, []byte("\r"))))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fail := func(format string, args ...any) ([]Member, error) {
			return nil, fmt.Errorf("%s, line %d: %s", what, n, fmt.Sprintf(format, args...))
		}
		pub, comment, options, _, err := ssh.ParseAuthorizedKey([]byte(line))
		if err != nil {
			return fail("%v (want \"ssh-ed25519 AAAA... name\")", err)
		}
		if len(options) > 0 {
			return fail("options before the key (%s); an approver line is the key and a name only", shorten(strings.Join(options, ",")))
		}
		key := edKey(pub)
		if pub.Type() != ssh.KeyAlgoED25519 || key == nil {
			return fail("a %s key; approvers sign with ssh-ed25519 keys", pub.Type())
		}
		if err := checkName(comment); err != nil {
			return fail("%v", err)
		}
		if prev, ok := names[comment]; ok {
			return fail("the name %q again (first on line %d); each approver has one line", comment, prev)
		}
		if prev, ok := keys[string(key)]; ok {
			return fail("the key of line %d again (%s); each approver has a key of their own", prev, ssh.FingerprintSHA256(pub))
		}
		names[comment], keys[string(key)] = n, n
		members = append(members, Member{Name: comment, Key: key})
	}
	return members, nil
}

// checkName accepts an approver name: 1 to MaxName bytes of UTF-8 without
// spaces or control characters.
func checkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("no name after the key; write the approver's name there (ssh-ed25519 AAAA... alice)")
	case len(name) > MaxName:
		return fmt.Errorf("a name of %d bytes; at most %d", len(name), MaxName)
	case !utf8.ValidString(name):
		return fmt.Errorf("the name %q is not UTF-8", name)
	}
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) || !unicode.IsPrint(r) {
			return fmt.Errorf("the name %q has %q; a name has no spaces or control characters (alice, bob.smith)", name, r)
		}
	}
	return nil
}

// index returns the index of the member with key k, or -1.
func index(members []Member, k ed25519.PublicKey) int {
	for i, m := range members {
		if bytes.Equal(m.Key, k) {
			return i
		}
	}
	return -1
}
