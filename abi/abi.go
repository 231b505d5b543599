// Package abi is the contract between an agent compiled to WebAssembly and
// the agentrt host: import module and function names, the calling
// convention, operation codes, status codes and the CBOR request and
// response types.
//
// Both the host and the guest SDK import this package; it must never import
// anything of the host. SPEC.md beside this file is the normative text, and
// testdata/vectors holds the byte-level test vectors every implementation
// (the Go SDK, the C header) is tested against.
package abi

import "fmt"

// Version is the ABI version a module is built against. The host records it
// in every run header.
const Version = 1

// ModulePrefix starts the name of every agentrt import module. A module's
// import section therefore states exactly which capabilities it may use.
const ModulePrefix = "agentrt:"

// The two functions every capability module exports.
//
//	call(op i32, req_ptr i32, req_len i32, resp_ptr i32, resp_cap i32) -> i64
//	take(resp_ptr i32, resp_cap i32) -> i64
//
// Both return a packed Result. When call's response does not fit in
// resp_cap, the host keeps it pending and returns StatusPending with the
// length needed; the guest then calls take with a buffer at least that
// large. The request is never issued twice.
const (
	FuncCall = "call"
	FuncTake = "take"
)

// Capability names a family of imports. Each has its own import module,
// ModulePrefix + string(Capability).
type Capability string

// The capabilities of ABI v1.
const (
	CapRun    Capability = "run"
	CapKV     Capability = "kv"
	CapHTTP   Capability = "http"
	CapClock  Capability = "clock"
	CapRandom Capability = "random"
	CapTool   Capability = "tool"
	CapLLM    Capability = "llm"
	// CapTimer is the durable sleep; CapApproval the explicit request for
	// a person's approval (SPEC.md §15).
	CapTimer    Capability = "timer"
	CapApproval Capability = "approval"
	// CapMCP reaches the Model Context Protocol servers the grant
	// declares (SPEC.md §16).
	CapMCP Capability = "mcp"
	// CapAgent starts, awaits and cancels sub-agents (SPEC.md §17).
	CapAgent Capability = "agent"
)

// Capabilities lists every capability of this ABI version, in a stable order.
var Capabilities = []Capability{CapRun, CapKV, CapHTTP, CapClock, CapRandom, CapTool, CapLLM, CapTimer, CapApproval, CapMCP, CapAgent}

// Module returns the import module name of c, e.g. "agentrt:kv".
func (c Capability) Module() string { return ModulePrefix + string(c) }

// Known reports whether c is a capability of this ABI version.
func (c Capability) Known() bool {
	for _, k := range Capabilities {
		if k == c {
			return true
		}
	}
	return false
}

// CapabilityOfModule returns the capability an import module name stands for,
// and false if the name does not start with ModulePrefix.
func CapabilityOfModule(module string) (Capability, bool) {
	if len(module) <= len(ModulePrefix) || module[:len(ModulePrefix)] != ModulePrefix {
		return "", false
	}
	return Capability(module[len(ModulePrefix):]), true
}

// Class says how the host journals a call.
type Class uint8

const (
	// Pure calls have no effect outside the run. They are journaled as one
	// completed (or failed) entry and may be group-committed.
	Pure Class = iota + 1
	// Effect calls change the world outside the run. Their intent and
	// executing entries, and every entry before them, are durable before
	// the effect is dispatched.
	Effect
)

func (c Class) String() string {
	switch c {
	case Pure:
		return "pure"
	case Effect:
		return "effect"
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// Op is one operation of a capability: the op code passed to call.
type Op struct {
	Cap  Capability
	Code uint32
	// Name is the journal name of the op, "<capability>.<verb>".
	Name string
	// Class says how the call is journaled.
	Class Class
	// Idempotent effects may be re-dispatched with the same idempotency
	// key when a crash leaves them in doubt.
	Idempotent bool
}

// Op codes, per capability module.
const (
	OpRunInput      uint32 = 1
	OpRunSetOutput  uint32 = 2
	OpRunLog        uint32 = 3
	OpRunIntrospect uint32 = 4
	OpRunCheckpoint uint32 = 5
	OpRunLimit      uint32 = 6

	OpKVGet    uint32 = 1
	OpKVPut    uint32 = 2
	OpKVDelete uint32 = 3
	OpKVList   uint32 = 4

	OpHTTPRequest uint32 = 1

	OpClockNow uint32 = 1

	OpRandomBytes uint32 = 1

	OpToolRun uint32 = 1
)

// Ops is the table of every operation of ABI v1.
var Ops = []Op{
	{CapRun, OpRunInput, "run.input", Pure, true},
	{CapRun, OpRunSetOutput, "run.set_output", Pure, true},
	{CapRun, OpRunLog, "run.log", Pure, true},
	{CapRun, OpRunIntrospect, "run.introspect", Pure, true},
	{CapRun, OpRunCheckpoint, "run.checkpoint", Pure, true},
	{CapRun, OpRunLimit, "run.limit", Pure, true},
	// The run.self family (self.go) reads the run and the gate, and
	// changes nothing: run.self_may is a dry run of the gate.
	{CapRun, OpRunSelf, "run.self", Pure, true},
	{CapRun, OpRunSelfCaps, "run.self_caps", Pure, true},
	{CapRun, OpRunSelfMay, "run.self_may", Pure, true},
	{CapRun, OpRunSelfBudget, "run.self_budget", Pure, true},
	{CapRun, OpRunSelfMode, "run.self_mode", Pure, true},
	{CapRun, OpRunSelfJournal, "run.self_journal", Pure, true},
	{CapKV, OpKVGet, "kv.get", Pure, true},
	{CapKV, OpKVPut, "kv.put", Effect, true},
	{CapKV, OpKVDelete, "kv.delete", Effect, true},
	{CapKV, OpKVList, "kv.list", Pure, true},
	{CapHTTP, OpHTTPRequest, "http.request", Effect, false},
	{CapClock, OpClockNow, "clock.now", Pure, true},
	{CapRandom, OpRandomBytes, "random.bytes", Pure, true},
	// Whether a tool may run again after a crash is the grant's to say
	// (each tool declares it), not the op's.
	{CapTool, OpToolRun, "tool.run", Effect, false},
	// A model call changes nothing outside its cost: one a crash left in
	// doubt is sent again (SPEC.md §13).
	{CapLLM, OpLLMComplete, "llm.complete", Effect, true},
	{CapLLM, OpLLMNext, "llm.next", Pure, true},
	// Waits park the run; nothing is dispatched, so a resume asks again.
	{CapTimer, OpTimerSleep, "timer.sleep", Effect, true},
	{CapApproval, OpApprovalRequest, "approval.request", Effect, true},
	// Listing and reading change nothing on the server; their results are
	// recorded. Whether a tool call may be sent again after a crash is the
	// grant's to say (each server lists its idempotent tools), never the
	// server's annotations.
	{CapMCP, OpMCPListTools, "mcp.list_tools", Pure, true},
	{CapMCP, OpMCPCallTool, "mcp.call_tool", Effect, false},
	{CapMCP, OpMCPReadResource, "mcp.read_resource", Pure, true},
	{CapMCP, OpMCPGetPrompt, "mcp.get_prompt", Pure, true},
	// A spawn is sent again after a crash: the cell finds the child the
	// (run, step) started, if any. An await is a wait; a cancel of a
	// cancelled or ended child changes nothing.
	{CapAgent, OpAgentSpawn, "agent.spawn", Effect, true},
	{CapAgent, OpAgentAwait, "agent.await", Effect, true},
	{CapAgent, OpAgentCancel, "agent.cancel", Effect, true},
	{CapAgent, OpAgentChildren, "agent.children", Pure, true},
}

// LookupOp returns the operation with the given code in capability c.
func LookupOp(c Capability, code uint32) (Op, bool) {
	for _, op := range Ops {
		if op.Cap == c && op.Code == code {
			return op, true
		}
	}
	return Op{}, false
}

// LookupOpName returns the operation with the given journal name.
func LookupOpName(name string) (Op, bool) {
	for _, op := range Ops {
		if op.Name == name {
			return op, true
		}
	}
	return Op{}, false
}
