package host

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/caps/agent"
	"github.com/agentrt/agentrt/host/caps/approval"
	"github.com/agentrt/agentrt/host/caps/clock"
	"github.com/agentrt/agentrt/host/caps/http"
	"github.com/agentrt/agentrt/host/caps/kv"
	"github.com/agentrt/agentrt/host/caps/llm"
	"github.com/agentrt/agentrt/host/caps/mcp"
	"github.com/agentrt/agentrt/host/caps/random"
	"github.com/agentrt/agentrt/host/caps/run"
	"github.com/agentrt/agentrt/host/caps/timer"
	"github.com/agentrt/agentrt/host/caps/tool"
	"github.com/agentrt/agentrt/internal/fileread"
	"github.com/agentrt/agentrt/internal/yamlkeys"
	"go.yaml.in/yaml/v3"
)

// Grant names the capabilities a run may use and the resources within each.
// It is loaded from a small YAML or JSON file today; a later version makes it
// a signed capability token, and Grant stays the decoded, checked form that
// the host consults.
type Grant struct {
	Run      *RunGrant      `yaml:"run,omitempty" cbor:"run,omitempty"`
	KV       *KVGrant       `yaml:"kv,omitempty" cbor:"kv,omitempty"`
	HTTP     *HTTPGrant     `yaml:"http,omitempty" cbor:"http,omitempty"`
	Clock    *ClockGrant    `yaml:"clock,omitempty" cbor:"clock,omitempty"`
	Random   *RandomGrant   `yaml:"random,omitempty" cbor:"random,omitempty"`
	Tool     *ToolGrant     `yaml:"tool,omitempty" cbor:"tool,omitempty"`
	LLM      *LLMGrant      `yaml:"llm,omitempty" cbor:"llm,omitempty"`
	Timer    *TimerGrant    `yaml:"timer,omitempty" cbor:"timer,omitempty"`
	Approval *ApprovalGrant `yaml:"approval,omitempty" cbor:"approval,omitempty"`
	MCP      *MCPGrant      `yaml:"mcp,omitempty" cbor:"mcp,omitempty"`
	Agent    *AgentGrant    `yaml:"agent,omitempty" cbor:"agent,omitempty"`
	// Budget holds the budget ceilings of the run's token, when it has
	// any. Not part of a grant file: it comes from the verified token.
	Budget *capability.Budget `yaml:"-" cbor:"budget,omitempty"`
	// Limits are the run's limits: in a grant file, those of its limits
	// section (a sibling of capabilities:), which may only lower the
	// cell's; in a run header, every limit the run had (Limits).
	Limits *Limits `yaml:"-" cbor:"limits,omitempty"`
}

// The sections of a grant are the capabilities' own types, named here so
// that callers keep writing host.KVGrant.
type (
	// RunGrant allows the run capability (input, output, log, introspect).
	RunGrant = run.Grant
	// KVGrant allows durable key/value state in one namespace.
	KVGrant = kv.Grant
	// HTTPGrant allows HTTP requests to the listed hosts.
	HTTPGrant = http.Grant
	// ClockGrant allows reading the host's real wall time.
	ClockGrant = clock.Grant
	// RandomGrant allows reading real random bytes.
	RandomGrant = random.Grant
	// ToolGrant allows running the native tools it registers.
	ToolGrant = tool.Grant
	// LLMGrant allows model calls to the providers and models it lists.
	LLMGrant = llm.Grant
	// TimerGrant allows durable sleeps.
	TimerGrant = timer.Grant
	// ApprovalGrant allows asking the approvers' groups it lists.
	ApprovalGrant = approval.Grant
	// MCPGrant allows the MCP servers it declares.
	MCPGrant = mcp.Grant
	// AgentGrant allows sub-agents, within its bounds.
	AgentGrant = agent.Grant
)

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

// Check validates each section of g (Section.Check), in ABI order, and
// puts its HTTP hosts in canonical form in place (LOCALHOST. becomes
// localhost), so that the grant, the token, the policy and the modes
// compare one spelling.
func (g *Grant) Check() error {
	for i := range registry {
		if sec := registry[i].section(g); sec != nil {
			if err := sec.Check(); err != nil {
				return err
			}
		}
	}
	return nil
}

// Capabilities lists the capabilities g includes, in ABI order.
func (g *Grant) Capabilities() []abi.Capability {
	var out []abi.Capability
	for i := range registry {
		if registry[i].section(g) != nil {
			out = append(out, registry[i].cap)
		}
	}
	return out
}

// Has reports whether g includes capability c.
func (g *Grant) Has(c abi.Capability) bool {
	for i := range registry {
		if registry[i].cap == c {
			return registry[i].section(g) != nil
		}
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
