package journal

import (
	"context"
	"errors"
	"fmt"
)

// Writer appends the entries of one run to a Store. Entries are linked as
// they are added and written at Commit, which seals the head: one signature
// per commit, whether it holds one entry or many. A Writer is used by one
// goroutine at a time.
type Writer struct {
	store Store
	chain *Chain
	// stored is the number of entries already in the store.
	stored uint64
	buf    []Record
}

// NewWriter returns a writer that appends chain's entries to store. The
// store must already hold exactly chain.Next() entries of the run.
func NewWriter(store Store, chain *Chain) *Writer {
	return &Writer{store: store, chain: chain, stored: chain.Next()}
}

// Chain returns the writer's chain.
func (w *Writer) Chain() *Chain { return w.chain }

// Add links e onto the chain and buffers it until the next Commit.
func (w *Writer) Add(e *Entry) error {
	r, err := w.chain.Link(e)
	if err != nil {
		return err
	}
	w.buf = append(w.buf, r)
	return nil
}

// Pending returns the number of entries added but not committed.
func (w *Writer) Pending() int { return len(w.buf) }

// Commit seals the head and durably appends the buffered entries, with meta
// if it is not nil. A commit with no buffered entries and no meta does
// nothing. On error the buffered entries are kept, so a caller may retry
// once the store recovers; after ErrNotDurable they are in the store and
// are not kept.
func (w *Writer) Commit(ctx context.Context, meta *RunMeta) error {
	if len(w.buf) == 0 && meta == nil {
		return nil
	}
	if len(w.buf) > 0 {
		w.buf[len(w.buf)-1].Seal = w.chain.Seal()
	}
	if err := w.store.Append(ctx, w.chain.run, w.stored, w.buf, meta); err != nil {
		err = fmt.Errorf("journal: commit of entries %d..%d: %w", w.stored, w.stored+uint64(len(w.buf)), err)
		if errors.Is(err, ErrNotDurable) {
			// The entries are in the store, so the chain has moved on;
			// what failed is the promise that they survive a crash.
			w.stored += uint64(len(w.buf))
			w.buf = w.buf[:0]
		}
		return err
	}
	w.stored += uint64(len(w.buf))
	clear(w.buf)
	w.buf = w.buf[:0]
	return nil
}
