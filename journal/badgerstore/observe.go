package badgerstore

import (
	"sync"
	"time"

	"github.com/agentrt/agentrt/journal"
)

// observers are told of every batch the store committed.
type observers struct {
	mu  sync.RWMutex
	seq int
	fns map[int]func(*journal.Batch)
	// syncs see how long each sync of a round took (ObserveSyncs).
	syncs map[int]func(time.Duration)
}

// ObserveSyncs makes fn see how long each sync to disk took from now on:
// the fdatasync of the journal's log after a round that held a durable
// batch, with the record's write, timed apart from badger's. fn runs in the goroutine that wrote the round and must not
// block. The returned function stops the observation.
func (s *Store) ObserveSyncs(fn func(d time.Duration)) (stop func()) {
	o := &s.c.observers
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.syncs == nil {
		o.syncs = map[int]func(time.Duration){}
	}
	o.seq++
	id := o.seq
	o.syncs[id] = fn
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		delete(o.syncs, id)
	}
}

// synced tells the sync observers how long a sync took.
func (o *observers) synced(d time.Duration) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	for _, fn := range o.syncs {
		fn(d)
	}
}

// ObserveCommits makes fn see every batch committed from now on, after its
// round is written (and synced, when a batch of it asked to be durable), in
// commit order; a batch refused (a fencing conflict, a failed write) is not
// shown. fn runs in the goroutine that wrote the round, which other
// commits wait for: it must not block, nor commit, nor keep b (the
// caller's) beyond its return. The cell's kv triggers see the agents' kv
// writes so (Batch.KV), without the host knowing of triggers. The returned
// function stops the observation.
func (s *Store) ObserveCommits(fn func(b *journal.Batch)) (stop func()) {
	o := &s.c.observers
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fns == nil {
		o.fns = map[int]func(*journal.Batch){}
	}
	o.seq++
	id := o.seq
	o.fns[id] = fn
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		delete(o.fns, id)
	}
}

// tell shows the batches of a written round to the observers.
func (o *observers) tell(round []*request) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	if len(o.fns) == 0 {
		return
	}
	for _, r := range round {
		for _, fn := range o.fns {
			fn(r.b)
		}
	}
}
