package capability

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
)

// DigestSize is the length of a tool declaration's digest: SHA-256.
const DigestSize = sha256.Size

// Digest is the SHA-256 of a tool's declaration (SPEC.md, "Tool
// declarations"). It reads and writes as hex in JSON and YAML.
type Digest []byte

// MarshalText writes d as hex.
func (d Digest) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(d)), nil }

// UnmarshalText reads d from hex.
func (d *Digest) UnmarshalText(b []byte) error {
	v, err := hex.DecodeString(string(b))
	if err != nil || len(v) != DigestSize {
		return fmt.Errorf("tool digest %q: want %d bytes of hex", b, DigestSize)
	}
	*d = v
	return nil
}

// String returns d as hex.
func (d Digest) String() string { return hex.EncodeToString(d) }

// Tool allows calling the listed native tools, each bound to the digest of
// its whole declaration: what it executes, with which arguments, seeing
// which paths, with which environment and limits. A grant file that
// declares a tool otherwise does not match its digest, so no grant file can
// widen what a token allows a tool to do.
type Tool struct {
	// Tools maps each tool's name to the digest of its declaration.
	// Attenuate reads a nil digest as "the parent's"; a link always
	// carries every digest.
	Tools map[string]Digest `cbor:"tools" json:"tools" yaml:"tools"`
	// Delegable maps the tools the holder may not run itself but may
	// hand to its sub-agents to the digests of their declarations. A
	// sub-agent's token may list them in its Tools (it runs them) or in
	// its own Delegable; nothing else reaches a tool the parent cannot
	// run.
	Delegable map[string]Digest `cbor:"delegable,omitempty" json:"delegable,omitempty" yaml:"delegable,omitempty"`
}

// DelegableNames returns the delegable tools' names, sorted.
func (t *Tool) DelegableNames() []string {
	if t == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(t.Delegable))
}

// Names returns the tools' names, sorted.
func (t *Tool) Names() []string {
	if t == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(t.Tools))
}

// ToolDigest returns the digest c binds the tool name to.
func (c Caps) ToolDigest(name string) (Digest, bool) {
	if c.Tool == nil {
		return nil, false
	}
	d, ok := c.Tool.Tools[name]
	return d, ok
}

// checkTools validates a tool list: bounded, valid names, full digests;
// a name is runnable or delegable, not both.
func checkTools(t *Tool) error {
	if len(t.Tools) == 0 && len(t.Delegable) == 0 {
		return fmt.Errorf("tools: the list is empty (leave the capability out to allow none)")
	}
	for _, list := range []struct {
		what  string
		names []string
		m     map[string]Digest
	}{{"tools", t.Names(), t.Tools}, {"delegable", t.DelegableNames(), t.Delegable}} {
		if len(list.m) > MaxListLen {
			return fmt.Errorf("%s: %d entries, at most %d", list.what, len(list.m), MaxListLen)
		}
		for _, name := range list.names {
			if err := checkName(name); err != nil {
				return fmt.Errorf("%s: %w", list.what, err)
			}
			if d := list.m[name]; len(d) != DigestSize {
				return fmt.Errorf("tool %q: want a %d-byte declaration digest, have %d bytes (a token binds each tool's whole declaration)", name, DigestSize, len(d))
			}
		}
	}
	for name := range t.Delegable {
		if _, ok := t.Tools[name]; ok {
			return fmt.Errorf("tool %q: both runnable and delegable (a delegable tool is one the holder may not run)", name)
		}
	}
	return nil
}

// toolsWithin returns nil when every tool of c, runnable or delegable, is
// one parent runs or may delegate, with the same declaration digest.
func toolsWithin(c, parent *Tool) error {
	if parent == nil {
		return widens("capability tool is not in the parent")
	}
	for _, list := range []struct {
		names []string
		m     map[string]Digest
	}{{c.Names(), c.Tools}, {c.DelegableNames(), c.Delegable}} {
		for _, name := range list.names {
			pd, ok := parent.Tools[name]
			if !ok {
				pd, ok = parent.Delegable[name]
			}
			switch {
			case !ok && len(parent.Delegable) == 0:
				return widens("tool %q is not in the parent's tools", name)
			case !ok:
				return widens("tool %q is neither in the parent's tools nor delegable by it", name)
			}
			if !bytes.Equal(list.m[name], pd) {
				return widens("tool %q is declared otherwise than in the parent (declaration %s, the parent's %s)", name, short(list.m[name]), short(pd))
			}
		}
	}
	return nil
}

// inheritTools fills the nil digests of c from parent, for Attenuate.
func (t *Tool) inheritTools(parent *Tool) {
	if t == nil || parent == nil {
		return
	}
	inherit := func(m map[string]Digest) map[string]Digest {
		if m == nil {
			return nil
		}
		out := make(map[string]Digest, len(m))
		for name, d := range m {
			if d == nil {
				if d = parent.Tools[name]; d == nil {
					d = parent.Delegable[name]
				}
			}
			out[name] = d
		}
		return out
	}
	t.Tools, t.Delegable = inherit(t.Tools), inherit(t.Delegable)
}

// short abbreviates a digest for messages.
func short(d Digest) string {
	if len(d) < 6 {
		return fmt.Sprintf("%x", []byte(d))
	}
	return fmt.Sprintf("%x…", []byte(d[:6]))
}

// ToolDecl is a tool's whole declaration, the input of its digest (SPEC.md,
// "Tool declarations"). It has the members of a grant file's tool entry
// (host.ToolSpec): the host converts its own type to this one, and a test
// there checks that every field of its type reaches the digest. Every
// member's zero value means what its absence means, and is left out of the
// encoding, so that one declaration has one digest however a grant file
// spells an empty list.
type ToolDecl struct {
	Name       string            `cbor:"name"`
	Exec       string            `cbor:"exec"`
	Args       *ToolArgsDecl     `cbor:"args,omitempty"`
	Read       []string          `cbor:"read,omitempty"`
	Write      []string          `cbor:"write,omitempty"`
	Workspace  bool              `cbor:"workspace,omitempty"`
	Workdir    string            `cbor:"workdir,omitempty"`
	Network    string            `cbor:"network,omitempty"`
	Env        map[string]string `cbor:"env,omitempty"`
	Limits     *ToolLimitsDecl   `cbor:"limits,omitempty"`
	Idempotent bool              `cbor:"idempotent,omitempty"`
}

// ToolArgsDecl is a declaration's argument schema.
type ToolArgsDecl struct {
	Fixed      []string             `cbor:"fixed,omitempty"`
	Flags      []ToolFlagDecl       `cbor:"flags,omitempty"`
	Positional []ToolPositionalDecl `cbor:"positional,omitempty"`
	Max        uint64               `cbor:"max,omitempty"`
}

// ToolFlagDecl is one allowed flag.
type ToolFlagDecl struct {
	Name  string `cbor:"name"`
	Value string `cbor:"value,omitempty"`
	Path  string `cbor:"path,omitempty"`
}

// ToolPositionalDecl is one positional slot.
type ToolPositionalDecl struct {
	Pattern string `cbor:"pattern"`
	Path    string `cbor:"path,omitempty"`
}

// ToolLimitsDecl are a declaration's limits, as written ("30s", "256MiB").
// FileSize, Disk and Hash are the sandbox's file_size, disk and hash
// limits, which a grant declares where the tool grant has them.
type ToolLimitsDecl struct {
	CPU      string `cbor:"cpu,omitempty"`
	Wall     string `cbor:"wall,omitempty"`
	Memory   string `cbor:"memory,omitempty"`
	Procs    uint64 `cbor:"procs,omitempty"`
	Output   string `cbor:"output,omitempty"`
	FileSize string `cbor:"file_size,omitempty"`
	Disk     string `cbor:"disk,omitempty"`
	Hash     string `cbor:"hash,omitempty"`
}

// Canonical returns the canonical CBOR of d: the bytes its digest is the
// SHA-256 of. Empty members are left out, so the input is normalized
// first: a nil and an empty list are the same declaration.
func (d ToolDecl) Canonical() ([]byte, error) {
	if d.Args != nil && len(d.Args.Fixed) == 0 && len(d.Args.Flags) == 0 && len(d.Args.Positional) == 0 && d.Args.Max == 0 {
		d.Args = nil
	}
	if d.Limits != nil && *d.Limits == (ToolLimitsDecl{}) {
		d.Limits = nil
	}
	return encMode.Marshal(d)
}

// Digest returns the SHA-256 of d's canonical CBOR.
func (d ToolDecl) Digest() (Digest, error) {
	b, err := d.Canonical()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	return sum[:], nil
}

// requireDigests refuses a tool without a declaration digest, for Issue: a
// root has no parent to take one from.
func (c Caps) requireDigests() error {
	for _, name := range c.MCP.Names() {
		if c.MCP.Servers[name] == nil {
			return fmt.Errorf("capability token: mcp server %q has no declaration digest: a token binds each server's whole declaration, so issue it from the server's declaration (a grant file's mcp server entry)", name)
		}
	}
	if c.Tool == nil {
		return nil
	}
	for _, name := range c.Tool.Names() {
		if c.Tool.Tools[name] == nil {
			return fmt.Errorf("capability token: tool %q has no declaration digest: a token binds each tool's whole declaration, so issue it from the tool's declaration (a grant file's tool entry)", name)
		}
	}
	return nil
}
