package badgerstore

import (
	"context"

	"github.com/agentrt/agentrt/journal"
	badger "github.com/dgraph-io/badger/v4"
)

// Events calls fn with each event-log record of run, in order. Events are
// written with journal batches (journal.Batch.Events).
func (s *Store) Events(ctx context.Context, run journal.RunID, fn func([]byte) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = runKey(prefixEvents, run)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := it.Item().Value(fn); err != nil {
				return err
			}
		}
		return nil
	})
}
