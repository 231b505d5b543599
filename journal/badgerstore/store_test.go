package badgerstore_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
)

func open(t *testing.T) *badgerstore.Store {
	t.Helper()
	st, err := badgerstore.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func chainOf(t *testing.T, run journal.RunID, n int) []journal.Record {
	t.Helper()
	_, key, _ := ed25519.GenerateKey(nil)
	c := journal.NewChain(run, key)
	recs := []journal.Record{}
	r, err := c.Link(&journal.Entry{Phase: journal.PhaseStart, Header: &journal.Header{ModuleSHA256: make([]byte, 32), ABI: 1, Seed: make([]byte, 32)}})
	if err != nil {
		t.Fatal(err)
	}
	recs = append(recs, r)
	for i := 1; i < n; i++ {
		req := []byte{byte(i)}
		r, err := c.Link(&journal.Entry{Phase: journal.PhaseCompleted, Step: uint64(i), Op: "run.log", Request: req,
			InputHash: journal.Sum(req), OutputHash: journal.Sum(nil)})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	recs[n-1].Seal = c.Seal()
	return recs
}

func TestAppendIsFencedOnTheJournalLength(t *testing.T) {
	st := open(t)
	ctx := context.Background()
	run := journal.NewRunID(time.Now())
	recs := chainOf(t, run, 6)
	if err := st.Commit(ctx, &journal.Batch{Run: run, Records: recs[:3], Durable: true}); err != nil {
		t.Fatal(err)
	}
	// A writer with a stale view (it thinks the journal holds 2 entries,
	// or 4) is refused, and nothing it sent is stored.
	for _, next := range []uint64{0, 2, 4} {
		if err := st.Commit(ctx, &journal.Batch{Run: run, Next: next, Records: recs[3:]}); !errors.Is(err, journal.ErrConflict) {
			t.Fatalf("append at %d to a journal of 3: %v, want ErrConflict", next, err)
		}
	}
	if err := st.Commit(ctx, &journal.Batch{Run: run, Next: 3, Records: recs[3:], Durable: true}); err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	if err := st.Records(ctx, run, 0, func(seq uint64, _ []byte) error { seqs = append(seqs, seq); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seqs, []uint64{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("stored seqs %v", seqs)
	}
	if _, err := journal.VerifyStore(ctx, st, run, journal.TrustAny); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentAppendsOneWins(t *testing.T) {
	st := open(t)
	ctx := context.Background()
	run := journal.NewRunID(time.Now())
	recs := chainOf(t, run, 2)
	errs := make(chan error, 8)
	for range 8 {
		go func() { errs <- st.Commit(ctx, &journal.Batch{Run: run, Records: recs, Durable: true}) }()
	}
	won := 0
	for range 8 {
		err := <-errs
		switch {
		case err == nil:
			won++
		case !errors.Is(err, journal.ErrConflict):
			t.Fatal(err)
		}
	}
	if won != 1 {
		t.Fatalf("%d of 8 racing appends of entry 0 succeeded, want exactly 1", won)
	}
}

func TestRunsNewestFirstAndMeta(t *testing.T) {
	st := open(t)
	ctx := context.Background()
	base := time.Now()
	var ids []journal.RunID
	for i := range 3 {
		id := journal.NewRunID(base.Add(time.Duration(i) * time.Second))
		ids = append(ids, id)
		m := &journal.RunMeta{ID: id, Status: journal.StatusRunning, ModuleSHA256: make([]byte, 32), Cell: make([]byte, 32), ModuleName: fmt.Sprint(i)}
		if err := st.Commit(ctx, &journal.Batch{Run: id, Records: chainOf(t, id, 1), Meta: m}); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := st.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 || runs[0].ID != ids[2] || runs[2].ID != ids[0] {
		t.Fatalf("runs not newest first: %v", runs)
	}
	if _, err := st.Meta(ctx, journal.NewRunID(base)); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("meta of an unknown run: %v", err)
	}
}

func TestModulesAreContentAddressed(t *testing.T) {
	st := open(t)
	ctx := context.Background()
	sum := journal.Sum([]byte("\x00asm module"))
	if err := st.PutModule(ctx, sum, []byte("\x00asm module")); err != nil {
		t.Fatal(err)
	}
	got, err := st.Module(ctx, sum)
	if err != nil || string(got) != "\x00asm module" {
		t.Fatalf("module: %q %v", got, err)
	}
	// Bytes stored under a digest they do not have are refused on read.
	wrong := journal.Sum([]byte("claimed"))
	if err := st.PutModule(ctx, wrong, []byte("\x00asm other bytes")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Module(ctx, wrong); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("module whose bytes do not match its digest: %v, want a corrupt-module error", err)
	}
	if _, err := st.Module(ctx, journal.Sum([]byte("other"))); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("unknown module: %v", err)
	}
}

func TestKVListPagesWithinNamespace(t *testing.T) {
	st := open(t)
	ctx := context.Background()
	var writes []journal.KVWrite
	for _, k := range []string{"a/1", "a/2", "a/3", "b/1"} {
		writes = append(writes, journal.KVWrite{Namespace: "ns", Key: k, Value: []byte(k)})
	}
	writes = append(writes, journal.KVWrite{Namespace: "other", Key: "a/9", Value: []byte{}})
	if err := st.Commit(ctx, &journal.Batch{KV: writes}); err != nil {
		t.Fatal(err)
	}
	keys, more, err := st.KVList("ns", "a/", "", 2)
	if err != nil || !slices.Equal(keys, []string{"a/1", "a/2"}) || !more {
		t.Fatalf("page 1: %v %v %v", keys, more, err)
	}
	keys, more, err = st.KVList("ns", "a/", "a/2", 2)
	if err != nil || !slices.Equal(keys, []string{"a/3"}) || more {
		t.Fatalf("page 2: %v %v %v", keys, more, err)
	}
	if err := st.Commit(ctx, &journal.Batch{KV: []journal.KVWrite{{Namespace: "ns", Key: "a/1", Delete: true}}}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := st.KVGet("ns", "a/1"); ok {
		t.Fatal("deleted key still there")
	}
	if v, ok, _ := st.KVGet("other", "a/9"); !ok || len(v) != 0 {
		t.Fatal("namespaces leak into each other")
	}
}

func TestSecondOpenOfADirectoryIsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	st, err := badgerstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := badgerstore.Open(dir); !errors.Is(err, badgerstore.ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
}

func TestRecordsFromTheMiddleOfABatch(t *testing.T) {
	st := open(t)
	ctx := context.Background()
	run := journal.NewRunID(time.Now())
	recs := chainOf(t, run, 10)
	for _, cut := range [][2]int{{0, 4}, {4, 5}, {5, 10}} {
		if err := st.Commit(ctx, &journal.Batch{Run: run, Next: uint64(cut[0]), Records: recs[cut[0]:cut[1]]}); err != nil {
			t.Fatal(err)
		}
	}
	for from := range uint64(11) {
		var seqs []uint64
		err := st.Records(ctx, run, from, func(seq uint64, raw []byte) error {
			r, err := journal.DecodeRecord(raw)
			if err != nil {
				return err
			}
			e, err := journal.DecodeEntry(r.Entry)
			if err != nil || e.Seq != seq {
				return fmt.Errorf("record at %d holds entry %d (%v)", seq, e.Seq, err)
			}
			seqs = append(seqs, seq)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if uint64(len(seqs)) != 10-min(from, 10) || (len(seqs) > 0 && seqs[0] != from) {
			t.Fatalf("from %d: %v", from, seqs)
		}
	}
}

func TestFencedBatchChangesNothing(t *testing.T) {
	st := open(t)
	ctx := context.Background()
	run := journal.NewRunID(time.Now())
	recs := chainOf(t, run, 3)
	if err := st.Commit(ctx, &journal.Batch{Run: run, Records: recs[:2]}); err != nil {
		t.Fatal(err)
	}
	stale := &journal.Batch{Run: run, Next: 1, Records: recs[2:],
		KV:     []journal.KVWrite{{Namespace: "n", Key: "k", Value: []byte("v")}},
		Events: [][]byte{[]byte("e")}, Meta: &journal.RunMeta{ID: run, Status: journal.StatusFailed}}
	if err := st.Commit(ctx, stale); !errors.Is(err, journal.ErrConflict) {
		t.Fatalf("stale batch: %v, want ErrConflict", err)
	}
	if _, ok, _ := st.KVGet("n", "k"); ok {
		t.Fatal("a fenced batch's state change was applied")
	}
	if _, err := st.Meta(ctx, run); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("a fenced batch's meta was written: %v", err)
	}
	n := 0
	st.Events(ctx, run, func([]byte) error { n++; return nil })
	if n != 0 {
		t.Fatalf("a fenced batch's events were written")
	}
}

func TestEventsKeepTheirOrderAcrossCommitsAndReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	st, err := badgerstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run := journal.NewRunID(time.Now())
	commit := func(st *badgerstore.Store, evs ...string) {
		var raw [][]byte
		for _, e := range evs {
			raw = append(raw, []byte(e))
		}
		if err := st.Commit(ctx, &journal.Batch{Run: run, Events: raw}); err != nil {
			t.Fatal(err)
		}
	}
	commit(st, "a", "b")
	commit(st, "c")
	st.Close()
	if st, err = badgerstore.Open(dir); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	commit(st, "d")
	var got []string
	st.Events(ctx, run, func(b []byte) error { got = append(got, string(b)); return nil })
	if !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("events %v", got)
	}
}

func TestBigBatchesCommitAlone(t *testing.T) {
	st := open(t)
	ctx := context.Background()
	big := make([]byte, 3<<20)
	errs := make(chan error, 4)
	for i := range 4 {
		go func() {
			errs <- st.Commit(ctx, &journal.Batch{KV: []journal.KVWrite{{Namespace: "n", Key: fmt.Sprint(i), Value: big}}, Durable: true})
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		if v, ok, err := st.KVGet("n", fmt.Sprint(i)); !ok || len(v) != len(big) || err != nil {
			t.Fatalf("key %d: %d bytes, %v %v", i, len(v), ok, err)
		}
	}
}

// TestOpenAfterACrashLeftAnEmptyMemtable: a process killed between badger's
// creating a memtable file and sizing it leaves an empty file, which badger
// alone refuses to open.
func TestOpenAfterACrashLeftAnEmptyMemtable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	st, err := badgerstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run := journal.NewRunID(time.Now())
	if err := st.Commit(ctx, &journal.Batch{Run: run, Records: chainOf(t, run, 3), Durable: true}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := os.WriteFile(filepath.Join(dir, "00009.mem"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err = badgerstore.Open(dir)
	if err != nil {
		t.Fatalf("open after an empty memtable file was left: %v", err)
	}
	defer st.Close()
	if _, err := journal.VerifyStore(ctx, st, run, journal.TrustAny); err != nil {
		t.Fatalf("the journal written before: %v", err)
	}
}

func TestLeasesChangeHandsByCompareAndSwap(t *testing.T) {
	st := open(t)
	ctx := context.Background()
	run := journal.NewRunID(time.Now())
	a, b := []byte("cell-a"), []byte("cell-b")
	now := time.Unix(1000, 0)
	la, err := st.Acquire(ctx, run, a, now, 10*time.Second)
	if err != nil || la.Epoch != 1 {
		t.Fatalf("first acquire: %+v %v", la, err)
	}
	var held *journal.HeldError
	if _, err := st.Acquire(ctx, run, b, now.Add(5*time.Second), 10*time.Second); !errors.As(err, &held) || held.Lease.Epoch != 1 {
		t.Fatalf("acquire of a lease held by another cell: %v", err)
	}
	if la, err = st.Renew(ctx, la, now.Add(9*time.Second), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// Expired: another cell takes it, with the next epoch, and the first
	// holder is deposed.
	lb, err := st.Acquire(ctx, run, b, now.Add(20*time.Second), 10*time.Second)
	if err != nil || lb.Epoch != 2 {
		t.Fatalf("takeover of an expired lease: %+v %v", lb, err)
	}
	if _, err := st.Renew(ctx, la, now.Add(21*time.Second), 10*time.Second); !errors.Is(err, journal.ErrLeaseLost) {
		t.Fatalf("renewal by the deposed holder: %v, want ErrLeaseLost", err)
	}
	if err := st.Release(ctx, la); !errors.Is(err, journal.ErrLeaseLost) {
		t.Fatalf("release by the deposed holder: %v, want ErrLeaseLost", err)
	}
	if err := st.Release(ctx, lb); err != nil {
		t.Fatal(err)
	}
	// Released: free for anyone, and the epoch still grows.
	la, err = st.Acquire(ctx, run, a, now.Add(22*time.Second), time.Second)
	if err != nil || la.Epoch != 3 {
		t.Fatalf("acquire after release: %+v %v", la, err)
	}
}

func TestPurgeDeletesWholeRunsAndKeepsTheOthersIntact(t *testing.T) {
	st := open(t)
	ctx := context.Background()
	module := journal.Sum([]byte("\x00asm shared module"))
	if err := st.PutModule(ctx, module, []byte("\x00asm shared module")); err != nil {
		t.Fatal(err)
	}
	var runs []journal.RunID
	for i := range 3 {
		run := journal.NewRunID(time.Now().Add(time.Duration(i) * time.Second))
		runs = append(runs, run)
		status := journal.StatusCompleted
		if i == 2 {
			status = journal.StatusRunning
		}
		meta := &journal.RunMeta{ID: run, Status: status, ModuleSHA256: module, Cell: make([]byte, 32)}
		if err := st.Commit(ctx, &journal.Batch{Run: run, Records: chainOf(t, run, 5), Meta: meta, Events: [][]byte{[]byte("e")}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Purge(ctx, runs[2], false); err == nil {
		t.Fatal("a run that has not finished was purged")
	}
	p, err := st.Purge(ctx, runs[0], false)
	if err != nil || p.Records != 1 || p.Events != 1 || p.Module != 0 {
		t.Fatalf("purge of run 0: %+v %v; want its commit and event, and the module kept (run 1 uses it)", p, err)
	}
	if _, err := st.Meta(ctx, runs[0]); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("purged run still listed: %v", err)
	}
	for _, run := range runs[1:] {
		if _, err := journal.VerifyStore(ctx, st, run, journal.TrustAny); err != nil {
			t.Fatalf("kept run %s: %v", run, err)
		}
	}
	if _, err := st.Module(ctx, module); err != nil {
		t.Fatalf("the module still used by run 1 was deleted: %v", err)
	}
}

// TestLargestBatchesCommit commits the biggest batches a host makes: a
// group of 256 entries carrying 60 KB log lines each, with the run's event
// buffer full (1 MiB of events); and a kv write of a value near the
// request limit, whose three entries each carry the request, with 1 MiB of
// events. Each commits whole, in one transaction.
func TestLargestBatchesCommit(t *testing.T) {
	st := open(t)
	ctx := context.Background()
	_, key, _ := ed25519.GenerateKey(nil)
	run := journal.NewRunID(time.Now())
	c := journal.NewChain(run, key)
	link := func(e *journal.Entry) journal.Record {
		r, err := c.Link(e)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	events := func() [][]byte {
		var evs [][]byte
		for range 16 {
			evs = append(evs, make([]byte, 64<<10))
		}
		return evs
	}
	recs := []journal.Record{link(&journal.Entry{Phase: journal.PhaseStart, Header: &journal.Header{ModuleSHA256: make([]byte, 32), ABI: 1, Seed: make([]byte, 32)}})}
	for i := 1; i <= 256; i++ {
		req := make([]byte, 60<<10)
		req[0] = byte(i)
		recs = append(recs, link(&journal.Entry{Phase: journal.PhaseCompleted, Step: uint64(i), Op: "run.log", Request: req,
			InputHash: journal.Sum(req), OutputHash: journal.Sum(nil)}))
	}
	recs[len(recs)-1].Seal = c.Seal()
	if err := st.Commit(ctx, &journal.Batch{Run: run, Records: recs, Events: events()}); err != nil {
		t.Fatalf("a group of 256 log lines of 60 KB: %v", err)
	}
	req := make([]byte, 1<<20-64)
	var kvRecs []journal.Record
	kvRecs = append(kvRecs, link(&journal.Entry{Phase: journal.PhaseIntent, Step: 257, Op: "kv.put", Request: req, InputHash: journal.Sum(req)}))
	kvRecs = append(kvRecs, link(&journal.Entry{Phase: journal.PhaseExecuting, Step: 257, Op: "kv.put", InputHash: journal.Sum(req), Key: "k"}))
	kvRecs = append(kvRecs, link(&journal.Entry{Phase: journal.PhaseCompleted, Step: 257, Op: "kv.put", InputHash: journal.Sum(req), OutputHash: journal.Sum(nil)}))
	kvRecs[2].Seal = c.Seal()
	if err := st.Commit(ctx, &journal.Batch{Run: run, Next: uint64(len(recs)), Records: kvRecs, Events: events(),
		KV: []journal.KVWrite{{Namespace: "n", Key: "k", Value: make([]byte, 1<<20-256)}}, Durable: true}); err != nil {
		t.Fatalf("a kv write near the request limit: %v", err)
	}
	if sum, err := journal.VerifyStore(ctx, st, run, journal.TrustAny); err != nil || sum.Entries != 260 {
		t.Fatalf("verify: %v %v", sum, err)
	}
}
