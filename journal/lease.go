package journal

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Lease says which cell holds a run: only the holder appends to the run's
// journal. The epoch grows by one at every acquisition; a journal records
// each in a lease entry, and the store's fencing check (Batch.Next) refuses
// appends from a holder whose view of the journal is stale.
type Lease struct {
	Run RunID `cbor:"1,keyasint"`
	// Owner is the public key of the holding cell.
	Owner []byte `cbor:"2,keyasint"`
	Epoch uint64 `cbor:"3,keyasint"`
	// Expires is when the lease lapses unless renewed, Unix ns.
	Expires int64 `cbor:"4,keyasint"`
}

// Leases keeps the leases of runs. Acquire and Renew are compare-and-swap:
// a lease changes hands only when it is free, expired, or already the
// owner's.
type Leases interface {
	// Acquire takes the lease of run for owner until now+ttl, with the next
	// epoch. It returns a *HeldError if another owner holds it unexpired.
	Acquire(ctx context.Context, run RunID, owner []byte, now time.Time, ttl time.Duration) (Lease, error)
	// Renew extends l until now+ttl if l is still the current lease; it
	// returns ErrLeaseLost otherwise.
	Renew(ctx context.Context, l Lease, now time.Time, ttl time.Duration) (Lease, error)
	// Release gives l up if it is still the current lease.
	Release(ctx context.Context, l Lease) error
}

// ErrLeaseLost is returned by Renew when the lease changed hands (or epoch)
// since it was taken: the holder is deposed and must stop writing.
var ErrLeaseLost = errors.New("journal: lease lost (another holder took the run)")

// HeldError is returned by Acquire when another owner holds the lease.
type HeldError struct{ Lease Lease }

func (e *HeldError) Error() string {
	return fmt.Sprintf("run %s is held by cell %x (epoch %d) until %s", e.Lease.Run, e.Lease.Owner, e.Lease.Epoch,
		time.Unix(0, e.Lease.Expires).UTC().Format(time.RFC3339))
}

// LeaseHandover is implemented by lease stores that can give a lease to a
// named cell (a handoff between cells): Hand replaces l, if it is still the
// current lease (same owner and epoch), by the lease of owner to with the
// same epoch until expires (Unix ns), and returns it; ErrLeaseLost
// otherwise. The new owner's Acquire then takes the next epoch at once (the
// lease is its own), and no other cell can take it before expires.
// Handing the lease back to its giver is the same call.
type LeaseHandover interface {
	Hand(ctx context.Context, l Lease, to []byte, expires int64) (Lease, error)
}
