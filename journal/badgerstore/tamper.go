package badgerstore

import (
	"bytes"
	"context"

	"github.com/agentrt/agentrt/journal"
	badger "github.com/dgraph-io/badger/v4"
)

// RewriteJournal replaces the stored records of run with what edit returns
// for the current ones, stored as one batch, bypassing the chain, the seals
// and the fencing check. It exists for tamper tests and tools that damage
// journals on purpose; a host never calls it.
func (s *Store) RewriteJournal(run journal.RunID, edit func(records [][]byte) [][]byte) error {
	var recs [][]byte
	err := s.Records(context.Background(), run, 0, func(_ uint64, raw []byte) error {
		recs = append(recs, bytes.Clone(raw))
		return nil
	})
	if err != nil {
		return err
	}
	recs = edit(recs)
	return s.c.exclusive(run, func() error { return s.rewrite(run, recs) })
}

func (s *Store) rewrite(run journal.RunID, recs [][]byte) error {
	return s.db.Update(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix, opts.PrefetchValues = runKey(prefixJournal, run), false
		it := txn.NewIterator(opts)
		var old [][]byte
		for it.Rewind(); it.Valid(); it.Next() {
			old = append(old, it.Item().KeyCopy(nil))
		}
		it.Close()
		for _, k := range old {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		var v []byte
		for _, r := range recs {
			v = appendRaw(v, r)
		}
		// The head record follows the rewritten records, as a writer's
		// would (one that does not decode leaves a head of length only).
		var last []byte
		if len(recs) > 0 {
			if rec, err := journal.DecodeRecord(recs[len(recs)-1]); err == nil {
				last = journal.Sum(rec.Entry)
			}
		}
		if err := txn.Set(runKey(prefixLength, run), journal.EncodeHead(uint64(len(recs)), last)); err != nil {
			return err
		}
		if len(recs) == 0 {
			return nil
		}
		return txn.Set(seqKey(prefixJournal, run, 0), v)
	})
}

// RewriteBlob replaces the bytes stored under the blob sum with what edit
// returns for them, under the same key, bypassing every check. It exists
// for tamper tests, as RewriteJournal does; a host never calls it.
func (s *Store) RewriteBlob(sum []byte, edit func(data []byte) []byte) error {
	return s.c.exclusive(journal.RunID{}, func() error {
		return s.db.Update(func(txn *badger.Txn) error {
			item, err := txn.Get(blobKey(sum))
			if err != nil {
				return err
			}
			data, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			return txn.Set(blobKey(sum), edit(data))
		})
	})
}
