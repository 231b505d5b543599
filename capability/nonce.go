package capability

import (
	"container/heap"
	"errors"
	"sync"
	"time"
)

// NonceCache remembers the tokens a cell has been presented with.
type NonceCache interface {
	// CheckAndRecord records id as presented until expires and reports
	// whether it was recorded before and has not expired since, as one
	// atomic step. An error refuses the token (fail closed).
	CheckAndRecord(id []byte, expires, now time.Time) (seen bool, err error)
}

// ErrCacheFull is returned by MemoryNonces when it holds its maximum of
// unexpired ids: the token is refused rather than remembered nowhere.
var ErrCacheFull = errors.New("nonce cache full")

// MemoryNonces is an in-memory NonceCache. An id is kept only until its
// token expires, so memory is bounded by the tokens presented within one
// token lifetime, and at most by max ids.
type MemoryNonces struct {
	mu    sync.Mutex
	max   int
	seen  map[string]int64
	queue expiryQueue
}

// NewMemoryNonces returns an empty cache that holds at most max unexpired
// ids (max <= 0 means 1<<20).
func NewMemoryNonces(max int) *MemoryNonces {
	if max <= 0 {
		max = 1 << 20
	}
	return &MemoryNonces{max: max, seen: map[string]int64{}}
}

// CheckAndRecord implements NonceCache.
func (m *MemoryNonces) CheckAndRecord(id []byte, expires, now time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := now.Unix()
	for len(m.queue) > 0 && m.queue[0].expires <= t {
		e := heap.Pop(&m.queue).(expiring)
		if m.seen[e.id] == e.expires {
			delete(m.seen, e.id)
		}
	}
	if exp, ok := m.seen[string(id)]; ok && exp > t {
		return true, nil
	}
	if expires.Unix() <= t {
		return false, nil // already expired: nothing to remember
	}
	if len(m.seen) >= m.max {
		return false, ErrCacheFull
	}
	m.seen[string(id)] = expires.Unix()
	heap.Push(&m.queue, expiring{id: string(id), expires: expires.Unix()})
	return false, nil
}

// Len returns the number of ids held.
func (m *MemoryNonces) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.seen)
}

type expiring struct {
	id      string
	expires int64
}

// expiryQueue is a min-heap of ids by expiry.
type expiryQueue []expiring

func (q expiryQueue) Len() int           { return len(q) }
func (q expiryQueue) Less(i, j int) bool { return q[i].expires < q[j].expires }
func (q expiryQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *expiryQueue) Push(x any)        { *q = append(*q, x.(expiring)) }
func (q *expiryQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}
