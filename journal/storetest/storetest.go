// Package storetest is the conformance suite of journal.Store: the
// behaviour every store must have, whatever it keeps its journals in.
// Each store's own tests call Run (and RunLeases for a journal.Leases) with
// a function that opens a fresh, empty store, so that the embedded store
// and the cluster store are held to one suite rather than to two copies
// of it.
//
// The suite uses only the interfaces a store offers the host: journal.Store
// and journal.Heads, the agent state and event reads (KV, Events), and
// journal.Blobs when the store implements it. It never reaches into a
// store's layout; tests of damage to that layout stay with each store.
package storetest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/journal"
)

// KV is the read side of the agents' durable state that a store offers the
// host: writes arrive in batches (journal.KVWrite).
type KV interface {
	// KVGet returns the value of key in namespace ns, and false if it is
	// absent.
	KVGet(ns, key string) ([]byte, bool, error)
	// KVList returns up to limit keys of namespace ns that start with
	// prefix and sort after after, in byte order, and whether more remain.
	KVList(ns, prefix, after string, limit int) ([]string, bool, error)
}

// Events is the read side of the runs' event logs.
type Events interface {
	// Events calls fn with each event-log record of run, in the order
	// they were committed.
	Events(ctx context.Context, run journal.RunID, fn func([]byte) error) error
}

// Store is what the suite needs of a store beyond journal.Store.
type Store interface {
	journal.Store
	journal.Heads
	KV
	Events
}

// Chain returns n records of a valid journal of run, sealed at its last
// record by a fresh key: a start entry, then run.log calls.
func Chain(t testing.TB, run journal.RunID, n int) []journal.Record {
	t.Helper()
	_, key, _ := ed25519.GenerateKey(nil)
	c, recs := link(t, run, key, n)
	recs[n-1].Seal = c.Seal()
	return recs
}

// link returns the first n records of a journal of run signed by key, none
// sealed, and the chain that linked them.
func link(t testing.TB, run journal.RunID, key ed25519.PrivateKey, n int) (*journal.Chain, []journal.Record) {
	t.Helper()
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
	return c, recs
}

// Run runs the store conformance suite, each test on a store that open
// returns fresh and empty. open must implement Store; the suite fails
// at once if it does not.
func Run(t *testing.T, open func(t *testing.T) journal.Store) {
	tests := append(fencingTests(), []storeTest{
		{"RecordsFromTheMiddleOfABatch", recordsFromTheMiddle},
		{"RecordsOfALiveRunAreAPrefix", recordsOfALiveRun},
		{"RunsNewestFirstAndMeta", runsNewestFirst},
		{"ModulesAreContentAddressed", modulesContentAddressed},
		{"KVCommitsWithTheRecords", kvCommitsWithRecords},
		{"KVListPagesWithinNamespace", kvListPages},
		{"EventsKeepTheirOrder", eventsKeepOrder},
		{"BlobsCommitWithTheirEntries", blobsCommitWithEntries},
		{"SealWithSealsTheHead", sealWith},
	}...)
	runTests(t, tests, open)
}

type storeTest struct {
	name string
	fn   func(*testing.T, Store)
}

// fencingTests are the tests of appends fenced on the journal's length.
// Each writes runs of its own and reads nothing else, so they may share a
// store, one that lived through a fault before them.
func fencingTests() []storeTest {
	return []storeTest{
		{"AppendIsFencedOnTheJournalLength", appendIsFenced},
		{"FencedBatchChangesNothing", fencedBatchChangesNothing},
		{"ConcurrentAppendsOneWins", concurrentAppendsOneWins},
		{"AppendsToOtherRunsDoNotInterfere", otherRunsDoNotInterfere},
	}
}

// RunFencing runs the suite's fencing tests alone: a fenced append, a
// fenced batch that changes nothing, racing appends to one run of which
// exactly one wins, and appends to other runs that racing writers do not
// disturb. Unlike Run, open may return the same store for every test.
func RunFencing(t *testing.T, open func(t *testing.T) journal.Store) {
	runTests(t, fencingTests(), open)
}

func runTests(t *testing.T, tests []storeTest, open func(t *testing.T) journal.Store) {
	get := func(t *testing.T) Store {
		t.Helper()
		js := open(t)
		st, ok := js.(Store)
		if !ok {
			t.Fatalf("storetest: %T does not implement storetest.Store (journal.Heads, KVGet/KVList, Events)", js)
		}
		return st
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, get(t)) })
	}
}

func seqs(t *testing.T, st journal.Store, run journal.RunID, from uint64) []uint64 {
	t.Helper()
	var out []uint64
	err := st.Records(context.Background(), run, from, func(seq uint64, raw []byte) error {
		r, err := journal.DecodeRecord(raw)
		if err != nil {
			return err
		}
		e, err := journal.DecodeEntry(r.Entry)
		if err != nil {
			return err
		}
		if e.Seq != seq || e.Run != run {
			return fmt.Errorf("the record delivered as entry %d of %s is entry %d of %s", seq, run, e.Seq, e.Run)
		}
		out = append(out, seq)
		return nil
	})
	if err != nil {
		t.Fatalf("records of %s from %d: %v", run, from, err)
	}
	return out
}

func upTo(n uint64) []uint64 {
	out := []uint64{}
	for i := range n {
		out = append(out, i)
	}
	return out
}

func appendIsFenced(t *testing.T, st Store) {
	ctx := context.Background()
	run := journal.NewRunID(time.Now())
	recs := Chain(t, run, 6)
	if err := st.Commit(ctx, &journal.Batch{Run: run, Records: recs[:3], Durable: true}); err != nil {
		t.Fatal(err)
	}
	// A writer with a stale view (it thinks the journal holds 0 or 2
	// entries, or 4) is refused, and nothing it sent is stored.
	for _, next := range []uint64{0, 2, 4} {
		if err := st.Commit(ctx, &journal.Batch{Run: run, Next: next, Records: recs[3:]}); !errors.Is(err, journal.ErrConflict) {
			t.Fatalf("append at %d to a journal of 3: %v, want ErrConflict", next, err)
		}
	}
	if n, err := st.Head(ctx, run); err != nil || n != 3 {
		t.Fatalf("head after refused appends: %d %v, want 3", n, err)
	}
	if err := st.Commit(ctx, &journal.Batch{Run: run, Next: 3, Records: recs[3:], Durable: true}); err != nil {
		t.Fatal(err)
	}
	if got := seqs(t, st, run, 0); !slices.Equal(got, upTo(6)) {
		t.Fatalf("stored seqs %v", got)
	}
	if n, err := st.Head(ctx, run); err != nil || n != 6 {
		t.Fatalf("head: %d %v, want 6", n, err)
	}
	if _, err := journal.VerifyStore(ctx, st, run, journal.TrustAny); err != nil {
		t.Fatal(err)
	}
}

func fencedBatchChangesNothing(t *testing.T, st Store) {
	ctx := context.Background()
	run := journal.NewRunID(time.Now())
	recs := Chain(t, run, 3)
	if err := st.Commit(ctx, &journal.Batch{Run: run, Records: recs[:2]}); err != nil {
		t.Fatal(err)
	}
	stale := &journal.Batch{Run: run, Next: 1, Records: recs[2:],
		KV:     []journal.KVWrite{{Namespace: "n", Key: "k", Value: []byte("v")}},
		Events: [][]byte{[]byte("e")}, Meta: &journal.RunMeta{ID: run, Status: journal.StatusFailed}}
	if err := st.Commit(ctx, stale); !errors.Is(err, journal.ErrConflict) {
		t.Fatalf("stale batch: %v, want ErrConflict", err)
	}
	// A batch without records is fenced too.
	noRecs := &journal.Batch{Run: run, Next: 5, KV: []journal.KVWrite{{Namespace: "n", Key: "k", Value: []byte("v")}}}
	if err := st.Commit(ctx, noRecs); !errors.Is(err, journal.ErrConflict) {
		t.Fatalf("stale batch without records: %v, want ErrConflict", err)
	}
	if _, ok, err := st.KVGet("n", "k"); ok || err != nil {
		t.Fatalf("a fenced batch's state change was applied (%v)", err)
	}
	if _, err := st.Meta(ctx, run); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("a fenced batch's meta was written: %v", err)
	}
	n := 0
	if err := st.Events(ctx, run, func([]byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("a fenced batch's events were written")
	}
	if got := seqs(t, st, run, 0); !slices.Equal(got, upTo(2)) {
		t.Fatalf("stored seqs %v after a fenced batch", got)
	}
}

func concurrentAppendsOneWins(t *testing.T, st Store) {
	ctx := context.Background()
	run := journal.NewRunID(time.Now())
	// Each writer has its own chain (its own key), as two cells would.
	const writers = 8
	chains := make([][]journal.Record, writers)
	for i := range chains {
		chains[i] = Chain(t, run, 3)
	}
	errs := make(chan error, writers)
	for i := range writers {
		go func() { errs <- st.Commit(ctx, &journal.Batch{Run: run, Records: chains[i], Durable: true}) }()
	}
	won := 0
	for range writers {
		err := <-errs
		switch {
		case err == nil:
			won++
		case !errors.Is(err, journal.ErrConflict):
			t.Fatal(err)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d racing appends of entry 0 succeeded, want exactly 1", won, writers)
	}
	if got := seqs(t, st, run, 0); !slices.Equal(got, upTo(3)) {
		t.Fatalf("stored seqs %v, want one writer's 3 entries", got)
	}
	if _, err := journal.VerifyStore(ctx, st, run, journal.TrustAny); err != nil {
		t.Fatalf("the winner's journal: %v", err)
	}
}

// otherRunsDoNotInterfere: while writers race for one run, other runs'
// writers append commit after commit, and every one of their commits
// succeeds.
func otherRunsDoNotInterfere(t *testing.T, st Store) {
	ctx := context.Background()
	contested := journal.NewRunID(time.Now())
	const others, commits = 3, 5
	var wg sync.WaitGroup
	fail := make(chan error, others+8)
	runs := make([]journal.RunID, others)
	for i := range others {
		runs[i] = journal.NewRunID(time.Now().Add(time.Duration(i+1) * time.Millisecond))
		recs := Chain(t, runs[i], commits*2)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range commits {
				b := &journal.Batch{Run: runs[i], Next: uint64(2 * c), Records: recs[2*c : 2*c+2], Durable: true}
				if err := st.Commit(ctx, b); err != nil {
					fail <- fmt.Errorf("commit %d of run %d: %w", c, i, err)
					return
				}
			}
		}()
	}
	won := make(chan struct{}, 8)
	for range 8 {
		recs := Chain(t, contested, 2)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := st.Commit(ctx, &journal.Batch{Run: contested, Records: recs, Durable: true})
			switch {
			case err == nil:
				won <- struct{}{}
			case !errors.Is(err, journal.ErrConflict):
				fail <- err
			}
		}()
	}
	wg.Wait()
	close(fail)
	for err := range fail {
		t.Error(err)
	}
	if len(won) != 1 {
		t.Fatalf("%d racing writers of the contested run won, want 1", len(won))
	}
	for _, run := range runs {
		if got := seqs(t, st, run, 0); !slices.Equal(got, upTo(2*commits)) {
			t.Fatalf("run %s: seqs %v", run, got)
		}
		if _, err := journal.VerifyStore(ctx, st, run, journal.TrustAny); err != nil {
			t.Fatal(err)
		}
	}
}

func recordsFromTheMiddle(t *testing.T, st Store) {
	ctx := context.Background()
	run := journal.NewRunID(time.Now())
	recs := Chain(t, run, 10)
	for _, cut := range [][2]int{{0, 4}, {4, 5}, {5, 10}} {
		if err := st.Commit(ctx, &journal.Batch{Run: run, Next: uint64(cut[0]), Records: recs[cut[0]:cut[1]]}); err != nil {
			t.Fatal(err)
		}
	}
	for from := range uint64(11) {
		got := seqs(t, st, run, from)
		if uint64(len(got)) != 10-min(from, 10) || (len(got) > 0 && got[0] != from) {
			t.Fatalf("from %d: %v", from, got)
		}
	}
	// A caller that stops early gets its own error back.
	stop := errors.New("stop")
	n := 0
	err := st.Records(ctx, run, 0, func(uint64, []byte) error {
		if n++; n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 3 {
		t.Fatalf("records stopped after %d: %v, want the caller's error after 3", n, err)
	}
	// A run with no journal has no records.
	if got := seqs(t, st, journal.NewRunID(time.Now()), 0); len(got) != 0 {
		t.Fatalf("an unknown run has records %v", got)
	}
}

// recordsOfALiveRun: a reader reads a run's records again and again while
// a writer commits to it, one entry and then two a commit. Every read
// gets the journal up to some commit, whole and in order (a consistent
// prefix), never an error because the writer moved on while it read.
func recordsOfALiveRun(t *testing.T, st Store) {
	ctx := context.Background()
	run := journal.NewRunID(time.Now())
	const total = 30
	recs := Chain(t, run, total)
	done := make(chan error, 1)
	go func() {
		for next := 0; next < total; {
			k := 1 + next%2
			if next+k > total {
				k = total - next
			}
			if err := st.Commit(ctx, &journal.Batch{Run: run, Next: uint64(next), Records: recs[next : next+k], Durable: true}); err != nil {
				done <- fmt.Errorf("commit at entry %d: %w", next, err)
				return
			}
			next += k
		}
		done <- nil
	}()
	read := func() int {
		t.Helper()
		n := 0
		err := st.Records(ctx, run, 0, func(seq uint64, raw []byte) error {
			if seq != uint64(n) {
				return fmt.Errorf("entry %d delivered after %d entries", seq, n)
			}
			if !bytes.Equal(raw, journal.AppendRecord(nil, &recs[seq])) {
				return fmt.Errorf("entry %d is not the record the writer committed", seq)
			}
			n++
			return nil
		})
		if err != nil {
			t.Fatalf("a read of the live run after %d entries: %v", n, err)
		}
		return n
	}
	reads, last := 0, 0
	for writing := true; writing; reads++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			writing = false
		default:
		}
		n := read()
		if n < last {
			t.Fatalf("read %d got %d entries, an earlier read %d", reads, n, last)
		}
		last = n
	}
	if n := read(); n != total {
		t.Fatalf("after the writer finished, a read got %d entries of %d", n, total)
	}
	t.Logf("%d reads while the writer committed", reads)
}

func runsNewestFirst(t *testing.T, st Store) {
	ctx := context.Background()
	base := time.Now()
	var ids []journal.RunID
	for i := range 3 {
		id := journal.NewRunID(base.Add(time.Duration(i) * time.Second))
		ids = append(ids, id)
		m := &journal.RunMeta{ID: id, Status: journal.StatusRunning, ModuleSHA256: make([]byte, 32), Cell: make([]byte, 32), ModuleName: fmt.Sprint(i)}
		if err := st.Commit(ctx, &journal.Batch{Run: id, Records: Chain(t, id, 1), Meta: m}); err != nil {
			t.Fatal(err)
		}
	}
	// A later commit replaces the index record.
	done := &journal.RunMeta{ID: ids[1], Status: journal.StatusCompleted, ModuleSHA256: make([]byte, 32), Cell: make([]byte, 32), ModuleName: "1", Steps: 7}
	if err := st.Commit(ctx, &journal.Batch{Run: ids[1], Next: 1, Meta: done}); err != nil {
		t.Fatal(err)
	}
	runs, err := st.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 || runs[0].ID != ids[2] || runs[1].ID != ids[1] || runs[2].ID != ids[0] {
		t.Fatalf("runs not newest first: %v", runs)
	}
	if runs[1].Status != journal.StatusCompleted || runs[1].Steps != 7 {
		t.Fatalf("the replaced index record lists as %+v", runs[1])
	}
	m, err := st.Meta(ctx, ids[0])
	if err != nil || m.ModuleName != "0" || m.Status != journal.StatusRunning {
		t.Fatalf("meta of run 0: %+v %v", m, err)
	}
	if _, err := st.Meta(ctx, journal.NewRunID(base)); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("meta of an unknown run: %v", err)
	}
}

func modulesContentAddressed(t *testing.T, st Store) {
	ctx := context.Background()
	code := []byte("\x00asm module")
	sum := journal.Sum(code)
	if err := st.PutModule(ctx, sum, code); err != nil {
		t.Fatal(err)
	}
	if err := st.PutModule(ctx, sum, code); err != nil {
		t.Fatalf("storing a module twice: %v", err)
	}
	got, err := st.Module(ctx, sum)
	if err != nil || !bytes.Equal(got, code) {
		t.Fatalf("module: %q %v", got, err)
	}
	// A module of several megabytes, as Go guests are.
	big := bytes.Repeat([]byte("0123456789abcdef"), 3<<20/16)
	if err := st.PutModule(ctx, journal.Sum(big), big); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Module(ctx, journal.Sum(big)); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("a 3 MiB module read back as %d bytes: %v", len(got), err)
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

func kvCommitsWithRecords(t *testing.T, st Store) {
	ctx := context.Background()
	run := journal.NewRunID(time.Now())
	recs := Chain(t, run, 4)
	put := func(next int, to int, kv ...journal.KVWrite) error {
		return st.Commit(ctx, &journal.Batch{Run: run, Next: uint64(next), Records: recs[next:to], KV: kv, Durable: true})
	}
	if err := put(0, 2, journal.KVWrite{Namespace: "ns", Key: "a", Value: []byte("1")}, journal.KVWrite{Namespace: "ns", Key: "b", Value: []byte("2")}); err != nil {
		t.Fatal(err)
	}
	if err := put(2, 3, journal.KVWrite{Namespace: "ns", Key: "a", Value: []byte("3")}, journal.KVWrite{Namespace: "ns", Key: "b", Delete: true}); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := st.KVGet("ns", "a"); err != nil || !ok || string(v) != "3" {
		t.Fatalf("ns/a = %q %v %v, want the second commit's 3", v, ok, err)
	}
	if _, ok, err := st.KVGet("ns", "b"); err != nil || ok {
		t.Fatalf("ns/b deleted by the second commit: present %v (%v)", ok, err)
	}
	// A refused commit's write is not applied.
	if err := put(1, 4, journal.KVWrite{Namespace: "ns", Key: "a", Value: []byte("stale")}); !errors.Is(err, journal.ErrConflict) {
		t.Fatalf("stale commit: %v", err)
	}
	if v, _, _ := st.KVGet("ns", "a"); string(v) != "3" {
		t.Fatalf("a refused commit changed ns/a to %q", v)
	}
	// Keys and namespaces with bytes that are not plain words.
	odd := []journal.KVWrite{{Namespace: "n.s *>", Key: "k.e y/>*", Value: []byte("x")}, {Namespace: "n.s *>", Key: "", Value: []byte("empty key")}}
	if err := put(3, 4, odd...); err != nil {
		t.Fatal(err)
	}
	for _, w := range odd {
		if v, ok, err := st.KVGet(w.Namespace, w.Key); err != nil || !ok || !bytes.Equal(v, w.Value) {
			t.Fatalf("%q/%q = %q %v %v", w.Namespace, w.Key, v, ok, err)
		}
	}
}

func kvListPages(t *testing.T, st Store) {
	ctx := context.Background()
	var writes []journal.KVWrite
	for _, k := range []string{"a/3", "a/1", "b/1", "a/2"} {
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
	keys, _, err = st.KVList("ns", "", "", 10)
	if err != nil || !slices.Equal(keys, []string{"a/2", "a/3", "b/1"}) {
		t.Fatalf("all keys after a delete: %v %v", keys, err)
	}
	if v, ok, _ := st.KVGet("other", "a/9"); !ok || len(v) != 0 {
		t.Fatal("namespaces leak into each other")
	}
}

func eventsKeepOrder(t *testing.T, st Store) {
	ctx := context.Background()
	run, other := journal.NewRunID(time.Now()), journal.NewRunID(time.Now().Add(time.Second))
	commit := func(run journal.RunID, evs ...string) {
		var raw [][]byte
		for _, e := range evs {
			raw = append(raw, []byte(e))
		}
		if err := st.Commit(ctx, &journal.Batch{Run: run, Events: raw}); err != nil {
			t.Fatal(err)
		}
	}
	commit(run, "a", "b")
	commit(other, "x")
	commit(run, "c")
	commit(run, "d")
	for r, want := range map[journal.RunID][]string{run: {"a", "b", "c", "d"}, other: {"x"}} {
		var got []string
		if err := st.Events(ctx, r, func(b []byte) error { got = append(got, string(b)); return nil }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("events %v, want %v", got, want)
		}
	}
}

func blobsCommitWithEntries(t *testing.T, st Store) {
	ctx := context.Background()
	run := journal.NewRunID(time.Now())
	recs := Chain(t, run, 2)
	blob := journal.NewBlob(bytes.Repeat([]byte("payload "), 300))
	bs, ok := st.(journal.Blobs)
	if !ok {
		// A store without a blob area refuses a batch that carries any,
		// and writes nothing of it.
		if err := st.Commit(ctx, &journal.Batch{Run: run, Records: recs, Blobs: []journal.Blob{blob}}); err == nil {
			t.Fatal("a store without journal.Blobs took a batch with a blob")
		}
		if n, _ := st.Head(ctx, run); n != 0 {
			t.Fatalf("the refused batch wrote %d entries", n)
		}
		return
	}
	if err := st.Commit(ctx, &journal.Batch{Run: run, Next: 5, Records: recs, Blobs: []journal.Blob{blob}}); !errors.Is(err, journal.ErrConflict) {
		t.Fatalf("fenced batch: %v", err)
	}
	if _, err := bs.Blob(ctx, blob.Sum); !errors.Is(err, journal.ErrNotFound) || !errors.Is(err, journal.ErrBlob) {
		t.Fatalf("the blob of a refused batch: %v, want missing", err)
	}
	bad := journal.Blob{Sum: blob.Sum, Data: []byte("other bytes")}
	if err := st.Commit(ctx, &journal.Batch{Run: run, Records: recs, Blobs: []journal.Blob{bad}}); err == nil || !strings.Contains(err.Error(), "not named by its hash") {
		t.Fatalf("a misnamed blob: %v", err)
	}
	if n, _ := st.Head(ctx, run); n != 0 {
		t.Fatalf("the batch with a misnamed blob wrote %d entries", n)
	}
	// A blob larger than one message of a message system.
	large := journal.NewBlob(bytes.Repeat([]byte("0123456789abcdef"), 3<<20/16))
	if err := st.Commit(ctx, &journal.Batch{Run: run, Records: recs, Blobs: []journal.Blob{blob, blob, large}}); err != nil {
		t.Fatal(err)
	}
	for _, b := range []journal.Blob{blob, large} {
		got, err := bs.Blob(ctx, b.Sum)
		if err != nil || !bytes.Equal(got, b.Data) {
			t.Fatalf("read back %d bytes of %d: %v", len(got), len(b.Data), err)
		}
	}
	// Another run's commit of a blob the store holds already.
	run2 := journal.NewRunID(time.Now())
	if err := st.Commit(ctx, &journal.Batch{Run: run2, Records: Chain(t, run2, 1), Blobs: []journal.Blob{blob}}); err != nil {
		t.Fatal(err)
	}
	if got, err := bs.Blob(ctx, blob.Sum); err != nil || !bytes.Equal(got, blob.Data) {
		t.Fatalf("the shared blob: %v", err)
	}
	if _, err := bs.Blob(ctx, journal.Sum([]byte("absent"))); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("an absent blob: %v", err)
	}
}

// sealWith: a batch that asks for a seal is sealed by the store over the
// head it names, and the journal verifies.
func sealWith(t *testing.T, st Store) {
	ctx := context.Background()
	_, key, _ := ed25519.GenerateKey(nil)
	run := journal.NewRunID(time.Now())
	_, recs := link(t, run, key, 3)
	head := journal.Sum(recs[2].Entry)
	if err := st.Commit(ctx, &journal.Batch{Run: run, Records: recs, SealWith: key, Head: head, Durable: true}); err != nil {
		t.Fatal(err)
	}
	var last *journal.Record
	err := st.Records(ctx, run, 2, func(_ uint64, raw []byte) error {
		r, err := journal.DecodeRecord(raw)
		last = r
		return err
	})
	if err != nil || last == nil || last.Seal == nil {
		t.Fatalf("the last record of a sealed batch: %+v %v", last, err)
	}
	if err := journal.VerifySeal(last.Seal, run, 2, head); err != nil {
		t.Fatalf("the store's seal: %v", err)
	}
	if _, err := journal.VerifyStore(ctx, st, run, journal.TrustAny); err != nil {
		t.Fatal(err)
	}
}

// RunLeases runs the lease conformance suite, each test on leases that
// open returns fresh. Each test leases runs of its own, so open may also
// return the same leases every time.
func RunLeases(t *testing.T, open func(t *testing.T) journal.Leases) {
	t.Run("ChangeHandsByCompareAndSwap", func(t *testing.T) { leasesCAS(t, open(t)) })
	t.Run("RacingAcquiresOneWins", func(t *testing.T) { racingAcquires(t, open(t)) })
	t.Run("HandedToAnotherCell", func(t *testing.T) { leasesHand(t, open(t)) })
}

// leasesHand: a lease handed to another cell (journal.LeaseHandover) is
// that cell's to acquire with the next epoch, nobody else's before it
// expires; a stale holder cannot hand it, and a lease handed back is the
// giver's again.
func leasesHand(t *testing.T, st journal.Leases) {
	hs, ok := st.(journal.LeaseHandover)
	if !ok {
		t.Fatalf("%T does not hand leases over (journal.LeaseHandover)", st)
	}
	ctx := context.Background()
	run := journal.NewRunID(time.Now())
	a, b, c := []byte("cell-a"), []byte("cell-b"), []byte("cell-c")
	now := time.Unix(2000, 0)
	la, err := st.Acquire(ctx, run, a, now, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	stale := la
	stale.Epoch--
	if _, err := hs.Hand(ctx, stale, b, now.Add(5*time.Second).UnixNano()); !errors.Is(err, journal.ErrLeaseLost) {
		t.Fatalf("hand by a stale holder: %v, want ErrLeaseLost", err)
	}
	handed, err := hs.Hand(ctx, la, b, now.Add(5*time.Second).UnixNano())
	if err != nil || handed.Epoch != la.Epoch || !bytes.Equal(handed.Owner, b) {
		t.Fatalf("hand to b: %+v %v", handed, err)
	}
	var held *journal.HeldError
	if _, err := st.Acquire(ctx, run, c, now.Add(time.Second), 10*time.Second); !errors.As(err, &held) || !bytes.Equal(held.Lease.Owner, b) {
		t.Fatalf("a third cell acquiring a handed lease: %v", err)
	}
	if _, err := st.Renew(ctx, la, now.Add(time.Second), 10*time.Second); !errors.Is(err, journal.ErrLeaseLost) {
		t.Fatalf("the giver renewing after the hand: %v, want ErrLeaseLost", err)
	}
	back, err := hs.Hand(ctx, handed, a, now.Add(10*time.Second).UnixNano())
	if err != nil || !bytes.Equal(back.Owner, a) {
		t.Fatalf("hand back to a: %+v %v", back, err)
	}
	if back, err = hs.Hand(ctx, back, b, now.Add(5*time.Second).UnixNano()); err != nil {
		t.Fatal(err)
	}
	lb, err := st.Acquire(ctx, run, b, now.Add(time.Second), 10*time.Second)
	if err != nil || lb.Epoch != la.Epoch+1 {
		t.Fatalf("b acquiring the lease handed to it: %+v %v", lb, err)
	}
	if _, err := hs.Hand(ctx, back, a, now.Add(time.Second).UnixNano()); !errors.Is(err, journal.ErrLeaseLost) {
		t.Fatalf("handing back a lease its receiver acquired: %v, want ErrLeaseLost", err)
	}
}

func leasesCAS(t *testing.T, st journal.Leases) {
	ctx := context.Background()
	run := journal.NewRunID(time.Now())
	a, b := []byte("cell-a"), []byte("cell-b")
	now := time.Unix(1000, 0)
	la, err := st.Acquire(ctx, run, a, now, 10*time.Second)
	if err != nil || la.Epoch != 1 || !bytes.Equal(la.Owner, a) || la.Expires != now.Add(10*time.Second).UnixNano() {
		t.Fatalf("first acquire: %+v %v", la, err)
	}
	var held *journal.HeldError
	if _, err := st.Acquire(ctx, run, b, now.Add(5*time.Second), 10*time.Second); !errors.As(err, &held) || held.Lease.Epoch != 1 || !bytes.Equal(held.Lease.Owner, a) {
		t.Fatalf("acquire of a lease held by another cell: %v", err)
	}
	if la, err = st.Renew(ctx, la, now.Add(9*time.Second), 10*time.Second); err != nil || la.Expires != now.Add(19*time.Second).UnixNano() {
		t.Fatalf("renew: %+v %v", la, err)
	}
	// The renewal counts: at 15 s the lease is still held.
	if _, err := st.Acquire(ctx, run, b, now.Add(15*time.Second), 10*time.Second); !errors.As(err, &held) {
		t.Fatalf("acquire of a renewed lease: %v", err)
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
	// The owner taking its own lease again moves to a new epoch.
	la2, err := st.Acquire(ctx, run, a, now.Add(22*time.Second), time.Second)
	if err != nil || la2.Epoch != 4 {
		t.Fatalf("re-acquire by the owner: %+v %v", la2, err)
	}
	if _, err := st.Renew(ctx, la, now.Add(22*time.Second), time.Second); !errors.Is(err, journal.ErrLeaseLost) {
		t.Fatalf("renewal of the owner's older epoch: %v, want ErrLeaseLost", err)
	}
}

func racingAcquires(t *testing.T, st journal.Leases) {
	ctx := context.Background()
	run := journal.NewRunID(time.Now())
	now := time.Unix(5000, 0)
	const cells = 6
	type result struct {
		l   journal.Lease
		err error
	}
	out := make(chan result, cells)
	for i := range cells {
		go func() {
			l, err := st.Acquire(ctx, run, []byte{'c', byte(i)}, now, 10*time.Second)
			out <- result{l, err}
		}()
	}
	won := 0
	for range cells {
		r := <-out
		var held *journal.HeldError
		switch {
		case r.err == nil:
			won++
			if r.l.Epoch != 1 {
				t.Errorf("the winner has epoch %d, want 1", r.l.Epoch)
			}
		case !errors.As(r.err, &held):
			t.Errorf("a losing acquire: %v, want a *HeldError", r.err)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d racing acquires won, want exactly 1", won, cells)
	}
}
