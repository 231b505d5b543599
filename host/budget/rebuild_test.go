package budget

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
)

// journalOf runs a live ledger through a sequence of model calls, as the
// gate would, and returns it with the budget records in journal order. A
// call whose index is in crashAt is left without its settle.
func journalOf(t *testing.T, c Ceilings, rng *rand.Rand, calls int, crashAt map[int]bool) (*Ledger, []Op) {
	t.Helper()
	l := New(c)
	var ops []Op
	price := Price{Input: 3_000_000, Output: 15_000_000, CacheRead: 300_000, CacheWrite: 3_750_000}
	for i := range calls {
		if err := l.Step(); err != nil {
			t.Fatal(err)
		}
		in, maxOut := 100+rng.Uint64N(5000), 1+rng.Uint64N(2000)
		worst, err := WorstCase(in, maxOut, price)
		if err != nil {
			t.Fatal(err)
		}
		r, err := l.Reserve(uint64(i+1), worst)
		if errors.Is(err, ErrBudget) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, r.Op())
		if crashAt[i] {
			continue
		}
		u := Usage{Input: in / 2, CacheRead: in / 4, CacheWrite: in - in/2 - in/4, Output: rng.Uint64N(maxOut + 1)}
		actual, err := Charge(u, price)
		if err != nil {
			t.Fatal(err)
		}
		o, err := l.Settle(r, actual)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, o)
	}
	return l, ops
}

func sameLedger(t *testing.T, what string, a, b *Ledger) {
	t.Helper()
	as, ar := a.Spent()
	bs, br := b.Spent()
	if as != bs || ar != br || len(a.Open()) != len(b.Open()) {
		t.Fatalf("%s: spent %v reserved %v (%d open), want %v %v (%d open)", what, as, ar, len(a.Open()), bs, br, len(b.Open()))
	}
}

// TestReplayEqualsTheLiveLedger: the records of a live ledger, encoded and
// decoded as the journal holds them, replay to the same ledger, and spent
// is exactly the sum of the settles.
func TestReplayEqualsTheLiveLedger(t *testing.T) {
	for seed := range 50 {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		c := Ceilings{}.With(MicroUSD, 2*ten).With(ModelCalls, 200)
		live, ops := journalOf(t, c, rng, 100, nil)
		var fields [][]byte
		var sum Amounts
		for _, o := range ops {
			b, err := EncodeRecord(o)
			if err != nil {
				t.Fatal(err)
			}
			fields = append(fields, b)
			sum = sum.add(o.Amounts.settled(o))
		}
		spent, _ := live.Spent()
		sum[Steps] = spent[Steps]
		if spent != sum {
			t.Fatalf("seed %d: live spent %v, sum of settles %v", seed, spent, sum)
		}
		rep, err := ReportFrom(c, Journal{Steps: spent[Steps], Fields: fields})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Rows[MicroUSD].Spent != spent[MicroUSD] || rep.Rows[InputTokens].Spent != spent[InputTokens] || rep.Open != 0 {
			t.Fatalf("seed %d: report %+v, live %v", seed, rep.Rows, spent)
		}
		r, err := Replay(c, spent[Steps], ops)
		if err != nil {
			t.Fatal(err)
		}
		sameLedger(t, "replay", r, live)
	}
}

// settled is what a record charges: a settle's amounts, nothing for the
// others.
func (a Amounts) settled(o Op) Amounts {
	if o.Kind == OpSettle {
		return a
	}
	return Amounts{}
}

// TestRebuildSettlesOrphans: a crash leaves reservations without settles;
// Rebuild resolves each as its Resolver says (by default at its worst
// case), returns the records to journal, and a rebuild from the journal
// with those records appended needs no resolution and gives the same
// ledger.
func TestRebuildSettlesOrphans(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	c := Ceilings{}.With(MicroUSD, 5*ten)
	_, ops := journalOf(t, c, rng, 20, map[int]bool{4: true, 11: true, 19: true})
	orphans := map[uint64]Reservation{}
	replayed, err := Replay(c, 20, ops)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range replayed.Open() {
		orphans[r.ID] = r
	}
	if len(orphans) != 3 {
		t.Fatalf("%d orphans, want 3", len(orphans))
	}
	spentBefore, _ := replayed.Spent()

	// By default each is charged its worst case.
	l, res, err := Rebuild(c, 20, ops, nil)
	if err != nil {
		t.Fatal(err)
	}
	var worst Amounts
	for i, o := range res {
		r := orphans[o.ID]
		if o.Kind != OpSettle || !o.Orphan || !o.WorstCase || o.Amounts != r.Amounts {
			t.Errorf("resolution %d: %v, orphan %v", i, o, r)
		}
		worst = worst.add(r.Amounts)
	}
	spent, reserved := l.Spent()
	if want := spentBefore.add(worst); spent != want || !reserved.IsZero() || len(res) != 3 {
		t.Fatalf("rebuilt spent %v reserved %v, want %v", spent, reserved, want)
	}
	again, more, err := Rebuild(c, 20, append(ops, res...), nil)
	if err != nil || len(more) != 0 {
		t.Fatalf("second rebuild: %v, %v", more, err)
	}
	sameLedger(t, "second rebuild", again, l)

	// A resolver that knows: one actual, one never sent, one kept.
	ids := []uint64{}
	for _, r := range replayed.Open() {
		ids = append(ids, r.ID)
	}
	actual := Amounts{ModelCalls: 1, InputTokens: 10, OutputTokens: 3, MicroUSD: 77}
	l, res, err = Rebuild(c, 20, ops, func(r Reservation) Resolution {
		switch r.ID {
		case ids[0]:
			return Resolution{Kind: ResolveActual, Actual: actual}
		case ids[1]:
			return Resolution{Kind: ResolveNotSent}
		}
		return Resolution{Kind: ResolveKeep}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0] != (Op{Kind: OpSettle, ID: ids[0], Amounts: actual, Orphan: true}) || res[1] != (Op{Kind: OpRelease, ID: ids[1], Orphan: true}) {
		t.Fatalf("resolutions %v", res)
	}
	spent, reserved = l.Spent()
	if spent != spentBefore.add(actual) || reserved != orphans[ids[2]].Amounts {
		t.Fatalf("spent %v reserved %v", spent, reserved)
	}
	// The kept one is open, and the host settles it as usual.
	open := l.Open()
	if len(open) != 1 || open[0].ID != ids[2] {
		t.Fatalf("open %v", open)
	}
	if _, err := l.Settle(open[0], actual); err != nil {
		t.Fatalf("settling the kept orphan: %v", err)
	}
	// A new reservation gets the next id.
	var last uint64
	for _, o := range ops {
		last = max(last, o.ID)
	}
	if r, err := l.Reserve(21, usd(1)); err != nil || r.ID != last+1 {
		t.Fatalf("the next reservation: %+v %v, want id %d", r, err, last+1)
	}
}

func TestReplayRefusesRecordsNoLedgerWrites(t *testing.T) {
	r1 := Op{Kind: OpReserve, ID: 1, Step: 1, Amounts: usd(5)}
	s1 := Op{Kind: OpSettle, ID: 1, Amounts: usd(4)}
	for name, tc := range map[string]struct {
		ops   []Op
		index int
		cause error
	}{
		"settle without reserve":  {[]Op{s1}, 0, ErrNotOpen},
		"settled twice":           {[]Op{r1, s1, s1}, 2, ErrNotOpen},
		"release after settle":    {[]Op{r1, s1, {Kind: OpRelease, ID: 1}}, 2, ErrNotOpen},
		"id reused":               {[]Op{r1, s1, r1}, 2, nil},
		"ids going down":          {[]Op{{Kind: OpReserve, ID: 2, Step: 1}, r1}, 1, nil},
		"carve settled as a call": {[]Op{{Kind: OpReserve, ID: 1, Step: 1, Carve: true}, s1}, 1, ErrNotOpen},
		"call settled as a carve": {[]Op{r1, {Kind: OpSettle, ID: 1, Carve: true}}, 1, ErrNotOpen},
		"malformed":               {[]Op{{Kind: OpRelease, ID: 1, Amounts: usd(1)}}, 0, nil},
	} {
		_, err := Replay(Ceilings{}, 0, tc.ops)
		var re *RecordError
		if !errors.As(err, &re) || re.Index != tc.index || (tc.cause != nil && !errors.Is(err, tc.cause)) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Replay applies what the journal says, over the ceiling or not: the
	// live ledger admitted it.
	l, err := Replay(Ceilings{}.With(MicroUSD, 1), 0, []Op{r1})
	if err != nil {
		t.Fatal(err)
	}
	if _, reserved := l.Spent(); reserved[MicroUSD] != 5 {
		t.Fatalf("reserved %v", reserved)
	}
}

// A ledger rebuilt from a snapshot and the records after it equals the one
// rebuilt from every record: what a resume from a checkpoint relies on.
func TestRebuildFromSnapshotEqualsRebuildFromEveryRecord(t *testing.T) {
	c := Ceilings{}.With(ToolCalls, 10).With(MicroUSD, 5000)
	l := New(c)
	var ops []Op
	must := func(o Op, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, o)
	}
	r1, err := l.Reserve(1, Amounts{ToolCalls: 1})
	must(r1.Op(), err)
	must(l.Settle(r1, Amounts{ToolCalls: 1}))
	held, err := l.Reserve(2, Amounts{MicroUSD: 3000})
	must(held.Op(), err)
	l.Lower(ToolCalls, 4)
	snap, cut := l.Snapshot(), len(ops)
	r3, err := l.Reserve(3, Amounts{ToolCalls: 1})
	must(r3.Op(), err)
	must(l.Settle(held, Amounts{MicroUSD: 1200}))
	r4, err := l.Reserve(4, Amounts{ToolCalls: 2})
	must(r4.Op(), err)

	all, resAll, err := Rebuild(l.Ceilings(), 4, ops, nil)
	if err != nil {
		t.Fatal(err)
	}
	from, resFrom, err := RebuildFrom(snap, 4, ops[cut:], nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(all.Report(), from.Report()) || len(resAll) != 2 || len(resFrom) != 2 || resAll[0] != resFrom[0] || resAll[1] != resFrom[1] {
		t.Fatalf("from every record:\n%v %v\nfrom the snapshot:\n%v %v", all.Report(), resAll, from.Report(), resFrom)
	}
	if _, err := ReplayFrom(Snapshot{LastID: 1, Open: []Reservation{{ID: 2, Step: 1}}}, 0, nil); !errors.Is(err, ErrRecord) {
		t.Fatalf("a snapshot with an open id past its last: %v", err)
	}
}
