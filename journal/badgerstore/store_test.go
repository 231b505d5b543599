package badgerstore_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	"github.com/agentrt/agentrt/journal/storetest"
)

func open(t *testing.T) *badgerstore.Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "store"))
}

// openAt opens the store in dir, closed when the test ends (a test may
// close it before: Close twice is harmless).
func openAt(t *testing.T, dir string) *badgerstore.Store {
	t.Helper()
	st, err := badgerstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func chainOf(t *testing.T, run journal.RunID, n int) []journal.Record {
	t.Helper()
	return storetest.Chain(t, run, n)
}

// TestConformance runs the store conformance suite, which every
// journal.Store passes, on badger.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) journal.Store { return open(t) })
	storetest.RunLeases(t, func(t *testing.T) journal.Leases { return open(t) })
}

// TestSecondOpenOfADirectoryIsRefused, and OpenOptions.Locked is called
// for the open that holds the store, not for the one refused.
func TestSecondOpenOfADirectoryIsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	calls := 0
	st, err := badgerstore.OpenWith(dir, badgerstore.OpenOptions{Locked: func() { calls++ }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if calls != 1 {
		t.Fatalf("Locked was called %d times for the open that holds the store, want 1", calls)
	}
	if _, err := badgerstore.OpenWith(dir, badgerstore.OpenOptions{Locked: func() { calls++ }}); !errors.Is(err, badgerstore.ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
	if calls != 1 {
		t.Fatal("Locked was called for an open refused for the lock")
	}
}

// TestEventsContinueAfterReopen: the committer numbers a run's events
// from what the store holds after a reopen (its count is cached).
func TestEventsContinueAfterReopen(t *testing.T) {
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
