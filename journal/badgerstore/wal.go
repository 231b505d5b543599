package badgerstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// The journal's log. Every transaction the committer writes goes first, as
// one record, to a log of the store's own, then to badger, which is not
// synced; the log is: a round is durable once its records are (written
// before badger has them, so that badger never holds a write the log
// lacks: walMarkKey), at the cost of one write and one
// fdatasync of a file sized in advance, where badger's own sync would msync
// its memtable's log and its value log (two flushes of the disk) and make
// every later write to a synced page fault again.
//
// The log holds every round since the last checkpoint, in order, durable
// or not: a durable round's sync makes the rounds before it durable too.
// Open applies the records to badger again (the same keys set to the same
// values, in the same order), syncs badger, and drops the log once badger
// holds all of it durably. A clean Close drops it (badger wrote its
// memtables to synced tables); otherwise a checkpoint does: it syncs badger and deletes the log's older segments only when no
// memtable but the one just synced is waiting to be written to a table
// (badger syncs only its current memtable; an older one is durable once its
// table is written, and its .mem file is deleted then).
//
// Replaying a record over newer values would be wrong, so a key the
// committer writes is written elsewhere only in exclusive, which
// checkpoints first (purge, salvage, tamper); every other writer of the
// store (leases, cell records, nonces, modules, the lineage index, recovery
// marks) writes keys of its own and syncs badger itself.
//
// A segment is a file walDir/<n>.log of walSegment bytes, made sparse
// (Truncate), holding records back to back and zeros after them:
//
//	magic  uint32  walMagic
//	size   uint32  bytes of ops
//	seq    uint64  the round's number, one more than the record before
//	crc    uint32  CRC-32C of the 16 bytes above and the ops
//	ops    size bytes: a set is 1, uvarint key length, key, uvarint value
//	       length, value; a delete is 2, uvarint key length, key.
//
// A record that does not check ends the log if nothing valid follows it
// (a write cut by a crash: its round was never acknowledged); a valid
// record after it, or a bad one in a segment that is not the last, is
// damage, and Open refuses the store changing nothing.
const (
	walDir     = "wal"
	walExt     = ".log"
	walMagic   = 0x4c41574a // "JWAL" little-endian
	walHeader  = 20
	walSegment = 16 << 20
	opSet      = 1
	opDelete   = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// walMarkKey is the badger key each transaction of the committer sets to
// its record's seq (8 bytes big-endian), with the record's other writes.
// A record is written before its transaction goes to badger, so after a
// kill badger's mark is at most the log's last record. A mark past it
// means badger kept rounds the log lost: a power cut after rounds that
// were not synced, whose pages the kernel wrote back in another order.
// Applying the log then would set keys back under those rounds, so Open
// refuses the store.
const walMarkKey = "w/mark"

// wal is the log the committer appends to; only the goroutine that leads
// the committer touches it.
type wal struct {
	dir string
	db  *badger.DB
	f   *os.File
	seg uint64 // number of f
	off int64  // where the next record goes in f
	seq uint64 // seq of the last record written
	// old are the segments before f that a checkpoint has not dropped.
	old []uint64
	buf []byte
	// failed is the error that made the log unusable: a record may be cut
	// in it, so nothing more may be appended after it.
	failed error
}

// walOps collects a transaction's writes while they are staged in badger,
// for its record.
type walOps struct{ b []byte }

func (o *walOps) set(k, v []byte) {
	o.b = append(o.b, opSet)
	o.b = binary.AppendUvarint(o.b, uint64(len(k)))
	o.b = append(o.b, k...)
	o.b = binary.AppendUvarint(o.b, uint64(len(v)))
	o.b = append(o.b, v...)
}

func (o *walOps) del(k []byte) {
	o.b = append(o.b, opDelete)
	o.b = binary.AppendUvarint(o.b, uint64(len(k)))
	o.b = append(o.b, k...)
}

func (o *walOps) reset() { o.b = o.b[:0] }

// WALError is a log that Open cannot apply: a record that does not check
// with a valid one after it, or in a segment that is not the last (Offset
// is where); or badger holding writes past the log's end (Offset -1).
type WALError struct {
	File   string
	Offset int64
	Detail string
}

func (e *WALError) Error() string {
	at := fmt.Sprintf(" at byte %d", e.Offset)
	if e.Offset < 0 {
		at = ""
	}
	return fmt.Sprintf("badgerstore: the journal's log does not apply: %s%s: %s (nothing of the store was lost; agentrt store check reports its state, and agentrt store salvage --to DIR copies what verifies)", e.File, at, e.Detail)
}

func (e *WALError) Unwrap() error { return ErrDamaged }

// segments lists the log's segment numbers in dir, in order.
func segments(dir string) ([]uint64, error) {
	entries, err := os.ReadDir(filepath.Join(dir, walDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var segs []uint64
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), walExt)
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(name, 10, 64)
		if err != nil {
			continue
		}
		segs = append(segs, n)
	}
	slices.Sort(segs)
	return segs, nil
}

func segmentPath(dir string, n uint64) string {
	return filepath.Join(dir, walDir, fmt.Sprintf("%08d%s", n, walExt))
}

// walLeft is the log a crash left in a store's folder, read and checked
// before badger opens: a damaged log refuses the store changing nothing.
type walLeft struct {
	segs []uint64
	recs [][]byte // the records' ops, in order
	last uint64   // seq of the last record
}

// readWAL reads and checks every record of the log in dir.
func readWAL(dir string) (*walLeft, error) {
	segs, err := segments(dir)
	if err != nil || len(segs) == 0 {
		return &walLeft{}, err
	}
	left := &walLeft{segs: segs}
	for i, n := range segs {
		path := segmentPath(dir, n)
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		off := 0
		for off < len(data) {
			seq, ops, err := readRecord(data[off:])
			if err == nil && left.last != 0 && seq != left.last+1 {
				err = fmt.Errorf("record %d follows record %d", seq, left.last)
			}
			if err != nil {
				// Zeros end every segment (its sized rest); a record
				// that does not check ends only the last (the write a
				// crash cut: never acknowledged), and only when nothing
				// valid follows it.
				if !errors.Is(err, errEnd) && i < len(segs)-1 {
					return nil, &WALError{File: path, Offset: int64(off), Detail: err.Error() + ", in a segment a later one follows"}
				}
				if at := validAfter(data, off+1); at >= 0 {
					return nil, &WALError{File: path, Offset: int64(off), Detail: fmt.Sprintf("%v, and a valid record follows at byte %d", err, at)}
				}
				break
			}
			left.recs = append(left.recs, ops)
			left.last = seq
			off += walHeader + len(ops)
		}
	}
	return left, nil
}

// behind refuses a log whose last record is before badger's mark: badger
// holds rounds the log lost (walMarkKey).
func (left *walLeft) behind(dir string, mark uint64) error {
	if len(left.recs) == 0 || mark <= left.last {
		return nil
	}
	return &WALError{File: segmentPath(dir, left.segs[len(left.segs)-1]), Offset: -1,
		Detail: fmt.Sprintf("badger holds the writes of record %d, past the log's last record (%d): a power cut after rounds that were not synced; applying the log would set keys back", mark, left.last)}
}

// openWAL applies the log a crash left (a clean Close leaves none) to db,
// syncs db, and opens a new segment for the rounds to come. The segments
// applied are dropped if a checkpoint can, else kept for the next one.
func openWAL(dir string, db *badger.DB, left *walLeft) (*wal, error) {
	w := &wal{dir: dir, db: db}
	mark, err := walMark(db)
	if err != nil {
		return nil, err
	}
	// Seqs go on from the last record badger or the log holds, so that a
	// new record is always past badger's mark (a log a clean Close
	// deleted starts again from it).
	w.seq = max(mark, left.last)
	if err := left.behind(dir, mark); err != nil {
		return nil, err
	}
	if len(left.segs) > 0 {
		if err := applyWAL(db, left.recs); err != nil {
			return nil, err
		}
		w.old = left.segs
		w.seg = left.segs[len(left.segs)-1]
	}
	if err := os.MkdirAll(filepath.Join(dir, walDir), 0o700); err != nil {
		return nil, err
	}
	if err := w.next(); err != nil {
		return nil, err
	}
	if len(w.old) > 0 {
		if _, err := w.checkpoint(); err != nil {
			w.close()
			return nil, err
		}
	}
	return w, nil
}

// walMark reads badger's mark (walMarkKey): 0 when absent.
func walMark(db *badger.DB) (uint64, error) {
	var mark uint64
	err := db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(walMarkKey))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("badgerstore: the journal log's mark is %d bytes, want 8", len(v))
			}
			mark = binary.BigEndian.Uint64(v)
			return nil
		})
	})
	return mark, err
}

// applyWAL sets the keys of every record in db again, in order, then syncs
// db.
func applyWAL(db *badger.DB, recs [][]byte) error {
	wb := db.NewWriteBatch()
	defer wb.Cancel()
	for _, ops := range recs {
		if err := applyOps(ops, wb.Set, wb.Delete); err != nil {
			return err
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("badgerstore: applying the journal's log: %w", err)
	}
	if err := db.Sync(); err != nil {
		return fmt.Errorf("badgerstore: applying the journal's log: %w", err)
	}
	return nil
}

// errEnd is a record position that holds no record: zeros, the rest of a
// segment sized in advance.
var errEnd = errors.New("zeros where a record would begin")

// readRecord decodes the record at the start of b.
func readRecord(b []byte) (seq uint64, ops []byte, err error) {
	if len(b) < walHeader {
		return 0, nil, fmt.Errorf("%d bytes, short of a record's header", len(b))
	}
	magic := binary.LittleEndian.Uint32(b)
	if magic != walMagic {
		if magic == 0 {
			return 0, nil, errEnd
		}
		return 0, nil, fmt.Errorf("bad magic %#x", magic)
	}
	size := binary.LittleEndian.Uint32(b[4:])
	if uint64(size) > uint64(len(b)-walHeader) {
		return 0, nil, fmt.Errorf("a record of %d bytes, past the segment's end", size)
	}
	seq = binary.LittleEndian.Uint64(b[8:])
	if seq == 0 {
		return 0, nil, errors.New("a record numbered 0 (records count from 1)")
	}
	crc := crc32.Update(crc32.Checksum(b[:16], castagnoli), castagnoli, b[walHeader:walHeader+int(size)])
	if crc != binary.LittleEndian.Uint32(b[16:]) {
		return 0, nil, fmt.Errorf("record %d fails its checksum", seq)
	}
	ops = b[walHeader : walHeader+int(size)]
	if err := applyOps(ops, func(_, _ []byte) error { return nil }, func([]byte) error { return nil }); err != nil {
		return 0, nil, fmt.Errorf("record %d: %v", seq, err)
	}
	return seq, ops, nil
}

// validAfter returns the offset of the first record at or after from that
// checks, or -1.
func validAfter(data []byte, from int) int {
	var magic [4]byte
	binary.LittleEndian.PutUint32(magic[:], walMagic)
	for from < len(data) {
		i := bytes.Index(data[from:], magic[:])
		if i < 0 {
			return -1
		}
		if _, _, err := readRecord(data[from+i:]); err == nil {
			return from + i
		}
		from += i + 1
	}
	return -1
}

// applyOps calls set or del for each op of a record.
func applyOps(ops []byte, set func(k, v []byte) error, del func(k []byte) error) error {
	for len(ops) > 0 {
		op := ops[0]
		ops = ops[1:]
		k, rest, err := lengthPrefixed(ops)
		if err != nil {
			return err
		}
		ops = rest
		switch op {
		case opSet:
			var v []byte
			if v, ops, err = lengthPrefixed(ops); err != nil {
				return err
			}
			err = set(k, v)
		case opDelete:
			err = del(k)
		default:
			return fmt.Errorf("unknown op %d", op)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func lengthPrefixed(b []byte) (field, rest []byte, err error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return nil, nil, errors.New("an op's length runs past the record")
	}
	return b[w : w+int(n)], b[w+int(n):], nil
}

// next starts a new segment after the current one and makes its name
// durable. The current one is synced first: its last records may not be.
func (w *wal) next() error {
	if w.f != nil {
		if err := datasync(w.f); err != nil {
			return err
		}
		if err := w.f.Close(); err != nil {
			return err
		}
		w.old = append(w.old, w.seg)
		w.f = nil
	}
	w.seg++
	f, err := os.OpenFile(segmentPath(w.dir, w.seg), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := f.Truncate(walSegment); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = syncDir(filepath.Join(w.dir, walDir))
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	w.f, w.off = f, 0
	return nil
}

// write writes ops as the next record, unsynced, starting a new segment
// first if the record would not fit in this one. After an error the log
// takes nothing more.
func (w *wal) write(ops []byte) error {
	if w.failed != nil {
		return w.failed
	}
	if err := w.put(ops); err != nil {
		w.fail(err)
		return w.failed
	}
	return nil
}

// sync makes every record written so far durable.
func (w *wal) sync() error {
	if w.failed != nil {
		return w.failed
	}
	if err := datasync(w.f); err != nil {
		w.fail(err)
		return w.failed
	}
	return nil
}

func (w *wal) put(ops []byte) error {
	size := int64(walHeader + len(ops))
	if w.off > 0 && w.off+size > walSegment {
		if err := w.next(); err != nil {
			return err
		}
		if _, err := w.checkpoint(); err != nil {
			return err
		}
	}
	w.seq++
	w.buf = appendHeader(w.buf[:0], w.seq, ops)
	if len(ops) <= 64<<10 {
		w.buf = append(w.buf, ops...)
		if _, err := w.f.WriteAt(w.buf, w.off); err != nil {
			return err
		}
	} else {
		if _, err := w.f.WriteAt(w.buf, w.off); err != nil {
			return err
		}
		if _, err := w.f.WriteAt(ops, w.off+walHeader); err != nil {
			return err
		}
	}
	w.off += size
	return nil
}

// appendHeader appends the header of the record of ops with seq seq.
func appendHeader(b []byte, seq uint64, ops []byte) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint32(b, walMagic)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(ops)))
	b = binary.LittleEndian.AppendUint64(b, seq)
	crc := crc32.Update(crc32.Checksum(b[start:], castagnoli), castagnoli, ops)
	return binary.LittleEndian.AppendUint32(b, crc)
}

// checkpoint drops the segments before the current one if badger holds
// their writes durably: it syncs badger, then looks for memtables waiting
// to be written to tables, whose writes a sync does not cover. It reports
// whether the segments were dropped.
func (w *wal) checkpoint() (bool, error) {
	if len(w.old) == 0 {
		return true, nil
	}
	if err := w.db.Sync(); err != nil {
		return false, err
	}
	if n, err := memtables(w.dir); err != nil || n > 1 {
		return false, err
	}
	if err := w.removeSegments(w.old); err != nil {
		return false, err
	}
	w.old = w.old[:0]
	return true, nil
}

// removeSegments deletes the segments segs.
func (w *wal) removeSegments(segs []uint64) error {
	for _, n := range segs {
		if err := os.Remove(segmentPath(w.dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// drain checkpoints everything the log holds, waiting for badger to write
// its older memtables to tables: after it, nothing the log holds needs
// applying again, and a key the committer writes may be written elsewhere.
func (w *wal) drain() error {
	if w == nil {
		return nil
	}
	if w.failed != nil {
		return w.failed
	}
	if w.off > 0 {
		if err := w.next(); err != nil {
			w.fail(err)
			return w.failed
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		ok, err := w.checkpoint()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return errors.New("badgerstore: badger did not write its memtables to tables within a minute; the journal's log is kept")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// memtables counts badger's memtable files in dir: the current one, and
// those waiting to be written to tables.
func memtables(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".mem") {
			n++
		}
	}
	return n, nil
}

// fail makes the log take nothing more: what it holds and badger lacks is
// applied when the store is opened again.
func (w *wal) fail(err error) {
	if w.failed == nil {
		w.failed = fmt.Errorf("the journal's log: %w (the store takes no more commits; open it again)", err)
	}
}

// close closes the current segment; the log stays for the next open.
func (w *wal) close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// remove deletes the whole log and its folder, after badger closed
// cleanly (its memtables written to tables, synced).
func (w *wal) remove() error {
	w.close()
	segs, err := segments(w.dir)
	if err != nil {
		return err
	}
	if err := w.removeSegments(segs); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(w.dir, walDir)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
