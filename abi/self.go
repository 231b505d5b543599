package abi

// The self-introspection ops (SPEC.md §9.15), the run.self family of
// agentrt:run: who the run is, what it may do, whether the gate would let a
// call through, what it has spent, which mode it runs in, and a bounded
// view of its own journal. Every one is pure: its answer is journaled as
// the call's one entry, and a replay answers it from there.

// Op codes of the run.self family, in agentrt:run.
const (
	OpRunSelf        uint32 = 7
	OpRunSelfCaps    uint32 = 8
	OpRunSelfMay     uint32 = 9
	OpRunSelfBudget  uint32 = 10
	OpRunSelfMode    uint32 = 11
	OpRunSelfJournal uint32 = 12
)

// MaxJournalPage is the most entries one run.self_journal call returns; a
// request asking for more is refused with StatusBadRequest.
const MaxJournalPage = 100

// SelfResponse answers run.self: who the run is. Task and Attempt are set
// on a run that is an attempt of a task; Parent and ParentStep on a
// sub-agent (the run and the step that spawned it). Depth counts the
// run's ancestors (0: a top-level run). Cell is the executing cell's key
// id: the first 8 bytes of its ed25519 public key in hex, the Cell
// entity's name in the policy.
type SelfResponse struct {
	ABI          uint32 `cbor:"abi"`
	Cell         string `cbor:"cell"`
	Depth        uint32 `cbor:"depth"`
	Task         string `cbor:"task,omitempty"`
	RunID        string `cbor:"run_id"`
	Parent       string `cbor:"parent,omitempty"`
	Attempt      uint64 `cbor:"attempt,omitempty"`
	ParentStep   uint64 `cbor:"parent_step,omitempty"`
	ModuleSHA256 []byte `cbor:"module_sha256"`
}

// SelfCapsResponse answers run.self_caps: the capabilities the gate
// enforces for the run, in ABI order, and the claims themselves as JSON
// (the token's capabilities, attenuated by the grant: capability.Caps),
// with the token's budget ceilings in the flag syntax ("" for none).
type SelfCapsResponse struct {
	Caps         string   `cbor:"caps"`
	Budget       string   `cbor:"budget,omitempty"`
	Capabilities []string `cbor:"capabilities"`
}

// MayRequest is the request of run.self_may: would the gate let the call
// of Op with the request body Request (the op's own CBOR request) through
// if the run made it next?
type MayRequest struct {
	Op      string `cbor:"op"`
	Request []byte `cbor:"request"`
}

// Decisions of run.self_may.
const (
	MayAllow = "allow"
	MayDeny  = "deny"
	// MayAsk: the permission modes would park the call for a person's
	// approval.
	MayAsk = "ask"
)

// MayResponse answers run.self_may: the decision, the gate layer that
// made it ("capability", "policy", "budget" or "mode"; absent when every
// layer allows), the status a denied call would get, and the reason the
// gate gives (the message of the Error body the guest would get).
type MayResponse struct {
	Stage    string `cbor:"stage,omitempty"`
	Reason   string `cbor:"reason,omitempty"`
	Status   Status `cbor:"status,omitempty"`
	Decision string `cbor:"decision"`
}

// SelfBudget is one budget dimension in SelfBudgetResponse: its ceiling
// and what is left of it (absent, Limited false, for a dimension without
// one), what settled calls spent, what open reservations hold, and of
// that, what is carved out for the run's children.
type SelfBudget struct {
	Dim      string `cbor:"dim"`
	Left     uint64 `cbor:"left,omitempty"`
	Spent    uint64 `cbor:"spent"`
	Ceiling  uint64 `cbor:"ceiling,omitempty"`
	Limited  bool   `cbor:"limited,omitempty"`
	Children uint64 `cbor:"children,omitempty"`
	Reserved uint64 `cbor:"reserved"`
}

// SelfBudgetResponse answers run.self_budget: every budget dimension, in
// the order of BudgetLimit's list.
type SelfBudgetResponse struct {
	Dims []SelfBudget `cbor:"dims"`
}

// ModeRule is one permission-mode rule in SelfModeResponse.
type ModeRule struct {
	Op       string `cbor:"op"`
	Name     string `cbor:"name"`
	Effect   string `cbor:"effect"`
	Method   string `cbor:"method,omitempty"`
	Resource string `cbor:"resource,omitempty"`
}

// SelfModeResponse answers run.self_mode: the mode the policy sees the run
// in ("interactive" when someone can answer an approval, "unattended"
// otherwise), whether the cell applies permission modes, their default
// effect and their rules, in order.
type SelfModeResponse struct {
	Mode    string     `cbor:"mode"`
	Rules   []ModeRule `cbor:"rules,omitempty"`
	Modes   bool       `cbor:"modes,omitempty"`
	Default string     `cbor:"default,omitempty"`
}

// JournalRequest is the request of run.self_journal: the run's own
// entries from seq From on, at most Limit of them (0: MaxJournalPage;
// above it: refused), only those of op Op and of phase Phase when set.
// There is no run field: a run reads its own journal only.
type JournalRequest struct {
	Op    string `cbor:"op,omitempty"`
	From  uint64 `cbor:"from,omitempty"`
	Limit uint32 `cbor:"limit,omitempty"`
	Phase string `cbor:"phase,omitempty"`
}

// JournalEntry summarises one journal entry: its seq, phase, step, op
// and status, its input and output hashes, and its own hash (the chain's
// link to it).
type JournalEntry struct {
	Op     string `cbor:"op,omitempty"`
	Seq    uint64 `cbor:"seq"`
	Hash   []byte `cbor:"hash"`
	Step   uint64 `cbor:"step,omitempty"`
	Phase  string `cbor:"phase"`
	Input  []byte `cbor:"input,omitempty"`
	Output []byte `cbor:"output,omitempty"`
	Status uint32 `cbor:"status,omitempty"`
}

// JournalResponse answers run.self_journal: the entries found, in seq
// order, and Next, the seq to ask from for the next page (absent when the
// journal held no more when the call was made).
type JournalResponse struct {
	Next    uint64         `cbor:"next,omitempty"`
	Entries []JournalEntry `cbor:"entries"`
}
