package badgerstore

import (
	"errors"
	"fmt"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
)

// prefixCell keys the cell's own records (journal.CellRecords):
// s/<table>\x00<key>. They are not part of any run's journal.
const prefixCell = "s/"

func cellKey(table, key string) ([]byte, error) {
	if table == "" || strings.IndexByte(table, 0) >= 0 {
		return nil, fmt.Errorf("badgerstore: cell record table %q: empty or with a NUL byte", table)
	}
	if len(key) > 1<<10 {
		return nil, fmt.Errorf("badgerstore: cell record key of %d bytes (at most 1024)", len(key))
	}
	return []byte(prefixCell + table + "\x00" + key), nil
}

// CellGet returns the record of table under key, and false if it has none.
func (s *Store) CellGet(table, key string) ([]byte, bool, error) {
	k, err := cellKey(table, key)
	if err != nil {
		return nil, false, err
	}
	return s.value(k)
}

// CellPut sets the record of table under key, durably.
func (s *Store) CellPut(table, key string, val []byte) error {
	k, err := cellKey(table, key)
	if err != nil {
		return err
	}
	s.cellMu.Lock()
	defer s.cellMu.Unlock()
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(k, val) }); err != nil {
		return err
	}
	return s.db.Sync()
}

// errExists ends CellCreate's transaction when the key has a record.
var errExists = errors.New("exists")

// CellCreate sets the record of table under key, durably, only if it has
// none; it reports whether it did. Of two concurrent creates one wins: the
// look and the set are under cellMu (badger's own conflict detection is
// off in this store).
func (s *Store) CellCreate(table, key string, val []byte) (bool, error) {
	k, err := cellKey(table, key)
	if err != nil {
		return false, err
	}
	s.cellMu.Lock()
	defer s.cellMu.Unlock()
	err = s.db.Update(func(txn *badger.Txn) error {
		if _, err := txn.Get(k); err == nil {
			return errExists
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		return txn.Set(k, val)
	})
	switch {
	case errors.Is(err, errExists):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, s.db.Sync()
}

// CellDelete removes the record of table under key, if any, durably.
func (s *Store) CellDelete(table, key string) error {
	k, err := cellKey(table, key)
	if err != nil {
		return err
	}
	s.cellMu.Lock()
	defer s.cellMu.Unlock()
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete(k) }); err != nil {
		return err
	}
	return s.db.Sync()
}

// CellList calls fn with every record of table whose key starts with
// prefix, in key order, until fn returns an error, which it returns.
func (s *Store) CellList(table, prefix string, fn func(key string, val []byte) error) error {
	k, err := cellKey(table, prefix)
	if err != nil {
		return err
	}
	strip := len(prefixCell) + len(table) + 1
	return s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = k
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			if err := fn(string(item.Key()[strip:]), v); err != nil {
				return err
			}
		}
		return nil
	})
}
