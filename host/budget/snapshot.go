package budget

import "fmt"

// Snapshot is a ledger's state at one point of its run: what a run's
// checkpoint carries (abi.CheckpointResponse.Budget), so that a resume
// from the checkpoint rebuilds the ledger from it and the records after
// it, without reading the journal before it. The run's own steps and its
// wall-clock seconds are not in it: they are counted from the journal.
type Snapshot struct {
	Ceilings Ceilings
	// Spent is what settled calls spent, wall clock excluded; its steps
	// are those the run's children spent (settled carves), its own being
	// counted from the journal.
	Spent Amounts
	// Open are the reservations open at the snapshot, by id.
	Open []Reservation
	// LastID is the id of the ledger's last reservation.
	LastID uint64
}

// Snapshot returns the ledger's state.
func (l *Ledger) Snapshot() Snapshot {
	open := l.Open()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Snapshot{Ceilings: l.ceil, Spent: l.spent, Open: open, LastID: l.lastID}
	s.Spent[Steps], s.Spent[WallSeconds] = l.kidSteps, 0
	for i := range s.Open {
		s.Open[i].l = nil
	}
	return s
}

// ledgerOf returns the ledger in state s, with steps counted.
func ledgerOf(s Snapshot, steps uint64) (*Ledger, error) {
	l := New(s.Ceilings)
	l.spent = s.Spent
	l.kidSteps = s.Spent[Steps]
	l.spent[Steps], l.spent[WallSeconds] = sat(steps, l.kidSteps), 0
	l.lastID = s.LastID
	for _, r := range s.Open {
		if r.ID == 0 || r.ID > s.LastID {
			return nil, fmt.Errorf("%w: snapshot: open reservation %d after the last id %d", ErrRecord, r.ID, s.LastID)
		}
		if _, dup := l.open[r.ID]; dup {
			return nil, fmt.Errorf("%w: snapshot: reservation %d open twice", ErrRecord, r.ID)
		}
		l.open[r.ID] = held{amounts: r.Amounts, step: r.Step, carve: r.Carve}
		l.reserved = l.reserved.add(r.Amounts)
	}
	return l, nil
}

// ReplayFrom is Replay from a snapshot instead of an empty ledger: ops are
// the records journaled after it.
func ReplayFrom(s Snapshot, steps uint64, ops []Op) (*Ledger, error) {
	l, err := ledgerOf(s, steps)
	if err != nil {
		return nil, err
	}
	for i, o := range ops {
		if err := l.apply(o); err != nil {
			return nil, &RecordError{Index: i, Reason: fmt.Sprintf("%s: %v", o, err), Err: err}
		}
	}
	return l, nil
}

// RebuildFrom is Rebuild from a snapshot: ReplayFrom, then the resolution
// of every reservation left open.
func RebuildFrom(s Snapshot, steps uint64, ops []Op, resolve Resolver) (*Ledger, []Op, error) {
	l, err := ReplayFrom(s, steps, ops)
	if err != nil {
		return nil, nil, err
	}
	return l.resolve(resolve)
}
