package badgerstore

import (
	"bytes"
	"context"
	"fmt"

	"github.com/agentrt/agentrt/journal"
	badger "github.com/dgraph-io/badger/v4"
)

// Purged says what Purge removed of one run.
type Purged struct {
	Run journal.RunID
	// Records, Events and Module count what went: stored commits of the
	// journal, event-log records, and the module (1 when no kept run still
	// used it).
	Records, Events, Module int
}

// Purge deletes run from the store: its journal, run index record, lease,
// lineage index keys and event log, and its module unless another run still uses it. With
// keepAudit it deletes only the event log, keeping everything an auditor
// needs (the journal, the index record and the module). A journal is always
// deleted whole, never cut, so a run that is kept is kept intact. Purge
// refuses a run that has not finished.
func (s *Store) Purge(ctx context.Context, run journal.RunID, keepAudit bool) (Purged, error) {
	p := Purged{Run: run}
	meta, err := s.Meta(ctx, run)
	if err != nil {
		return p, err
	}
	if !meta.Status.Finished() {
		return p, fmt.Errorf("badgerstore: run %s has not finished; it is not purged", run)
	}
	err = s.c.exclusive(run, func() error {
		var err error
		if keepAudit {
			p.Events, err = s.deletePrefix(runKey(prefixEvents, run))
			return err
		}
		// The run leaves the index first: a purge cut short by a crash
		// leaves unreachable keys, never a listed run with part of its
		// journal.
		err = s.db.Update(func(txn *badger.Txn) error {
			for _, k := range [][]byte{runKey(prefixMeta, run), runKey(prefixLength, run), runKey(prefixLease, run)} {
				if err := txn.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if p.Records, err = s.deletePrefix(runKey(prefixJournal, run)); err != nil {
			return err
		}
		if err := s.purgeLineage(run); err != nil {
			return err
		}
		if p.Events, err = s.deletePrefix(runKey(prefixEvents, run)); err != nil {
			return err
		}
		return s.db.Update(func(txn *badger.Txn) error {
			used, err := moduleUsed(txn, meta.ModuleSHA256, run)
			if err != nil || used {
				return err
			}
			p.Module = 1
			return txn.Delete(moduleKey(meta.ModuleSHA256))
		})
	})
	return p, err
}

// deletePrefix deletes every key with prefix, in transactions of a bounded
// size, and returns how many it deleted.
func (s *Store) deletePrefix(prefix []byte) (int, error) {
	total := 0
	for {
		var keys [][]byte
		err := s.db.View(func(txn *badger.Txn) error {
			opts := badger.DefaultIteratorOptions
			opts.Prefix, opts.PrefetchValues = prefix, false
			it := txn.NewIterator(opts)
			defer it.Close()
			for it.Rewind(); it.Valid() && len(keys) < 5000; it.Next() {
				keys = append(keys, it.Item().KeyCopy(nil))
			}
			return nil
		})
		if err != nil || len(keys) == 0 {
			return total, err
		}
		err = s.db.Update(func(txn *badger.Txn) error {
			for _, k := range keys {
				if err := txn.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		total += len(keys)
	}
}

// moduleUsed reports whether a run other than except ran the module.
func moduleUsed(txn *badger.Txn, sum []byte, except journal.RunID) (bool, error) {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = []byte(prefixMeta)
	it := txn.NewIterator(opts)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		var m journal.RunMeta
		if err := it.Item().Value(func(v []byte) error { return decodeMeta(v, &m) }); err != nil {
			return false, err
		}
		if m.ID != except && bytes.Equal(m.ModuleSHA256, sum) {
			return true, nil
		}
	}
	return false, nil
}
