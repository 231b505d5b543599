// Package journal defines the agentrt run journal: its entries in canonical
// CBOR, the hash chain that links them, the ed25519 signatures over chain
// heads, the Store interface that keeps them and the verifier that checks
// them. SPEC.md beside this file is the normative text.
//
// The package does no I/O of its own beyond a Store, and must never
// dispatch an effect: it records, it does not act.
package journal

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// FormatVersion is the version of the entry format this package writes and
// reads. An entry with another version is rejected.
const FormatVersion = 1

// HashSize is the size of every hash in the journal (SHA-256).
const HashSize = sha256.Size

// Hash is a SHA-256 digest.
type Hash = [HashSize]byte

// Sum returns the SHA-256 of b.
func Sum(b []byte) []byte {
	h := sha256.Sum256(b)
	return h[:]
}

// Phase is the kind of a journal entry.
type Phase uint8

// Phases. The numbers are part of the format.
const (
	// PhaseStart is the first entry of every journal; it carries the Header.
	PhaseStart Phase = 1
	// PhaseIntent records that a call passed the gate and is about to run.
	PhaseIntent Phase = 2
	// PhaseExecuting records that an effect is being dispatched, with its
	// idempotency key.
	PhaseExecuting Phase = 3
	// PhaseCompleted records a call's successful response.
	PhaseCompleted Phase = 4
	// PhaseFailed records a call's error response.
	PhaseFailed Phase = 5
	// PhaseEnd is the last entry of a finished run; it carries the End.
	PhaseEnd Phase = 6
	// PhaseLease records that the entry's cell took the run's lease with
	// the entry's epoch: the entries after it are written under that lease.
	PhaseLease Phase = 7
)

var phaseNames = [...]string{"", "start", "intent", "executing", "completed", "failed", "end", "lease"}

func (p Phase) String() string {
	if int(p) < len(phaseNames) && p != 0 {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase(%d)", uint8(p))
}

// Valid reports whether p is a phase of this format version.
func (p Phase) Valid() bool { return p >= PhaseStart && p <= PhaseLease }

// Entry is one record of a run's journal. Field numbers are the CBOR map keys.
type Entry struct {
	Version uint8  `cbor:"1,keyasint"`
	Run     RunID  `cbor:"2,keyasint"`
	Seq     uint64 `cbor:"3,keyasint"`
	// Prev is the hash of the previous entry; 32 zero bytes for seq 0.
	Prev  []byte `cbor:"4,keyasint"`
	Phase Phase  `cbor:"5,keyasint"`
	// Step is the ordinal of the import call, from 1; 0 for lifecycle
	// entries.
	Step       uint64 `cbor:"6,keyasint,omitempty"`
	Op         string `cbor:"7,keyasint,omitempty"`
	InputHash  []byte `cbor:"8,keyasint,omitempty"`
	Request    []byte `cbor:"9,keyasint,omitempty"`
	OutputHash []byte `cbor:"10,keyasint,omitempty"`
	Response   []byte `cbor:"11,keyasint,omitempty"`
	// Status is the ABI status of a completed or failed call.
	Status uint32 `cbor:"12,keyasint,omitempty"`
	// Cell is the ed25519 public key of the cell that wrote the entry.
	Cell []byte `cbor:"13,keyasint"`
	// Time is the host's wall time when the entry was written, in Unix
	// nanoseconds. It is a record, never an input to the guest.
	Time int64 `cbor:"14,keyasint"`
	// Epoch is the lease epoch under which the entry was written.
	Epoch uint64 `cbor:"15,keyasint,omitempty"`
	// Key is the idempotency key of an executing effect.
	Key    string  `cbor:"16,keyasint,omitempty"`
	Header *Header `cbor:"17,keyasint,omitempty"`
	End    *End    `cbor:"18,keyasint,omitempty"`
	// Gate is the gate's decision on the call, canonical CBOR (the host's
	// gate record): on the intent of an effect, or on the one entry of a
	// pure or refused call, when the cell runs a policy or permission
	// modes.
	Gate []byte `cbor:"19,keyasint,omitempty"`
	// Budget is the budget layer's records of the call, canonical CBOR
	// (budget-record, SPEC.md section 6.1): a reserve on the intent, its
	// settle or release on the outcome, the resolutions of a crash's
	// orphans on the first entry a resumed run writes. The entry hash
	// covers it, so a changed charge breaks the chain.
	Budget []byte `cbor:"20,keyasint,omitempty"`
	// Approval is an approval's record, canonical CBOR (approval.Record,
	// approval/SPEC.md): the request on the intent of a call that parked
	// for it, its votes and decision on the entry that ends the wait (the
	// executing entry of an approved effect, the outcome of any other).
	// The entry hash covers it; audit verify checks its meaning.
	Approval []byte `cbor:"21,keyasint,omitempty"`
}

// Header describes a run. It is carried by the start entry (seq 0).
type Header struct {
	ModuleSHA256 []byte `cbor:"1,keyasint"`
	ABI          uint32 `cbor:"2,keyasint"`
	Input        []byte `cbor:"3,keyasint"`
	// Seed seeds the run's random stream (32 bytes).
	Seed []byte `cbor:"4,keyasint"`
	// WallBase is the virtual wall clock's origin, in Unix nanoseconds.
	WallBase int64 `cbor:"5,keyasint"`
	// Grant is the canonical CBOR of the capabilities granted to the run.
	Grant []byte `cbor:"6,keyasint"`
	// Parent is the run that started this one, if any.
	Parent     []byte `cbor:"7,keyasint,omitempty"`
	ModuleName string `cbor:"8,keyasint,omitempty"`
	// Token is the capability token the run was started with (a chain of
	// COSE_Sign1 links, capability/SPEC.md); Grant is what it grants.
	Token []byte `cbor:"9,keyasint,omitempty"`
	// Fork, on a run started by agentrt fork, names the run it was forked
	// from and where.
	Fork *Fork `cbor:"10,keyasint,omitempty"`
	// Origin, on a run a cell started on its own (a trigger's firing, a
	// task's attempt), says which.
	Origin *Origin `cbor:"11,keyasint,omitempty"`
	// Trace, when the cell traced the run (OpenTelemetry), names the
	// run's span: the trace and the spans point at the signed journal by
	// run id, seq and entry hash, and the journal at them by this.
	Trace *TraceRef `cbor:"12,keyasint,omitempty"`
}

// TraceRef names a run's span in a W3C trace (OpenTelemetry): the trace id
// and the id of the span of the run's start.
type TraceRef struct {
	// ID is the trace id (16 bytes, not all zero).
	ID []byte `cbor:"1,keyasint"`
	// Span is the span id of the run's span (8 bytes, not all zero).
	Span []byte `cbor:"2,keyasint"`
}

// Valid reports whether t names a trace and a span: ids of the right
// sizes, neither all zero (W3C Trace Context's invalid ids).
func (t *TraceRef) Valid() bool {
	return len(t.ID) == 16 && len(t.Span) == 8 && !allZero(t.ID) && !allZero(t.Span)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// Origin names what started a run when no one submitted it by hand.
type Origin struct {
	// Kind is "trigger" or "task".
	Kind string `cbor:"1,keyasint"`
	// ID names the trigger or the task.
	ID string `cbor:"2,keyasint"`
	// Seq is the trigger's firing (its scheduled moment, Unix seconds,
	// or its event's ordinal) or the task's attempt (from 1).
	Seq uint64 `cbor:"3,keyasint,omitempty"`
}

// Fork is where a forked run branches off its parent. The fork's calls up
// to the fork point were answered from the parent's journal and are
// journaled again in the fork's own, so the fork verifies, replays and
// audits alone; Fork says where they came from, and the hash of the
// parent's entry at the fork point binds the fork to that journal.
type Fork struct {
	// Parent is the run forked. Unlike Header.Parent (the run that
	// started this one), a fork's parent is a run it copies, not one
	// that called it.
	Parent RunID `cbor:"1,keyasint"`
	// Seq is the fork point: the seq of the parent's last entry the fork
	// follows, a call boundary (the end of a call, or a lifecycle entry).
	Seq uint64 `cbor:"2,keyasint"`
	// Entry is the hash of the parent's entry at Seq (32 bytes).
	Entry []byte `cbor:"3,keyasint"`
	// Step is the step of the parent's last call at or before Seq, 0 when
	// there is none: the fork's calls 1..Step were served from the
	// parent's journal, those after it ran live.
	Step uint64 `cbor:"4,keyasint"`
	// Provider and Model, when set, replaced the provider and the model
	// of every llm.complete the fork made live (agentrt fork --provider,
	// --model): its journal holds the requests as the guest made them,
	// and this is what was sent instead.
	Provider string `cbor:"5,keyasint,omitempty"`
	Model    string `cbor:"6,keyasint,omitempty"`
}

// End is carried by the end entry of a finished run.
type End struct {
	// Status is "completed" or "failed".
	Status RunStatus `cbor:"1,keyasint"`
	Output []byte    `cbor:"2,keyasint,omitempty"`
	Error  string    `cbor:"3,keyasint,omitempty"`
	// Steps is the number of import calls the run made.
	Steps uint64 `cbor:"4,keyasint"`
}

// RunStatus is the state of a run as a whole.
type RunStatus string

// Run states.
const (
	StatusRunning   RunStatus = "running"
	StatusCompleted RunStatus = "completed"
	StatusFailed    RunStatus = "failed"
	// StatusCancelled marks, in a run's index record only, a run stopped
	// on request before its end: it is not finished (agentrt resume goes
	// on with it), but a cell does not resume it on its own. No journal
	// entry carries it.
	StatusCancelled RunStatus = "cancelled"
	// StatusHeld marks, in a run's index record only, a run a cell
	// daemon stopped recovering because every recovery ended with the
	// daemon dying, the run making no progress (host/cell's crash-loop
	// breaker; RunMeta.Error says why). Like a cancelled run it is not
	// finished and not resumed on its own; agentrt resume goes on with it.
	StatusHeld RunStatus = "held"
	// StatusParked marks, in a run's index record only, a run that waits
	// (for an approval, a timer): its instance is closed and its state is
	// its journal, whose last call has an intent and no outcome.
	// RunMeta.Wait says what it waits for; the cell resumes it when that
	// happens, through the path of every resume.
	StatusParked RunStatus = "parked"
)

// Finished says whether a run in state s has its end entry: completed or
// failed. Running, cancelled and held runs can go on.
func (s RunStatus) Finished() bool { return s == StatusCompleted || s == StatusFailed }

// RunID identifies a run: 8 bytes of big-endian Unix nanoseconds followed by
// 8 random bytes, so that ids sort by start time.
type RunID [16]byte

// NewRunID returns a fresh run id for a run starting at t.
func NewRunID(t time.Time) RunID {
	var id RunID
	binary.BigEndian.PutUint64(id[:8], uint64(t.UnixNano()))
	if _, err := rand.Read(id[8:]); err != nil {
		panic(err)
	}
	return id
}

// String returns the id as 32 lower-case hex digits.
func (id RunID) String() string { return hex.EncodeToString(id[:]) }

// IsZero reports whether id is the zero id.
func (id RunID) IsZero() bool { return id == RunID{} }

// ErrBadRunID is returned by ParseRunID for a malformed id.
var ErrBadRunID = errors.New("journal: malformed run id (want 32 hex digits)")

// ParseRunID parses the String form of a run id.
func ParseRunID(s string) (RunID, error) {
	var id RunID
	s = strings.TrimSpace(s)
	if len(s) != 2*len(id) {
		return id, ErrBadRunID
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, ErrBadRunID
	}
	return id, nil
}

// MarshalBinary lets RunID encode as a CBOR byte string.
func (id RunID) MarshalBinary() ([]byte, error) { return id[:], nil }

// UnmarshalBinary decodes a 16-byte CBOR byte string.
func (id *RunID) UnmarshalBinary(b []byte) error {
	if len(b) != len(id) {
		return fmt.Errorf("journal: run id is %d bytes, want %d", len(b), len(id))
	}
	copy(id[:], b)
	return nil
}
