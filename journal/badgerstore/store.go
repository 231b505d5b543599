// Package badgerstore is the embedded default journal.Store: one badger
// database under a cell's data directory.
//
// One goroutine, the committer, writes every batch. It takes whatever
// batches are waiting, checks each against its run's journal length (the
// fencing check), writes them all in one badger transaction and, if any of
// them asked to be durable, syncs once. Concurrent runs thus share one
// write and one fsync: that is the group commit of the durable path. Being
// the only writer, the committer never meets a transaction conflict.
//
// Layout (see journal/SPEC.md): each commit's records are stored as one
// value under the seq of its first record; the run's journal length is a
// key of its own, read and written in the same transaction as the records.
package badgerstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
	badger "github.com/dgraph-io/badger/v4"
)

// Key prefixes. The layout is documented in journal/SPEC.md.
const (
	prefixMeta    = "m/" // m/<run>: RunMeta
	prefixLength  = "n/" // n/<run>: the journal's length, 8 bytes big-endian
	prefixJournal = "j/" // j/<run><first seq>: the records of one commit
	prefixModule  = "c/" // c/<sha256>: module bytes
	prefixKV      = "k/" // k/<namespace>\x00<key>: agent state
	prefixEvents  = "e/" // e/<run><seq>: one event-log record
)

// ErrLocked is returned by Open when another process holds the directory.
var ErrLocked = errors.New("badgerstore: the data directory is in use by another agentrt process")

// Store is a journal.Store on badger.
type Store struct {
	db *badger.DB
	c  *committer
	// leaseMu serializes the compare-and-swap of leases.
	leaseMu sync.Mutex
	// lineageMu serializes the lineage index's catch-up, queries and
	// deletions (lineage.go).
	lineageMu sync.Mutex
}

var _ journal.Store = (*Store)(nil)

// Open opens (creating if needed) the store in dir.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := removeEmptyMemtables(dir); err != nil {
		return nil, err
	}
	opts := badger.DefaultOptions(dir).
		WithSyncWrites(false). // the committer syncs, once per round
		WithDetectConflicts(false).
		WithLogger(quietLogger{}).
		WithMemTableSize(32 << 20).
		WithBlockCacheSize(32 << 20).
		WithIndexCacheSize(16 << 20).
		WithValueLogFileSize(64 << 20).
		WithNumVersionsToKeep(1)
	db, err := badger.Open(opts)
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("%w (%s)", ErrLocked, dir)
		}
		return nil, fmt.Errorf("badgerstore: open %s: %w", dir, err)
	}
	return &Store{db: db, c: newCommitter(db)}, nil
}

// Close stops the committer and closes the database.
func (s *Store) Close() error {
	s.c.close()
	return s.db.Close()
}

// removeEmptyMemtables deletes memtable files of zero bytes. Badger creates
// a memtable file and then sizes it; a process killed between the two
// leaves an empty file that badger v4 refuses to open ("Create a new file")
// ever after. An empty memtable file never held a write, so removing it
// loses nothing. (Found by the crash test: SIGKILL while the store closes.)
func removeEmptyMemtables(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.mem"))
	if err != nil {
		return err
	}
	for _, f := range files {
		if info, err := os.Stat(f); err == nil && info.Size() == 0 {
			log.Printf("badgerstore: removing %s, an empty memtable file left by a crash", f)
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	return nil
}

func runKey(prefix string, run journal.RunID) []byte {
	return append([]byte(prefix), run[:]...)
}

func seqKey(prefix string, run journal.RunID, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(runKey(prefix, run), seq)
}

func moduleKey(sum []byte) []byte { return append([]byte(prefixModule), sum...) }

// Commit implements journal.Store.
func (s *Store) Commit(ctx context.Context, b *journal.Batch) error {
	return s.c.submit(ctx, b)
}

// PutModule stores code under sum. The key is content-addressed: a module
// stored before is not written again (every run of it would rewrite megabytes).
func (s *Store) PutModule(_ context.Context, sum, code []byte) error {
	err := s.db.View(func(txn *badger.Txn) error {
		_, err := txn.Get(moduleKey(sum))
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		err = s.db.Update(func(txn *badger.Txn) error { return txn.Set(moduleKey(sum), code) })
	}
	return err
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

// Records implements journal.Store.
func (s *Store) Records(ctx context.Context, run journal.RunID, from uint64, fn func(uint64, []byte) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		start, err := firstBatch(txn, run, from)
		if err != nil {
			return err
		}
		prefix := runKey(prefixJournal, run)
		opts := badger.DefaultIteratorOptions
		opts.Prefix = prefix
		opts.PrefetchSize = 16
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(seqKey(prefixJournal, run, start)); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			item := it.Item()
			k := item.Key()
			if len(k) != len(prefix)+8 {
				return fmt.Errorf("badgerstore: malformed journal key %x", k)
			}
			seq := binary.BigEndian.Uint64(k[len(prefix):])
			err := item.Value(func(v []byte) error {
				return splitRecords(v, func(raw []byte) error {
					defer func() { seq++ }()
					if seq < from {
						return nil
					}
					return fn(seq, raw)
				})
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// firstBatch returns the first seq of the stored batch that holds entry
// from: the greatest batch key not after it.
func firstBatch(txn *badger.Txn, run journal.RunID, from uint64) (uint64, error) {
	if from == 0 {
		return 0, nil
	}
	prefix := runKey(prefixJournal, run)
	opts := badger.DefaultIteratorOptions
	opts.Prefix, opts.Reverse, opts.PrefetchValues = prefix, true, false
	it := txn.NewIterator(opts)
	defer it.Close()
	it.Seek(seqKey(prefixJournal, run, from))
	if !it.Valid() {
		return 0, nil
	}
	k := it.Item().Key()
	return binary.BigEndian.Uint64(k[len(prefix):]), nil
}

// Records of one commit are stored back to back, each preceded by its
// length as a uvarint.

func appendRecords(dst []byte, recs []journal.Record) ([]byte, error) {
	size := 0
	for i := range recs {
		n := journal.RecordSize(&recs[i])
		size += n + uvarintLen(uint64(n))
	}
	dst = slices.Grow(dst, size)
	for i := range recs {
		dst = binary.AppendUvarint(dst, uint64(journal.RecordSize(&recs[i])))
		dst = journal.AppendRecord(dst, &recs[i])
	}
	return dst, nil
}

func uvarintLen(n uint64) int {
	l := 1
	for n >= 0x80 {
		n >>= 7
		l++
	}
	return l
}

func appendRaw(dst, rec []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(rec)))
	return append(dst, rec...)
}

func splitRecords(v []byte, fn func([]byte) error) error {
	for len(v) > 0 {
		n, w := binary.Uvarint(v)
		if w <= 0 || n > uint64(len(v)-w) {
			return fmt.Errorf("badgerstore: a stored batch is truncated or corrupt")
		}
		if err := fn(v[w : w+int(n)]); err != nil {
			return err
		}
		v = v[w+int(n):]
	}
	return nil
}

// Meta implements journal.Store.
func (s *Store) Meta(_ context.Context, run journal.RunID) (journal.RunMeta, error) {
	var m journal.RunMeta
	err := s.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(runKey(prefixMeta, run))
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
