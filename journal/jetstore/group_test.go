package jetstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/jetstore/jstest"
	"github.com/agentrt/agentrt/journal/storetest"
)

// TestGroupCommit holds the store's lead while commits of three runs
// queue, so that they go in one batch. First the third's fence is stale
// (another store appended to its run since this one cached its tail): the
// shared batch is refused, the commits are sent again one by one, and only
// the third is a conflict. Then two runs' commits share a batch the
// servers apply, and each run's next commit (fenced on the tail the shared
// batch's answer gave) goes through. The journals verify.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	nc := jstest.Connect(t, jstest.Server(t))
	s, err := Open(ctx, nc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := Open(ctx, nc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	runs := make([]journal.RunID, 3)
	recs := make([][]journal.Record, 3)
	for i := range runs {
		runs[i] = journal.NewRunID(time.Now().Add(time.Duration(i) * time.Millisecond))
		recs[i] = storetest.Chain(t, runs[i], 3) // sealed at its last, entry 2
	}
	commit := func(st *Store, i, next int) error {
		return st.Commit(ctx, &journal.Batch{Run: runs[i], Next: uint64(next), Records: recs[i][next : next+1], Durable: true})
	}
	if err := commit(s, 2, 0); err != nil {
		t.Fatal(err)
	}
	if err := commit(other, 2, 1); err != nil { // s's cached tail of run 2 is stale now
		t.Fatal(err)
	}
	grouped := func(nexts ...int) []error {
		t.Helper()
		s.gmu.Lock()
		s.leading = true
		s.gmu.Unlock()
		errs := make([]chan error, len(nexts))
		for i, next := range nexts {
			errs[i] = make(chan error, 1)
			go func() { errs[i] <- commit(s, i, next) }()
		}
		deadline := time.Now().Add(time.Minute)
		for {
			s.gmu.Lock()
			n := len(s.queue)
			s.gmu.Unlock()
			if n == len(nexts) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d commits queued, want %d", n, len(nexts))
			}
			time.Sleep(time.Millisecond)
		}
		go s.lead(ctx)
		out := make([]error, len(nexts))
		for i := range errs {
			out[i] = <-errs[i]
		}
		return out
	}
	errs := grouped(0, 0, 1)
	if errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], journal.ErrConflict) {
		t.Fatalf("a shared batch with one stale fence: %v, want the first two committed and the third a conflict", errs)
	}
	errs = grouped(1, 1)
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("a shared batch: %v", errs)
	}
	for i := range 2 {
		if err := commit(s, i, 2); err != nil {
			t.Fatalf("run %d after the shared batch: %v", i, err)
		}
		sum, err := journal.VerifyStore(ctx, s, runs[i], journal.TrustAny)
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if sum.Entries != 3 {
			t.Fatalf("run %d: %d entries, want 3", i, sum.Entries)
		}
	}
}
