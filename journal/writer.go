package journal

import (
	"context"
	"errors"
	"fmt"
)

// Writer appends the entries of one run to a Store. Entries are linked as
// they are added and written at Commit, whose head the store seals: one
// signature per commit, whether it holds one entry or many (or, in a round
// seal, one signature for the commits of many runs). A Writer is used by
// one goroutine at a time.
type Writer struct {
	store Store
	chain *Chain
	// stored is the number of entries already in the store.
	stored uint64
	batch  Batch
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
func (w *Writer) Commit(ctx context.Context, meta *RunMeta, durable bool) error {
	b := &w.batch
	if len(b.Records) == 0 && len(b.KV) == 0 && len(b.Events) == 0 && len(b.Blobs) == 0 && meta == nil {
		return nil
	}
	b.Run, b.Next, b.Meta, b.Durable = w.chain.run, w.stored, meta, durable
	b.SealWith, b.Head = nil, nil
	if len(b.Records) > 0 {
		b.SealWith, b.Head = w.chain.key, w.chain.Head()
	}
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
	clear(b.Records)
	clear(b.Blobs)
	w.batch = Batch{Records: b.Records[:0], KV: b.KV[:0], Events: b.Events[:0], Blobs: b.Blobs[:0]}
	return err
}
