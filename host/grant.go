package host

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/internal/fileread"
	"github.com/agentrt/agentrt/internal/yamlkeys"
	"go.yaml.in/yaml/v3"
)

// Grant names the capabilities a run may use and the resources within each.
// It is loaded from a small YAML or JSON file today; a later version makes it
// a signed capability token, and Grant stays the decoded, checked form that
// the host consults.
type Grant struct {
	Run    *RunGrant    `yaml:"run,omitempty" cbor:"run,omitempty"`
	KV     *KVGrant     `yaml:"kv,omitempty" cbor:"kv,omitempty"`
	HTTP   *HTTPGrant   `yaml:"http,omitempty" cbor:"http,omitempty"`
	Clock  *ClockGrant  `yaml:"clock,omitempty" cbor:"clock,omitempty"`
	Random *RandomGrant `yaml:"random,omitempty" cbor:"random,omitempty"`
	Tool   *ToolGrant   `yaml:"tool,omitempty" cbor:"tool,omitempty"`
	// Budget holds the budget ceilings of the run's token, when it has
	// any. Not part of a grant file: it comes from the verified token.
	Budget *capability.Budget `yaml:"-" cbor:"budget,omitempty"`
	// Limits are the run's limits: in a grant file, those of its limits
	// section (a sibling of capabilities:), which may only lower the
	// cell's; in a run header, every limit the run had (Limits).
	Limits *Limits `yaml:"-" cbor:"limits,omitempty"`
}

// RunGrant allows the run capability (input, output, log, introspect).
type RunGrant struct{}

// KVGrant allows durable key/value state in one namespace.
type KVGrant struct {
	// Namespace scopes the keys; agents sharing a namespace share state.
	Namespace string `yaml:"namespace" cbor:"namespace"`
}

// HTTPGrant allows HTTP requests to the listed hosts.
type HTTPGrant struct {
	// Hosts are "host" (any port) or "host:port" entries, in canonical
	// form (capability.CanonicalHostEntry; Check puts them in it);
	// requests to any other host are denied. An IP address or localhost
	// among them is what lets the run reach that address (localhost: any
	// loopback address) past the platform's private-range rules.
	Hosts []string `yaml:"hosts" cbor:"hosts"`
	// Idempotent says the servers honour the Idempotency-Key header (they
	// serve a repeated key once), so a request a crash left in doubt may
	// be sent again with the same key. Otherwise it is not re-sent and the
	// guest is told it is in doubt.
	Idempotent bool `yaml:"idempotent,omitempty" cbor:"idempotent,omitempty"`
}

// ClockGrant allows reading the host's real wall time.
type ClockGrant struct{}

// RandomGrant allows reading real random bytes.
type RandomGrant struct{}

// DefaultGrant is the grant of a run started without one: the run
// capability alone.
func DefaultGrant() *Grant { return &Grant{Run: &RunGrant{}} }

// LoadGrant reads a grant file (YAML or JSON).
func LoadGrant(path string) (*Grant, error) {
	b, err := fileread.Read(path, fileread.Grant)
	if err != nil {
		return nil, err
	}
	return ParseGrantFile(path, b)
}

// ParseGrantFile is ParseGrant for the contents b of the file path, whose
// name its errors carry: an unknown key as "grant.yaml:3: ...", any other
// problem as "grant grant.yaml: ...".
func ParseGrantFile(path string, b []byte) (*Grant, error) {
	g, err := ParseGrant(b)
	var uk *yamlkeys.UnknownKeyError
	if errors.As(err, &uk) {
		uk.File = path
		return nil, uk
	}
	if err != nil {
		return nil, fmt.Errorf("grant %s: %w", path, err)
	}
	return g, nil
}

// ParseGrant parses and checks a grant in YAML or JSON. Unknown keys are an
// error, so a misspelt capability never silently grants less or more: a
// *yamlkeys.UnknownKeyError that names the key, its line, the section
// (relative to capabilities: "kv", "tool.tools[0].limits"), the keys
// allowed there and the nearest one.
//
//	capabilities:
//	  run: {}
//	  kv: {namespace: crawler}
//	  http: {hosts: ["127.0.0.1:8080"]}
//	limits: {memory: 256MiB, calls: 100000}   # optional: see Limits
func ParseGrant(b []byte) (*Grant, error) {
	var doc struct {
		Capabilities *Grant       `yaml:"capabilities"`
		Limits       *grantLimits `yaml:"limits"`
	}
	if err := yamlkeys.Check(b, reflect.TypeOf(doc)); err != nil {
		var uk *yamlkeys.UnknownKeyError
		if errors.As(err, &uk) && uk.Path != "capabilities" {
			uk.Path = strings.TrimPrefix(uk.Path, "capabilities.")
		}
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if doc.Capabilities == nil {
		return nil, fmt.Errorf("no 'capabilities' map (write e.g. capabilities: {run: {}})")
	}
	g := doc.Capabilities
	if err := g.Check(); err != nil {
		return nil, err
	}
	if doc.Limits != nil {
		l, err := doc.Limits.limits()
		if err != nil {
			return nil, err
		}
		g.Limits = l
	}
	return g, nil
}

// Check validates the resources named in g, and puts its HTTP hosts in
// canonical form in place (LOCALHOST. becomes localhost), so that the
// grant, the token, the policy and the modes compare one spelling.
func (g *Grant) Check() error {
	if g.KV != nil && (g.KV.Namespace == "" || strings.ContainsRune(g.KV.Namespace, 0) || !utf8.ValidString(g.KV.Namespace)) {
		return fmt.Errorf("kv: a non-empty UTF-8 namespace without NUL is required (kv: {namespace: NAME})")
	}
	if g.HTTP != nil {
		if len(g.HTTP.Hosts) == 0 {
			return fmt.Errorf("http: list the allowed hosts (http: {hosts: [\"example.com\"]})")
		}
		for i, h := range g.HTTP.Hosts {
			canon, err := capability.CanonicalHostEntry(h)
			if err != nil {
				return fmt.Errorf("http: %w (want host or host:port)", err)
			}
			g.HTTP.Hosts[i] = canon
		}
	}
	if g.Tool != nil {
		if err := g.Tool.check(); err != nil {
			return err
		}
	}
	return nil
}

// Capabilities lists the capabilities g includes, in ABI order.
func (g *Grant) Capabilities() []abi.Capability {
	var out []abi.Capability
	for _, c := range abi.Capabilities {
		if g.Has(c) {
			out = append(out, c)
		}
	}
	return out
}

// Has reports whether g includes capability c.
func (g *Grant) Has(c abi.Capability) bool {
	switch c {
	case abi.CapRun:
		return g.Run != nil
	case abi.CapKV:
		return g.KV != nil
	case abi.CapHTTP:
		return g.HTTP != nil
	case abi.CapClock:
		return g.Clock != nil
	case abi.CapRandom:
		return g.Random != nil
	case abi.CapTool:
		return g.Tool != nil
	}
	return false
}

// Canonical returns the canonical CBOR of g, as recorded in a run header.
func (g *Grant) Canonical() ([]byte, error) { return abi.Marshal(g) }

// DecodeGrant decodes the canonical CBOR of a grant from a run header.
func DecodeGrant(b []byte) (*Grant, error) {
	var g Grant
	if err := abi.Unmarshal(b, &g); err != nil {
		return nil, fmt.Errorf("grant: %w", err)
	}
	return &g, g.Check()
}

// allows reports whether an HTTP request to the canonical host and port is
// allowed: an entry names the host, at any port or at this one.
func (g *HTTPGrant) allows(host, port string) bool {
	return slices.ContainsFunc(g.Hosts, func(entry string) bool {
		eh, ep := splitEntry(entry)
		return eh == host && (ep == "" || ep == port)
	})
}

// namesAddr reports whether g names the address a at port itself, which
// lets the run reach it past the platform's private-range rules: an entry
// that is a, or localhost when a is a loopback address, at any port or at
// this one. A name that resolves to a never names it.
func (g *HTTPGrant) namesAddr(a netip.Addr, port uint16) bool {
	if g == nil {
		return false
	}
	p := strconv.Itoa(int(port))
	return slices.ContainsFunc(g.Hosts, func(entry string) bool {
		eh, ep := splitEntry(entry)
		if ep != "" && ep != p {
			return false
		}
		if eh == "localhost" {
			return a.IsLoopback()
		}
		ip, err := netip.ParseAddr(eh)
		return err == nil && ip == a
	})
}

// splitEntry splits a canonical hosts entry into host and port ("" for
// any): "[v6]:port" and "name:port" have one, a bare IPv6 address none.
func splitEntry(entry string) (host, port string) {
	if h, p, err := net.SplitHostPort(entry); err == nil {
		return h, p
	}
	return entry, ""
}
