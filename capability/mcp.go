package capability

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
)

// MCP allows the listed Model Context Protocol servers, each bound to the
// digest of its whole declaration in a grant (host/caps/mcp.Decl): how it
// is launched or reached, which of its tools the agent may call, which are
// idempotent, and the pinned hashes of their definitions. A grant file
// that declares a server otherwise does not match its digest, so no grant
// file can widen what a token allows a server to do.
type MCP struct {
	// Servers maps each server's name to the digest of its declaration.
	// Attenuate reads a nil digest as "the parent's"; a link always
	// carries every digest.
	Servers map[string]Digest `cbor:"servers" json:"servers" yaml:"servers"`
}

// Names returns the servers' names, sorted.
func (m *MCP) Names() []string {
	if m == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(m.Servers))
}

// MCPDigest returns the digest c binds the MCP server name to.
func (c Caps) MCPDigest(name string) (Digest, bool) {
	if c.MCP == nil {
		return nil, false
	}
	d, ok := c.MCP.Servers[name]
	return d, ok
}

// checkMCP validates a server list: bounded, valid names, full digests.
func checkMCP(m *MCP) error {
	if len(m.Servers) == 0 {
		return fmt.Errorf("mcp servers: the list is empty (leave the capability out to allow none)")
	}
	if len(m.Servers) > MaxListLen {
		return fmt.Errorf("mcp servers: %d entries, at most %d", len(m.Servers), MaxListLen)
	}
	for _, name := range m.Names() {
		if err := checkName(name); err != nil {
			return fmt.Errorf("mcp servers: %w", err)
		}
		if d := m.Servers[name]; len(d) != DigestSize {
			return fmt.Errorf("mcp server %q: want a %d-byte declaration digest, have %d bytes (a token binds each server's whole declaration)", name, DigestSize, len(d))
		}
	}
	return nil
}

// mcpWithin returns nil when every server of c is in parent with the same
// declaration digest.
func mcpWithin(c, parent *MCP) error {
	if parent == nil {
		return widens("capability mcp is not in the parent")
	}
	for _, name := range c.Names() {
		pd, ok := parent.Servers[name]
		if !ok {
			return widens("mcp server %q is not in the parent's servers", name)
		}
		if !bytes.Equal(c.Servers[name], pd) {
			return widens("mcp server %q is declared otherwise than in the parent (declaration %s, the parent's %s)", name, short(c.Servers[name]), short(pd))
		}
	}
	return nil
}

// inherit fills the nil digests of m from parent, for Attenuate.
func (m *MCP) inherit(parent *MCP) {
	if m == nil || parent == nil {
		return
	}
	out := make(map[string]Digest, len(m.Servers))
	for name, d := range m.Servers {
		if d == nil {
			d = parent.Servers[name]
		}
		out[name] = d
	}
	m.Servers = out
}
