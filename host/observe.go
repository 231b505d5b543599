package host

import (
	"errors"

	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/journal"
)

// RunObserver is an Observer that is also told of the runs' budgets,
// leases and journal verifications, for metrics. The host tells
// Deps.Observer when it implements RunObserver. Its methods are called in
// the run's goroutine and must not block.
type RunObserver interface {
	Observer
	// Charged is told of what a call was charged as its budget settled,
	// per dimension, and of the run's headroom then: for each dimension
	// with a ceiling, the share of the ceiling neither spent nor reserved
	// (0 to 1); -1 for a dimension without a ceiling.
	Charged(used budget.Amounts, headroom [budget.NumDims]float64)
	// BudgetRefused is told of a call the run's budget refused, and for
	// which dimension.
	BudgetRefused(d budget.Dim)
	// Lease is told of a run's lease this host acquired: its epoch, and
	// whether it took the run over from another cell (a takeover through
	// placement) rather than starting or resuming it.
	Lease(epoch uint64, takeover bool)
	// LeaseLost is told of a lease lost while its run was going on:
	// another holder took the run, and this host stopped writing it.
	LeaseLost()
	// VerifyFailed is told of a journal the host refused to continue
	// (a resume, a takeover, a fork) because it does not verify: the
	// failure class of journal/SPEC.md §9 ("decode", "chain", ...).
	VerifyFailed(class string)
}

// runObserver returns d's Observer as a RunObserver, nil when it is not one.
func (d *Deps) runObserver() RunObserver {
	ro, _ := d.Observer.(RunObserver)
	return ro
}

// verifyFailed tells the run observer of err when it is a journal's
// failure to verify; it returns err.
func (d *Deps) verifyFailed(err error) error {
	var ve *journal.VerifyError
	if ro := d.runObserver(); ro != nil && errors.As(err, &ve) && ve.Class != nil {
		ro.VerifyFailed(ve.Class.Error())
	}
	return err
}

// charged tells the run observer what a call was charged, with the run's
// headroom after it.
func (s *session) charged(used budget.Amounts) {
	ro := s.deps.runObserver()
	if ro == nil {
		return
	}
	var head [budget.NumDims]float64
	ceil := s.ledger.Ceilings()
	for d := budget.Dim(0); d < budget.NumDims; d++ {
		max, ok := ceil.Get(d)
		switch {
		case !ok:
			head[d] = -1
		case max == 0:
			head[d] = 0
		default:
			used := s.ledger.Used(d)
			if used >= max {
				head[d] = 0
			} else {
				head[d] = float64(max-used) / float64(max)
			}
		}
	}
	ro.Charged(used, head)
}
