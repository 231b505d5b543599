package jetstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
	"github.com/nats-io/nats.go/jetstream"
)

// Leases live in a KV bucket, one key per run (its id in hex), holding
// the canonical CBOR of journal.Lease (journal/SPEC.md section 16.4):
//
//   - acquire: Create when the key has never been written, else Update at
//     the revision read, after checking the lease is free, expired or the
//     owner's; the epoch is the last one plus one;
//   - renew: Update at the revision read, if the lease read is the holder's;
//   - release: the same, with expiry 0. A lease key is never deleted: KV's
//     Create is not atomic against a delete, and a deleted key would let
//     epochs start again at 1. A key found deleted is an error.
//
// Expiry is the holder's business (journal.Lease.Expires against its own
// clock); the bucket keeps no TTL and no delete marker means anything.

// maxLeaseTries bounds how often an operation re-reads a lease that
// changed under it before it gives its answer.
const maxLeaseTries = 8

// readLease returns the current lease of run and its revision; ok is
// false when the key has never been written.
func (s *Store) readLease(ctx context.Context, run journal.RunID) (l journal.Lease, rev uint64, ok bool, err error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	e, err := s.leases.Get(ctx, run.String())
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		// Get says not found for a deleted key too: tell them apart, for
		// a deleted lease must not restart its epochs. (The key may also
		// have been created since: then its history ends in a put.)
		h, herr := s.leases.History(ctx, run.String())
		switch {
		case errors.Is(herr, jetstream.ErrKeyNotFound):
			return l, 0, false, nil
		case herr != nil:
			return l, 0, false, fmt.Errorf("jetstore: read the lease history of %s: %w", run, herr)
		case h[len(h)-1].Operation() != jetstream.KeyValuePut:
			return l, 0, false, fmt.Errorf("jetstore: the lease key of run %s in bucket %s was deleted (leases are never deleted; its epochs would repeat): put back its last lease, or stop the run", run, s.opts.LeaseBucket)
		}
		e, err = h[len(h)-1], nil
	}
	if err != nil {
		return l, 0, false, fmt.Errorf("jetstore: read the lease of %s: %w", run, err)
	}
	if err := abi.Unmarshal(e.Value(), &l); err != nil {
		return l, 0, false, fmt.Errorf("jetstore: the lease of %s (revision %d) does not decode: %w", run, e.Revision(), err)
	}
	if l.Run != run {
		return l, 0, false, fmt.Errorf("jetstore: the lease key of %s holds the lease of %s", run, l.Run)
	}
	return l, e.Revision(), true, nil
}

// writeLease writes next at rev (0: create); it reports false when the
// key changed since rev was read.
func (s *Store) writeLease(ctx context.Context, next *journal.Lease, rev uint64, exists bool) (bool, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	v, err := abi.Marshal(next)
	if err != nil {
		return false, err
	}
	if exists {
		_, err = s.leases.Update(ctx, next.Run.String(), v, rev)
	} else {
		_, err = s.leases.Create(ctx, next.Run.String(), v)
	}
	if errors.Is(err, jetstream.ErrKeyExists) || isConflict(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("jetstore: write the lease of %s: %w", next.Run, err)
	}
	return true, nil
}

// Acquire implements journal.Leases. The epoch continues from the last
// one recorded, even after a Release, so epochs never repeat.
func (s *Store) Acquire(ctx context.Context, run journal.RunID, owner []byte, now time.Time, ttl time.Duration) (journal.Lease, error) {
	next := journal.Lease{Run: run, Owner: bytes.Clone(owner), Expires: now.Add(ttl).UnixNano()}
	for range maxLeaseTries {
		cur, rev, ok, err := s.readLease(ctx, run)
		if err != nil {
			return journal.Lease{}, err
		}
		if ok && !bytes.Equal(cur.Owner, owner) && cur.Expires > now.UnixNano() {
			return journal.Lease{}, &journal.HeldError{Lease: cur}
		}
		next.Epoch = cur.Epoch + 1
		done, err := s.writeLease(ctx, &next, rev, ok)
		if err != nil || done {
			return next, err
		}
	}
	return journal.Lease{}, fmt.Errorf("jetstore: the lease of %s changed %d times while it was acquired: try again", run, maxLeaseTries)
}

// change replaces the lease l by next if l is still the current lease.
func (s *Store) change(ctx context.Context, l journal.Lease, next *journal.Lease) error {
	cur, rev, ok, err := s.readLease(ctx, l.Run)
	if err != nil {
		return err
	}
	if !ok || cur.Epoch != l.Epoch || !bytes.Equal(cur.Owner, l.Owner) {
		return journal.ErrLeaseLost
	}
	done, err := s.writeLease(ctx, next, rev, true)
	if err == nil && !done {
		// Changed between the read and the write: by someone else, since
		// a holder does not race itself.
		return journal.ErrLeaseLost
	}
	return err
}

// Renew implements journal.Leases.
func (s *Store) Renew(ctx context.Context, l journal.Lease, now time.Time, ttl time.Duration) (journal.Lease, error) {
	next := l
	next.Expires = now.Add(ttl).UnixNano()
	if err := s.change(ctx, l, &next); err != nil {
		return journal.Lease{}, err
	}
	return next, nil
}

// Release implements journal.Leases: the record stays, expired, so that
// the next epoch follows this one.
func (s *Store) Release(ctx context.Context, l journal.Lease) error {
	done := l
	done.Expires = 0
	return s.change(ctx, l, &done)
}

// Lease returns the current lease of run, for a peer to see whether it
// expired; ok is false when the run has never been leased.
func (s *Store) Lease(ctx context.Context, run journal.RunID) (l journal.Lease, ok bool, err error) {
	l, _, ok, err = s.readLease(ctx, run)
	return l, ok, err
}

// Hand implements journal.LeaseHandover: an update at the revision read,
// like a renewal, that names another owner.
func (s *Store) Hand(ctx context.Context, l journal.Lease, to []byte, expires int64) (journal.Lease, error) {
	next := l
	next.Owner, next.Expires = bytes.Clone(to), expires
	if err := s.change(ctx, l, &next); err != nil {
		return journal.Lease{}, err
	}
	return next, nil
}
