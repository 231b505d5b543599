// Package badgerstore is the embedded default journal.Store: one badger
// database under a cell's data directory.
//
// One goroutine, the committer, writes every batch. It takes whatever
// batches are waiting, checks each against its run's journal length (the
// fencing check), appends each badger transaction of them (one, up to
// 2 MiB) as one record to the journal's log (wal.go) before badger takes
// it, and syncs the log if any of them asked to be durable; badger itself
// is not synced.
// Concurrent runs thus share one write and one fdatasync: that is the
// group commit of the durable path. Being the only writer, the committer
// never meets a transaction conflict.
//
// Layout (see journal/SPEC.md section 10): a commit's records are stored
// in values that fit a 64 KiB block, each under the seq of its first record;
// the run's head record (the journal's length and the hash of its last
// entry) is a key of its own, read and written in the same transaction as
// the records. Every read of a journal checks that what it read reaches
// that head, so that damage to the store is never taken for a shorter
// journal.
//
// Open checks the files of a store before badger sees them (preflight.go)
// and refuses, changing nothing, a store that would not open cleanly; it
// then applies the journal's log a crash left.
package badgerstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
	badger "github.com/dgraph-io/badger/v4"
	boptions "github.com/dgraph-io/badger/v4/options"
)

// Key prefixes. The layout is documented in journal/SPEC.md.
const (
	prefixMeta    = "m/" // m/<run>: RunMeta
	prefixLength  = "n/" // n/<run>: the head record: the journal's length (8 bytes big-endian) and its last entry's hash
	prefixJournal = "j/" // j/<run><first seq>: records of one commit, up to 48 KiB of them
	prefixModule  = "c/" // c/<sha256>: module bytes
	prefixKV      = "k/" // k/<namespace>\x00<key>: agent state
	prefixEvents  = "e/" // e/<run><seq>: one event-log record
)

// ErrLocked is returned by Open when another process holds the directory.
var ErrLocked = errors.New("badgerstore: the data directory is in use by another agentrt process")

// Store is a journal.Store on badger.
type Store struct {
	db   *badger.DB
	c    *committer
	lock *dirLock
	// leaseMu serializes the compare-and-swap of leases.
	leaseMu sync.Mutex
	// cellMu serializes the writes of cell records, so that CellCreate's
	// look and set are one step: the store runs badger without conflict
	// detection, and the directory lock keeps other processes out.
	cellMu sync.Mutex
	// lineageMu serializes the lineage index's catch-up, queries and
	// deletions (lineage.go).
	lineageMu sync.Mutex
}

var _ journal.Store = (*Store)(nil)

// options are the badger options of every store. The sizes bound the
// memory badger holds while it writes (RATIONALE.md, "badger's memory"):
// its table builders take about twice a table's size from a pool that
// keeps what they took, and grow a block's buffer for a value that does
// not fit, so records are stored in values that fit a block (maxChunk),
// blocks are 64 KiB, memtables are three of 32 MiB (badger refuses a
// transaction over 15% of one, and the biggest batch a host commits must
// fit) and every level's tables are the same size (TableSizeMultiplier 1).
func options(dir string) badger.Options {
	opts := badger.DefaultOptions(dir).
		WithSyncWrites(false). // the committer syncs, once per round
		WithDetectConflicts(false).
		WithLogger(quietLogger{}).
		WithMemTableSize(32 << 20).
		WithNumMemtables(3).
		WithNumLevelZeroTables(10).
		WithNumLevelZeroTablesStall(30).
		WithBaseTableSize(2 << 20).
		WithBlockSize(64 << 10).
		WithBlockCacheSize(32 << 20).
		WithIndexCacheSize(16 << 20).
		WithValueLogFileSize(64 << 20).
		WithNumVersionsToKeep(1).
		// A block whose checksum fails is an error, not garbage read as
		// data (the preflight checks whole tables once; this every read).
		WithChecksumVerificationMode(boptions.OnBlockRead)
	opts.TableSizeMultiplier = 1
	return opts
}

// Open opens (creating if needed) the store in dir. It first checks the
// store's files (preflight.go): a store that would not open cleanly (a
// MANIFEST that does not replay whole, a table missing or failing its
// checksums, tables the MANIFEST does not list that hold data the store
// lacks) is refused with a *DamageError, and nothing in dir is changed:
// agentrt store check reports the damage and agentrt store salvage copies
// out what verifies. The journal's log a crash left is read and checked
// before badger opens (a damaged one is a *WALError, and nothing changes),
// and applied after. Open fails with ErrLocked while another process holds
// dir.
func Open(dir string) (*Store, error) { return OpenWith(dir, OpenOptions{}) }

// OpenOptions are the options of OpenWith.
type OpenOptions struct {
	// Locked, when set, is called once the store's directory is locked
	// for this process, before its files are read and checked: the work
	// a caller does there runs beside the opening (agentrt run starts
	// compiling its module) and is not done for a store another process
	// holds (Open returns ErrLocked without calling it).
	Locked func()
}

// OpenWith is Open with options.
func OpenWith(dir string, o OpenOptions) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	if o.Locked != nil {
		o.Locked()
	}
	left, err := readWAL(dir)
	if err != nil {
		lock.release()
		return nil, err
	}
	db, err := openChecked(dir)
	if err != nil {
		lock.release()
		return nil, err
	}
	w, err := openWAL(dir, db, left)
	if err != nil {
		db.Close()
		lock.release()
		return nil, err
	}
	return &Store{db: db, c: newCommitter(db, w), lock: lock}, nil
}

// openBadger opens the badger database in dir, with opts changed by tune.
func openBadger(dir string, tune func(badger.Options) badger.Options) (*badger.DB, error) {
	opts := options(dir)
	if tune != nil {
		opts = tune(opts)
	}
	db, err := badger.Open(opts)
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("%w (%s)", ErrLocked, dir)
		}
		return nil, fmt.Errorf("badgerstore: open %s: %w", dir, err)
	}
	return db, nil
}

// Close stops the committer and closes the database.
func (s *Store) Close() error {
	s.c.close()
	err := s.db.Close()
	if w := s.c.wal; w != nil {
		if err == nil {
			// badger wrote its memtables to tables and synced them:
			// the log holds nothing it lacks.
			err = w.remove()
		} else {
			w.close()
		}
	}
	s.lock.release()
	return err
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
		if err == nil {
			// Runs of it are made durable by the journal's log, which
			// does not hold modules: the module is synced here.
			err = s.db.Sync()
		}
	}
	return err
}

// HasModule says whether the store holds the module with the given
// SHA-256, without reading it (host.ModuleHaver).
func (s *Store) HasModule(_ context.Context, sum []byte) (bool, error) {
	err := s.db.View(func(txn *badger.Txn) error {
		_, err := txn.Get(moduleKey(sum))
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Module returns the module with the given SHA-256, checking the digest.
func (s *Store) Module(_ context.Context, sum []byte) ([]byte, error) {
	code, ok, err := s.value(moduleKey(sum))
	if err == nil && !ok {
		return nil, fmt.Errorf("module %x: %w", sum, journal.ErrNotFound)
	}
	if err == nil && !bytes.Equal(journal.Sum(code), sum) {
		return nil, fmt.Errorf("badgerstore: stored module %x is corrupt (its bytes hash to %x)", sum, journal.Sum(code))
	}
	return code, err
}

// Records implements journal.Store. It reads the run's head record in the
// same transaction as the records, and returns a *journal.GapError (after
// the records it could read) when the stored values skip entries, end
// before the head, or go past it, or when the last entry is not the one
// the head names: damage, never a shorter journal.
func (s *Store) Records(ctx context.Context, run journal.RunID, from uint64, fn func(uint64, []byte) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		h, err := readHead(txn, run)
		if err != nil {
			return err
		}
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
		// next is the seq the next stored value must begin with; last
		// keeps the last record read, to check it against the head.
		next, stopped := start, false
		var last []byte
		for it.Seek(seqKey(prefixJournal, run, start)); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			item := it.Item()
			k := item.Key()
			if len(k) != len(prefix)+8 {
				return fmt.Errorf("badgerstore: malformed journal key %x", k)
			}
			if seq := binary.BigEndian.Uint64(k[len(prefix):]); seq != next {
				gap := h.Gap(run, next, fmt.Sprintf("the stored records go from entry %d to entry %d", int64(next)-1, seq))
				if seq > next {
					gap.To = seq
				}
				return gap
			}
			err := item.Value(func(v []byte) error {
				var tail []byte
				err := splitRecords(v, func(raw []byte) error {
					seq := next
					next, tail = next+1, raw
					if seq < from {
						return nil
					}
					if err := fn(seq, raw); err != nil {
						stopped = true
						return err
					}
					return nil
				})
				last = append(last[:0], tail...)
				return err
			})
			if err != nil {
				if stopped {
					return err
				}
				return h.Gap(run, next, fmt.Sprintf("the value holding entry %d does not read: %v", next, err))
			}
		}
		return h.Reaches(run, h.ok, next, last, "stored")
	})
}

// head is a run's head record: how many entries its journal holds and the
// entry hash of the last one (nil in stores written before the hash was
// kept, which are checked by length alone). ok is false when the run has
// no head record.
type head struct {
	journal.Head
	// ok says the store holds a head record for the run.
	ok bool
}

func decodeHead(run journal.RunID, v []byte) (head, error) {
	h, err := journal.DecodeHead(run, v)
	return head{Head: h, ok: err == nil}, err
}

func readHead(txn *badger.Txn, run journal.RunID) (head, error) {
	item, err := txn.Get(runKey(prefixLength, run))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return head{}, nil
	}
	if err != nil {
		return head{}, fmt.Errorf("badgerstore: read the head record of %s: %w", run, err)
	}
	var h head
	err = item.Value(func(v []byte) error {
		h, err = decodeHead(run, v)
		return err
	})
	return h, err
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
// length as a uvarint, in values of at most maxChunk bytes (a record larger
// than that alone in its value), each under the seq of its first record.
// A value that fits a block keeps badger's table builder from growing a
// block buffer for it (doubling it, then allocating a compression buffer),
// which cost it about five times the bytes of the values it wrote; a few
// values a commit keep badger's per-key work (its skiplist, its WAL, every
// compaction) near one key a commit. A commit whose records take more than
// maxInline bytes is stored as one value instead: badger keeps a value of
// 1 MiB or more in its value log, and only a pointer to it counts towards
// the transaction size limit it enforces.
const (
	maxChunk  = 48 << 10
	maxInline = 256 << 10
)

// chunk is one stored value of records, first being its first record's
// seq.
type chunk struct {
	first uint64
	recs  []byte
}

// encodeChunks encodes recs, whose first is entry next, into chunks. The
// chunks share one buffer.
func encodeChunks(next uint64, recs []journal.Record) []chunk {
	size := 0
	for i := range recs {
		n := journal.RecordSize(&recs[i])
		size += n + uvarintLen(uint64(n))
	}
	buf := make([]byte, 0, size)
	if size > maxInline {
		for i := range recs {
			buf = binary.AppendUvarint(buf, uint64(journal.RecordSize(&recs[i])))
			buf = journal.AppendRecord(buf, &recs[i])
		}
		return []chunk{{next, buf}}
	}
	out := make([]chunk, 0, size/maxChunk+1)
	start, first := 0, next
	for i := range recs {
		n := journal.RecordSize(&recs[i])
		if len(buf) > start && len(buf)-start+uvarintLen(uint64(n))+n > maxChunk {
			out = append(out, chunk{first, buf[start:len(buf):len(buf)]})
			start, first = len(buf), next+uint64(i)
		}
		buf = binary.AppendUvarint(buf, uint64(n))
		buf = journal.AppendRecord(buf, &recs[i])
	}
	return append(out, chunk{first, buf[start:]})
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

// Head implements journal.Heads: the number of entries the head record of
// run names (0 for a run with none).
func (s *Store) Head(_ context.Context, run journal.RunID) (uint64, error) {
	var h head
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		h, err = readHead(txn, run)
		return err
	})
	return h.Len, err
}
