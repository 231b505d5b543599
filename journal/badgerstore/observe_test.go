package badgerstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/journal"
)

// TestCommitObserverSeesWrittenBatches: an observer sees each committed
// batch's kv writes once, in commit order, not a batch the fencing check
// refused, and nothing after it stops.
func TestCommitObserverSeesWrittenBatches(t *testing.T) {
	st := open(t)
	ctx := context.Background()
	var mu sync.Mutex
	var seen []string
	stop := st.ObserveCommits(func(b *journal.Batch) {
		mu.Lock()
		defer mu.Unlock()
		for _, w := range b.KV {
			seen = append(seen, fmt.Sprintf("%s/%s=%x del=%v", w.Namespace, w.Key, w.Value, w.Delete))
		}
	})
	run := journal.NewRunID(time.Now())
	recs := chainOf(t, run, 3)
	if err := st.Commit(ctx, &journal.Batch{Run: run, Records: recs[:1], KV: []journal.KVWrite{{Namespace: "ns", Key: "a", Value: []byte{1}}}, Durable: true}); err != nil {
		t.Fatal(err)
	}
	// Fenced: the journal holds 1 entry, not 0.
	err := st.Commit(ctx, &journal.Batch{Run: run, Records: recs[1:2], KV: []journal.KVWrite{{Namespace: "ns", Key: "refused", Value: []byte{2}}}})
	if !errors.Is(err, journal.ErrConflict) {
		t.Fatalf("a fenced batch: %v", err)
	}
	if err := st.Commit(ctx, &journal.Batch{Run: run, Next: 1, Records: recs[1:2], KV: []journal.KVWrite{{Namespace: "ns", Key: "b", Value: []byte{3}}, {Namespace: "ns", Key: "a", Delete: true}}}); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := st.Commit(ctx, &journal.Batch{Run: run, Next: 2, Records: recs[2:], KV: []journal.KVWrite{{Namespace: "ns", Key: "late", Value: []byte{4}}}}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got, want := fmt.Sprint(seen), "[ns/a=01 del=false ns/b=03 del=false ns/a= del=true]"; got != want {
		t.Fatalf("the observer saw %s, want %s", got, want)
	}
}
