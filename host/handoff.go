package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/journal"
)

// ErrNotLive is returned by Yield for a run this host is not executing.
var ErrNotLive = errors.New("host: the run is not executing on this host")

// ErrHandingOff is the cause of a run stopped by Yield: it stopped at a
// step boundary to be handed to another cell, and stays running in its
// journal.
var ErrHandingOff = errors.New("host: run stopped to be handed to another cell")

// Yielded is a run stopped for a handoff: its lease, still this cell's
// (not released, no longer renewed: it lapses at Lease.Expires unless
// handed on), and its journal as it stopped.
type Yielded struct {
	Lease journal.Lease
	// Entries is the journal's length and Head the hash of its last
	// entry.
	Entries uint64
	Head    []byte
	// Token is the capability token the run's header records.
	Token []byte
}

// yieldStop is the cause Yield stops a run for; conclude hands it the
// yielded run once its last commit is durable.
type yieldStop struct{ out chan *Yielded }

func (*yieldStop) Error() string { return ErrHandingOff.Error() }
func (*yieldStop) Unwrap() error { return ErrHandingOff }

// Yield stops run, which this host executes, at its next step boundary (a
// step under way completes and is journaled: nothing is left in doubt), to
// hand it to another cell. The run stays running in its journal. Unlike
// Drain, the run's lease is not released: Yield returns it, with the
// journal's tail, for the caller to hand over (journal.LeaseHandover) or,
// if the handoff fails, to resume the run (Reopen takes the lease again,
// its own). A run that ends before it reaches a step boundary is not
// yielded, and Yield says so.
//
// If ctx ends first, Yield returns its error; the run still stops, and its
// lease lapses at its expiry, when a resume or a takeover continues it.
func (h *Host) Yield(ctx context.Context, run journal.RunID) (*Yielded, error) {
	if _, ok := h.deps.Leases.(journal.LeaseHandover); !ok {
		return nil, fmt.Errorf("host: hand off %s: this host's runs are not leased in a store that can hand a lease to another cell (a cluster's)", run)
	}
	r := h.live.get(run)
	if r == nil {
		return nil, fmt.Errorf("%w: run %s", ErrNotLive, run)
	}
	y := &yieldStop{out: make(chan *Yielded, 1)}
	r.stop(y)
	if why := r.why(); why != error(y) {
		return nil, fmt.Errorf("host: hand off %s: the run is already stopping: %w", run, why)
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("host: hand off %s: waiting for the run to reach a step boundary: %w", run, ctx.Err())
	}
	select {
	case out := <-y.out:
		return out, nil
	default:
		return nil, fmt.Errorf("host: hand off %s: the run ended, or its last commit failed, before it stopped at a step boundary: nothing to hand over", run)
	}
}

// Tail is what Receive, TakeOver and ReopenChecked show their check of
// the run's verified journal, before the run's lease is taken.
type Tail struct {
	Entries uint64
	// Head is the hash of the journal's last entry.
	Head []byte
	// Token is the capability token the run's header records: the run's
	// authority, which the run keeps.
	Token []byte

	h        *Host
	run      journal.RunID
	header   *journal.Header
	ceilings budget.Ceilings
}

// Admit asks this cell's policy whether the run may be admitted, as
// Started.Admit does for a run that starts here: a receiving cell asks it
// before it takes the lease, so that a refusal leaves the run with its
// source (a run taken over, or resumed by hand, as it was).
func (t Tail) Admit() error { return t.h.admit(t.run, t.header) }

// Origin returns what started the run, as its verified header records it
// (nil: a submission).
func (t Tail) Origin() *journal.Origin { return t.header.Origin }

// Ceilings returns the run's budget ceilings, as Started.Ceilings will
// once the run is received: its grant's, lowered by its journal.
func (t Tail) Ceilings() budget.Ceilings { return t.ceilings }

// Receive is Reopen for a run another cell handed to this one: the
// journal is verified (seals of this cell or a trusted peer, the tail
// against the store's head record), then check sees its tail and may
// refuse, before the lease is taken. The lease entry carries envelope,
// the handoff's signed envelope, as its request (journal/SPEC.md shape
// rule 7). The run goes on under the grant its header records, which its
// token gives.
func (h *Host) Receive(ctx context.Context, run journal.RunID, envelope []byte, check func(Tail) error) (*Started, error) {
	if len(envelope) == 0 || check == nil {
		return nil, fmt.Errorf("host: receive %s: no envelope to journal, or no check of it", run)
	}
	return h.reopen(ctx, run, &reopening{request: envelope, check: check})
}
