package badgerstore

import (
	"context"
	"crypto/ed25519"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/journal"
)

// sibling is a run committing one durable entry at a time.
type sibling struct {
	run journal.RunID
	w   *journal.Writer
	key ed25519.PrivateKey
}

func newSibling(t *testing.T, st *Store) *sibling {
	_, key, _ := ed25519.GenerateKey(nil)
	run := journal.NewRunID(time.Now())
	w := journal.NewWriter(st, journal.NewChain(run, key))
	if err := w.Add(&journal.Entry{Phase: journal.PhaseStart, Header: &journal.Header{ModuleSHA256: make([]byte, 32), ABI: 1, Seed: make([]byte, 32)}}); err != nil {
		t.Fatal(err)
	}
	return &sibling{run: run, w: w, key: key}
}

// step commits one more completed call, durable, with the run going on
// (status, when not running, ends or parks it).
func (s *sibling) step(t *testing.T, n uint64, status journal.RunStatus) {
	resp := []byte{byte(n)}
	if err := s.w.Add(&journal.Entry{Phase: journal.PhaseCompleted, Step: n, Op: "run.input", InputHash: journal.Sum([]byte{0xa0}),
		Request: []byte{0xa0}, Response: resp, OutputHash: journal.Sum(resp), Time: time.Now().UnixNano()}); err != nil {
		t.Error(err)
		return
	}
	var meta *journal.RunMeta
	if status != "" {
		meta = &journal.RunMeta{ID: s.run, Status: status, Cell: s.key.Public().(ed25519.PublicKey), Steps: n}
	}
	if err := s.w.Commit(context.Background(), meta, true); err != nil {
		t.Error(err)
	}
}

func (c *committer) waitCount() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waits
}

// TestSiblingsWait: a run committing alone never waits for itself; a run
// that ended, or parked, is not waited for; a run let go that does not come
// back is waited for by one round at most; and runs committing at once,
// waiting for each other, all land whole and in order.
func TestSiblingsWait(t *testing.T) {
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := st.c

	alone := newSibling(t, st)
	for n := uint64(1); n <= 50; n++ {
		alone.step(t, n, "")
	}
	if w := c.waitCount(); w != 0 {
		t.Fatalf("a run committing alone waited %d times", w)
	}
	alone.step(t, 51, journal.StatusCompleted)
	parked := newSibling(t, st)
	parked.step(t, 1, "")
	parked.step(t, 2, journal.StatusParked)
	other := newSibling(t, st)
	for n := uint64(1); n <= 5; n++ {
		other.step(t, n, "")
	}
	if w := c.waitCount(); w != 0 {
		t.Fatalf("runs waited %d times for a run that ended and one that parked", w)
	}

	// gone commits twice (it came back once: runs come back), then
	// never again, without ending.
	gone := newSibling(t, st)
	gone.step(t, 1, "")
	gone.step(t, 2, "")
	for n := uint64(6); n <= 15; n++ {
		other.step(t, n, "")
	}
	if w := c.waitCount(); w > 1 {
		t.Fatalf("a run that never came back was waited for %d times", w)
	}
	c.mu.Lock()
	_, away := c.away[gone.run]
	c.mu.Unlock()
	if away {
		t.Fatalf("the run that never came back is still waited for")
	}

	// Eight runs at once.
	runs := make([]*sibling, 8)
	for i := range runs {
		runs[i] = newSibling(t, st)
	}
	var wg sync.WaitGroup
	for _, s := range runs {
		wg.Go(func() {
			for n := uint64(1); n <= 40; n++ {
				s.step(t, n, "")
			}
			s.step(t, 41, journal.StatusCompleted)
		})
	}
	wg.Wait()
	for _, s := range runs {
		sum, err := journal.VerifyStore(context.Background(), st, s.run, journal.TrustKeys(s.key.Public().(ed25519.PublicKey)))
		if err != nil || sum.Entries != 42 {
			t.Fatalf("run %s: %+v %v", s.run, sum, err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range runs {
		if _, ok := c.away[s.run]; ok {
			t.Fatalf("run %s ended and is still waited for", s.run)
		}
	}
}
