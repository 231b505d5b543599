package badgerstore

import (
	"sync"

	"github.com/agentrt/agentrt/journal"
)

// observers are told of every batch the store committed.
type observers struct {
	mu  sync.RWMutex
	seq int
	fns map[int]func(*journal.Batch)
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
