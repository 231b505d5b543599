package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
	badger "github.com/dgraph-io/badger/v4"
)

const prefixLease = "l/" // l/<run>: the run's journal.Lease

var _ journal.Leases = (*Store)(nil)

// lease reads the current lease of run; ok is false when there is none.
func (s *Store) lease(txn *badger.Txn, run journal.RunID) (l journal.Lease, ok bool, err error) {
	item, err := txn.Get(runKey(prefixLease, run))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return l, false, nil
	}
	if err != nil {
		return l, false, err
	}
	err = item.Value(func(v []byte) error { return abi.Unmarshal(v, &l) })
	if err != nil {
		return l, false, fmt.Errorf("badgerstore: corrupt lease of %s: %w", run, err)
	}
	return l, true, nil
}

// swap replaces the lease of run by next if check approves the current one. Leases are changed one at a time, under a lock,
// and read and written in one transaction.
func (s *Store) swap(run journal.RunID, check func(cur journal.Lease, ok bool) error, next *journal.Lease) error {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	return s.db.Update(func(txn *badger.Txn) error {
		cur, ok, err := s.lease(txn, run)
		if err != nil {
			return err
		}
		if err := check(cur, ok); err != nil {
			return err
		}
		v, err := abi.Marshal(next)
		if err != nil {
			return err
		}
		return txn.Set(runKey(prefixLease, run), v)
	})
}

// Acquire implements journal.Leases. The lease's epoch continues from the
// last one recorded, even after a Release, so epochs never repeat.
func (s *Store) Acquire(_ context.Context, run journal.RunID, owner []byte, now time.Time, ttl time.Duration) (journal.Lease, error) {
	next := journal.Lease{Run: run, Owner: owner, Expires: now.Add(ttl).UnixNano()}
	err := s.swap(run, func(cur journal.Lease, ok bool) error {
		if ok && !bytes.Equal(cur.Owner, owner) && cur.Expires > now.UnixNano() {
			return &journal.HeldError{Lease: cur}
		}
		next.Epoch = cur.Epoch + 1
		return nil
	}, &next)
	return next, err
}

// Renew implements journal.Leases.
func (s *Store) Renew(_ context.Context, l journal.Lease, now time.Time, ttl time.Duration) (journal.Lease, error) {
	next := l
	next.Expires = now.Add(ttl).UnixNano()
	err := s.swap(l.Run, func(cur journal.Lease, ok bool) error {
		if !ok || cur.Epoch != l.Epoch || !bytes.Equal(cur.Owner, l.Owner) {
			return journal.ErrLeaseLost
		}
		return nil
	}, &next)
	return next, err
}

// Release implements journal.Leases: the record stays, expired, so that the
// next epoch follows this one.
func (s *Store) Release(_ context.Context, l journal.Lease) error {
	done := l
	done.Expires = 0
	return s.swap(l.Run, func(cur journal.Lease, ok bool) error {
		if !ok || cur.Epoch != l.Epoch || !bytes.Equal(cur.Owner, l.Owner) {
			return journal.ErrLeaseLost
		}
		return nil
	}, &done)
}

// Hand implements journal.LeaseHandover.
func (s *Store) Hand(_ context.Context, l journal.Lease, to []byte, expires int64) (journal.Lease, error) {
	next := l
	next.Owner, next.Expires = bytes.Clone(to), expires
	err := s.swap(l.Run, func(cur journal.Lease, ok bool) error {
		if !ok || cur.Epoch != l.Epoch || !bytes.Equal(cur.Owner, l.Owner) {
			return journal.ErrLeaseLost
		}
		return nil
	}, &next)
	if err != nil {
		return journal.Lease{}, err
	}
	return next, nil
}
