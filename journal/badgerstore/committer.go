package badgerstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
	badger "github.com/dgraph-io/badger/v4"
)

// ErrClosed is returned by Commit after Close.
var ErrClosed = errors.New("badgerstore: store is closed")

// errReadOnly refuses the commits of a store opened for reading (the views
// of store check and salvage).
var errReadOnly = errors.New("the store is open for reading only")

// maxRound bounds the batches written in one round.
const maxRound = 512

type request struct {
	b    *journal.Batch
	done chan result
}

// result answers a request: its outcome, or (lead) that its goroutine is
// to write the next round.
type result struct {
	err  error
	lead bool
}

// committer makes sure one goroutine at a time writes journals, state and
// events, and that batches arriving while it writes are written together
// in its next round. There is no committer goroutine: the first caller to
// find nobody writing writes the round itself (no hand-off on an idle
// store), and when it is done it passes the lead to the oldest waiting
// caller, so no caller writes rounds for others for long.
type committer struct {
	db *badger.DB
	// wal is the journal's log (wal.go): a round is durable once its
	// records are synced there, and badger is not synced. nil for the
	// views of store check and salvage, which take no commits.
	wal *wal
	// ops are the writes of the transaction being staged, for its record.
	ops walOps

	mu      sync.Mutex
	queue   []*request
	leading bool
	closed  bool
	idle    *sync.Cond
	// away are the runs the last rounds let go that are still going and
	// have not committed since, with when they were let go; back is
	// closed, when a leader waits for them, once none is away (siblings).
	away map[journal.RunID]time.Time
	back chan struct{}
	// returns is the average time a run let go took to commit again, and
	// synced the last round's sync: they bound how long a leader waits.
	// waits counts the leaders that waited.
	returns, synced time.Duration
	waits           uint64
	// lengths and events cache each run's journal length and next event
	// seq: as the only writer, the committer can trust them once read.
	lengths map[journal.RunID]uint64
	events  map[journal.RunID]uint64
	// observers see each batch written (ObserveCommits).
	observers observers
}

func newCommitter(db *badger.DB, w *wal) *committer {
	c := &committer{db: db, wal: w, lengths: map[journal.RunID]uint64{}, events: map[journal.RunID]uint64{}, away: map[journal.RunID]time.Time{}}
	c.idle = sync.NewCond(&c.mu)
	return c
}

// submit writes b in the next round and returns its outcome. It does not
// give up when ctx ends: once queued, the batch may be written, and
// returning early would leave the caller unsure of what the store holds.
func (c *committer) submit(_ context.Context, b *journal.Batch) error {
	r := &request{b: b, done: make(chan result, 1)}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.queue = append(c.queue, r)
	c.returned(b.Run)
	if c.leading {
		c.mu.Unlock()
		res := <-r.done
		if !res.lead {
			return res.err
		}
		c.mu.Lock()
	}
	c.leading = true
	c.siblings()
	n := min(len(c.queue), maxRound)
	round := c.queue[:n:n]
	c.queue = c.queue[n:]
	c.mu.Unlock()

	c.write(round)

	c.mu.Lock()
	if len(c.queue) > 0 {
		c.queue[0].done <- result{lead: true}
	} else {
		c.leading = false
		c.idle.Broadcast()
	}
	c.mu.Unlock()
	return (<-r.done).err
}

// The siblings wait. Runs committing at once settle into cohorts: while a
// round is synced, the runs the round before let go compute their next
// step and queue, and the next round takes them alone, while the runs
// just let go compute. Rounds then hold half the runs each. Before it
// writes a round, a leader waits for the runs the last rounds let go
// that are still away (not committed since), as PostgreSQL's commit_delay
// waits for its siblings, so that one round takes them all; it waits at
// most twice the time runs have taken to come back, and never longer than
// a sync, and not at all for a run let go longer ago than that (one gone
// to a long call, or ended without a last commit), nor for a round that
// is not to be synced. A run that commits alone (one at a time) is never
// away when it leads its own round.

// maxSiblingWait bounds the wait whatever the syncs take.
const maxSiblingWait = 500 * time.Microsecond

// returned notes that run committed again; c.mu is held.
func (c *committer) returned(run journal.RunID) {
	let, ok := c.away[run]
	if !ok {
		return
	}
	delete(c.away, run)
	d := time.Since(let)
	if c.returns == 0 {
		c.returns = d
	} else {
		c.returns += (d - c.returns) / 8
	}
	if c.back != nil && len(c.away) == 0 {
		close(c.back)
		c.back = nil
	}
}

// siblingWait is how long a leader waits for runs away; c.mu is held.
func (c *committer) siblingWait() time.Duration {
	return min(2*c.returns, c.synced, maxSiblingWait)
}

// siblings waits, as the leader, for the runs away to come back, for at
// most siblingWait since they were let go; c.mu is held, and released
// while it waits.
func (c *committer) siblings() {
	wait := c.siblingWait()
	if wait <= 0 || len(c.away) == 0 || !slices.ContainsFunc(c.queue, func(r *request) bool { return r.b.Durable }) {
		// A round that is not synced is written at once: it is quick,
		// and its callers do not wait for the disk.
		return
	}
	now := time.Now()
	var until time.Time
	for run, let := range c.away {
		if end := let.Add(wait); end.After(now) {
			if end.After(until) {
				until = end
			}
		} else {
			delete(c.away, run) // gone too long: not waited for again
		}
	}
	if len(c.away) == 0 || until.IsZero() {
		return
	}
	back := make(chan struct{})
	c.back = back
	c.waits++
	c.mu.Unlock()
	t := time.NewTimer(until.Sub(now))
	select {
	case <-back:
	case <-t.C:
	}
	t.Stop()
	c.mu.Lock()
	if c.back == back {
		c.back = nil
	}
}

// exclusive runs fn while no round is written, then forgets what it cached
// about run (fn rewrote it behind the committer's back).
func (c *committer) exclusive(run journal.RunID, fn func() error) error {
	c.mu.Lock()
	for c.leading {
		c.idle.Wait()
	}
	c.leading = true
	c.mu.Unlock()
	err := c.wal.drain()
	if err == nil {
		err = fn()
	}
	c.mu.Lock()
	delete(c.lengths, run)
	delete(c.events, run)
	if len(c.queue) > 0 {
		c.queue[0].done <- result{lead: true}
	} else {
		c.leading = false
		c.idle.Broadcast()
	}
	c.mu.Unlock()
	return err
}

// close refuses new batches and waits for the round in progress.
func (c *committer) close() {
	c.mu.Lock()
	c.closed = true
	for c.leading {
		c.idle.Wait()
	}
	c.mu.Unlock()
}

// txnBudget is the most bytes staged in one transaction of several
// batches, well under badger's batch limit (15% of the memtable, 4.8 MiB),
// so that a transaction over it can only be one batch alone.
const (
	txnBudget = 2 << 20
	txnCount  = 10000
)

// writeError is a failure of badger to take a write into a transaction
// (one too big): the transaction may hold part of the batch.
type writeError struct{ err error }

func (e *writeError) Error() string { return "badgerstore: " + e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// write commits one round: every batch that passes its fencing check, in
// as few transactions as the size budget allows, each written first as a
// record of the journal's log, then the log synced if any batch asked to
// be durable. After the log failed, the round is refused whole. The runs
// of the durable batches written that go on are noted away before they
// are let go (siblings).
func (c *committer) write(round []*request) {
	refused := errReadOnly
	if c.wal != nil {
		refused = c.wal.failed
	}
	if refused != nil {
		for _, r := range round {
			r.done <- result{err: fmt.Errorf("badgerstore: commit refused: %w", refused)}
		}
		return
	}
	batches := make([]*journal.Batch, len(round))
	for i, r := range round {
		batches[i] = r.b
	}
	journal.SealBatches(batches)
	t := &roundTxn{c: c, lengths: map[journal.RunID]uint64{}, events: map[journal.RunID]uint64{}}
	durable := false
	for _, r := range round {
		size, count := batchSize(r.b)
		if len(t.staged) > 0 && (t.size+size > txnBudget || t.count+count > txnCount) {
			t.flush()
		}
		if err := t.stage(r.b); err != nil {
			r.done <- result{err: err}
			var we *writeError
			if errors.As(err, &we) {
				// The transaction holds part of this batch: drop it, and
				// with it the batches staged beside it (the budget makes
				// this all but impossible: a big batch is staged alone).
				for _, s := range t.staged {
					s.done <- result{err: fmt.Errorf("badgerstore: commit: a batch in the same transaction failed: %w", err)}
				}
				t.begin()
			}
			continue
		}
		t.size += size
		t.count += count
		t.staged = append(t.staged, r)
		durable = durable || r.b.Durable
	}
	// The last transaction is written by badger while the log is synced:
	// its record is written already.
	done := t.start()
	var syncErr error
	var took time.Duration
	if durable && (len(t.written) > 0 || done != nil) {
		// A sync makes the rounds before this one durable too.
		start := time.Now()
		if err := c.wal.sync(); err != nil {
			syncErr = fmt.Errorf("%w: %v", journal.ErrNotDurable, err)
		}
		took = time.Since(start)
	}
	t.finish(done)
	t.discard()
	if syncErr == nil && durable && len(t.written) > 0 {
		c.observers.synced(took)
	}
	if syncErr == nil {
		c.observers.tell(t.written)
	}
	c.mu.Lock()
	if syncErr == nil && durable {
		c.synced = took
		now := time.Now()
		for _, r := range t.written {
			if r.b.Durable && (r.b.Meta == nil || r.b.Meta.Status == journal.StatusRunning) {
				c.away[r.b.Run] = now
			}
		}
	}
	c.mu.Unlock()
	for _, r := range t.written {
		r.done <- result{err: syncErr}
	}
}

// roundTxn is the transaction in progress within a round.
type roundTxn struct {
	c       *committer
	txn     *badger.Txn
	size    int
	count   int
	staged  []*request
	written []*request
	// lengths and events hold the runs' journal lengths and next event
	// seqs as of the batches staged so far.
	lengths, events map[journal.RunID]uint64
}

// begin drops the transaction in progress; the next stage starts another.
// Transactions start lazily: starting one waits for badger's commits in
// flight, and a round that ends with a flush needs no new one.
func (t *roundTxn) begin() {
	t.discard()
	t.c.ops.reset()
	t.size, t.count, t.staged = 0, 0, t.staged[:0]
	clear(t.lengths)
	clear(t.events)
}

func (t *roundTxn) discard() {
	if t.txn != nil {
		t.txn.Discard()
		t.txn = nil
	}
}

// flush commits the staged batches and waits for badger.
func (t *roundTxn) flush() { t.finish(t.start()) }

// start writes the staged batches' record to the journal's log, then hands
// them to badger without waiting for it to write them; finish takes its
// answer. The record goes first, so that badger never holds a write the
// log lacks: applying the log again at open must never set a key back to
// an older value (after a kill both are in the page cache). It returns
// nil when nothing is staged, or when the record could not be written
// (the staged batches are then told, and the log takes nothing more).
func (t *roundTxn) start() chan error {
	if len(t.staged) == 0 {
		return nil
	}
	w := t.c.wal
	// The mark names the record in badger: Open compares it with the
	// log's last record (walMarkKey).
	err := t.set([]byte(walMarkKey), binary.BigEndian.AppendUint64(nil, w.seq+1))
	if err == nil {
		err = w.write(t.c.ops.b)
	}
	if err != nil {
		w.fail(err)
		failed := fmt.Errorf("badgerstore: commit: %w", w.failed)
		for _, r := range t.staged {
			r.done <- result{err: failed}
		}
		t.staged = t.staged[:0]
		t.begin()
		return nil
	}
	done := make(chan error, 1)
	t.txn.CommitWith(func(err error) { done <- err })
	t.txn = nil // CommitWith discards it
	return done
}

// finish waits for badger's answer to start. On success the staged
// batches are written, and their runs' lengths and event seqs become the
// committer's own. A refusal stops the store: the log holds the refused
// writes already, so they come back when the store is opened again, which
// the batches' error says (ErrNotDurable: the writer counts them as
// written).
func (t *roundTxn) finish(done chan error) {
	if done == nil {
		return
	}
	if err := <-done; err != nil {
		t.c.wal.fail(fmt.Errorf("badger refused a transaction whose writes it holds: %w", err))
		failed := fmt.Errorf("%w: badger refused a transaction whose writes the journal's log holds; they are applied when the store is opened again: %v", journal.ErrNotDurable, err)
		for _, r := range t.staged {
			r.done <- result{err: failed}
		}
	} else {
		t.written = append(t.written, t.staged...)
		for run, n := range t.events {
			t.c.events[run] = n
		}
		for run, n := range t.lengths {
			t.c.lengths[run] = n
		}
		for _, r := range t.staged {
			if m := r.b.Meta; m != nil && m.Status != journal.StatusRunning {
				// A finished run is not written again; a resume
				// reads its length afresh.
				delete(t.c.lengths, r.b.Run)
				delete(t.c.events, r.b.Run)
			}
		}
	}
	t.begin()
}

// stage adds b's writes to the transaction after checking that b's run
// holds exactly b.Next entries. Every check and encoding comes before the
// first write, so a batch refused for them leaves the transaction as it was.
func (t *roundTxn) stage(b *journal.Batch) error {
	if t.txn == nil {
		t.txn = t.c.db.NewTransaction(true)
	}
	have, ok := t.lengths[b.Run]
	if !ok {
		have, ok = t.c.lengths[b.Run]
	}
	if !ok {
		var err error
		if have, err = journalLength(t.txn, b.Run); err != nil {
			return err
		}
	}
	if have != b.Next {
		return fmt.Errorf("%w: the journal of %s holds %d entries, the writer expected %d", journal.ErrConflict, b.Run, have, b.Next)
	}
	if err := checkBlobs(b); err != nil {
		return err
	}
	n := uint64(len(b.Records))
	var recs []chunk
	if n > 0 {
		recs = encodeChunks(b.Next, b.Records)
	}
	var err error
	var meta []byte
	if b.Meta != nil {
		if meta, err = abi.Marshal(b.Meta); err != nil {
			return err
		}
	}
	event, ok := t.events[b.Run]
	if !ok {
		event, ok = t.c.events[b.Run]
	}
	if !ok && len(b.Events) > 0 {
		if event, err = t.c.nextEvent(t.txn, b.Run); err != nil {
			return err
		}
	}

	if err := t.write(b, n, recs, meta, event); err != nil {
		return &writeError{err}
	}
	t.lengths[b.Run] = b.Next + n
	if len(b.Events) > 0 {
		t.events[b.Run] = event + uint64(len(b.Events))
	}
	return nil
}

// write sets the keys of a checked and encoded batch.
func (t *roundTxn) write(b *journal.Batch, n uint64, recs []chunk, meta []byte, event uint64) error {
	if err := writeBlobs(t.txn, b.Blobs, t.set); err != nil {
		return err
	}
	if n > 0 {
		for _, c := range recs {
			if err := t.set(seqKey(prefixJournal, b.Run, c.first), c.recs); err != nil {
				return err
			}
		}
		// The head record, in the same transaction: the store computes
		// the head from what it writes rather than trusting b.Head.
		last := journal.Sum(b.Records[n-1].Entry)
		if err := t.set(runKey(prefixLength, b.Run), journal.EncodeHead(b.Next+n, last)); err != nil {
			return err
		}
	}
	if meta != nil {
		if err := t.set(runKey(prefixMeta, b.Run), meta); err != nil {
			return err
		}
	}
	for _, w := range b.KV {
		var err error
		if w.Delete {
			err = t.del(kvKey(w.Namespace, w.Key))
		} else {
			err = t.set(kvKey(w.Namespace, w.Key), w.Value)
		}
		if err != nil {
			return err
		}
	}
	for i, e := range b.Events {
		if err := t.set(seqKey(prefixEvents, b.Run, event+uint64(i)), e); err != nil {
			return err
		}
	}
	return nil
}

// set and del write a key in the transaction and in its record.
func (t *roundTxn) set(k, v []byte) error {
	if err := t.txn.Set(k, v); err != nil {
		return err
	}
	t.c.ops.set(k, v)
	return nil
}

func (t *roundTxn) del(k []byte) error {
	if err := t.txn.Delete(k); err != nil {
		return err
	}
	t.c.ops.del(k)
	return nil
}

// batchSize estimates the bytes and keys b adds to a transaction.
func batchSize(b *journal.Batch) (size, count int) {
	size, count = 96, 3+len(b.KV)+len(b.Events)
	for _, r := range b.Records {
		size += len(r.Entry) + 112
	}
	if size <= maxInline {
		count += size / maxChunk
	}
	for _, w := range b.KV {
		size += len(w.Namespace) + len(w.Key) + len(w.Value) + 16
	}
	for _, e := range b.Events {
		size += len(e) + 32
	}
	for _, bl := range b.Blobs {
		size += len(bl.Data) + 48
		count++
	}
	return size, count
}

func journalLength(txn *badger.Txn, run journal.RunID) (uint64, error) {
	h, err := readHead(txn, run)
	return h.Len, err
}

func (c *committer) nextEvent(txn *badger.Txn, run journal.RunID) (uint64, error) {
	opts := badger.DefaultIteratorOptions
	opts.Prefix, opts.Reverse, opts.PrefetchValues = runKey(prefixEvents, run), true, false
	it := txn.NewIterator(opts)
	defer it.Close()
	it.Seek(seqKey(prefixEvents, run, ^uint64(0)))
	if !it.Valid() {
		return 0, nil
	}
	k := it.Item().Key()
	return binary.BigEndian.Uint64(k[len(k)-8:]) + 1, nil
}
