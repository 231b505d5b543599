package journal

import (
	"context"
	"errors"
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
}

// Errors returned by every Store implementation.
var (
	// ErrNotFound is returned when a run or module is not in the store.
	ErrNotFound = errors.New("journal: not found")
	// ErrConflict is returned by Append when the journal does not have
	// exactly the expected number of entries: another writer appended
	// first, or the caller's view is stale. It is the fencing check.
	ErrConflict = errors.New("journal: append conflict (the journal moved on; another writer holds this run)")
	// ErrNotDurable is returned by Append when the records were written
	// and are visible, but could not be made durable (the sync failed).
	// They may not survive a crash; the caller must not act on them as if
	// they had.
	ErrNotDurable = errors.New("journal: written but not durable (sync failed)")
)

// Store keeps journals, their run index and the modules they ran.
//
// Implementations must make Append atomic and durable: when it returns nil,
// every record (and meta, if given) survives a crash; when it fails with any
// error but ErrNotDurable, none of them is visible.
type Store interface {
	// PutModule stores a module under its SHA-256 and returns the digest.
	PutModule(ctx context.Context, code []byte) ([]byte, error)
	// Module returns the module with the given SHA-256.
	Module(ctx context.Context, sha256 []byte) ([]byte, error)
	// Append adds recs as entries next, next+1, ... of run's journal, and
	// writes meta when it is not nil, all in one atomic, durable write. It
	// returns ErrConflict unless the journal holds exactly next entries.
	Append(ctx context.Context, run RunID, next uint64, recs []Record, meta *RunMeta) error
	// Records calls fn with the raw bytes of every stored record of run from
	// seq from on, in seq order, until fn returns an error. The bytes are
	// valid only during the call.
	Records(ctx context.Context, run RunID, from uint64, fn func(seq uint64, raw []byte) error) error
	// Meta returns the index record of run.
	Meta(ctx context.Context, run RunID) (RunMeta, error)
	// Runs returns the index records of every run, newest first.
	Runs(ctx context.Context) ([]RunMeta, error)
	// Close releases the store.
	Close() error
}
