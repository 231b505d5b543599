package journal

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
)

// RunMeta is the index record a Store keeps beside each journal, so runs can
// be listed without reading their journals. The journal is authoritative;
// RunMeta is a convenience that is updated in the same atomic write as the
// entries it describes.
type RunMeta struct {
	ID           RunID     `cbor:"1,keyasint"`
	Status       RunStatus `cbor:"2,keyasint"`
	ModuleSHA256 []byte    `cbor:"3,keyasint"`
	ModuleName   string    `cbor:"4,keyasint,omitempty"`
	// Started and Ended are Unix nanoseconds of host time.
	Started int64  `cbor:"5,keyasint"`
	Ended   int64  `cbor:"6,keyasint,omitempty"`
	Output  []byte `cbor:"7,keyasint,omitempty"`
	Error   string `cbor:"8,keyasint,omitempty"`
	Cell    []byte `cbor:"9,keyasint"`
	Steps   uint64 `cbor:"10,keyasint,omitempty"`
	// Checkpoint is the seq of the run's last run.checkpoint entry, 0
	// when it has none: where a resume starts verifying and re-executing.
	Checkpoint uint64 `cbor:"11,keyasint,omitempty"`
	// Engines are the WebAssembly engines that ran the run's segments
	// ("wazero", "wasmtime"), in the order each was first used; empty for
	// a run recorded before hosts recorded it.
	Engines []string `cbor:"12,keyasint,omitempty"`
	// MaxRequest is the request size limit of the host that recorded the
	// run, which decided which calls were too large; 0 for a run recorded
	// before hosts recorded it (they all used abi.MaxRequest).
	MaxRequest uint64 `cbor:"13,keyasint,omitempty"`
	// Origin is the header's origin (a trigger's firing, a task's attempt).
	Origin *Origin `cbor:"14,keyasint,omitempty"`
	// Wait is what a parked run waits for; nil for a run that does not.
	Wait *Wait `cbor:"15,keyasint,omitempty"`
	// Priority is the run's scheduling priority in its cell's queue
	// (1 lowest .. 9 highest; 0: not given, 5), kept so that a run
	// queued when its cell stopped is queued again as it was. An index
	// field only: the journal does not record it, and a replay ignores it.
	Priority uint8 `cbor:"16,keyasint,omitempty"`
}

// Wait is what a parked run waits for, as its index record says, so that a
// cell finds its parked runs without reading their journals.
type Wait struct {
	// Kind is WaitTimer, WaitApproval or WaitRun.
	Kind string `cbor:"1,keyasint"`
	// Step is the parked call's.
	Step uint64 `cbor:"2,keyasint"`
	Op   string `cbor:"3,keyasint,omitempty"`
	// Until is, for a timer, its wake time; for an approval, its expiry
	// (0: none). Unix ns.
	Until int64 `cbor:"4,keyasint,omitempty"`
	// Group and Digest name an approval: the approvers' group, and the
	// action digest the votes are bound to.
	Group  string `cbor:"5,keyasint,omitempty"`
	Digest []byte `cbor:"6,keyasint,omitempty"`
	// Since is when the run parked, Unix ns.
	Since int64 `cbor:"7,keyasint,omitempty"`
	// Run is, for a WaitRun, the run awaited (a child, agent.await).
	Run RunID `cbor:"8,keyasint,omitzero"`
}

// Kinds of wait.
const (
	WaitTimer    = "timer"
	WaitApproval = "approval"
	// WaitRun: the end of another run (a parent awaiting its child).
	WaitRun = "run"
)

// CellRecords are a cell's own durable records, kept apart from the runs'
// journals and the agents' state: approval votes, triggers and their
// firings, tasks. Each record is in a table, under a key; a table's keys
// list in byte order. Writes are durable when they return.
type CellRecords interface {
	CellGet(table, key string) ([]byte, bool, error)
	CellPut(table, key string, val []byte) error
	// CellCreate sets the record only if the key has none, and reports
	// whether it did: the one way to claim a key once (a trigger's
	// moment), whoever else tries.
	CellCreate(table, key string, val []byte) (bool, error)
	CellDelete(table, key string) error
	// CellList calls fn with every record of table whose key starts with
	// prefix, in key order, until fn returns an error.
	CellList(table, prefix string, fn func(key string, val []byte) error) error
}

// Errors returned by every Store implementation.
var (
	// ErrNotFound is returned when a run or module is not in the store.
	ErrNotFound = errors.New("journal: not found")
	// ErrConflict is returned by Commit when the journal does not have
	// exactly the expected number of entries: another writer appended
	// first, or the caller's view is stale. It is the fencing check.
	ErrConflict = errors.New("journal: append conflict (the journal moved on; another writer holds this run)")
	// ErrNotDurable is returned by Commit when the batch was written
	// and are visible, but could not be made durable (the sync failed).
	// They may not survive a crash; the caller must not act on them as if
	// they had.
	ErrNotDurable = errors.New("journal: written but not durable (sync failed)")
	// ErrIncomplete is returned by Records when the stored records of a
	// run do not reach the head its index records: entries are missing
	// from the store (it was damaged), and the journal must not be taken
	// for a shorter one. The *GapError says which.
	ErrIncomplete = errors.New("journal: entries are missing from the store")
)

// GapError reports entries of a run's journal that the store's index says
// it holds and that cannot be read back.
type GapError struct {
	Run RunID
	// From is the first missing seq and To the seq after the last one
	// missing (To == Length when the journal's tail is missing).
	From, To uint64
	// Length is the number of entries the run's head record says the
	// journal holds.
	Length uint64
	// Reason says what the store found instead.
	Reason string
}

func (e *GapError) Error() string {
	what := fmt.Sprintf("entries %d..%d", e.From, e.To-1)
	if e.To == e.From+1 {
		what = fmt.Sprintf("entry %d", e.From)
	}
	return fmt.Sprintf("journal: run %s: %s of the %d its head record names are missing from the store (%s)", e.Run, what, e.Length, e.Reason)
}

// Unwrap returns ErrIncomplete.
func (e *GapError) Unwrap() error { return ErrIncomplete }

// KVWrite is a change to an agent's durable key/value state that a Batch
// applies atomically with its records: the state change and the journal
// entries that record it become visible together or not at all.
type KVWrite struct {
	Namespace string
	Key       string
	Value     []byte
	Delete    bool
}

// Batch is one atomic write to a run's journal.
type Batch struct {
	Run RunID
	// Next is the seq of the first record. The store refuses the batch
	// with ErrConflict unless the journal holds exactly Next entries: the
	// fencing check, compare-and-swap on the journal's length.
	Next    uint64
	Records []Record
	// Meta, when not nil, replaces the run's index record.
	Meta *RunMeta
	// KV are state changes that commit with the records.
	KV []KVWrite
	// Events are opaque event-log records appended to the run's log.
	Events [][]byte
	// Blobs are the payload parts the records reference by hash (SPEC.md
	// section 15). They commit with the records, so that no entry is
	// visible without the blobs it names; a blob the store holds already
	// is not written again. A store that does not implement Blobs MUST
	// refuse a batch that carries any.
	Blobs []Blob
	// SealWith, when set, asks the store to seal the last record with this
	// key before writing it (SealBatches), and Head is that record's entry
	// hash. A store may seal many batches of one round with one signature.
	SealWith ed25519.PrivateKey
	Head     []byte
	// Durable asks for the batch, and every batch committed before it, to
	// be on disk when Commit returns. A batch that is not durable is
	// visible when Commit returns but may be lost in a crash, together
	// with every later batch (a store loses only a suffix).
	Durable bool
}

// Store keeps journals, their run index, the modules they ran, the agents'
// durable state and the runs' event logs.
//
// Implementations must make Commit atomic: when it fails with any error but
// ErrNotDurable, nothing of the batch is visible. They must seal the
// batches that ask for it (SealBatches) before writing them.
type Store interface {
	// PutModule stores code under sum, its SHA-256, which the caller has
	// computed already (Module checks it on every read).
	PutModule(ctx context.Context, sum, code []byte) error
	// Module returns the module with the given SHA-256.
	Module(ctx context.Context, sha256 []byte) ([]byte, error)
	// Commit writes b atomically (see Batch).
	Commit(ctx context.Context, b *Batch) error
	// Records calls fn with the raw bytes of every stored record of run from
	// seq from on, in seq order, until fn returns an error. The bytes are
	// valid only during the call. A store that records each journal's head
	// (its length and last entry hash) with its entries returns a
	// *GapError, after the records it could read, when what it reads does
	// not reach that head.
	Records(ctx context.Context, run RunID, from uint64, fn func(seq uint64, raw []byte) error) error
	// Meta returns the index record of run.
	Meta(ctx context.Context, run RunID) (RunMeta, error)
	// Runs returns the index records of every run, newest first.
	Runs(ctx context.Context) ([]RunMeta, error)
	// Close releases the store.
	Close() error
}

// Heads is implemented by stores that record each journal's head with its
// entries (badgerstore): Head returns the number of entries the journal of
// run holds by that record, which every read must reach.
type Heads interface {
	Head(ctx context.Context, run RunID) (uint64, error)
}

// ReadEntries calls fn with every stored record of run and its decoded
// entry, in seq order, until fn returns an error. It checks decoding only:
// use a Verifier to check the chain and the seals.
func ReadEntries(ctx context.Context, store Store, run RunID, fn func(*Entry, *Record) error) error {
	return store.Records(ctx, run, 0, func(_ uint64, raw []byte) error {
		rec, err := DecodeRecord(raw)
		if err != nil {
			return err
		}
		e, err := DecodeEntry(rec.Entry)
		if err != nil {
			return err
		}
		return fn(e, rec)
	})
}
