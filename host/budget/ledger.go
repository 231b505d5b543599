package budget

import (
	"fmt"
	"slices"
	"sync"
)

// A Ledger holds one run's budget: its ceilings, what its settled calls
// spent, and what its open reservations hold. It is safe for concurrent
// use; concurrent reservations never admit more than fits, because each
// one checks and takes its room under the ledger's lock.
type Ledger struct {
	mu              sync.Mutex
	ceil            Ceilings
	spent, reserved Amounts
	open            map[uint64]held
	lastID          uint64
	// parent and carveID are set on a child (Carve): its charges go on to
	// the parent's reservation carveID.
	parent  *Ledger
	carveID uint64
	closed  bool
	// ticked says that Tick counts the ledger's wall clock: only then
	// does an elapsed wall-clock ceiling refuse reservations.
	ticked bool
	// kidSteps is what the ledger's children spent of its steps (the
	// settles of carves that reserved steps, the charges of attached
	// children): spent[Steps] is the run's own steps plus kidSteps.
	kidSteps uint64
}

// held is an open reservation: what it holds now (a carve's shrinks as its
// child spends), the step that made it, and whether it is a child's.
type held struct {
	amounts Amounts
	step    uint64
	carve   bool
	// charged is what an attached child (Carve, Adopt) has charged the
	// carve so far.
	charged Amounts
}

// New returns an empty ledger with ceilings c.
func New(c Ceilings) *Ledger { return &Ledger{ceil: c, open: map[uint64]held{}} }

// Reservation is an open reservation of a ledger: its id (from 1, in the
// order the ledger admitted them), the step of the call that made it and
// the worst case it holds. Settle or Release it exactly once.
type Reservation struct {
	ID      uint64
	Step    uint64
	Amounts Amounts
	// Carve is set on the reservation of a child ledger's ceilings.
	Carve bool
	l     *Ledger
}

// Op returns the record of the reservation, to journal on the intent of
// the call that made it.
func (r Reservation) Op() Op {
	return Op{Kind: OpReserve, ID: r.ID, Step: r.Step, Amounts: r.Amounts, Carve: r.Carve}
}

// checkReservable refuses amounts of the counted dimensions.
func checkReservable(a Amounts) error {
	if a[Steps] != 0 || a[WallSeconds] != 0 {
		return fmt.Errorf("%w (asked %s)", ErrNotReservable, a)
	}
	return nil
}

// Reserve admits the worst case a of the call at step when it fits in what
// is left of every dimension, and holds it until Settle or Release. It
// returns an *ExceededError (errors.Is ErrBudget) naming the first
// dimension that a does not fit in, and nothing is held. A ledger whose
// wall-clock ceiling has elapsed (Tick) admits nothing.
func (l *Ledger) Reserve(step uint64, a Amounts) (Reservation, error) {
	if err := checkReservable(a); err != nil {
		return Reservation{}, err
	}
	return l.reserve(step, a, false)
}

func (l *Ledger) reserve(step uint64, a Amounts, carve bool) (Reservation, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return Reservation{}, ErrClosed
	}
	if err := l.fits(a); err != nil {
		return Reservation{}, err
	}
	l.reserved = l.reserved.add(a)
	l.lastID++
	l.open[l.lastID] = held{amounts: a, step: step, carve: carve}
	return Reservation{ID: l.lastID, Step: step, Amounts: a, Carve: carve, l: l}, nil
}

// Fits reports whether Reserve would admit a now: nil, or the error
// Reserve would return. It holds nothing (a dry run of the gate).
func (l *Ledger) Fits(a Amounts) error {
	if err := checkReservable(a); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return l.fits(a)
}

// fits returns the *ExceededError of the first dimension a does not fit
// in, or nil. The caller holds l.mu.
func (l *Ledger) fits(a Amounts) error {
	for d := range NumDims {
		if !l.ceil.limited[d] {
			continue
		}
		max, spent, reserved := l.ceil.max[d], l.spent[d], l.reserved[d]
		if d == WallSeconds {
			if l.ticked && spent >= max {
				return &ExceededError{Dim: d, Ceiling: max, Spent: spent}
			}
			continue
		}
		var left uint64
		if used := sat(spent, reserved); used < max {
			left = max - used
		}
		if a[d] > left {
			return &ExceededError{Dim: d, Asked: a[d], Left: left, Ceiling: max, Spent: spent, Reserved: reserved}
		}
	}
	return nil
}

// take removes the open reservation r from l. The caller holds l.mu.
func (l *Ledger) take(r Reservation) (held, error) {
	if l.closed {
		return held{}, ErrClosed
	}
	h, ok := l.open[r.ID]
	if !ok || r.l != l {
		return held{}, fmt.Errorf("%w: reservation %d", ErrNotOpen, r.ID)
	}
	if h.carve {
		return held{}, fmt.Errorf("%w: reservation %d holds a child's ceilings: close the child", ErrNotOpen, r.ID)
	}
	delete(l.open, r.ID)
	l.reserved = sub(l.reserved, h.amounts)
	return h, nil
}

// sub returns a-b per dimension, at least 0 (a sum that saturated may hold
// less than its parts).
func sub(a, b Amounts) Amounts {
	for d := range a {
		if b[d] < a[d] {
			a[d] -= b[d]
		} else {
			a[d] = 0
		}
	}
	return a
}

// Settle closes r and charges actual, what the call used. actual may
// exceed r's worst case: the excess is spent all the same (an overspend,
// which Report shows and later reservations see). It returns the record to
// journal on the call's completed or failed entry. A reservation that is
// not open here (settled or released already, or another ledger's) is
// ErrNotOpen, and nothing changes.
func (l *Ledger) Settle(r Reservation, actual Amounts) (Op, error) {
	if err := checkReservable(actual); err != nil {
		return Op{}, err
	}
	l.mu.Lock()
	if _, err := l.take(r); err != nil {
		l.mu.Unlock()
		return Op{}, err
	}
	l.spent = l.spent.add(actual)
	parent, id := l.parent, l.carveID
	l.mu.Unlock()
	if parent != nil {
		parent.charge(id, actual)
	}
	return Op{Kind: OpSettle, ID: r.ID, Amounts: actual}, nil
}

// Release closes r without charging it: the call never left the host (a
// later gate layer refused it, or it failed before dispatch). It returns
// the record to journal on the call's failed entry.
func (l *Ledger) Release(r Reservation) (Op, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.take(r); err != nil {
		return Op{}, err
	}
	return Op{Kind: OpRelease, ID: r.ID}, nil
}

// Step charges one import call to the steps dimension, or returns an
// *ExceededError when the ceiling is reached. Steps are not journaled as
// budget records: the journal's step numbers count them (Replay).
func (l *Ledger) Step() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	if max, ok := l.ceil.Get(Steps); ok {
		if used := sat(l.spent[Steps], l.reserved[Steps]); used >= max {
			l.mu.Unlock()
			return &ExceededError{Dim: Steps, Asked: 1, Ceiling: max, Spent: l.spent[Steps], Reserved: l.reserved[Steps]}
		}
	}
	l.spent[Steps]++
	parent, id := l.parent, l.carveID
	l.mu.Unlock()
	if parent != nil {
		parent.charge(id, Amounts{Steps: 1})
	}
	return nil
}

// Tick records that the run has been going for elapsed seconds of wall
// clock (it never goes back). Once the wall-clock ceiling has elapsed, a
// ticked ledger admits no reservation. A ledger never ticked leaves its
// wall-clock ceiling to its caller (the host stops a run whose deadline
// passed, so that the wall clock has one enforcer).
func (l *Ledger) Tick(elapsed uint64) {
	l.mu.Lock()
	l.ticked = true
	l.spent[WallSeconds] = max(l.spent[WallSeconds], elapsed)
	l.mu.Unlock()
}

// Elapse records, as Tick does, that the run has been going for elapsed
// seconds, without making the ledger refuse reservations once its
// wall-clock ceiling has elapsed: for a caller that enforces the wall
// clock itself (the host's timer) and tells the ledger the time only so
// that a carve is held to what is left of it.
func (l *Ledger) Elapse(elapsed uint64) {
	l.mu.Lock()
	l.spent[WallSeconds] = max(l.spent[WallSeconds], elapsed)
	l.mu.Unlock()
}

// CountSteps records that the run has made n import calls of its own (it
// never goes back): its steps spent are n plus what its children spent of
// them. A caller that counts the run's steps itself (the host, from the
// journal's step numbers) calls it before a carve, so that the carve's
// steps fit in what the run and its children have left.
func (l *Ledger) CountSteps(n uint64) {
	l.mu.Lock()
	if own := l.spent[Steps] - min(l.spent[Steps], l.kidSteps); n > own {
		l.spent[Steps] = sat(l.spent[Steps], n-own)
	}
	l.mu.Unlock()
}

// ChildSteps returns the steps the ledger's children hold (the steps of
// its open carves) and have spent (the settled ones'): what a run that
// counts its own steps adds to them to hold itself and its descendants
// to its steps ceiling.
func (l *Ledger) ChildSteps() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return sat(l.kidSteps, l.reserved[Steps])
}

// charge spends a, charged by the child of carve id: the carve holds less
// by as much (at least 0), and the parent's parent is charged in turn.
func (l *Ledger) charge(id uint64, a Amounts) {
	l.mu.Lock()
	h, ok := l.open[id]
	if ok {
		used := a
		for d := range used {
			used[d] = min(used[d], h.amounts[d])
		}
		h.amounts = sub(h.amounts, used)
		h.charged = h.charged.add(a)
		l.open[id] = h
		l.reserved = sub(l.reserved, used)
	}
	l.spent = l.spent.add(a)
	l.kidSteps = sat(l.kidSteps, a[Steps])
	parent, pid := l.parent, l.carveID
	l.mu.Unlock()
	if parent != nil {
		parent.charge(pid, a)
	}
}

// Carve returns a child ledger with ceilings c, for the sub-agent started
// by the call at step, and the reservation that holds c in l (its record
// goes on that call's intent). Every dimension l limits, c must limit too,
// and c's wall clock must be at most what l has left (ErrCarve); c must fit
// in what l has left (*ExceededError), steps included. The child's settles
// and steps charge l as they happen; Close returns what the child left
// unused.
func (l *Ledger) Carve(step uint64, c Ceilings) (*Ledger, Reservation, error) {
	r, err := l.reserveCarve(step, c)
	if err != nil {
		return nil, Reservation{}, err
	}
	child := New(c)
	child.parent, child.carveID = l, r.ID
	return child, r, nil
}

// ReserveCarve reserves in l the ceilings c of a child, for the sub-agent
// started by the call at step, and returns the carve. Every dimension l
// limits, c must limit too (ErrCarve); c's wall clock must be at most what
// l has left of its own (ErrCarve: the time l was told, by Tick or
// Elapse); every other dimension of c, steps included, must fit in what l
// has left (*ExceededError), l's own steps as CountSteps or Step counted
// them. No child is attached: the child's ledger runs apart, with ceilings
// c, and SettleCarve closes the carve at what it spent, returning to l
// what the child left unused, steps included. So a run and its
// descendants never spend more than the run's ceilings: its wall clock
// too, as each child must end by its parent's deadline.
func (l *Ledger) ReserveCarve(step uint64, c Ceilings) (Reservation, error) {
	return l.reserveCarve(step, c)
}

func (l *Ledger) reserveCarve(step uint64, c Ceilings) (Reservation, error) {
	l.mu.Lock()
	a, err := l.carveAmounts(c)
	l.mu.Unlock()
	if err != nil {
		return Reservation{}, err
	}
	return l.reserve(step, a, true)
}

// FitsCarve reports whether ReserveCarve would admit a child with ceilings
// c now: nil, or the error it would return. It holds nothing (a dry run of
// the gate).
func (l *Ledger) FitsCarve(c Ceilings) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, err := l.carveAmounts(c)
	if err != nil {
		return err
	}
	if l.closed {
		return ErrClosed
	}
	return l.fits(a)
}

// carveAmounts returns what a carve of a child with ceilings c reserves,
// or why the child does not fit the parent's ceilings. The caller holds
// l.mu.
func (l *Ledger) carveAmounts(c Ceilings) (Amounts, error) {
	var a Amounts
	for d := range NumDims {
		pmax, plim := l.ceil.Get(d)
		cmax, clim := c.Get(d)
		switch {
		case plim && !clim:
			return a, fmt.Errorf("%w: the parent limits %s to %s, the child does not", ErrCarve, d, d.format(pmax))
		case d == WallSeconds:
			if plim && l.spent[d] >= pmax {
				return a, fmt.Errorf("%w: the parent's wall clock of %s has run out", ErrCarve, d.format(pmax))
			}
			if plim && cmax > pmax-min(pmax, l.spent[d]) {
				left := pmax - min(pmax, l.spent[d])
				return a, fmt.Errorf("%w: the child's wall_seconds is %s, the parent has %s left", ErrCarve, d.format(cmax), d.format(left))
			}
		case clim:
			a[d] = cmax
		}
	}
	return a, nil
}

// Close ends a child ledger: its parent's carve is closed, returning to the
// parent what the child did not spend. It returns the record to journal in
// the parent's journal: the settle of the carve, for what the child spent
// (the parent has been charged it already, as the child spent it). A child
// that still holds reservations is not closed (ErrOpenReservations).
func (l *Ledger) Close() (Op, error) {
	l.mu.Lock()
	switch {
	case l.parent == nil:
		l.mu.Unlock()
		return Op{}, fmt.Errorf("%w: only a child ledger (Carve) is closed", ErrNotOpen)
	case l.closed:
		l.mu.Unlock()
		return Op{}, ErrClosed
	case len(l.open) > 0:
		n := len(l.open)
		l.mu.Unlock()
		return Op{}, fmt.Errorf("%w: %d", ErrOpenReservations, n)
	}
	l.closed = true
	spent := l.spent
	spent[WallSeconds] = 0
	parent, id := l.parent, l.carveID
	l.mu.Unlock()

	parent.mu.Lock()
	defer parent.mu.Unlock()
	if h, ok := parent.open[id]; ok {
		parent.reserved = sub(parent.reserved, h.amounts)
		delete(parent.open, id)
	}
	return Op{Kind: OpSettle, ID: id, Amounts: spent, Carve: true}, nil
}

// SettleCarve closes the carve r of l at spent, what its child spent
// (wall-clock seconds are not reserved and are dropped; steps count only
// in a carve that reserved them: every carve does, but one a journal
// written before carves reserved steps holds may not),
// as the child's own journal says: the bridge for a child whose ledger
// runs apart from l (its own run, resumed on its own), which the host
// settles when it learns that the child ended. What the carve held beyond
// spent returns to l. A child attached to the carve (Carve, Adopt) has
// charged l as it spent: only what it did not charge is charged now, and
// a closed attached child is closed already. It returns the settle's
// record (carve: true), for l's journal. spent may exceed the carve (a
// child's overspend): it is charged all the same.
func (l *Ledger) SettleCarve(r Reservation, spent Amounts) (Op, error) {
	spent[WallSeconds] = 0
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return Op{}, ErrClosed
	}
	h, ok := l.open[r.ID]
	if !ok || !h.carve || r.l != l {
		l.mu.Unlock()
		return Op{}, fmt.Errorf("%w: reservation %d is not an open carve of this ledger", ErrNotOpen, r.ID)
	}
	if h.amounts[Steps] == 0 && h.charged[Steps] == 0 {
		spent[Steps] = 0
	}
	delete(l.open, r.ID)
	l.reserved = sub(l.reserved, h.amounts)
	extra := sub(spent, h.charged)
	l.spent = l.spent.add(extra)
	l.kidSteps = sat(l.kidSteps, extra[Steps])
	parent, id := l.parent, l.carveID
	l.mu.Unlock()
	if parent != nil && !extra.IsZero() {
		parent.charge(id, extra)
	}
	return Op{Kind: OpSettle, ID: r.ID, Amounts: spent, Carve: true}, nil
}

// Open returns the open reservations, by id.
func (l *Ledger) Open() []Reservation {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Reservation, 0, len(l.open))
	for id, h := range l.open {
		out = append(out, Reservation{ID: id, Step: h.step, Amounts: h.amounts, Carve: h.carve, l: l})
	}
	slices.SortFunc(out, func(a, b Reservation) int { return cmpUint(a.ID, b.ID) })
	return out
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Ceilings returns the ledger's ceilings.
func (l *Ledger) Ceilings() Ceilings { return l.ceil }

// Spent returns what the ledger's settled calls (and counted steps and
// elapsed seconds) spent, and what its open reservations hold.
func (l *Ledger) Spent() (spent, reserved Amounts) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.spent, l.reserved
}

// Lower lowers the ceiling of d to n when d is unlimited or its ceiling is
// above n; a ceiling is never raised (a run narrows its own budget, ABI
// run.limit). It returns the ceilings now in force. A ceiling lowered
// below what is spent and reserved admits nothing more of d; what is
// already held stays held.
func (l *Ledger) Lower(d Dim, n uint64) Ceilings {
	l.mu.Lock()
	defer l.mu.Unlock()
	if max, ok := l.ceil.Get(d); !ok || n < max {
		l.ceil = l.ceil.With(d, n)
	}
	return l.ceil
}

// Used returns what d has used of its ceiling: spent and reserved, the
// amount Lower's "from now on, at most so much more" counts from.
func (l *Ledger) Used(d Dim) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return sat(l.spent[d], l.reserved[d])
}
