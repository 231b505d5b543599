// Package badgerstore is the embedded default journal.Store: one badger
// database under a cell's data directory. Every Append is on disk when it
// returns; concurrent Appends from many runs share one fsync (see
// groupSync), which is the group commit of the durable path.
//
// It also keeps the agents' durable key/value state and event logs. Those
// writes are not synced on their own: a kv write is an effect whose intent
// is already durable, so a crash that loses it leaves the effect in doubt,
// and kv writes are idempotent; the next Append syncs them anyway.
package badgerstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
	badger "github.com/dgraph-io/badger/v4"
)

// Key prefixes. The layout is documented in journal/SPEC.md.
const (
	prefixMeta    = "m/"
	prefixJournal = "j/"
	prefixModule  = "c/"
	prefixKV      = "k/"
)

// ErrLocked is returned by Open when another process holds the directory.
var ErrLocked = errors.New("badgerstore: the data directory is in use by another agentrt process")

// Store is a journal.Store on badger.
type Store struct {
	db   *badger.DB
	sync *groupSync
}

var _ journal.Store = (*Store)(nil)

// Open opens (creating if needed) the store in dir.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	opts := badger.DefaultOptions(dir).
		WithSyncWrites(false).
		WithLogger(quietLogger{}).
		WithMemTableSize(32 << 20).
		WithBlockCacheSize(32 << 20).
		WithIndexCacheSize(16 << 20).
		WithValueLogFileSize(256 << 20).
		WithNumVersionsToKeep(1).
		WithDetectConflicts(true)
	db, err := badger.Open(opts)
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("%w (%s)", ErrLocked, dir)
		}
		return nil, fmt.Errorf("badgerstore: open %s: %w", dir, err)
	}
	return &Store{db: db, sync: newGroupSync(db.Sync)}, nil
}

// Close closes the database.
func (s *Store) Close() error {
	s.sync.close()
	return s.db.Close()
}

// DB returns the underlying database, for tools and tests that inspect or
// damage stored bytes on purpose.
func (s *Store) DB() *badger.DB { return s.db }

// RecordKey returns the database key of entry seq of run.
func RecordKey(run journal.RunID, seq uint64) []byte {
	k := make([]byte, 0, len(prefixJournal)+len(run)+8)
	k = append(k, prefixJournal...)
	k = append(k, run[:]...)
	return binary.BigEndian.AppendUint64(k, seq)
}

func metaKey(run journal.RunID) []byte { return append([]byte(prefixMeta), run[:]...) }

func moduleKey(sum []byte) []byte { return append([]byte(prefixModule), sum...) }

// PutModule stores code under its SHA-256.
func (s *Store) PutModule(_ context.Context, code []byte) ([]byte, error) {
	sum := sha256.Sum256(code)
	err := s.db.Update(func(txn *badger.Txn) error {
		if _, err := txn.Get(moduleKey(sum[:])); err == nil {
			return nil
		}
		return txn.Set(moduleKey(sum[:]), code)
	})
	return sum[:], err
}

// Module returns the module with the given SHA-256, checking the digest.
func (s *Store) Module(_ context.Context, sum []byte) ([]byte, error) {
	var code []byte
	err := s.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(moduleKey(sum))
		if err != nil {
			return err
		}
		code, err = it.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, fmt.Errorf("module %x: %w", sum, journal.ErrNotFound)
	}
	if err == nil && !bytes.Equal(journal.Sum(code), sum) {
		return nil, fmt.Errorf("badgerstore: stored module %x is corrupt (its bytes hash to %x)", sum, journal.Sum(code))
	}
	return code, err
}

// Append implements journal.Store.
func (s *Store) Append(_ context.Context, run journal.RunID, next uint64, recs []journal.Record, meta *journal.RunMeta) error {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	if next > 0 {
		if _, err := txn.Get(RecordKey(run, next-1)); err != nil {
			if errors.Is(err, badger.ErrKeyNotFound) {
				return fmt.Errorf("%w: journal of %s has fewer than %d entries", journal.ErrConflict, run, next)
			}
			return err
		}
	}
	if _, err := txn.Get(RecordKey(run, next)); err == nil {
		return fmt.Errorf("%w: entry %d of %s already exists", journal.ErrConflict, next, run)
	} else if !errors.Is(err, badger.ErrKeyNotFound) {
		return err
	}
	for i := range recs {
		b, err := journal.EncodeRecord(&recs[i])
		if err != nil {
			return err
		}
		if err := txn.Set(RecordKey(run, next+uint64(i)), b); err != nil {
			return err
		}
	}
	if meta != nil {
		b, err := abi.Marshal(meta)
		if err != nil {
			return err
		}
		if err := txn.Set(metaKey(run), b); err != nil {
			return err
		}
	}
	err := txn.Commit()
	if errors.Is(err, badger.ErrConflict) {
		return fmt.Errorf("%w: concurrent append to %s", journal.ErrConflict, run)
	}
	if err != nil {
		return err
	}
	if err := s.sync.wait(); err != nil {
		return fmt.Errorf("badgerstore: %w: %v", journal.ErrNotDurable, err)
	}
	return nil
}

// Records implements journal.Store.
func (s *Store) Records(ctx context.Context, run journal.RunID, from uint64, fn func(uint64, []byte) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		prefix := append([]byte(prefixJournal), run[:]...)
		opts := badger.DefaultIteratorOptions
		opts.Prefix = prefix
		opts.PrefetchSize = 256
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(RecordKey(run, from)); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			item := it.Item()
			k := item.Key()
			if len(k) != len(prefix)+8 {
				return fmt.Errorf("badgerstore: malformed journal key %x", k)
			}
			seq := binary.BigEndian.Uint64(k[len(prefix):])
			if err := item.Value(func(v []byte) error { return fn(seq, v) }); err != nil {
				return err
			}
		}
		return nil
	})
}

// Meta implements journal.Store.
func (s *Store) Meta(_ context.Context, run journal.RunID) (journal.RunMeta, error) {
	var m journal.RunMeta
	err := s.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(metaKey(run))
		if err != nil {
			return err
		}
		return it.Value(func(v []byte) error { return decodeMeta(v, &m) })
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return m, fmt.Errorf("run %s: %w", run, journal.ErrNotFound)
	}
	return m, err
}

func decodeMeta(v []byte, m *journal.RunMeta) error {
	if err := abi.Unmarshal(v, m); err != nil {
		return fmt.Errorf("badgerstore: corrupt run index record: %w", err)
	}
	return nil
}

// Runs implements journal.Store: newest first, since run ids sort by start.
func (s *Store) Runs(_ context.Context) ([]journal.RunMeta, error) {
	var out []journal.RunMeta
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte(prefixMeta)
		opts.Reverse = true
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(append([]byte(prefixMeta), 0xff)); it.Valid(); it.Next() {
			var m journal.RunMeta
			if err := it.Item().Value(func(v []byte) error { return decodeMeta(v, &m) }); err != nil {
				return err
			}
			out = append(out, m)
		}
		return nil
	})
	return out, err
}

type quietLogger struct{}

func (quietLogger) Errorf(f string, a ...any)   { log.Printf("badger: "+f, a...) }
func (quietLogger) Warningf(f string, a ...any) { log.Printf("badger: "+f, a...) }
func (quietLogger) Infof(string, ...any)        {}
func (quietLogger) Debugf(string, ...any)       {}
