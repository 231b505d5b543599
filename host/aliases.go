package host

import (
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/caps"
	"github.com/agentrt/agentrt/host/caps/http"
	"github.com/agentrt/agentrt/host/caps/kv"
	"github.com/agentrt/agentrt/host/caps/tool"
)

// Names of the capability packages that cmd/, replay/, bench/, examples/
// and the cell use through host: aliases, so that a capability's types
// have one definition, in its package, and callers need not know which
// package that is.

// Call is one import call on its way through the host (caps.Call).
type Call = caps.Call

// KVStore reads the agents' durable key/value state (kv.Store).
type KVStore = kv.Store

// The http capability's cell-facing types (package http).
type (
	// Listener is an address the cell listens on, and what listens there.
	Listener = http.Listener
	// Listeners tells the http capability where the cell itself listens.
	Listeners = http.Listeners
	// ListenerSet is a Listeners that listeners are added to and removed
	// from as they open and close.
	ListenerSet = http.ListenerSet
	// EgressError is a connection the http capability's dialer refused.
	EgressError = http.EgressError
)

// ErrEgress is wrapped by every *EgressError.
var ErrEgress = http.ErrEgress

// IdempotencyHeader carries an effect's idempotency key on its HTTP
// request.
const IdempotencyHeader = http.IdempotencyHeader

// The tool capability's grant types and cell deps (package tool).
type (
	// ToolSpec registers one tool.
	ToolSpec = tool.Spec
	// ToolArgs is a tool's argument schema.
	ToolArgs = tool.Args
	// ToolFlag is one allowed flag.
	ToolFlag = tool.Flag
	// ToolPositional is one positional slot.
	ToolPositional = tool.Positional
	// ToolLimits bound one run of a tool.
	ToolLimits = tool.Limits
	// ToolDeps are what the tool capability needs from its cell.
	ToolDeps = tool.Deps
	// ToolDeclarationError names the tool a grant file declares otherwise
	// than its token.
	ToolDeclarationError = tool.DeclarationError
)

// ErrToolDeclaration is wrapped by every *ToolDeclarationError.
var ErrToolDeclaration = tool.ErrDeclaration

// ToolDecl returns t's declaration as a token binds it (tool.Decl).
func ToolDecl(t *ToolSpec) capability.ToolDecl { return tool.Decl(t) }

// ToolDigest returns the digest a token binds t by (tool.Digest).
func ToolDigest(t *ToolSpec) (capability.Digest, error) { return tool.Digest(t) }
