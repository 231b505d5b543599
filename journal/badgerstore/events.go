package badgerstore

import (
	"context"
	"encoding/binary"

	"github.com/agentrt/agentrt/journal"
	badger "github.com/dgraph-io/badger/v4"
)

const prefixEvents = "e/"

func eventPrefix(run journal.RunID) []byte { return append([]byte(prefixEvents), run[:]...) }

// AppendEvents adds events to run's event log, after those already there.
func (s *Store) AppendEvents(_ context.Context, run journal.RunID, events [][]byte) error {
	return s.db.Update(func(txn *badger.Txn) error {
		next := uint64(0)
		opts := badger.DefaultIteratorOptions
		opts.Prefix, opts.Reverse, opts.PrefetchValues = eventPrefix(run), true, false
		it := txn.NewIterator(opts)
		it.Seek(append(eventPrefix(run), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff))
		if it.Valid() {
			k := it.Item().Key()
			next = binary.BigEndian.Uint64(k[len(k)-8:]) + 1
		}
		it.Close()
		for i, e := range events {
			k := binary.BigEndian.AppendUint64(eventPrefix(run), next+uint64(i))
			if err := txn.Set(k, e); err != nil {
				return err
			}
		}
		return nil
	})
}

// Events calls fn with each event of run, in order.
func (s *Store) Events(ctx context.Context, run journal.RunID, fn func([]byte) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = eventPrefix(run)
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
