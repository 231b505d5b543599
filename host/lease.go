package host

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentrt/agentrt/journal"
)

// ErrLeaseExpired is the cause of a run stopped because its cell could not
// renew the run's lease in time: the lease's TTL minus leaseMargin went by,
// on this process's monotonic clock, since the cell last asked for it. The
// run stops writing and dispatching at once (its context ends, so an effect
// under way is left in doubt, as in a crash) and stays running in its
// journal, for whichever cell takes the lease next.
var ErrLeaseExpired = errors.New("host: the run's lease ran out before this cell could renew it")

// leaseMargin is how long before the end of its lease a holder that could
// not renew stops: room for the clocks of two cells to disagree (a peer
// judges expiry on its own wall clock) and for the stop to take effect.
func leaseMargin(ttl time.Duration) time.Duration { return ttl / 5 }

// holder holds a run's lease for a live path: it takes it, records it in
// the journal, renews it in the background every third of its TTL and gives
// it up at the end.
//
// The holder trusts its own monotonic clock, never the store's or a peer's:
// a lease it asked for at t is its own until t + TTL - leaseMargin, and past
// that without a renewal it writes nothing more (valid fails) and tells the
// run to stop (lost is closed). A renewal that the store refuses (another
// cell took the run) stops it at once. Safety does not rest on this (a
// deposed holder's append is refused by the journal's fencing); it keeps a
// holder cut off from the store from going on with effects that a peer is
// about to run again.
type holder struct {
	leases journal.Leases
	ttl    time.Duration
	now    func() time.Time

	mu       sync.Mutex
	lease    journal.Lease
	asked    time.Time // monotonic: when the lease held was asked for
	last     error     // why the last renewal failed, if it did
	err      error     // set once: why the holder may no longer write
	released bool
	lost     chan struct{}

	stop    context.CancelFunc
	stopped chan struct{}

	// obs, when set, is told of the lease lost or run out.
	obs RunObserver
}

// acquire takes the lease of run for this cell and adds its lease entry to
// w, carrying request (the placement decision of a takeover, the envelope
// of a handoff; nil for none) under its hash; takeover says it is a
// takeover's, for the observer. With no lease store, runs go unleased and
// holder is nil.
func (h *Host) acquire(ctx context.Context, run journal.RunID, w *journal.Writer, request []byte, takeover bool) (*holder, error) {
	if h.deps.Leases == nil {
		return nil, nil
	}
	asked, now := time.Now(), h.deps.Now()
	l, err := h.deps.Leases.Acquire(ctx, run, h.deps.Key.Public().(ed25519.PublicKey), now, h.cfg.LeaseTTL)
	if err != nil {
		return nil, fmt.Errorf("host: lease of %s: %w", run, err)
	}
	e := &journal.Entry{Phase: journal.PhaseLease, Epoch: l.Epoch, Time: now.UnixNano()}
	if request != nil {
		e.Request, e.InputHash = request, journal.Sum(request)
	}
	if err := w.Add(e); err != nil {
		h.deps.Leases.Release(context.WithoutCancel(ctx), l)
		return nil, err
	}
	ro := h.deps.runObserver()
	if ro != nil {
		ro.Lease(l.Epoch, takeover)
	}
	o := &holder{leases: h.deps.Leases, lease: l, asked: asked, ttl: h.cfg.LeaseTTL, now: h.deps.Now,
		lost: make(chan struct{}), stopped: make(chan struct{}), obs: ro}
	kctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	o.stop = stop
	go o.keep(kctx)
	return o, nil
}

// epoch returns the epoch the holder writes under (0 when unleased).
func (o *holder) epoch() uint64 {
	if o == nil {
		return 0
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lease.Epoch
}

// until is when the holder stops unless it renews; o.mu held.
func (o *holder) until() time.Time { return o.asked.Add(o.ttl - leaseMargin(o.ttl)) }

// valid returns nil while the holder may write: its lease not lost, and
// renewed within TTL - leaseMargin on this process's clock. Every commit
// of the run asks it first.
func (o *holder) valid() error {
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err == nil && !time.Now().Before(o.until()) {
		o.fail(o.expired())
	}
	return o.err
}

// expired is the error of a lease that ran out unrenewed; o.mu held.
func (o *holder) expired() error {
	why := ""
	if o.last != nil {
		why = fmt.Sprintf("; its last renewal failed: %v", o.last)
	}
	return fmt.Errorf("host: lease of %s (epoch %d): %w: not renewed within %v of asking, its TTL %v less a margin of %v%s",
		o.lease.Run, o.lease.Epoch, ErrLeaseExpired, o.ttl-leaseMargin(o.ttl), o.ttl, leaseMargin(o.ttl), why)
}

// fail records why the holder may no longer write and tells the run; o.mu
// held, o.err nil.
func (o *holder) fail(err error) {
	o.err = err
	close(o.lost)
	if o.obs != nil {
		o.obs.LeaseLost()
	}
}

// keep renews the lease every third of its TTL, and after a failed
// renewal again every tenth, until the holder is released, the lease is
// lost, or it runs out unrenewed.
func (o *holder) keep(ctx context.Context) {
	defer close(o.stopped)
	for {
		o.mu.Lock()
		next := o.asked.Add(o.ttl / 3)
		if o.last != nil {
			next = time.Now().Add(o.ttl / 10)
		}
		until := o.until()
		o.mu.Unlock()
		if until.Before(next) {
			next = until
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if o.valid() != nil {
			return
		}
		o.mu.Lock()
		cur, until := o.lease, o.until()
		o.mu.Unlock()
		// A renewal that outlasts the lease is of no use: it is cut at
		// the moment the holder stops.
		rctx, cancel := context.WithDeadline(ctx, until)
		asked := time.Now()
		l, err := o.leases.Renew(rctx, cur, o.now(), o.ttl)
		cancel()
		if ctx.Err() != nil {
			return
		}
		o.mu.Lock()
		switch {
		case o.err != nil:
		case errors.Is(err, journal.ErrLeaseLost):
			o.fail(fmt.Errorf("host: lease of %s: %w", cur.Run, err))
		case err != nil:
			o.last = err
		default:
			o.lease, o.asked, o.last = l, asked, nil
		}
		o.mu.Unlock()
	}
}

// watch calls stop, once, if the holder loses its lease or lets it run out
// before the returned function is called.
func (o *holder) watch(stop func(error)) func() {
	if o == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-o.lost:
			o.mu.Lock()
			err := o.err
			o.mu.Unlock()
			stop(err)
		case <-done:
		}
	}()
	return func() { close(done) }
}

// LostLease reports whether err says a run stopped for its lease: lost to
// another cell, or run out unrenewed. Such a run writes nothing more here.
func LostLease(err error) bool {
	return errors.Is(err, ErrLeaseExpired) || errors.Is(err, journal.ErrLeaseLost)
}

// release stops the renewals and gives the lease up, so the run can be
// taken at once. A lease lost to another cell is left as it is; one that
// ran out is released too, if no cell took it yet. Release is idempotent.
func (o *holder) release(ctx context.Context) {
	if o == nil {
		return
	}
	o.stop()
	<-o.stopped
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.released {
		return
	}
	o.released = true
	if o.err == nil {
		o.err = errReleased // lost stays open: this is no loss to report
	}
	if !errors.Is(o.err, journal.ErrLeaseLost) {
		_ = o.leases.Release(context.WithoutCancel(ctx), o.lease)
	}
}

// errReleased is the holder's state once its lease is given up.
var errReleased = errors.New("host: the run's lease was released")

// yield stops the renewals and returns the lease as it stands, neither
// released nor lost: the caller hands it to another cell (Host.Yield). The
// holder writes nothing more.
func (o *holder) yield() journal.Lease {
	o.stop()
	<-o.stopped
	o.mu.Lock()
	defer o.mu.Unlock()
	o.released = true
	if o.err == nil {
		o.err = errYielded
	}
	return o.lease
}

// errYielded is the holder's state once its lease is yielded for a
// handoff.
var errYielded = errors.New("host: the run's lease was yielded to be handed to another cell")
