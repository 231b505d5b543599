// Package caps is the seam between the host and its capabilities: the one
// interface a capability implements and the types both sides see. The
// host (package host) keeps the session, the gate, the engines and the
// journal path; each capability is a package of its own under
// host/caps/<name>/ (run, kv, http, clock, random, tool) that imports this
// package and nothing of the host or of another capability.
//
// A capability is a value of type Capability, registered by one line in
// the host (host/registry.go). What it provides, in the order a call meets
// it:
//
//  1. its ops: abi.Ops names them (code, effect or pure, idempotent);
//     OpsOf lists a capability's.
//  2. its grant section S: decoded from a grant file by the host with the
//     section type's yaml tags (so a typo is a yamlkeys error naming the
//     key), checked by Section.Check, encoded by its cbor tags into the
//     run header's canonical grant, and mapped to and from the capability
//     token's claims (Section.Token, Capability.FromToken,
//     Section.CheckToken).
//  3. per run, an Instance (Capability.Open), given the section and what
//     it needs from the cell (its own deps type D) and the run (Run).
//  4. its resource check: Handler.Check, the capability stage of the gate,
//     before anything is journaled as intent.
//  5. its policy facts (Instance.Facts): the resource entity and context
//     attributes the Cedar layer decides on.
//  6. its handler per op: Handler.Serve, or Handler.Stage for a write of
//     the agent's own state that commits with its entries.
//  7. whether an effect a crash left in doubt may be dispatched again
//     (Instance.Idempotent), and what is closed at the run's end
//     (Instance.Close).
//
// A capability must never reach the journal, the session or the engine:
// what it journals is its response, which the host writes; what it knows of
// the run is what Run and its deps give it.
package caps

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/journal"
)

// Call is one import call on its way through the host: what the gate checks,
// what the journal records and what a Source replays. A Call and its
// Request are valid only while the call is being served.
type Call struct {
	// Step is the call's ordinal in the run, from 1.
	Step uint64
	// Op is the op called; for an unknown op code, a placeholder named
	// "<capability>.#<code>".
	Op *abi.Op
	// Request is the CBOR request as the guest sent it, read in place from
	// guest memory; nil when it was refused as too large.
	Request []byte
	// Key is the idempotency key of an effect, derived from (run, step).
	Key string
	// TooLarge marks a request refused for its size; Request is nil and
	// the input hash covers the whole request.
	TooLarge bool
	// Child, on a call that starts a run whose budget is carved out of the
	// caller's (a Carver's), is the budget the gate's budget layer carved
	// for it: the ceilings the child's token must carry (the request's,
	// with a wall clock it left out cut to what the caller has left). nil
	// when nothing was carved (the caller has no ceilings).
	Child *capability.Budget

	inputHash []byte
}

// InputHash returns the SHA-256 of the request, computed on first use: a
// call that nothing journals or compares by hash never pays for it.
func (c *Call) InputHash() []byte {
	if c.inputHash == nil {
		c.inputHash = journal.Sum(c.Request)
	}
	return c.inputHash
}

// SetInputHash sets the input hash of a call whose request the host did
// not keep (one refused as too large): the hash covers the whole request.
func (c *Call) SetInputHash(h []byte) { c.inputHash = h }

// Denial is the outcome a gate stage gives a call it refuses: the status
// and the CBOR abi.Error body the guest gets and the journal records.
type Denial struct {
	Status abi.Status
	Body   []byte
}

// Deny returns the Denial of status code with a formatted message.
func Deny(code abi.Status, format string, args ...any) *Denial {
	st, b := Error(code, format, args...)
	return &Denial{st, b}
}

// Handler serves one op. Check, when set, is the op's stage of the gate's
// capability layer: it inspects the request before anything is journaled as
// intent, and a denial it returns is the call's outcome. An op has Serve,
// or, for an effect on the agent's own durable state, Stage: it computes
// the response and the state change, which the journal commits together
// with the call's entries (exactly once, never in doubt).
//
// Handlers are bound to their run's Instance when the run opens, so a
// call finds its handler in one array lookup and calls it directly.
type Handler struct {
	// Flush asks the host to commit the journal's group after the call
	// (without waiting for the disk), so that a reader of the run's
	// journal sees its entry at once: a stream's batches.
	Flush bool
	// Conversation names the key under which the op's request holds a
	// conversation's message list ("messages"): the journal stores the
	// request as a chain of message blobs (journal.EncodeConversation),
	// so that a conversation's journal grows with its new messages, and
	// the op's large responses by hash too (journal.Externalize).
	Conversation string
	Check        func(c *Call) *Denial
	Serve        func(ctx context.Context, c *Call) (abi.Status, []byte)
	Stage        func(c *Call) (abi.Status, []byte, journal.KVWrite)
	// Wait, set instead of Serve, makes the op a wait (abi/SPEC.md §15):
	// it returns what call c, a request its Check allowed whose intent was
	// journaled at since, waits for. The host parks the run until that
	// happens and answers the call itself; nothing is dispatched.
	Wait func(c *Call, since time.Time) Wait
}

// Wait is what a waiting call waits for: a time, an approval, or another
// run's end.
type Wait struct {
	// Until is a timer's wake time.
	Until time.Time
	// Run is the run awaited (agent.await), and Answer says whether it
	// has ended, and then the call's outcome; the host asks it when the
	// call is made and each time the waiting run is woken.
	Run    journal.RunID
	Answer func(ctx context.Context) (done bool, status abi.Status, resp []byte)
	// Group is the approvers' group an approval asks, and Action the text
	// they are shown.
	Group  string
	Action string
}

// Section is a capability's section of a grant (a *S of the capability's
// grant type), as the grant file, the run header and the token see it.
type Section interface {
	// Check validates the section and puts it in canonical form in place,
	// saying what to change.
	Check() error
	// Token adds what the section grants to a token's capabilities.
	Token(c *capability.Caps) error
	// CheckToken checks what a token binds beyond Within's comparison of
	// capabilities (the tool capability's declaration digests); nil when
	// the token names nothing of the section or agrees.
	CheckToken(c capability.Caps) error
}

// Capability is one capability family. S is its grant section type, D what
// it needs from the cell (a store, a resolver, a sandbox) or the host (the
// run capability's view of the session).
type Capability[S Section, D any] interface {
	// Cap is the capability's name in the ABI.
	Cap() abi.Capability
	// FromToken returns the section a token's claims grant when no grant
	// file defines it, or nil when the claims do not name the capability.
	FromToken(c capability.Caps) (S, error)
	// Open makes the capability's state for one run. sec is the run's
	// (checked) section, never nil.
	Open(sec S, deps D, run *Run) (Instance, error)
}

// Run is what every capability may know of the run it serves.
type Run struct {
	// ID is the run's id.
	ID journal.RunID
	// Now is the host's real clock.
	Now func() time.Time
	// Halt is closed when the host asks the run to stop (cancel, drain,
	// the wall-time budget): work a handler does after its effect (a
	// tool's hashing) stops there.
	Halt <-chan struct{}
	// Deadline returns when the run's wall-time budget runs out, or the
	// zero time for none: no effect launched now may outlast it.
	Deadline func() time.Time
	// Stderr writes to the run's event log, as stderr: what a process the
	// capability keeps for the run writes there (an MCP server's stderr).
	// Nothing of it is journaled. Nil: discarded.
	Stderr io.Writer
}

// Instance is a capability's state for one run.
type Instance interface {
	// Handler returns the handler of op (an op of the capability): called
	// once per op when the run opens.
	Handler(op abi.Op) Handler
	// Facts returns what the policy layer sees of c, a call its Check (if
	// any) allowed.
	Facts(c *Call) (Facts, error)
	// Idempotent reports whether c, an effect whose op is not idempotent
	// in the ABI, may still be dispatched again with the same idempotency
	// key after a crash left it in doubt (a grant that says its servers
	// honour Idempotency-Key, a tool declared idempotent).
	Idempotent(c *Call) bool
	// Close releases what the run held (its connections); the run is over.
	Close()
}

// Facts are what the policy layer sees of one call besides the run's
// constants (policy/schema.cedarschema): the resource and the op's context
// attributes.
type Facts struct {
	// ResourceType and ResourceID name the resource entity ("Host",
	// "Namespace", "Tool"); empty: the run itself.
	ResourceType, ResourceID string
	// IP is set when the resource is a Host named by an IP address, and
	// Explicit when the run's grant names that address itself.
	IP       string
	Explicit bool
	// Attrs are the op's context attributes, in schema order.
	Attrs []Fact
	// Method is the HTTP method, for the permission modes.
	Method string
}

// Fact is one context attribute: a string, a number or a set of strings.
type Fact struct {
	Name string
	Kind FactKind
	Str  string
	Num  int64
	Set  []string
}

// FactKind is the type of a Fact.
type FactKind byte

// Kinds of Fact.
const (
	FactString FactKind = 's'
	FactNumber FactKind = 'n'
	FactSet    FactKind = 'S'
)

// Meter is implemented by an Instance whose calls count against a budget:
// the hook of the gate's budget layer (between policy and approval), which
// reserves a call's worst case before its intent is journaled and settles
// its actual cost after dispatch. The llm capability's is a model call
// with its input tokens estimated and its max output tokens at the model's
// prices, then the provider's usage at those prices; the tool and http
// capabilities' are one tool call and one HTTP request.
type Meter interface {
	// Estimate returns the most c can cost, in the budget's dimensions
	// (steps and wall-clock time are the host's counters, never a
	// capability's), before anything of it is journaled; zero amounts:
	// nothing to reserve. An error refuses the call (a request that
	// cannot be priced).
	Estimate(c *Call) (budget.Amounts, error)
	// Usage returns what c cost, from its status and response; a call that
	// was sent is charged even when it failed. Hold says that c's
	// reservation stays open after it (a streamed model call, whose usage
	// comes with its stream's last batch): a later call settles it
	// (Settler), and the host settles it at its worst case if none does by
	// the run's end.
	Usage(c *Call, status abi.Status, resp []byte) (used budget.Amounts, hold bool)
}

// Settler is implemented by an Instance (a Meter) one of whose calls can
// settle the reservation an earlier call of the run held open: the
// llm.next that delivers a stream's last batch settles the reservation of
// the llm.complete that opened it. The host asks it after every call of
// the capability that was served.
type Settler interface {
	// Settles returns the step whose held reservation c settles, and what
	// that step cost; ok false: c settles none. Worst says the cost is
	// unknown (the stream broke before its usage came) and the
	// reservation is charged at its worst case; used is then ignored.
	Settles(c *Call, status abi.Status, resp []byte) (s Settlement, ok bool)
}

// Carver is implemented by an Instance one of whose calls starts a run
// whose budget is carved out of the caller's (agent.spawn): the gate's
// budget layer reserves the child's ceilings in the caller's ledger before
// the call's intent, the reservation stays open while the child runs, and
// the host settles it at what the child spent once it learns that the
// child ended (the budget bridge, host/budget.go).
type Carver interface {
	// CarveBudget returns the budget c asks for its child, in the flag
	// syntax (a ceiling it leaves out is the caller's); ok false: c starts
	// no child.
	CarveBudget(c *Call) (budget string, ok bool)
}

// Settlement is what a Settler reports: the held reservation of Step is
// settled at Used, or at its worst case when Worst.
type Settlement struct {
	Step  uint64
	Used  budget.Amounts
	Worst bool
}

// OpsOf returns the ops of capability c, in code order.
func OpsOf(c abi.Capability) []abi.Op {
	var out []abi.Op
	for _, op := range abi.Ops {
		if op.Cap == c {
			out = append(out, op)
		}
	}
	return out
}

// Error builds the status and CBOR abi.Error body of a failed call.
func Error(code abi.Status, format string, args ...any) (abi.Status, []byte) {
	b, err := abi.Marshal(&abi.Error{Code: code, Message: fmt.Sprintf(format, args...)})
	if err != nil {
		panic(err) // an Error always encodes
	}
	return code, b
}

// OK encodes v as the body of a successful call (nil: no body).
func OK(v any) (abi.Status, []byte) {
	if v == nil {
		return abi.StatusOK, nil
	}
	b, err := abi.Marshal(v)
	if err != nil {
		return Error(abi.StatusInternal, "encode response: %v", err)
	}
	return abi.StatusOK, b
}

// Decode decodes c's request into v strictly, or returns the
// StatusBadRequest response naming the op.
func Decode(c *Call, v any) (abi.Status, []byte, bool) {
	if err := abi.Unmarshal(c.Request, v); err != nil {
		st, b := Error(abi.StatusBadRequest, "%s: %v", c.Op.Name, err)
		return st, b, false
	}
	return abi.StatusOK, nil, true
}

// DecodeCheck is Decode for a Check stage: the denial, or nil.
func DecodeCheck(c *Call, v any) *Denial {
	if st, b, ok := Decode(c, v); !ok {
		return &Denial{st, b}
	}
	return nil
}

// NoFacts is the Facts of a capability whose calls touch no resource and
// carry no attributes (run, clock).
func NoFacts(*Call) (Facts, error) { return Facts{}, nil }
