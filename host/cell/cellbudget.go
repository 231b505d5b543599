package cell

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/journal"
)

// The cell budget (SchedulerOptions.CellBudget): a ceiling per dimension on
// the sum of the ceilings of the runs admitted from outside (submissions,
// task attempts, trigger firings) that have not ended. A run's ceilings
// are what it may spend at most, so the runs in flight never spend more
// than the cell budget together; a spawn is carved out of its parent's
// ceilings, counted already, and is not counted again.
//
// A run holds its ceilings from its admission to its end, or until it
// leaves the cell: released by the end hook (Server.OnEnd, for a run whose
// index record says it is no longer running or parked: it ended, was
// cancelled or held; or one that lost its lease: taken over, or run out
// unrenewed), by a handoff that gave the run to another cell, and, for an
// end no hook saw (a parked run cancelled), when an admission finds the
// budget full and looks again at each holder's index record. A run that
// comes back (taken over, handed back, resumed) is admitted again. The
// budget is rebuilt by Recover from the index: every run of this cell
// running or parked, but a spawn, holds its ceilings again, read from its
// journal's header. So a restart neither loses what runs in flight hold
// nor keeps what ended runs held.

// cellBudget is the scheduler's accounting of the cell budget.
type cellBudget struct {
	max budget.Ceilings
	// names are the dimensions max limits.
	dims []budget.Dim

	mu   sync.Mutex
	held map[journal.RunID]budget.Amounts
	sum  budget.Amounts
	// freed counts the shares given back: a start refused for the budget
	// is not worth trying again before it moves (triggers' roomWait).
	// onFreed, when set, is told of each; it must not block.
	freed   uint64
	onFreed func()
}

func newCellBudget(max budget.Ceilings) *cellBudget {
	cb := &cellBudget{max: max, held: map[journal.RunID]budget.Amounts{}}
	for d := range budget.NumDims {
		if _, ok := max.Get(d); ok {
			cb.dims = append(cb.dims, d)
		}
	}
	return cb
}

// on reports whether the cell has a budget.
func (cb *cellBudget) on() bool { return cb != nil }

// amounts returns what a run of ceilings c holds of the cell budget, or
// why it cannot hold any (a dimension the budget names that c leaves
// unlimited).
func (cb *cellBudget) amounts(c budget.Ceilings) (budget.Amounts, error) {
	var a budget.Amounts
	for _, d := range cb.dims {
		n, ok := c.Get(d)
		if !ok {
			m, _ := cb.max.Get(d)
			return a, fmt.Errorf("the run's budget leaves %s unlimited; this cell's runs may hold %s=%d together (its cell budget): give the run a ceiling", d, d, m)
		}
		a[d] = n
	}
	return a, nil
}

// hold admits run, of ceilings c, into the cell budget, or says why it
// does not fit. Before refusing, it releases the runs that ended without
// the end hook seeing it.
func (cb *cellBudget) hold(ctx context.Context, s *Server, run journal.RunID, c budget.Ceilings) error {
	a, err := cb.amounts(c)
	if err != nil {
		return err
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	// A run that holds a share already (handed back to this cell, parked
	// and resumed by hand) holds one: its own is not counted against it,
	// and stays its own if it is refused.
	prev, had := cb.held[run]
	cb.releaseLocked(run)
	d, ok := cb.fits(a)
	if !ok {
		cb.prune(ctx, s)
		d, ok = cb.fits(a)
	}
	if !ok {
		if had {
			cb.holdLocked(run, prev)
		}
		m, _ := cb.max.Get(d)
		return fmt.Errorf("the run asks %s=%d and the %d runs admitted that have not ended hold %d of the cell budget's %d: retry when some end",
			d, a[d], len(cb.held), cb.sum[d], m)
	}
	cb.holdLocked(run, a)
	return nil
}

// holdLocked makes run hold a; cb.mu is held and run holds nothing.
func (cb *cellBudget) holdLocked(run journal.RunID, a budget.Amounts) {
	cb.held[run] = a
	for _, d := range cb.dims {
		cb.sum[d] += a[d]
	}
}

// fits returns the first dimension a does not fit in; cb.mu is held.
func (cb *cellBudget) fits(a budget.Amounts) (budget.Dim, bool) {
	for _, d := range cb.dims {
		m, _ := cb.max.Get(d)
		if cb.sum[d] > m || a[d] > m-cb.sum[d] {
			return d, false
		}
	}
	return 0, true
}

// holds reports whether run holds a share (false when cb is nil: no cell
// budget).
func (cb *cellBudget) holds(run journal.RunID) bool {
	if cb == nil {
		return false
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	_, ok := cb.held[run]
	return ok
}

// release gives back what run holds (nothing when cb is nil: no cell
// budget).
func (cb *cellBudget) release(run journal.RunID) {
	if cb == nil {
		return
	}
	cb.mu.Lock()
	cb.releaseLocked(run)
	cb.mu.Unlock()
}

// releaseLocked gives back what run holds; cb.mu is held.
func (cb *cellBudget) releaseLocked(run journal.RunID) {
	a, ok := cb.held[run]
	if !ok {
		return
	}
	delete(cb.held, run)
	for _, d := range cb.dims {
		cb.sum[d] -= a[d]
	}
	cb.freed++
	if cb.onFreed != nil {
		cb.onFreed()
	}
}

// generation returns how many shares were given back so far (0 when cb
// is nil: no cell budget).
func (cb *cellBudget) generation() uint64 {
	if cb == nil {
		return 0
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return cb.freed
}

// inFlight reports whether a run of status st holds its share: it runs,
// waits for a worker or is parked. A run that ended, was cancelled or is
// held by the crash-loop breaker holds none (one resumed by hand later,
// agentrt resume, is admitted again and holds its share from then on).
func inFlight(st journal.RunStatus) bool {
	return st == journal.StatusRunning || st == journal.StatusParked
}

// ended releases run, which stopped on this cell for err, if it no longer
// runs here: it lost its lease (to a takeover, or unrenewed: a cell that
// takes it up again admits it anew), or its index record says it is no
// longer in flight. A run stopped here and still this cell's (drained, or
// backing off after a crash) keeps its share. (A run handed to another
// cell is released by the handoff.) Nothing when cb is nil: no cell
// budget.
func (cb *cellBudget) ended(s *Server, run journal.RunID, err error) {
	if cb == nil {
		return
	}
	cb.mu.Lock()
	_, ok := cb.held[run]
	cb.mu.Unlock()
	if !ok {
		return
	}
	if !host.LostLease(err) {
		m, merr := s.cell.Journal.Meta(context.Background(), run)
		if merr != nil || inFlight(m.Status) {
			return
		}
	}
	cb.mu.Lock()
	cb.releaseLocked(run)
	cb.mu.Unlock()
}

// prune releases every holder whose index record says it ended; cb.mu is
// held.
func (cb *cellBudget) prune(ctx context.Context, s *Server) {
	for run := range cb.held {
		if m, err := s.cell.Journal.Meta(ctx, run); err == nil && !inFlight(m.Status) {
			cb.releaseLocked(run)
		}
	}
}

// recover makes run, of index record m, hold its ceilings again after a
// restart (Server.Recover), unless it is a spawn or has ended. It holds
// them even past the cell budget (a budget lowered across the restart):
// the run was admitted, and later admissions wait for room.
func (cb *cellBudget) recover(ctx context.Context, s *Server, m journal.RunMeta) error {
	if !inFlight(m.Status) || (m.Origin != nil && m.Origin.Kind == OriginSpawn) {
		return nil
	}
	h, err := host.StartHeader(ctx, s.cell.Journal, m.ID)
	if err != nil {
		return fmt.Errorf("cell budget: run %s: %w", m.ID, err)
	}
	c, err := host.HeaderCeilings(h)
	if err != nil {
		return fmt.Errorf("cell budget: run %s: %w", m.ID, err)
	}
	var a budget.Amounts
	for _, d := range cb.dims {
		// A run admitted before the budget named d holds none of it.
		a[d], _ = c.Get(d)
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	cb.releaseLocked(m.ID)
	cb.holdLocked(m.ID, a)
	return nil
}

// CellBudgetStats are what the cell budget's holders hold, for GET
// /v1/cell: per dimension the budget names, its ceiling and the sum held.
type CellBudgetStats struct {
	Runs int                   `json:"runs"`
	Dims []CellBudgetDimension `json:"dims"`
}

// CellBudgetDimension is one dimension of CellBudgetStats.
type CellBudgetDimension struct {
	Dim     string `json:"dim"`
	Ceiling uint64 `json:"ceiling"`
	Held    uint64 `json:"held"`
}

func (cb *cellBudget) stats() *CellBudgetStats {
	if !cb.on() {
		return nil
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	st := &CellBudgetStats{Runs: len(cb.held)}
	for _, d := range cb.dims {
		m, _ := cb.max.Get(d)
		st.Dims = append(st.Dims, CellBudgetDimension{Dim: d.String(), Ceiling: m, Held: cb.sum[d]})
	}
	return st
}

// String writes the held sums, e.g. "micro_usd=3000000/5000000".
func (st *CellBudgetStats) String() string {
	var parts []string
	for _, d := range st.Dims {
		parts = append(parts, fmt.Sprintf("%s=%d/%d", d.Dim, d.Held, d.Ceiling))
	}
	return strings.Join(parts, " ")
}
