package budget

import (
	"errors"
	"sync"
	"testing"
)

// TestCarve: a child's ceilings are held in its parent; the child's
// settles and steps charge the parent as they happen; closing the child
// returns what it left unused, and the parent's records replay to the same
// parent.
func TestCarve(t *testing.T) {
	parent := New(Ceilings{}.With(MicroUSD, ten).With(Steps, 100).With(WallSeconds, 600))
	pr, _ := parent.Reserve(1, usd(1_000_000))
	if _, err := parent.Settle(pr, usd(1_000_000)); err != nil {
		t.Fatal(err)
	}
	parent.Step()

	// The child must be limited wherever the parent is.
	if _, _, err := parent.Carve(2, Ceilings{}.With(MicroUSD, 3*1_000_000).With(WallSeconds, 60)); !errors.Is(err, ErrCarve) {
		t.Fatalf("a child without a steps ceiling: %v", err)
	}
	parent.Tick(550)
	if _, _, err := parent.Carve(2, Ceilings{}.With(MicroUSD, 1).With(Steps, 1).With(WallSeconds, 60)); !errors.Is(err, ErrCarve) {
		t.Fatalf("60 s for a child of a parent with 50 s left: %v", err)
	}
	// More money than is left.
	_, _, err := parent.Carve(2, Ceilings{}.With(MicroUSD, 9_000_001).With(Steps, 10).With(WallSeconds, 50))
	var ex *ExceededError
	if !errors.As(err, &ex) || ex.Dim != MicroUSD || ex.Left != 9_000_000 {
		t.Fatalf("a child of $9.000001 with $9 left: %v", err)
	}

	child, carve, err := parent.Carve(2, Ceilings{}.With(MicroUSD, 3_000_000).With(Steps, 10).With(WallSeconds, 50).With(ModelCalls, 5))
	if err != nil {
		t.Fatal(err)
	}
	if carve.Op() != (Op{Kind: OpReserve, ID: 2, Step: 2, Amounts: Amounts{MicroUSD: 3_000_000, Steps: 10, ModelCalls: 5}, Carve: true}) {
		t.Fatalf("carve record %v", carve.Op())
	}
	ops := []Op{pr.Op(), {Kind: OpSettle, ID: 1, Amounts: usd(1_000_000)}, carve.Op()}
	spent, reserved := parent.Spent()
	if spent[MicroUSD] != 1_000_000 || reserved[MicroUSD] != 3_000_000 || reserved[Steps] != 10 {
		t.Fatalf("parent after carve: spent %v reserved %v", spent, reserved)
	}
	// The parent cannot settle the carve itself.
	if _, err := parent.Settle(carve, usd(1)); !errors.Is(err, ErrNotOpen) {
		t.Fatalf("parent settling the carve: %v", err)
	}
	// The parent's own reservations see only what the carve leaves.
	if _, err := parent.Reserve(3, usd(6_000_001)); !errors.Is(err, ErrBudget) {
		t.Fatalf("a parent reserve over what the carve leaves: %v", err)
	}

	c1, err := child.Reserve(1, Amounts{ModelCalls: 1, MicroUSD: 2_000_000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := child.Reserve(2, Amounts{ModelCalls: 1, MicroUSD: 1_000_001}); !errors.Is(err, ErrBudget) {
		t.Fatalf("a child reserve over its ceiling: %v", err)
	}
	if err := child.Step(); err != nil {
		t.Fatal(err)
	}
	if _, err := child.Settle(c1, Amounts{ModelCalls: 1, MicroUSD: 1_250_000}); err != nil {
		t.Fatal(err)
	}
	spent, reserved = parent.Spent()
	if spent[MicroUSD] != 2_250_000 || reserved[MicroUSD] != 1_750_000 || spent[Steps] != 2 || reserved[Steps] != 9 || spent[ModelCalls] != 1 {
		t.Fatalf("parent after the child's settle: spent %v reserved %v", spent, reserved)
	}
	c2, _ := child.Reserve(3, usd(5))
	if _, err := child.Close(); !errors.Is(err, ErrOpenReservations) {
		t.Fatalf("closing with a reservation open: %v", err)
	}
	child.Release(c2)
	closing, err := child.Close()
	if err != nil {
		t.Fatal(err)
	}
	if closing != (Op{Kind: OpSettle, ID: 2, Amounts: Amounts{MicroUSD: 1_250_000, Steps: 1, ModelCalls: 1}, Carve: true}) {
		t.Fatalf("close record %v", closing)
	}
	spent, reserved = parent.Spent()
	if spent[MicroUSD] != 2_250_000 || !reserved.IsZero() {
		t.Fatalf("parent after close: spent %v reserved %v", spent, reserved)
	}
	if _, err := child.Reserve(4, usd(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("a closed child reserves: %v", err)
	}
	if _, err := parent.Reserve(3, usd(7_750_000)); err != nil {
		t.Fatalf("the parent's room after the child closed: %v", err)
	}
	// The parent's journal replays to the same money and reservations
	// (the steps come from its own step numbers).
	ops = append(ops, closing)
	r, err := Replay(parent.Ceilings(), 1, ops)
	if err != nil {
		t.Fatal(err)
	}
	rs, _ := r.Spent()
	if rs[MicroUSD] != 2_250_000 || rs[ModelCalls] != 1 {
		t.Fatalf("replayed parent spent %v", rs)
	}
}

// TestGrandchildChargesEveryAncestor: a carve of a carve charges up the
// chain.
func TestGrandchildChargesEveryAncestor(t *testing.T) {
	root := New(Ceilings{}.With(MicroUSD, ten))
	child, _, err := root.Carve(1, Ceilings{}.With(MicroUSD, 5_000_000))
	if err != nil {
		t.Fatal(err)
	}
	grand, _, err := child.Carve(1, Ceilings{}.With(MicroUSD, 2_000_000))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := grand.Reserve(1, usd(1_500_000))
	grand.Settle(r, usd(1_000_000))
	for _, tc := range []struct {
		l               *Ledger
		spent, reserved uint64
	}{{grand, 1_000_000, 0}, {child, 1_000_000, 1_000_000}, {root, 1_000_000, 4_000_000}} {
		s, res := tc.l.Spent()
		if s[MicroUSD] != tc.spent || res[MicroUSD] != tc.reserved {
			t.Errorf("spent %d reserved %d, want %d %d", s[MicroUSD], res[MicroUSD], tc.spent, tc.reserved)
		}
	}
}

// TestAdopt: after a crash of the parent, its rebuilt ledger keeps the
// carve of a child that still runs, and adopting the child's rebuilt
// ledger restores what the live parent held.
func TestAdopt(t *testing.T) {
	c := Ceilings{}.With(MicroUSD, ten)
	parent := New(c)
	child, carve, _ := parent.Carve(1, Ceilings{}.With(MicroUSD, 4_000_000))
	cr, _ := child.Reserve(1, usd(1_000_000))
	settle, _ := child.Settle(cr, usd(600_000))
	liveSpent, liveReserved := parent.Spent()

	rebuilt, res, err := Rebuild(c, 0, []Op{carve.Op()}, func(r Reservation) Resolution { return Resolution{Kind: ResolveKeep} })
	if err != nil || len(res) != 0 {
		t.Fatal(res, err)
	}
	kid, err := Replay(Ceilings{}.With(MicroUSD, 4_000_000), 0, []Op{cr.Op(), settle})
	if err != nil {
		t.Fatal(err)
	}
	if err := rebuilt.Adopt(rebuilt.Open()[0], kid); err != nil {
		t.Fatal(err)
	}
	if s, r := rebuilt.Spent(); s != liveSpent || r != liveReserved {
		t.Fatalf("adopted: spent %v reserved %v, live %v %v", s, r, liveSpent, liveReserved)
	}
	if err := rebuilt.Adopt(rebuilt.Open()[0], kid); !errors.Is(err, ErrCarve) {
		t.Fatalf("adopting twice: %v", err)
	}
	op, err := kid.Close()
	if err != nil || op.Amounts[MicroUSD] != 600_000 {
		t.Fatalf("closing the adopted child: %v %v", op, err)
	}
	if s, r := rebuilt.Spent(); s[MicroUSD] != 600_000 || !r.IsZero() {
		t.Fatalf("after close: spent %v reserved %v", s, r)
	}
}

// TestConcurrentCarves: children carved concurrently out of one parent get
// only the room it has; each spends concurrently within its own ceilings
// beside the parent's own calls; the parent never holds more than its
// ceiling, and once every child has closed it has spent exactly what the
// children and its own calls settled.
func TestConcurrentCarves(t *testing.T) {
	for seed := range 20 {
		parent := New(Ceilings{}.With(MicroUSD, ten).With(ModelCalls, 1000))
		var wg sync.WaitGroup
		var mu sync.Mutex
		var settled uint64
		live, most := 0, 0
		for k := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				child, _, err := parent.Carve(uint64(k+1), Ceilings{}.With(MicroUSD, 3_000_000).With(ModelCalls, 100))
				if err != nil {
					if !errors.Is(err, ErrBudget) {
						t.Errorf("carve: %v", err)
					}
					return
				}
				mu.Lock()
				live++
				most = max(most, live)
				mu.Unlock()
				var inner sync.WaitGroup
				for w := range 3 {
					inner.Add(1)
					go func() {
						defer inner.Done()
						for i := range 50 {
							r, err := child.Reserve(1, Amounts{ModelCalls: 1, MicroUSD: 40_000})
							if err != nil {
								continue
							}
							actual := uint64((seed*31+k*7+w*3+i)%40_000 + 1)
							if _, err := child.Settle(r, Amounts{ModelCalls: 1, MicroUSD: actual}); err != nil {
								t.Error(err)
								return
							}
							mu.Lock()
							settled += actual
							mu.Unlock()
						}
					}()
				}
				inner.Wait()
				// Counted closed first: the parent may carve again as soon
				// as Close returns the room.
				mu.Lock()
				live--
				mu.Unlock()
				if _, err := child.Close(); err != nil {
					t.Error(err)
				}
			}()
		}
		// The parent's own calls, meanwhile.
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				r, err := parent.Reserve(1, usd(10_000))
				if err != nil {
					continue
				}
				parent.Settle(r, usd(10_000))
				mu.Lock()
				settled += 10_000
				mu.Unlock()
				spent, reserved := parent.Spent()
				if spent[MicroUSD]+reserved[MicroUSD] > ten {
					t.Errorf("the parent holds %d spent + %d reserved of %d", spent[MicroUSD], reserved[MicroUSD], ten)
				}
			}
		}()
		wg.Wait()
		spent, reserved := parent.Spent()
		if spent[MicroUSD] != settled || !reserved.IsZero() || len(parent.Open()) != 0 {
			t.Fatalf("seed %d: parent spent %d reserved %v, settled %d", seed, spent[MicroUSD], reserved, settled)
		}
		if most > 3 {
			t.Fatalf("seed %d: %d children of $3 open at once out of $10", seed, most)
		}
	}
}

// TestReserveCarveSteps: a carve reserves the child's steps in its
// parent, beside the parent's own (CountSteps); settling it returns what
// the child did not make, and a snapshot of the parent keeps what its
// children made, so that a rebuild from it counts them.
func TestReserveCarveSteps(t *testing.T) {
	parent := New(Ceilings{}.With(Steps, 100).With(WallSeconds, 600))
	parent.CountSteps(10)
	parent.CountSteps(4) // never goes back
	_, err := parent.ReserveCarve(11, Ceilings{}.With(Steps, 91).With(WallSeconds, 60))
	var ex *ExceededError
	if !errors.As(err, &ex) || ex.Dim != Steps || ex.Left != 90 {
		t.Fatalf("a child of 91 steps out of a parent with 90 left: %v", err)
	}
	parent.Elapse(580)
	if _, err := parent.ReserveCarve(11, Ceilings{}.With(Steps, 40).With(WallSeconds, 21)); !errors.Is(err, ErrCarve) {
		t.Fatalf("a child of 21 s out of a parent with 20 s left: %v", err)
	}
	r, err := parent.ReserveCarve(11, Ceilings{}.With(Steps, 40).With(WallSeconds, 20))
	if err != nil {
		t.Fatal(err)
	}
	if r.Amounts[Steps] != 40 || parent.ChildSteps() != 40 {
		t.Fatalf("carve %v, the children hold %d steps", r.Amounts, parent.ChildSteps())
	}
	// The parent's own steps see what the carve holds: 10 + 40 of 100.
	for range 50 {
		if err := parent.Step(); err != nil {
			t.Fatal(err)
		}
	}
	if err := parent.Step(); !errors.Is(err, ErrBudget) {
		t.Fatalf("the parent's 61st step with 40 held by its child: %v", err)
	}
	o, err := parent.SettleCarve(r, Amounts{Steps: 12})
	if err != nil {
		t.Fatal(err)
	}
	spent, reserved := parent.Spent()
	if o.Amounts[Steps] != 12 || spent[Steps] != 72 || reserved[Steps] != 0 || parent.ChildSteps() != 12 {
		t.Fatalf("after the child made 12 steps: settle %v, spent %v, reserved %v, children %d", o, spent, reserved, parent.ChildSteps())
	}
	snap := parent.Snapshot()
	l, err := ReplayFrom(snap, 60, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := l.Spent(); s[Steps] != 72 || l.ChildSteps() != 12 {
		t.Fatalf("rebuilt from the snapshot: %d steps, %d of the children", s[Steps], l.ChildSteps())
	}
}
