package badgerstore

import badger "github.com/dgraph-io/badger/v4"

// LineageKeys returns every key of the lineage index with its value, so
// tests can compare whole indexes and look for keys left behind.
func (s *Store) LineageKeys() map[string]string {
	out := map[string]string{}
	_ = s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte(prefixLineage)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, _ := it.Item().ValueCopy(nil)
			out[string(it.Item().KeyCopy(nil))] = string(v)
		}
		return nil
	})
	return out
}
