package host

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/host/caps"
	"github.com/agentrt/agentrt/journal"
)

// The gate's budget layer (layer 3, host/budget): the run's ledger, held by
// its session, and the records it journals (journal/SPEC.md section 6.1).
//
// Who enforces what: the reservable dimensions (model calls, tokens, money,
// tool calls, HTTP requests) are the ledger's, which refuses a call whose
// worst case does not fit with ABI status `budget`; the counted ones stop
// the run, as its limits do: a call past the steps ceiling ends the run
// (`stopped: budget: steps`, checked with the calls quota, in replay as
// live; a live call also counts the steps its children hold or made,
// childStepsOver), and the wall-clock ceiling is the run's wall-time timer
// (Started.armBudget). The ledger is never ticked or stepped live, so no
// dimension has two enforcers; a carve tells it the run's steps and
// seconds (CountSteps, Elapse) so that a child fits in what is left. The
// report counts steps and seconds from the journal (BudgetReport).

// budgetLog holds the budget records waiting for the next call entry the
// run writes (livePath.entry): a call's reserve for its intent, its settle
// for its outcome, the resolutions of a crash's orphans for the first entry
// a resumed run writes.
type budgetLog struct{ ops []budget.Op }

func (b *budgetLog) add(o ...budget.Op) { b.ops = append(b.ops, o...) }

// take returns the waiting records' field and clears them; nil when none.
func (b *budgetLog) take() []byte {
	if b == nil || len(b.ops) == 0 {
		return nil
	}
	f, err := budget.EncodeRecord(b.ops...)
	if err != nil {
		panic(err) // the ledger writes only records that encode
	}
	b.ops = b.ops[:0]
	return f
}

// runCeilings returns the ceilings of a run from its grant, which holds
// its token's budget.
func runCeilings(g *Grant) budget.Ceilings {
	var b capability.Budget
	if g.Budget != nil {
		b = *g.Budget
	}
	return budget.CeilingsOf(b, capability.Budget{})
}

// stepCap returns the most steps ceilings c allows (math.MaxUint64: no
// ceiling).
func stepCap(c budget.Ceilings) uint64 {
	if n, ok := c.Get(budget.Steps); ok {
		return n
	}
	return math.MaxUint64
}

// budgetLayer is the gate's third layer: it reserves the worst case of a
// call whose capability meters it. A refusal is the call's denial, with
// nothing reserved; otherwise the reserve waits for the call's first entry.
func (s *session) budgetLayer(c *Call) *denial {
	s.reserved = false
	if s.ledger == nil || !s.known {
		return nil
	}
	if cv, ok := s.inst[s.ci].(caps.Carver); ok {
		return s.carveLayer(c, cv)
	}
	m, ok := s.inst[s.ci].(caps.Meter)
	if !ok {
		return nil
	}
	cost, err := m.Estimate(c)
	if err != nil {
		return caps.Deny(abi.StatusBadRequest, "%s: budget: %v", c.Op.Name, err)
	}
	if cost.IsZero() {
		return nil
	}
	if s.dry {
		// A dry run (run.self_may) asks whether the call would fit, and
		// holds nothing.
		if err := s.ledger.Fits(cost); err != nil {
			return budgetDenial(c, err)
		}
		return nil
	}
	r, err := s.ledger.Reserve(c.Step, cost)
	if errors.Is(err, budget.ErrBudget) {
		var ex *budget.ExceededError
		if ro := s.deps.runObserver(); ro != nil && errors.As(err, &ex) {
			ro.BudgetRefused(ex.Dim)
		}
	}
	if err != nil {
		return budgetDenial(c, err)
	}
	s.resv, s.reserved = r, true
	s.blog.add(r.Op())
	return nil
}

// budgetDenial is the denial of call c whose reserve the ledger refused.
func budgetDenial(c *Call, err error) *denial {
	if errors.Is(err, budget.ErrBudget) {
		return caps.Deny(abi.StatusBudget, "%s: %v", c.Op.Name, err)
	}
	return caps.Deny(abi.StatusInternal, "%s: budget: %v", c.Op.Name, err)
}

// releaseBudget closes the reservation of a call a later layer refused:
// nothing was sent (a carve: no child started, and it spent nothing).
func (s *session) releaseBudget() {
	if !s.reserved {
		return
	}
	s.reserved = false
	if s.resv.Carve {
		if o, err := s.ledger.SettleCarve(s.resv, budget.Amounts{}); err == nil {
			s.blog.add(o)
		}
		return
	}
	if o, err := s.ledger.Release(s.resv); err == nil {
		s.blog.add(o)
	}
}

// The budget bridge: a sub-agent's budget is carved out of its parent's.
// The spawn's budget layer reserves the child's ceilings (its token's
// budget) in the parent's ledger, on the spawn's intent (carve: true); the
// child runs under its own ledger, in its own journal, within them; and
// the parent settles the carve, at what the child's journal says it spent
// (with what it still held when it stopped, at its worst case), on the
// entry of the first of its own calls that follows the child's end: the
// await that learns it, an agent call, the next spawn (which needs the
// room), or the parent's end entry, where a child still running is
// charged its whole carve. A carve of a spawn that started no child is
// settled at nothing. A parent and its descendants therefore never hold
// more than the parent's ceilings, each child's unspent budget returns to
// its parent, and both journals say so.

// carveLayer reserves the budget of the child that call c starts (a
// caps.Carver's), when the run has ceilings: the child's ceilings, as
// its token will have them, in every dimension: its steps beside the
// run's own, and its wall clock within what the run has left (a wall
// clock the request leaves out is cut to that; a steps ceiling it leaves
// out is the run's whole, which fits only a run that has made no call).
// The carved budget goes on c (Call.Child) for the Spawner to issue the
// child's token with. A child wider than the run is not carved: the
// Spawner refuses it, naming what widens.
func (s *session) carveLayer(c *Call, cv caps.Carver) *denial {
	req, ok := cv.CarveBudget(c)
	if !ok || s.ledger.Ceilings() == (budget.Ceilings{}) {
		return nil
	}
	var parent capability.Budget
	if s.grant.Budget != nil {
		parent = *s.grant.Budget
	}
	want, err := childBudget(parent, req)
	if err != nil || want.Within(parent) != nil {
		return nil
	}
	over, _ := capability.ParseBudget(req) // parsed by childBudget
	s.ledger.CountSteps(c.Step)
	since := max(0, s.deps.Now().Sub(time.Unix(0, s.started)))
	elapsed := uint64(since / time.Second)
	s.ledger.Elapse(elapsed)
	if w, ok := s.ledger.Ceilings().Get(budget.WallSeconds); ok && over.WallSeconds == nil {
		// The child's clock starts now: what the run has left, in whole
		// seconds rounded down, so that the child's deadline is never
		// past the run's.
		spent := uint64((since + time.Second - 1) / time.Second)
		want.WallSeconds = capability.Limit(w - min(w, spent))
	}
	var r budget.Reservation
	if s.dry {
		// A dry run holds nothing, and settles no ended child's carve
		// (that is an agent call's to journal): it may answer budget
		// where the spawn, settling first, would fit.
		err = s.ledger.FitsCarve(budget.CeilingsOf(want, capability.Budget{}))
	} else {
		s.settleCarves(false)
		r, err = s.ledger.ReserveCarve(c.Step, budget.CeilingsOf(want, capability.Budget{}))
	}
	var ex *budget.ExceededError
	switch {
	case errors.As(err, &ex) && ex.Dim == budget.Steps && over.Steps == nil:
		return caps.Deny(abi.StatusBudget, "%s: the child's budget: %v (a steps ceiling the spawn leaves out is the caller's whole: give the child its own, e.g. budget steps=%d)", c.Op.Name, err, ex.Left)
	case errors.Is(err, budget.ErrBudget):
		return caps.Deny(abi.StatusBudget, "%s: the child's budget: %v", c.Op.Name, err)
	case errors.Is(err, budget.ErrCarve):
		return caps.Deny(abi.StatusDenied, "%s: the child's budget: %v", c.Op.Name, err)
	case err != nil:
		return caps.Deny(abi.StatusInternal, "%s: budget: %v", c.Op.Name, err)
	}
	if s.dry {
		return nil
	}
	s.resv, s.reserved = r, true
	s.blog.add(r.Op())
	c.Child = &want
	return nil
}

// childStepsOver reports whether the call after step prior would take the
// run past its steps ceiling with the steps its children hold or made
// (carved, host/budget): the run's own are checked apart (session.call).
// An ended child's carve still open is settled first, returning what it
// did not make. Only a live call is checked: a recorded one was admitted
// when it was made, and a replay stops where the run stopped.
func (s *session) childStepsOver(prior uint64) (held uint64, over bool) {
	if s.ledger == nil || s.stepCap == math.MaxUint64 {
		return 0, false
	}
	held = s.ledger.ChildSteps()
	if held == 0 || sat(prior, held) < s.stepCap {
		return held, false
	}
	if s.hasCarves() {
		s.settleCarves(false)
		held = s.ledger.ChildSteps()
	}
	return held, sat(prior, held) >= s.stepCap
}

func sat(x, y uint64) uint64 {
	if s := x + y; s >= x {
		return s
	}
	return math.MaxUint64
}

// settleCarves settles the carve of each child of the run that has ended,
// at what it spent, and of each spawn that started none, at nothing. At
// the run's end (final), a child still running is charged its whole
// carve: the run's journal closes, and the child spends within it.
func (s *session) settleCarves(final bool) {
	if s.ledger == nil || s.deps.Agents == nil {
		return
	}
	var ctx context.Context
	for _, r := range s.ledger.Open() {
		if !r.Carve {
			continue
		}
		if ctx == nil {
			c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ctx = c
		}
		sp, err := s.deps.Agents.Spend(ctx, s.run, r.Step)
		var spent budget.Amounts
		switch {
		case err != nil && !final:
			continue // settled at a later call
		case err != nil:
			spent = r.Amounts
		case !sp.Started:
		case sp.Ended:
			spent = sp.Spent
		case final:
			spent = r.Amounts
		default:
			continue
		}
		if o, err := s.ledger.SettleCarve(r, spent); err == nil {
			s.blog.add(o)
		}
	}
}

// hasCarves reports whether the run's ledger holds a child's budget.
func (s *session) hasCarves() bool {
	if s.ledger == nil {
		return false
	}
	for _, r := range s.ledger.Open() {
		if r.Carve {
			return true
		}
	}
	return false
}

// settleBudget charges what call c used, after it was dispatched, and
// settles a reservation an earlier call held open when c's capability says
// c settles it (caps.Settler).
func (s *session) settleBudget(c *Call, status abi.Status, resp []byte) {
	if s.ledger == nil {
		return
	}
	inst := s.inst[s.ci]
	if _, ok := inst.(caps.Carver); ok {
		if s.reserved && s.resv.Carve && status == abi.StatusOK {
			// The child runs: its carve stays open until it ends.
			s.reserved = false
		} else if s.reserved && s.resv.Carve {
			s.releaseBudget()
		}
		if s.hasCarves() {
			s.settleCarves(false)
		}
		return
	}
	if s.reserved {
		s.reserved = false
		used, hold := s.resv.Amounts, false
		if m, ok := inst.(caps.Meter); ok {
			used, hold = m.Usage(c, status, resp)
		}
		if hold {
			if s.held == nil {
				s.held = map[uint64]budget.Reservation{}
			}
			s.held[c.Step] = s.resv
		} else if o, err := s.ledger.Settle(s.resv, used); err == nil {
			s.blog.add(o)
			s.charged(used)
		}
	}
	st, ok := inst.(caps.Settler)
	if !ok {
		return
	}
	sm, ok := st.Settles(c, status, resp)
	if !ok {
		return
	}
	r, open := s.held[sm.Step]
	if !open {
		return // settled already (an orphan a resume resolved)
	}
	delete(s.held, sm.Step)
	used := sm.Used
	if sm.Worst {
		used = r.Amounts
	}
	if o, err := s.ledger.Settle(r, used); err == nil {
		s.blog.add(o)
		s.charged(used)
	}
}

// settleInDoubt charges the worst case of the reservation of a call left in
// doubt that is not dispatched again: whether it was sent is unknown.
func (s *session) settleInDoubt() {
	if !s.reserved {
		return
	}
	s.reserved = false
	if o, err := s.ledger.Settle(s.resv, s.resv.Amounts); err == nil {
		o.Orphan, o.WorstCase = true, true
		s.blog.add(o)
		s.charged(s.resv.Amounts)
	}
}

// closeBudget settles, at their worst case, the reservations still open at
// the run's end (held by calls whose settling call never came): their
// records go on the end entry.
func (s *session) closeBudget() []byte {
	if s.ledger == nil {
		return s.blog.take()
	}
	s.settleCarves(true)
	for _, r := range s.ledger.Open() {
		if o, err := s.ledger.Settle(r, r.Amounts); err == nil {
			s.blog.add(o)
			s.charged(r.Amounts)
		}
	}
	s.held = nil
	return s.blog.take()
}

// Limit serves run.limit: it lowers the run's ceilings (never raises them)
// to what is used of each dimension now plus the amount asked, and returns
// the ceilings in force. Steps count this call; wall-clock seconds count
// from the run's start, and a lowered wall clock moves the run's deadline.
func (s *session) Limit(limits []abi.BudgetLimit) (abi.LimitResponse, error) {
	if s.ledger == nil {
		return abi.LimitResponse{}, errors.New("run.limit: the run has no ledger")
	}
	dims := make([]budget.Dim, len(limits))
	for i, l := range limits {
		d, ok := budget.ParseDim(l.Dim)
		if !ok {
			return abi.LimitResponse{}, fmt.Errorf("run.limit: unknown dimension %q (one of %s)", l.Dim, strings.Join(budget.DimNames(), ", "))
		}
		dims[i] = d
	}
	for i, l := range limits {
		d := dims[i]
		var used uint64
		switch d {
		case budget.Steps:
			used = sat(s.steps, s.ledger.ChildSteps())
		case budget.WallSeconds:
			used = uint64(max(0, s.deps.Now().Sub(time.Unix(0, s.started))) / time.Second)
		default:
			used = s.ledger.Used(d)
		}
		n := used + l.Amount
		if n < used {
			n = math.MaxUint64
		}
		s.ledger.Lower(d, n)
	}
	c := s.ledger.Ceilings()
	s.applyCeilings(c)
	return limitResponse(c), nil
}

// applyCeilings brings the counted dimensions' enforcement to ceilings c:
// the steps cap and the wall-clock deadline.
func (s *session) applyCeilings(c budget.Ceilings) {
	s.stepCap = stepCap(c)
	if n, ok := c.Get(budget.WallSeconds); ok && s.setWall != nil {
		s.setWall(time.Unix(0, s.started).Add(time.Duration(n) * time.Second))
	}
}

// applyLimit applies the ceilings of a run.limit answer: the steps cap,
// and, in a run with a ledger, its ceilings and the wall-clock deadline.
func (s *session) applyLimit(resp []byte) {
	var r abi.LimitResponse
	if abi.Unmarshal(resp, &r) != nil {
		return
	}
	c := budget.Ceilings{}.With(budget.Steps, s.stepCap)
	if s.ledger != nil {
		for _, l := range r.Ceilings {
			if d, ok := budget.ParseDim(l.Dim); ok {
				s.ledger.Lower(d, l.Amount)
			}
		}
		c = s.ledger.Ceilings()
		s.applyCeilings(c)
		return
	}
	s.stepCap = stepCap(lowerFrom(c, resp))
}

// limitResponse lists the ceilings of c, in dimension order.
func limitResponse(c budget.Ceilings) abi.LimitResponse {
	var r abi.LimitResponse
	for d := range budget.NumDims {
		if n, ok := c.Get(d); ok {
			r.Ceilings = append(r.Ceilings, abi.BudgetLimit{Dim: d.String(), Amount: n})
		}
	}
	return r
}

// lowerFrom lowers c to the ceilings of a recorded run.limit response.
func lowerFrom(c budget.Ceilings, resp []byte) budget.Ceilings {
	var r abi.LimitResponse
	if abi.Unmarshal(resp, &r) != nil {
		return c
	}
	var o budget.Ceilings
	for _, l := range r.Ceilings {
		if d, ok := budget.ParseDim(l.Dim); ok {
			o = o.With(d, l.Amount)
		}
	}
	return c.Tighter(o)
}

// budgetJournal is what a run's journal says of its budget, collected entry
// by entry (Recording.Add): every budget field, the ceilings run.limit set,
// the last step and the host times of the first and last entries.
type budgetJournal struct {
	// snapshot, when set, is the ledger at the run's last checkpoint, and
	// fields and limits are those journaled after it (a resume reads no
	// further back).
	snapshot       *budget.Snapshot
	fields         [][]byte
	limits         [][]byte
	lastStep       uint64
	first, last    int64
	haveFirstEntry bool
}

// restart makes the ledger at the checkpoint whose response is resp the
// start of what b collects: what came before is in the snapshot.
func (b *budgetJournal) restart(resp []byte) error {
	var r abi.CheckpointResponse
	if err := abi.Unmarshal(resp, &r); err != nil {
		return err
	}
	snap, err := snapshotOf(r.Budget)
	if err != nil {
		return err
	}
	b.snapshot, b.fields, b.limits = &snap, nil, nil
	return nil
}

// checkpointBudget returns what a checkpoint records of ledger l (nil for
// none, or a ledger that limits, holds and has spent nothing).
func checkpointBudget(l *budget.Ledger) *abi.CheckpointBudget {
	if l == nil {
		return nil
	}
	s := l.Snapshot()
	cb := &abi.CheckpointBudget{Ceilings: limitResponse(s.Ceilings).Ceilings, Spent: amountList(s.Spent), LastID: s.LastID}
	for _, r := range s.Open {
		cb.Open = append(cb.Open, abi.BudgetHolding{ID: r.ID, Step: r.Step, Amounts: amountList(r.Amounts), Carve: r.Carve})
	}
	if cb.Ceilings == nil && cb.Spent == nil && cb.Open == nil && cb.LastID == 0 {
		return nil
	}
	return cb
}

// amountList lists the non-zero amounts of a, in dimension order.
func amountList(a budget.Amounts) []abi.BudgetLimit {
	var out []abi.BudgetLimit
	for d, n := range a {
		if n != 0 {
			out = append(out, abi.BudgetLimit{Dim: budget.Dim(d).String(), Amount: n})
		}
	}
	return out
}

// amountsOf reads a list of amounts, refusing an unknown dimension.
func amountsOf(l []abi.BudgetLimit) (budget.Amounts, error) {
	var a budget.Amounts
	for _, x := range l {
		d, ok := budget.ParseDim(x.Dim)
		if !ok {
			return a, fmt.Errorf("checkpoint budget: unknown dimension %q", x.Dim)
		}
		a[d] = x.Amount
	}
	return a, nil
}

// snapshotOf reads the ledger a checkpoint recorded (nil: an empty one).
func snapshotOf(cb *abi.CheckpointBudget) (budget.Snapshot, error) {
	var s budget.Snapshot
	if cb == nil {
		return s, nil
	}
	for _, c := range cb.Ceilings {
		d, ok := budget.ParseDim(c.Dim)
		if !ok {
			return s, fmt.Errorf("checkpoint budget: unknown dimension %q", c.Dim)
		}
		s.Ceilings = s.Ceilings.With(d, c.Amount)
	}
	var err error
	if s.Spent, err = amountsOf(cb.Spent); err != nil {
		return s, err
	}
	for _, h := range cb.Open {
		a, err := amountsOf(h.Amounts)
		if err != nil {
			return s, err
		}
		s.Open = append(s.Open, budget.Reservation{ID: h.ID, Step: h.Step, Amounts: a, Carve: h.Carve})
	}
	s.LastID = cb.LastID
	return s, nil
}

func (b *budgetJournal) add(e *journal.Entry) {
	if !b.haveFirstEntry {
		b.first, b.haveFirstEntry = e.Time, true
	}
	b.last = e.Time
	if len(e.Budget) > 0 {
		b.fields = append(b.fields, slices.Clone(e.Budget))
	}
	if e.Step > b.lastStep {
		b.lastStep = e.Step
	}
	if e.Op == "run.limit" && e.Phase == journal.PhaseCompleted {
		b.limits = append(b.limits, slices.Clone(e.Response))
	}
}

// ceilings returns the run's ceilings: its grant's, lowered by its
// run.limit calls.
// ceilingsOf returns the ceilings of a run resumed from b under grant g:
// its last snapshot's, tightened by g's and the limits journaled since.
func (b *budgetJournal) ceilingsOf(g *Grant) budget.Ceilings {
	var c budget.Ceilings
	if b.snapshot != nil {
		c = b.snapshot.Ceilings
	}
	return c.Tighter(b.ceilings(g))
}

func (b *budgetJournal) ceilings(g *Grant) budget.Ceilings {
	c := runCeilings(g)
	for _, r := range b.limits {
		c = lowerFrom(c, r)
	}
	return c
}

// ops decodes the budget records, in journal order.
func (b *budgetJournal) ops() ([]budget.Op, error) {
	var ops []budget.Op
	for i, f := range b.fields {
		o, err := budget.DecodeRecord(f)
		if err != nil {
			return nil, fmt.Errorf("budget field %d: %w", i, err)
		}
		ops = append(ops, o...)
	}
	return ops, nil
}

// rebuildBudget rebuilds a resumed run's ledger from its journal. The
// resolver keeps every orphan open, so that what settles it is what would
// have settled it live: the reservation of the call left in doubt (doubt,
// at step doubtStep) is settled by its re-dispatch, or at its worst case
// by the in-doubt answer (resumePath.decide); a reservation a call held
// open for a later one (a stream's) is held again, for that later call
// (a resumed stream's last batch, at its actual usage; a broken one, at
// its worst case) or for the run's end, at its worst case. No orphan is
// resolved at the rebuild, so it journals nothing.
func (s *session) rebuildBudget(b *budgetJournal, doubt bool, doubtStep uint64) error {
	ops, err := b.ops()
	if err != nil {
		return err
	}
	snap := budget.Snapshot{}
	if b.snapshot != nil {
		snap = *b.snapshot
	}
	snap.Ceilings = b.ceilingsOf(s.grant)
	keep := func(budget.Reservation) budget.Resolution { return budget.Resolution{Kind: budget.ResolveKeep} }
	l, resolved, err := budget.RebuildFrom(snap, b.lastStep, ops, keep)
	if err != nil {
		return err
	}
	s.ledger = l
	s.blog.add(resolved...)
	s.stepCap = stepCap(l.Ceilings())
	for _, r := range l.Open() {
		switch {
		case r.Carve:
			// A child's ceilings: the budget bridge's to adopt.
		case doubt && r.Step == doubtStep:
			s.resv, s.reserved = r, true
		default:
			if s.held == nil {
				s.held = map[uint64]budget.Reservation{}
			}
			s.held[r.Step] = r
		}
	}
	return nil
}

// BudgetReport returns the budget of a run from its journal's entries, in
// order (what `agentrt budget RUN` prints): per dimension, the ceiling (the
// token's, lowered by run.limit), what open reservations hold, what was
// spent and what is left. Steps are the journal's last step, wall-clock
// seconds its host time from the start entry to the last one.
func BudgetReport(entries []*journal.Entry) (budget.Report, error) {
	var r BudgetReader
	for _, e := range entries {
		if err := r.Add(e); err != nil {
			return budget.Report{}, err
		}
	}
	return r.Report()
}

// LoadBudget verifies the journal of run in store, with seals by keys
// trust approves, and returns its BudgetReport.
func LoadBudget(ctx context.Context, store journal.Store, run journal.RunID, trust journal.TrustFunc) (budget.Report, error) {
	var r BudgetReader
	v := journal.NewVerifier(trust)
	v.OnEntry = func(e *journal.Entry, _ *journal.Record) error { return r.Add(e) }
	if _, err := journal.VerifyStoreWith(ctx, store, run, v); err != nil {
		return budget.Report{}, err
	}
	return r.Report()
}

// BudgetReader rebuilds a run's ledger from the budget records of its
// journal, fed entry by entry in order (Add) by a verifier that checked
// them: LoadBudget's, and an audit's, which thereby checks that the
// records are ones a ledger writes (no settle of a reservation never
// made, none twice). The zero value is ready to use.
type BudgetReader struct {
	grant *Grant
	b     budgetJournal
}

// Add takes the next entry of the journal.
func (r *BudgetReader) Add(e *journal.Entry) error {
	if e.Phase == journal.PhaseStart && e.Header != nil {
		g, err := DecodeGrant(e.Header.Grant)
		if err != nil {
			return err
		}
		r.grant = g
	}
	r.b.add(e)
	return nil
}

// Report returns the ledger the records rebuild, or an error naming the
// first record no ledger would write.
func (r *BudgetReader) Report() (budget.Report, error) {
	if r.grant == nil {
		return budget.Report{}, errors.New("budget: the journal has no start entry")
	}
	secs := uint64(0)
	if r.b.last > r.b.first {
		secs = uint64(time.Duration(r.b.last-r.b.first) / time.Second)
	}
	return budget.ReportFrom(r.b.ceilings(r.grant), budget.Journal{Steps: r.b.lastStep, ElapsedSeconds: secs, Fields: r.b.fields})
}

// dropReserve undoes the reservation of a call that will not be journaled
// (the run stopped while the call waited for an approval): its reserve
// leaves the waiting records, and the ledger holds it no more.
func (s *session) dropReserve() {
	if !s.reserved {
		return
	}
	s.reserved = false
	if s.resv.Carve {
		_, _ = s.ledger.SettleCarve(s.resv, budget.Amounts{})
	} else {
		_, _ = s.ledger.Release(s.resv)
	}
	if n := len(s.blog.ops); n > 0 && s.blog.ops[n-1].Kind == budget.OpReserve && s.blog.ops[n-1].ID == s.resv.ID {
		s.blog.ops = s.blog.ops[:n-1]
	}
}
