package badgerstore_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
)

// startEntry is a run's start entry.
func startEntry() *journal.Entry {
	return &journal.Entry{Phase: journal.PhaseStart, Header: &journal.Header{ModuleSHA256: make([]byte, 32), ABI: 1, Seed: make([]byte, 32)}}
}

// pureEntry is the completed entry of pure call step.
func pureEntry(step uint64) *journal.Entry {
	resp := []byte{byte(step), byte(step >> 8)}
	return &journal.Entry{Phase: journal.PhaseCompleted, Step: step, Op: "run.input", InputHash: journal.Sum([]byte{0xa0}),
		Request: []byte{0xa0}, Response: resp, OutputHash: journal.Sum(resp), Time: time.Now().UnixNano()}
}

// TestCommitGroupLandsInOrder: groups committed without waiting
// (Writer.CommitGroup), with entries added while each is in flight, land in
// order; what the run's end commits follows them, and the whole journal
// verifies. A group's outcome is reported to OnGroup once it lands.
func TestCommitGroupLandsInOrder(t *testing.T) {
	st := open(t)
	ctx := context.Background()
	_, key, _ := ed25519.GenerateKey(nil)
	run := journal.NewRunID(time.Now())
	w := journal.NewWriter(st, journal.NewChain(run, key))
	landed := 0
	w.OnGroup = func(took time.Duration) {
		if took <= 0 {
			t.Errorf("a group took %v", took)
		}
		landed++
	}
	if err := w.Add(startEntry()); err != nil {
		t.Fatal(err)
	}
	const groups, per = 200, 7
	step := uint64(0)
	for range groups {
		for range per {
			step++
			if err := w.Add(pureEntry(step)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.CommitGroup(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Add(&journal.Entry{Phase: journal.PhaseEnd, End: &journal.End{Status: journal.StatusCompleted, Steps: step}}); err != nil {
		t.Fatal(err)
	}
	meta := &journal.RunMeta{ID: run, Status: journal.StatusCompleted, Cell: key.Public().(ed25519.PublicKey), Steps: step}
	if err := w.Commit(ctx, meta, true); err != nil {
		t.Fatal(err)
	}
	if landed != groups {
		t.Errorf("OnGroup was told of %d groups, want %d", landed, groups)
	}
	sum, err := journal.VerifyStore(ctx, st, run, journal.TrustKeys(key.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(groups*per + 2); sum.Entries != want {
		t.Fatalf("the journal holds %d entries, want %d", sum.Entries, want)
	}
}

// TestFailedGroupStopsTheWriter: a group commit that fails (the store
// closed under it) is reported by the next commit, and every commit after
// it is refused, since the chain moved past entries the store lacks; the
// store holds exactly what landed before it.
func TestFailedGroupStopsTheWriter(t *testing.T) {
	dir := t.TempDir()
	st, err := badgerstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, key, _ := ed25519.GenerateKey(nil)
	run := journal.NewRunID(time.Now())
	w := journal.NewWriter(st, journal.NewChain(run, key))
	if err := w.Add(startEntry()); err != nil {
		t.Fatal(err)
	}
	if err := w.Add(pureEntry(1)); err != nil {
		t.Fatal(err)
	}
	if err := w.CommitGroup(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Add(pureEntry(2)); err != nil {
		t.Fatal(err)
	}
	if err := w.CommitGroup(ctx); err != nil {
		t.Fatal(err) // started: its outcome comes later
	}
	err = w.Commit(ctx, nil, true)
	if !errors.Is(err, badgerstore.ErrClosed) {
		t.Fatalf("the commit after a failed group: %v, want the group's ErrClosed", err)
	}
	if err2 := w.Commit(ctx, nil, true); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("the next commit: %v, want the same refusal", err2)
	}
	st, err = badgerstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n := 0
	if err := st.Records(ctx, run, 0, func(uint64, []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("the store holds %d entries, want the 2 that landed", n)
	}
}
