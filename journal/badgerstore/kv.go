package badgerstore

import (
	"bytes"
	"errors"

	badger "github.com/dgraph-io/badger/v4"
)

// The agents' durable key/value state. Keys are namespaced by the grant's kv
// namespace, so two agents sharing a namespace share state and no agent can
// name another's keys. Writes arrive in journal batches (journal.KVWrite),
// so a state change commits atomically with the entries that record it.

func kvKey(ns, key string) []byte {
	k := make([]byte, 0, len(prefixKV)+len(ns)+1+len(key))
	k = append(k, prefixKV...)
	k = append(k, ns...)
	k = append(k, 0)
	return append(k, key...)
}

// KVGet returns the value of key in namespace ns, and false if it is absent.
func (s *Store) KVGet(ns, key string) ([]byte, bool, error) {
	return s.value(kvKey(ns, key))
}

// value returns a copy of the value stored under key, and false if there
// is none.
func (s *Store) value(key []byte) ([]byte, bool, error) {
	var v []byte
	err := s.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(key)
		if err != nil {
			return err
		}
		v, err = it.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, nil
	}
	return v, err == nil, err
}

// KVList returns up to limit keys of namespace ns that start with prefix and
// sort after after, and whether more remain.
func (s *Store) KVList(ns, prefix, after string, limit int) ([]string, bool, error) {
	var keys []string
	more := false
	err := s.db.View(func(txn *badger.Txn) error {
		base := kvKey(ns, "")
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = kvKey(ns, prefix)
		it := txn.NewIterator(opts)
		defer it.Close()
		start := opts.Prefix
		if after != "" {
			start = append(kvKey(ns, after), 0)
		}
		for it.Seek(start); it.Valid(); it.Next() {
			k := it.Item().Key()
			if after != "" && bytes.Compare(k, kvKey(ns, after)) <= 0 {
				continue
			}
			if len(keys) == limit {
				more = true
				return nil
			}
			keys = append(keys, string(k[len(base):]))
		}
		return nil
	})
	return keys, more, err
}
