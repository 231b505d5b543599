package cell

import (
	"testing"
	"time"

	"github.com/agentrt/agentrt/journal"
)

// TestKVObserverIdleWithoutKVTriggers: the store's commit observer queues
// an agent's kv write, and wakes the kv worker, only while the cell has a
// kv trigger; other triggers do not count. (Every kv.put of every run
// passes through it: a cell without kv triggers must not pay a goroutine
// wake-up per commit.)
func TestKVObserverIdleWithoutKVTriggers(t *testing.T) {
	ts := newTriggers(&Server{cell: &Cell{}}) // not started: no worker drains the queue
	live := func(name, on string) *liveTrigger {
		lt, err := newLive(triggerDef{Name: name, On: on, Misfire: "skip", Overlap: "allow"})
		if err != nil {
			t.Fatal(err)
		}
		return lt
	}
	write := &journal.Batch{Run: journal.NewRunID(time.Now()), KV: []journal.KVWrite{{Namespace: "orders", Key: "new/a", Value: []byte("x")}}}
	observed := func(want int) {
		t.Helper()
		ts.observe(write)
		ts.mu.Lock()
		n := len(ts.kvq)
		ts.kvq = nil
		ts.mu.Unlock()
		woke := false
		select {
		case <-ts.kvWake:
			woke = true
		default:
		}
		if n != want || woke != (want > 0) {
			t.Fatalf("with %d kv triggers: %d writes queued, worker woken %v; want %d queued", ts.kvTriggers, n, woke, want)
		}
	}
	observed(0)
	ts.mu.Lock()
	ts.setLocked("nightly", live("nightly", "schedule:0 3 * * *"))
	ts.mu.Unlock()
	observed(0)
	ts.mu.Lock()
	ts.setLocked("orders", live("orders", "kv:orders/new/"))
	ts.mu.Unlock()
	observed(1)
	ts.mu.Lock()
	ts.setLocked("orders", live("orders", "kv:orders/old/")) // replaced, still one
	ts.mu.Unlock()
	observed(1)
	ts.mu.Lock()
	ts.setLocked("orders", nil)
	ts.mu.Unlock()
	observed(0)
	if ts.kvTriggers != 0 || len(ts.all) != 1 {
		t.Fatalf("after the kv trigger's removal: %d kv triggers, %d triggers; want 0 and 1", ts.kvTriggers, len(ts.all))
	}
}
