package badgerstore

import (
	"github.com/agentrt/agentrt/journal"
	badger "github.com/dgraph-io/badger/v4"
)

// prefixRecovery keys the cell daemon's record of its attempts to recover
// each run (host/cell's crash-loop breaker): r/<run> holds an opaque
// value the daemon encodes. It is not part of the run's journal.
const prefixRecovery = "r/"

// RecoveryRecord returns the recovery record of run, and false if it has
// none.
func (s *Store) RecoveryRecord(run journal.RunID) ([]byte, bool, error) {
	return s.value(runKey(prefixRecovery, run))
}

// SetRecoveryRecord sets the recovery record of run, durably: an attempt
// is on disk before it starts, so that a crash during it still counts.
func (s *Store) SetRecoveryRecord(run journal.RunID, rec []byte) error {
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(runKey(prefixRecovery, run), rec) }); err != nil {
		return err
	}
	return s.db.Sync()
}

// DeleteRecoveryRecord removes the recovery record of run, if any.
func (s *Store) DeleteRecoveryRecord(run journal.RunID) error {
	return s.db.Update(func(txn *badger.Txn) error { return txn.Delete(runKey(prefixRecovery, run)) })
}
