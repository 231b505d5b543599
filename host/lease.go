package host

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/agentrt/agentrt/journal"
)

// holder holds a run's lease for a live path: it takes it, records it in
// the journal, renews it as commits go by and gives it up at the end.
type holder struct {
	leases journal.Leases
	lease  journal.Lease
	ttl    time.Duration
	now    func() time.Time
	// obs, when set, is told of the lease lost.
	obs RunObserver
}

// acquire takes the lease of run for this cell and adds its lease entry to
// w, carrying decision (the placement decision of a takeover; nil for
// none) under its hash. With no lease store, runs go unleased and holder
// is nil.
func (h *Host) acquire(ctx context.Context, run journal.RunID, w *journal.Writer, decision []byte) (*holder, error) {
	if h.deps.Leases == nil {
		return nil, nil
	}
	now := h.deps.Now()
	l, err := h.deps.Leases.Acquire(ctx, run, h.deps.Key.Public().(ed25519.PublicKey), now, h.cfg.LeaseTTL)
	if err != nil {
		return nil, fmt.Errorf("host: lease of %s: %w", run, err)
	}
	e := &journal.Entry{Phase: journal.PhaseLease, Epoch: l.Epoch, Time: now.UnixNano()}
	if decision != nil {
		e.Request, e.InputHash = decision, journal.Sum(decision)
	}
	if err := w.Add(e); err != nil {
		return nil, err
	}
	ro := h.deps.runObserver()
	if ro != nil {
		ro.Lease(l.Epoch, decision != nil)
	}
	return &holder{leases: h.deps.Leases, lease: l, ttl: h.cfg.LeaseTTL, now: h.deps.Now, obs: ro}, nil
}

// epoch returns the epoch the holder writes under (0 when unleased).
func (o *holder) epoch() uint64 {
	if o == nil {
		return 0
	}
	return o.lease.Epoch
}

// renew extends the lease once half of it has gone by. A lease lost means
// another holder took the run: this one must stop writing.
func (o *holder) renew(ctx context.Context) error {
	if o == nil {
		return nil
	}
	now := o.now()
	if now.UnixNano() < o.lease.Expires-int64(o.ttl/2) {
		return nil
	}
	l, err := o.leases.Renew(ctx, o.lease, now, o.ttl)
	if err != nil {
		if o.obs != nil && errors.Is(err, journal.ErrLeaseLost) {
			o.obs.LeaseLost()
		}
		return fmt.Errorf("host: lease of %s: %w", o.lease.Run, err)
	}
	o.lease = l
	return nil
}

// release gives the lease up, so the run can be taken at once.
func (o *holder) release(ctx context.Context) {
	if o != nil {
		_ = o.leases.Release(context.WithoutCancel(ctx), o.lease)
	}
}
