package badgerstore_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
)

// walRun commits a run in rounds of one pure entry and one kv write each
// (durable, as the host commits a durable call), calling at(i) after round i.
type walRun struct {
	st  *badgerstore.Store
	run journal.RunID
	key ed25519.PrivateKey
	w   *journal.Writer
	n   uint64
}

func startWALRun(t *testing.T, st *badgerstore.Store) *walRun {
	t.Helper()
	_, key, _ := ed25519.GenerateKey(nil)
	r := &walRun{st: st, run: journal.NewRunID(time.Now()), key: key}
	r.w = journal.NewWriter(st, journal.NewChain(r.run, key))
	if err := r.w.Add(startEntry()); err != nil {
		t.Fatal(err)
	}
	meta := &journal.RunMeta{ID: r.run, Status: journal.StatusRunning, ModuleSHA256: make([]byte, 32), Cell: key.Public().(ed25519.PublicKey)}
	if err := r.w.Commit(context.Background(), meta, true); err != nil {
		t.Fatal(err)
	}
	return r
}

// round commits one more entry and sets kv key (i mod 5) to "v<i>".
func (r *walRun) round(t *testing.T) {
	t.Helper()
	r.n++
	if err := r.w.Add(pureEntry(r.n)); err != nil {
		t.Fatal(err)
	}
	r.w.AddKV(journal.KVWrite{Namespace: "wal", Key: strconv.FormatUint(r.n%5, 10), Value: []byte("v" + strconv.FormatUint(r.n, 10))})
	if err := r.w.Commit(context.Background(), nil, true); err != nil {
		t.Fatal(err)
	}
}

// check verifies the run's journal in st: its start entry and want rounds,
// and the kv keys as the last rounds set them.
func (r *walRun) check(t *testing.T, st *badgerstore.Store, want uint64) {
	t.Helper()
	sum, err := journal.VerifyStore(context.Background(), st, r.run, journal.TrustKeys(r.key.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Entries != want+1 {
		t.Fatalf("the journal holds %d entries, want %d", sum.Entries, want+1)
	}
	for i := want; i > 0 && i+5 > want; i-- {
		v, ok, err := st.KVGet("wal", strconv.FormatUint(i%5, 10))
		if err != nil || !ok || string(v) != "v"+strconv.FormatUint(i, 10) {
			t.Fatalf("kv key %d = %q, %v, %v; want %q (set by round %d)", i%5, v, ok, err, "v"+strconv.FormatUint(i, 10), i)
		}
	}
}

// copyWAL copies the store's log (its segments as they are, the store
// open) into the folder of the store copied to cp.
func copyWAL(t *testing.T, dir, cp string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "wal"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(cp, "wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		copyFile(t, filepath.Join(dir, "wal", e.Name()), filepath.Join(cp, "wal", e.Name()))
	}
}

func segmentsOf(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "wal", "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// crashCopy is the store as a power cut could leave it: badger's files as
// they were after round `badger` (its unsynced writes after that lost), the
// log as it was after the last round.
func crashCopy(t *testing.T, rounds, badger int) (r *walRun, cp string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	st := openAt(t, dir)
	defer st.Close()
	r = startWALRun(t, st)
	for i := 1; i <= rounds; i++ {
		r.round(t)
		if i == badger {
			cp = copyDir(t, dir)
		}
	}
	copyWAL(t, dir, cp)
	return r, cp
}

// TestLogRestoresWhatBadgerLost: badger is not synced; a round is durable
// once the journal's log is. A store whose badger files lost their last
// rounds (as a power cut leaves them) opens with every acknowledged round:
// the whole journal verifies, and keys overwritten by the lost rounds hold
// the values the last of them set. Open then drops the applied log.
func TestLogRestoresWhatBadgerLost(t *testing.T) {
	r, cp := crashCopy(t, 40, 25)
	st := openAt(t, cp)
	r.check(t, st, 40)
	if segs := segmentsOf(t, cp); len(segs) != 1 {
		t.Errorf("after the open applied the log, the log has %d segments (%v), want only the new one", len(segs), segs)
	}
	// The run goes on on the reopened store, and a second crash copy
	// replays the log again: what the first open applied, then this.
	r.st, r.w = st, journal.NewWriter(st, journal.ResumeChain(r.run, r.key, r.w.Next()-1, r.w.Head()))
	for range 3 {
		r.round(t)
	}
	cp2 := copyDir(t, cp)
	copyWAL(t, cp, cp2)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cp, "wal")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a clean close left the log: %v", err)
	}
	st2 := openAt(t, cp2)
	r.check(t, st2, 43)
}

// recordEnd returns where the records of a segment end, walking their
// headers (magic, size, seq, crc).
func recordEnd(t *testing.T, seg []byte) int {
	t.Helper()
	off := 0
	for off+20 <= len(seg) && binary.LittleEndian.Uint32(seg[off:]) != 0 {
		off += 20 + int(binary.LittleEndian.Uint32(seg[off+4:]))
	}
	return off
}

// TestTornLastRecordIsDropped: a crash in the middle of a round's write
// leaves its record cut (its round was never acknowledged): the store opens
// with every round before it.
func TestTornLastRecordIsDropped(t *testing.T) {
	r, cp := crashCopy(t, 12, 6)
	segs := segmentsOf(t, cp)
	seg, err := os.ReadFile(segs[len(segs)-1])
	if err != nil {
		t.Fatal(err)
	}
	end := recordEnd(t, seg)
	// A header whose record was cut short: its checksum fails.
	torn := binary.LittleEndian.AppendUint32(nil, 0x4c41574a)
	torn = binary.LittleEndian.AppendUint32(torn, 300)
	torn = binary.LittleEndian.AppendUint64(torn, 99)
	torn = append(torn, 1, 2, 3, 4, 0xee, 0xee, 0xee)
	copy(seg[end:], torn)
	if err := os.WriteFile(segs[len(segs)-1], seg, 0o600); err != nil {
		t.Fatal(err)
	}
	st := openAt(t, cp)
	r.check(t, st, 12)
}

// TestDamagedLogRefusesTheStoreAndChangesNothing: a record that fails its
// checksum with valid records after it is not a cut write but damage: the
// store is refused with a precise error, and no file changes.
func TestDamagedLogRefusesTheStoreAndChangesNothing(t *testing.T) {
	_, cp := crashCopy(t, 12, 6)
	segs := segmentsOf(t, cp)
	seg, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	seg[30] ^= 0xff // in the first record's ops
	if err := os.WriteFile(segs[0], seg, 0o600); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, cp)
	st, err := badgerstore.Open(cp)
	if err == nil {
		st.Close()
		t.Fatal("a store whose log is damaged opened")
	}
	var we *badgerstore.WALError
	if !errors.As(err, &we) || !errors.Is(err, badgerstore.ErrDamaged) {
		t.Fatalf("open: %v, want a *WALError", err)
	}
	if we.Offset != 0 || !bytes.Contains([]byte(we.Detail), []byte("a valid record follows")) {
		t.Errorf("the error names byte %d: %q; want the first record, and the valid one after it", we.Offset, we.Detail)
	}
	sameFiles(t, before, snapshot(t, cp))
}

// TestPurgedRunStaysPurgedAfterACrash: the log is applied again at open, so
// a key the committer wrote and another writer deleted must not come back:
// a purge empties the log first. A crash right after a purge leaves the
// run purged and the others whole.
func TestPurgedRunStaysPurgedAfterACrash(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	st := openAt(t, dir)
	ctx := context.Background()
	gone, kept := startWALRun(t, st), startWALRun(t, st)
	for range 5 {
		gone.round(t)
		kept.round(t)
	}
	if err := gone.w.Add(&journal.Entry{Phase: journal.PhaseEnd, End: &journal.End{Status: journal.StatusCompleted, Steps: gone.n}}); err != nil {
		t.Fatal(err)
	}
	end := &journal.RunMeta{ID: gone.run, Status: journal.StatusCompleted, ModuleSHA256: make([]byte, 32), Cell: gone.key.Public().(ed25519.PublicKey)}
	if err := gone.w.Commit(ctx, end, true); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Purge(ctx, gone.run, false); err != nil {
		t.Fatal(err)
	}
	kept.round(t)
	cp := copyDir(t, dir)
	copyWAL(t, dir, cp)
	st2 := openAt(t, cp)
	if _, err := st2.Meta(ctx, gone.run); !errors.Is(err, journal.ErrNotFound) {
		t.Errorf("the purged run after a crash: %v, want ErrNotFound", err)
	}
	n := 0
	if err := st2.Records(ctx, gone.run, 0, func(uint64, []byte) error { n++; return nil }); err == nil && n > 0 {
		t.Errorf("the purged run's journal came back: %d records", n)
	}
	kept.check(t, st2, 6)
}

// TestFullSegmentsAreDroppedOnceBadgerHoldsThem: the log moves to a new
// segment when a round does not fit, and drops the full ones once a sync of
// badger covers them; a crash after that still has every round.
func TestFullSegmentsAreDroppedOnceBadgerHoldsThem(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	st := openAt(t, dir)
	ctx := context.Background()
	r := startWALRun(t, st)
	value := bytes.Repeat([]byte{0x5a}, 32<<10)
	const rounds = 80 // 8 values of 32 KiB a round: 20 MiB, past a 16 MiB segment
	for i := range rounds {
		r.n++
		if err := r.w.Add(pureEntry(r.n)); err != nil {
			t.Fatal(err)
		}
		for k := range 8 {
			r.w.AddKV(journal.KVWrite{Namespace: "big", Key: fmt.Sprintf("%d-%d", i, k), Value: value})
		}
		if err := r.w.Commit(ctx, nil, true); err != nil {
			t.Fatal(err)
		}
	}
	segs := segmentsOf(t, dir)
	if len(segs) != 1 || filepath.Base(segs[0]) == "00000001.log" {
		t.Errorf("after 20 MiB of rounds the log holds %v; want one segment, not the first", segs)
	}
	cp := copyDir(t, dir)
	copyWAL(t, dir, cp)
	st2 := openAt(t, cp)
	sum, err := journal.VerifyStore(ctx, st2, r.run, journal.TrustKeys(r.key.Public().(ed25519.PublicKey)))
	if err != nil || sum.Entries != rounds+1 {
		t.Fatalf("after a crash: %d entries, %v; want %d", sum.Entries, err, rounds+1)
	}
	if v, ok, err := st2.KVGet("big", fmt.Sprintf("%d-7", rounds-1)); err != nil || !ok || !bytes.Equal(v, value) {
		t.Fatalf("the last round's value: %d bytes, %v, %v", len(v), ok, err)
	}
}

// TestCheckSeesTheLogAsOpenWill: store check of a store a crash left with a
// log reads the journals with the log applied (to its copy), as the next
// open applies it, and changes no file of the store.
func TestCheckSeesTheLogAsOpenWill(t *testing.T) {
	r, cp := crashCopy(t, 40, 25)
	before := snapshot(t, cp)
	rep, err := badgerstore.Check(context.Background(), cp, badgerstore.CheckOptions{Scratch: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.LogRecords != 41 || len(rep.Runs) != 1 {
		t.Fatalf("check: ok %v, %d log records, %d runs; want ok, 41 records (the start and 40 rounds), 1 run", rep.OK, rep.LogRecords, len(rep.Runs))
	}
	if rc := rep.Runs[0]; rc.Run != r.run.String() || rc.Length != 41 || rc.Readable != 41 {
		t.Errorf("the run: %+v; want 41 entries, all readable", rc)
	}
	sameFiles(t, before, snapshot(t, cp))
}

// TestBadgerAheadOfTheLogIsRefused: a record is written before its
// transaction goes to badger, so after a kill badger never holds a round
// the log lacks. A power cut could still leave badger's pages of rounds
// that were never synced without their records; applying the log would
// then set the head records back under entries badger kept. Such a store
// (badger copied after round 40, the log after round 25) is refused.
func TestBadgerAheadOfTheLogIsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	st := openAt(t, dir)
	r := startWALRun(t, st)
	logAt := t.TempDir()
	for i := 1; i <= 40; i++ {
		r.round(t)
		if i == 25 {
			copyWAL(t, dir, logAt)
		}
	}
	cp := copyDir(t, dir)
	st.Close()
	copyWAL(t, logAt, cp)
	_, err := badgerstore.Open(cp)
	var we *badgerstore.WALError
	if !errors.As(err, &we) || !bytes.Contains([]byte(we.Detail), []byte("past the log's last record (26)")) {
		t.Fatalf("open of a store whose badger is ahead of its log: %v; want a *WALError naming the log's last record", err)
	}
	if _, err := badgerstore.Check(context.Background(), cp, badgerstore.CheckOptions{Scratch: t.TempDir()}); !errors.As(err, &we) {
		t.Fatalf("store check of it: %v; want the same *WALError", err)
	}
}

// TestLogSeqsGoOnAfterAClosedLog: a clean close deletes the log, and badger
// keeps the mark of its last record; the next records go on past it, so
// that a crash right after the reopened store's first record (badger's
// files from before it, the log with it) opens with that round applied,
// not refused as badger ahead of the log.
func TestLogSeqsGoOnAfterAClosedLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	st := openAt(t, dir)
	r := startWALRun(t, st)
	for range 10 {
		r.round(t)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st2 := openAt(t, dir)
	cp := copyDir(t, dir)
	r.st, r.w = st2, journal.NewWriter(st2, journal.ResumeChain(r.run, r.key, r.w.Next()-1, r.w.Head()))
	r.round(t)
	copyWAL(t, dir, cp)
	st3 := openAt(t, cp)
	r.check(t, st3, 11)
}
