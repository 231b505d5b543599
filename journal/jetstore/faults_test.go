package jetstore_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/jetstore"
	"github.com/agentrt/agentrt/journal/jetstore/jstest"
	"github.com/agentrt/agentrt/journal/storetest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// clusterMatrix skips a test of the fault matrix unless it was asked for:
// make test-cluster sets AGENTRT_TEST_CLUSTER=1. Each such test stops
// servers under a store at work, and waits out the seconds JetStream takes
// to elect new leaders: too slow for make test.
func clusterMatrix(t *testing.T) {
	t.Helper()
	if os.Getenv("AGENTRT_TEST_CLUSTER") == "" {
		t.Skip("part of the cluster fault matrix: run it with make test-cluster (AGENTRT_TEST_CLUSTER=1)")
	}
}

// streamLeader returns the server that leads the raft group of stream
// (the store's journal stream, or a KV bucket's KV_<bucket>).
func streamLeader(t *testing.T, nc *nats.Conn, servers []*server.Server, stream string) *server.Server {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := js.Stream(ctx, stream)
		cancel()
		if err == nil {
			if ci := st.CachedInfo().Cluster; ci != nil {
				for _, s := range servers {
					if s.Name() == ci.Leader {
						return s
					}
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s has no leader among the servers after a minute (last error: %v)", stream, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// writer appends commits of two entries each to its run, as a host does,
// through a fault. A commit that fails (refused, unanswered, its outcome
// unknown) is followed by what a resume does: the journal is read back and
// verified, and writing goes on from its tail with new entries (a resume's
// are new: its lease entry), whether the failed commit was stored or not.
// acked holds the entry hashes of the commits the store acknowledged.
type writer struct {
	run   journal.RunID
	key   ed25519.PrivateKey
	chain *journal.Chain
	n     uint64
	try   int
	acked [][]byte
	done  atomic.Int32
}

func newWriter(t *testing.T, run journal.RunID) *writer {
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &writer{run: run, key: key, chain: journal.NewChain(run, key)}
}

// batch links the next two entries.
func (w *writer) batch() ([]journal.Record, error) {
	var recs []journal.Record
	for i := range uint64(2) {
		e := &journal.Entry{Phase: journal.PhaseCompleted, Step: w.n + i, Op: "run.log",
			Request: fmt.Appendf(nil, "%d/%d", w.n+i, w.try), OutputHash: journal.Sum(nil)}
		if w.n+i == 0 {
			e = &journal.Entry{Phase: journal.PhaseStart, Header: &journal.Header{ModuleSHA256: make([]byte, 32), ABI: 1, Seed: make([]byte, 32)}}
		} else {
			e.InputHash = journal.Sum(e.Request)
		}
		r, err := w.chain.Link(e)
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	recs[1].Seal = w.chain.Seal()
	return recs, nil
}

func (w *writer) write(ctx context.Context, st *jetstore.Store, entries uint64, tick func(uint64)) error {
	for w.n < entries {
		tick(w.n)
		recs, err := w.batch()
		if err != nil {
			return err
		}
		err = st.Commit(ctx, &journal.Batch{Run: w.run, Next: w.n, Records: recs, Durable: true})
		if err == nil {
			w.n += 2
			w.acked = append(w.acked, journal.Sum(recs[0].Entry), journal.Sum(recs[1].Entry))
			continue
		}
		// Resume: read the journal back, verified, until the servers
		// answer; go on from its tail.
		for {
			if ctx.Err() != nil {
				return fmt.Errorf("run %s: commit at entry %d: %v; no resume before the test's time ran out", w.run, w.n, err)
			}
			sum, rerr := journal.VerifyStore(ctx, st, w.run, journal.TrustAny)
			switch {
			case errors.Is(rerr, journal.ErrNotFound):
				w.n, w.chain = 0, journal.NewChain(w.run, w.key)
			case rerr != nil && errors.Is(rerr, journal.ErrIncomplete):
				return fmt.Errorf("run %s after a failed commit (%v): %w", w.run, err, rerr)
			case rerr != nil:
				time.Sleep(100 * time.Millisecond) // the servers are electing
				continue
			default:
				if sum.Entries != w.n && sum.Entries != w.n+2 {
					return fmt.Errorf("run %s: a commit at entry %d failed (%v) and the journal holds %d entries", w.run, w.n, err, sum.Entries)
				}
				w.n, w.chain = sum.Entries, journal.ResumeChain(w.run, w.key, sum.Entries-1, sum.Head)
			}
			w.try++
			break
		}
	}
	return nil
}

// TestFaultMatrix writes journals through faults of the servers, on one
// server (R1: the server restarted) and on three (R3: the leader of the
// journal stream stopped, and restarted after 2 s). While the fault
// happens, writers keep appending fenced commits to runs of their own and
// racers contend for one run: every run ends with all its commits, in
// order, verifying; no commit the store acknowledged is missing; of the
// racers, the journal holds exactly one's entries; a lease renewed all
// along is never lost and still held against another cell. After it, the
// fencing and lease conformance tests pass on the same store.
func TestFaultMatrix(t *testing.T) {
	clusterMatrix(t)
	for _, c := range []struct {
		name     string
		replicas int
		start    func(testing.TB) []*server.Server
	}{
		{"R1", 1, func(t testing.TB) []*server.Server { return []*server.Server{jstest.Server(t)} }},
		{"R3", 3, func(t testing.TB) []*server.Server { return jstest.Cluster(t, 3) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			servers := c.start(t)
			nc := jstest.Connect(t, servers...)
			st, err := jetstore.Open(context.Background(), nc, jetstore.Options{
				Stream: "FAULTS", Prefix: "faults", LeaseBucket: "FAULT_LEASES", Replicas: c.replicas,
				// Each request waits at most this: a request sent to a
				// leader that is gone is answered by nobody.
				Timeout: 5 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			// fault stops the server the stream's raft group (R3) or the
			// only server (R1) runs on, and starts it again, for the
			// rest of the test (the servers are the test's, t, not the
			// subtest's).
			fault := func(stream string) {
				victim := servers[0]
				if c.replicas > 1 {
					victim = streamLeader(t, nc, servers, stream)
				}
				t.Logf("stopping nats-server %s, which leads %s", victim.Name(), stream)
				if c.replicas == 1 {
					restarted := jstest.Restart(t, victim)
					servers[0] = restarted
					return
				}
				jstest.Stop(victim)
				// Two of three keep the quorum: the writers go on while
				// the stopped server is down. It comes back afterwards.
				time.Sleep(2 * time.Second)
				for i, s := range servers {
					if s == victim {
						servers[i] = jstest.Restart(t, victim)
					}
				}
				// The stream is whole again once it has a leader among
				// the three.
				streamLeader(t, nc, servers, stream)
			}
			t.Run("DuringAStreamLeaderFault", func(t *testing.T) {
				writeThrough(t, st, func() { fault("FAULTS") })
			})
			same := func(*testing.T) journal.Store { return st }
			t.Run("Fencing", func(t *testing.T) { storetest.RunFencing(t, same) })
			t.Run("Leases", func(t *testing.T) {
				storetest.RunLeases(t, func(*testing.T) journal.Leases { return st })
			})
		})
	}
}

// writeThrough runs writers and racers on st and calls fault once the
// writers are a third of the way through.
func writeThrough(t *testing.T, st *jetstore.Store, fault func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const writers, commits, racers = 4, 30, 6
	ws := make([]*writer, writers)
	for i := range ws {
		ws[i] = newWriter(t, journal.NewRunID(time.Now().Add(time.Duration(i)*time.Millisecond)))
	}
	third := make(chan struct{})
	var once sync.Once
	tick := func(n uint64) {
		if n >= 2*commits/3 {
			once.Do(func() { close(third) })
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers+racers)
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.done.Store(1)
			if err := w.write(ctx, st, 2*commits, tick); err != nil {
				errs <- err
			}
		}()
	}
	// The racers each try to write the contested run's first commit once
	// the fault is under way; a racer whose commit failed for the fault
	// tries again until it wins or meets another's entries.
	contested := journal.NewRunID(time.Now().Add(time.Second))
	chains := make([][]journal.Record, racers)
	won := make([]bool, racers)
	// A holder renews a lease all along, as a host does: a renewal that
	// fails for the fault is tried again, and none may find the lease lost.
	leased := journal.NewRunID(time.Now().Add(2 * time.Second))
	owner, now := []byte("holder"), time.Unix(1000, 0)
	l, err := st.Acquire(ctx, leased, owner, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var renewals atomic.Int32
	var renewErr error
	writing := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-writing:
				return
			case <-time.After(50 * time.Millisecond):
			}
			nl, err := st.Renew(ctx, l, now, time.Hour)
			if err != nil {
				renewErr = err
			}
			switch {
			case err == nil:
				l = nl
				renewals.Add(1)
			case errors.Is(err, journal.ErrLeaseLost):
				errs <- fmt.Errorf("the lease of %s was lost, and no one else asked for it: %w", leased, err)
				return
			}
		}
	}()
	<-third
	for i := range racers {
		chains[i] = storetest.Chain(t, contested, 3)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				err := st.Commit(ctx, &journal.Batch{Run: contested, Records: chains[i], Durable: true})
				switch {
				case err == nil:
					won[i] = true
					return
				case errors.Is(err, journal.ErrConflict):
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			errs <- fmt.Errorf("racer %d: no answer before the test's time ran out", i)
		}()
	}
	fault()
	// The writers finish, the holder renews once more after the fault,
	// and stops renewing.
	go func() {
		for _, w := range ws {
			for ctx.Err() == nil && w.done.Load() == 0 {
				time.Sleep(20 * time.Millisecond)
			}
		}
		for r := renewals.Load(); ctx.Err() == nil && renewals.Load() == r; {
			time.Sleep(20 * time.Millisecond)
		}
		close(writing)
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	for _, w := range ws {
		held := map[string]bool{}
		sum, err := journal.VerifyStoreWith(ctx, st, w.run, verifier(held))
		if err != nil {
			t.Fatalf("run %s: %v", w.run, err)
		}
		if sum.Entries != 2*commits {
			t.Fatalf("run %s holds %d entries, want %d", w.run, sum.Entries, 2*commits)
		}
		for _, h := range w.acked {
			if !held[string(h)] {
				t.Fatalf("run %s: an acknowledged entry (%x) is not in the journal", w.run, h[:8])
			}
		}
		if len(w.acked) == 0 {
			t.Fatalf("run %s: no commit was acknowledged", w.run)
		}
	}
	// Exactly one racer's entries: the stored first entry is one chain's,
	// and a racer told it won is that one.
	var first []byte
	if err := st.Records(ctx, contested, 0, func(seq uint64, raw []byte) error {
		r, err := journal.DecodeRecord(raw)
		if seq == 0 {
			first = r.Entry
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	winner := -1
	for i, c := range chains {
		if slices.Equal(c[0].Entry, first) {
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("the contested run's first entry is no racer's")
	}
	for i, w := range won {
		if w && i != winner {
			t.Fatalf("racer %d was told it won, and the journal holds racer %d's entries", i, winner)
		}
	}
	if renewals.Load() == 0 {
		t.Fatalf("the lease was never renewed (last error: %v)", renewErr)
	}
	if _, err := st.Acquire(ctx, leased, []byte("other"), now, time.Hour); !errors.As(err, new(*journal.HeldError)) {
		t.Fatalf("another cell's acquire of the renewed lease: %v, want it held", err)
	}
	if _, err := journal.VerifyStore(ctx, st, contested, journal.TrustAny); err != nil {
		t.Fatalf("the contested run: %v", err)
	}
}

// verifier verifies a journal of any key, noting the hash of each entry in
// held.
func verifier(held map[string]bool) *journal.Verifier {
	v := journal.NewVerifier(journal.TrustAny)
	v.OnEntry = func(_ *journal.Entry, r *journal.Record) error {
		held[string(journal.Sum(r.Entry))] = true
		return nil
	}
	return v
}
