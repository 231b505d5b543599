package journal

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Writer appends the entries of one run to a Store. Entries are linked as
// they are added and written at Commit, whose head the store seals: one
// signature per commit, whether it holds one entry or many (or, in a round
// seal, one signature for the commits of many runs). A Writer is used by
// one goroutine at a time.
type Writer struct {
	store Store
	chain *Chain
	// stored is the number of entries in the store, or on their way to it
	// (CommitGroup).
	stored uint64
	batch  Batch
	// flying is the batch of a group commit in progress (CommitGroup),
	// whose outcome landed sends; spare holds the emptied buffers of the
	// batch before it. failed is the error of a group commit that failed: the
	// writer refuses everything after it.
	flying *Batch
	landed chan landing
	spare  Batch
	failed error
	// OnGroup, when set, is told how long the store took to write each
	// group commit (CommitGroup) that succeeded, in the goroutine that
	// waits for it.
	OnGroup func(took time.Duration)
}

// landing is the outcome of a group commit.
type landing struct {
	err  error
	took time.Duration
}

// NewWriter returns a writer that appends chain's entries to store. The
// store must already hold exactly chain.Next() entries of the run.
func NewWriter(store Store, chain *Chain) *Writer {
	return &Writer{store: store, chain: chain, stored: chain.Next()}
}

// Add links e onto the chain and buffers it until the next Commit.
func (w *Writer) Add(e *Entry) error {
	r, err := w.chain.Link(e)
	if err != nil {
		return err
	}
	w.batch.Records = append(w.batch.Records, r)
	return nil
}

// AddKV buffers a state change to commit atomically with the entries.
func (w *Writer) AddKV(kv KVWrite) { w.batch.KV = append(w.batch.KV, kv) }

// AddBlobs buffers blobs that the entries reference (a Payload's Blobs),
// to commit atomically with them.
func (w *Writer) AddBlobs(blobs ...Blob) { w.batch.Blobs = append(w.batch.Blobs, blobs...) }

// AddEvents buffers event-log records to commit with the entries.
func (w *Writer) AddEvents(events ...[]byte) { w.batch.Events = append(w.batch.Events, events...) }

// Head returns the hash of the last entry added; Next the seq the next one
// gets.
func (w *Writer) Head() []byte { return w.chain.Head() }
func (w *Writer) Next() uint64 { return w.chain.Next() }

// Pending returns the number of entries added but not committed.
func (w *Writer) Pending() int { return len(w.batch.Records) }

// Commit seals the head and appends what is buffered, with meta if it is
// not nil; durable says whether to wait until it is on disk (see
// Batch.Durable). A commit with nothing buffered and no meta does nothing.
// On error the buffer is kept, so a caller may retry once the store
// recovers; after ErrNotDurable it is in the store and is not kept.
//
// A group commit in progress (CommitGroup) lands first: Commit returns its
// error, if it failed, without committing.
func (w *Writer) Commit(ctx context.Context, meta *RunMeta, durable bool) error {
	if err := w.Wait(); err != nil {
		return err
	}
	b := &w.batch
	if w.empty() && meta == nil {
		return nil
	}
	w.prepare(meta, durable)
	err := w.store.Commit(ctx, b)
	if err != nil {
		err = fmt.Errorf("journal: commit of entries %d..%d: %w", w.stored, w.stored+uint64(len(b.Records)), err)
		if !errors.Is(err, ErrNotDurable) {
			return err
		}
		// The batch is in the store, so the chain has moved on; what
		// failed is the promise that it survives a crash.
	}
	w.stored += uint64(len(b.Records))
	w.batch = emptied(b)
	return err
}

// emptied returns b's buffers emptied, for the next batch (what b
// referenced is dropped).
func emptied(b *Batch) Batch {
	clear(b.Records)
	clear(b.Blobs)
	return Batch{Records: b.Records[:0], KV: b.KV[:0], Events: b.Events[:0], Blobs: b.Blobs[:0]}
}

func (w *Writer) empty() bool {
	b := &w.batch
	return len(b.Records) == 0 && len(b.KV) == 0 && len(b.Events) == 0 && len(b.Blobs) == 0
}

// prepare sets the buffered batch's run, fence, seal and meta.
func (w *Writer) prepare(meta *RunMeta, durable bool) {
	b := &w.batch
	b.Run, b.Next, b.Meta, b.Durable = w.chain.run, w.stored, meta, durable
	b.SealWith, b.Head = nil, nil
	if len(b.Records) > 0 {
		b.SealWith, b.Head = w.chain.key, w.chain.Head()
	}
}

// CommitGroup starts committing what is buffered, as Commit(ctx, nil,
// false) would, and returns without waiting for the store: the caller goes
// on adding entries (a run's next pure calls) while the store writes the
// group. At most one group is in flight: CommitGroup, Commit and Wait
// first wait for the one before, and return its error if it failed; after
// that the writer refuses every commit, since the store lacks entries the
// chain has moved past (a resume goes on from what the store holds).
func (w *Writer) CommitGroup(ctx context.Context) error {
	if err := w.Wait(); err != nil {
		return err
	}
	if w.empty() {
		return nil
	}
	w.prepare(nil, false)
	b := new(Batch)
	*b = w.batch
	w.stored += uint64(len(b.Records))
	w.flying = b
	w.batch, w.spare = w.spare, Batch{}
	if w.landed == nil {
		w.landed = make(chan landing, 1)
	}
	// Once started, a group lands whatever becomes of ctx.
	ctx = context.WithoutCancel(ctx)
	go func() {
		start := time.Now()
		err := w.store.Commit(ctx, b)
		w.landed <- landing{err, time.Since(start)}
	}()
	return nil
}

// Wait waits for the group commit in flight, if any (CommitGroup), and
// returns its error.
func (w *Writer) Wait() error {
	if w.failed != nil {
		return w.failed
	}
	b := w.flying
	if b == nil {
		return nil
	}
	l := <-w.landed
	w.flying = nil
	if err := l.err; err != nil && !errors.Is(err, ErrNotDurable) {
		w.failed = fmt.Errorf("journal: commit of entries %d..%d: %w", b.Next, b.Next+uint64(len(b.Records)), err)
		return w.failed
	}
	if w.OnGroup != nil {
		w.OnGroup(l.took)
	}
	w.spare = emptied(b)
	return nil
}
