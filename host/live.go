package host

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/agentrt/agentrt/journal"
)

// Errors of the run lifecycle.
var (
	// ErrActive is returned by Resume (and Reopen) for a run this host is
	// running now: a run is never executed twice at once.
	ErrActive = errors.New("host: the run is running in this process")
	// ErrCancelled is the cause of a run stopped by Cancel: the run ends
	// its execution with ErrInterrupted, and its index record says
	// cancelled until a resume.
	ErrCancelled = errors.New("host: run cancelled")
	// ErrDraining is the cause of a run stopped by Drain: it stopped
	// because its host is shutting down, and stays running, to be resumed
	// when a host starts again.
	ErrDraining = errors.New("host: host shutting down")
)

// liveRun is a run this host is executing (or about to).
type liveRun struct {
	mu    sync.Mutex
	cause error
	// halt is closed by stop. The run checks it at every step boundary,
	// so a step under way (an HTTP request) completes and is journaled:
	// stopping a run leaves nothing in doubt, unlike ending its context.
	halt chan struct{}
	done chan struct{}
}

// stop asks the run to stop at its next step boundary, for cause. The first
// cause given wins.
func (r *liveRun) stop(cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cause == nil {
		r.cause = cause
		close(r.halt)
	}
}

// why returns the cause the run was stopped for, or nil.
func (r *liveRun) why() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cause
}

// live tracks the runs this host is executing.
type live struct {
	mu   sync.Mutex
	runs map[journal.RunID]*liveRun
}

func (a *live) enter(run journal.RunID) (*liveRun, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.runs[run] != nil {
		return nil, fmt.Errorf("%w: %s", ErrActive, run)
	}
	if a.runs == nil {
		a.runs = map[journal.RunID]*liveRun{}
	}
	r := &liveRun{halt: make(chan struct{}), done: make(chan struct{})}
	a.runs[run] = r
	return r, nil
}

func (a *live) leave(run journal.RunID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r := a.runs[run]; r != nil {
		delete(a.runs, run)
		close(r.done)
	}
}

func (a *live) get(run journal.RunID) *liveRun {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.runs[run]
}

func (a *live) all() []*liveRun {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*liveRun, 0, len(a.runs))
	for _, r := range a.runs {
		out = append(out, r)
	}
	return out
}

// Live reports whether this host is executing run now.
func (h *Host) Live(run journal.RunID) bool { return h.live.get(run) != nil }

// LiveRuns returns the runs this host is executing now, newest first (a
// run id begins with its start time).
func (h *Host) LiveRuns() []journal.RunID {
	h.live.mu.Lock()
	runs := make([]journal.RunID, 0, len(h.live.runs))
	for id := range h.live.runs {
		runs = append(runs, id)
	}
	h.live.mu.Unlock()
	slices.SortFunc(runs, func(a, b journal.RunID) int { return bytes.Compare(b[:], a[:]) })
	return runs
}

// LiveCount returns how many runs this host is executing now.
func (h *Host) LiveCount() int {
	h.live.mu.Lock()
	defer h.live.mu.Unlock()
	return len(h.live.runs)
}

// Stopping reports whether this host is executing run and was asked to stop
// it (Cancel, Drain): the run is finishing the step under way.
func (h *Host) Stopping(run journal.RunID) bool {
	r := h.live.get(run)
	return r != nil && r.why() != nil
}

// Cancel stops run at its next step boundary, keeping everything it
// journaled, and marks it cancelled: a cell does not resume it on its own,
// and Resume continues it. A step under way completes first. When this host is executing run, Cancel returns once it
// has stopped (or ctx ends). A run that is not executing here is marked
// cancelled if no other cell holds its lease. Cancel returns ErrFinished
// for a run that has ended; cancelling a cancelled run does nothing.
func (h *Host) Cancel(ctx context.Context, run journal.RunID) error {
	for {
		if r := h.live.get(run); r != nil {
			r.stop(ErrCancelled)
			select {
			case <-r.done:
				// A run that parked as the stop reached it (past its
				// last look for one, its wait being committed) ended
				// parked: cancel it as a parked run, below.
				if meta, err := h.deps.Store.Meta(ctx, run); err != nil || meta.Status != journal.StatusParked {
					return nil
				}
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		meta, err := h.deps.Store.Meta(ctx, run)
		if err != nil {
			return err
		}
		switch {
		case meta.Status.Finished():
			return fmt.Errorf("%w: run %s ended %s", ErrFinished, run, meta.Status)
		case meta.Status == journal.StatusCancelled:
			return nil
		}
		meta.Status = journal.StatusCancelled
		err = h.mark(ctx, run, &meta)
		if !errors.Is(err, ErrActive) {
			return err
		}
		// A resume of the run began meanwhile: stop it instead.
	}
}

// Hold marks run, which is not executing here, held: a cell does not
// resume it on its own, and Resume continues it (the crash-loop breaker of
// host/cell holds a run whose recoveries keep ending with the daemon's
// death). why is recorded in the index (RunMeta.Error). Hold returns
// ErrActive for a run this host is executing and ErrFinished for one that
// has ended.
func (h *Host) Hold(ctx context.Context, run journal.RunID, why string) error {
	if h.live.get(run) != nil {
		return fmt.Errorf("%w: %s", ErrActive, run)
	}
	meta, err := h.deps.Store.Meta(ctx, run)
	if err != nil {
		return err
	}
	if meta.Status.Finished() {
		return fmt.Errorf("%w: run %s ended %s", ErrFinished, run, meta.Status)
	}
	meta.Status, meta.Error = journal.StatusHeld, why
	return h.mark(ctx, run, &meta)
}

// mark writes meta, the index record of run, which no process executes:
// as the run's only executor in this process (ErrActive when one is), under
// the run's lease, so that no other cell is running it, and fenced on the
// journal's length.
func (h *Host) mark(ctx context.Context, run journal.RunID, meta *journal.RunMeta) error {
	// As a resume does, take the run in this process first: a resume
	// racing the mark then waits its turn (ErrActive) instead of finding
	// its journal moved under it.
	if _, err := h.live.enter(run); err != nil {
		return err
	}
	defer h.live.leave(run)
	if h.deps.Leases != nil {
		l, err := h.deps.Leases.Acquire(ctx, run, h.deps.Key.Public().(ed25519.PublicKey), h.deps.Now(), h.cfg.LeaseTTL)
		if err != nil {
			return fmt.Errorf("host: mark %s %s: %w", run, meta.Status, err)
		}
		defer h.deps.Leases.Release(context.WithoutCancel(ctx), l)
	}
	var n uint64
	if err := h.deps.Store.Records(ctx, run, 0, func(seq uint64, _ []byte) error { n = seq + 1; return nil }); err != nil {
		return err
	}
	return h.deps.Store.Commit(ctx, &journal.Batch{Run: run, Next: n, Meta: meta, Durable: true})
}

// Drain stops every run this host is executing at its next step boundary,
// as for a shutdown: they stay running, for a host to resume when it
// starts again. It returns when they have stopped or ctx ends.
func (h *Host) Drain(ctx context.Context) error {
	runs := h.live.all()
	for _, r := range runs {
		r.stop(ErrDraining)
	}
	for _, r := range runs {
		select {
		case <-r.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
