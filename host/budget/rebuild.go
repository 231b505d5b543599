package budget

import "fmt"

// Replay returns the ledger that wrote ops, in journal order, under
// ceilings c, with steps import calls counted (the journal's last step).
// It applies each record as the fact it is, whatever the ceilings (a
// reserve the live ledger admitted is not refused now), and checks only
// that the records are ones a ledger writes: a reserve under a fresh id, a
// settle or release of an open reservation (*RecordError otherwise).
// Reservations without their settle stay open; Rebuild resolves them.
func Replay(c Ceilings, steps uint64, ops []Op) (*Ledger, error) {
	l := New(c)
	l.spent[Steps] = steps
	for i, o := range ops {
		if err := l.apply(o); err != nil {
			return nil, &RecordError{Index: i, Reason: fmt.Sprintf("%s: %v", o, err), Err: err}
		}
	}
	return l, nil
}

// apply applies one record.
func (l *Ledger) apply(o Op) error {
	if why := o.check(); why != "" {
		return fmt.Errorf("%s", why)
	}
	switch o.Kind {
	case OpReserve:
		// A ledger numbers its reservations as it admits them, and a run's
		// calls reach the journal in that order.
		if o.ID <= l.lastID {
			return fmt.Errorf("reservation %d after reservation %d: ids count up", o.ID, l.lastID)
		}
		l.open[o.ID] = held{amounts: o.Amounts, step: o.Step, carve: o.Carve}
		l.reserved = l.reserved.add(o.Amounts)
		l.lastID = max(l.lastID, o.ID)
		return nil
	case OpSettle, OpRelease:
		h, ok := l.open[o.ID]
		switch {
		case !ok:
			return ErrNotOpen
		case h.carve != o.Carve:
			return fmt.Errorf("%w: reservation %d is %s a carve", ErrNotOpen, o.ID, map[bool]string{true: "", false: "not"}[h.carve])
		}
		delete(l.open, o.ID)
		l.reserved = sub(l.reserved, h.amounts)
		l.spent = l.spent.add(o.Amounts)
		if o.Carve {
			l.kidSteps = sat(l.kidSteps, o.Amounts[Steps])
		}
	}
	return nil
}

// Resolution is what a Resolver decided for a reservation a crash left
// open.
type Resolution struct {
	Kind ResolutionKind
	// Actual is the usage to charge, for ResolveActual.
	Actual Amounts
}

// ResolutionKind is how an orphaned reservation is resolved.
type ResolutionKind uint8

// The resolutions of an orphan.
const (
	// ResolveWorstCase charges the reservation's worst case: the call may
	// have been dispatched and its usage is unknown. It is the default,
	// since it never counts less than was spent.
	ResolveWorstCase ResolutionKind = iota
	// ResolveActual charges Resolution.Actual: the host learnt the usage
	// (a resumed stream's final usage, a provider's record of the request).
	ResolveActual
	// ResolveNotSent releases the reservation: the call never left the
	// host (its journal holds its intent but no executing entry).
	ResolveNotSent
	// ResolveKeep leaves the reservation open: the host goes on with the
	// call under it (an intent not yet dispatched), or a child ledger
	// still runs under the carve (Adopt).
	ResolveKeep
)

// A Resolver decides what an orphaned reservation cost. nil resolves every
// orphan at its worst case.
type Resolver func(r Reservation) Resolution

// Rebuild is Replay followed by the resolution of every reservation left
// open (an orphan of a crash), by id: resolve says how (nil: each at its
// worst case). It returns the ledger and the records of the resolutions,
// which the host MUST journal (journal/SPEC.md, "Budget records": on the
// next entry of each orphan's call) before the run goes on, so that the
// next rebuild reaches the same ledger.
func Rebuild(c Ceilings, steps uint64, ops []Op, resolve Resolver) (*Ledger, []Op, error) {
	l, err := Replay(c, steps, ops)
	if err != nil {
		return nil, nil, err
	}
	return l.resolve(resolve)
}

// resolve resolves every open reservation of a replayed ledger (Rebuild).
func (l *Ledger) resolve(resolve Resolver) (*Ledger, []Op, error) {
	var out []Op
	for _, r := range l.Open() {
		res := Resolution{Kind: ResolveWorstCase}
		if resolve != nil {
			res = resolve(r)
		}
		// A carve's worst case is the child's whole ceilings: what the
		// parent charges when the child's own journal cannot say better.
		o := Op{ID: r.ID, Orphan: true, Carve: r.Carve}
		switch res.Kind {
		case ResolveWorstCase:
			o.Kind, o.Amounts, o.WorstCase = OpSettle, r.Amounts, true
		case ResolveActual:
			o.Kind, o.Amounts = OpSettle, res.Actual
		case ResolveNotSent:
			if r.Carve {
				return nil, nil, fmt.Errorf("resolving reservation %d: a carve cannot be released (the child's spend is charged when it closes)", r.ID)
			}
			o.Kind = OpRelease
		case ResolveKeep:
			continue
		default:
			return nil, nil, fmt.Errorf("resolving reservation %d: unknown resolution %d", r.ID, res.Kind)
		}
		if err := l.apply(o); err != nil {
			return nil, nil, fmt.Errorf("resolving reservation %d: %w", r.ID, err)
		}
		out = append(out, o)
	}
	return l, out, nil
}

// Adopt re-attaches, after both were rebuilt, a child ledger to the carve r
// of l that it runs under (r from l.Open(), kept open by ResolveKeep): the
// child's spend so far, which l's journal does not hold, is charged to l as
// the live child charged it, and the child's later settles charge l. child
// is the child's ledger as Replay or Rebuild returned it from its own
// journal.
func (l *Ledger) Adopt(r Reservation, child *Ledger) error {
	l.mu.Lock()
	h, ok := l.open[r.ID]
	l.mu.Unlock()
	if !ok || !h.carve || r.l != l {
		return fmt.Errorf("%w: reservation %d is not an open carve of this ledger", ErrNotOpen, r.ID)
	}
	child.mu.Lock()
	if child.parent != nil {
		child.mu.Unlock()
		return fmt.Errorf("%w: the child has a parent already", ErrCarve)
	}
	child.parent, child.carveID = l, r.ID
	spent := child.spent
	child.mu.Unlock()
	spent[WallSeconds] = 0
	l.charge(r.ID, spent)
	return nil
}
