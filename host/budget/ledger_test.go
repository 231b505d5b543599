package budget

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/capability"
)

// ten dollars, for most tests.
const ten = 10 * capability.MicroPerUSD

func usd(n uint64) Amounts { return Amounts{MicroUSD: n} }

func TestReserveSettleRelease(t *testing.T) {
	l := New(Ceilings{}.With(MicroUSD, ten).With(ModelCalls, 3))
	a := Amounts{ModelCalls: 1, InputTokens: 1000, OutputTokens: 500, MicroUSD: 4_000_000}
	r1, err := l.Reserve(1, a)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := l.Reserve(2, a)
	if err != nil {
		t.Fatal(err)
	}
	if r1.ID != 1 || r2.ID != 2 || r2.Step != 2 {
		t.Fatalf("ids %d %d, step %d", r1.ID, r2.ID, r2.Step)
	}
	// 8 of 10 dollars reserved: a third call of 4 does not fit.
	_, err = l.Reserve(3, a)
	var ex *ExceededError
	if !errors.As(err, &ex) || !errors.Is(err, ErrBudget) {
		t.Fatalf("third reserve: %v", err)
	}
	if *ex != (ExceededError{Dim: MicroUSD, Asked: 4_000_000, Left: 2_000_000, Ceiling: ten, Reserved: 8_000_000}) {
		t.Fatalf("exceeded %+v", *ex)
	}
	if want := "budget exceeded: micro_usd: asked $4, $2 left of $10 ($0 spent, $8 reserved)"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	op, err := l.Settle(r1, Amounts{ModelCalls: 1, InputTokens: 990, OutputTokens: 120, MicroUSD: 1_234_567})
	if err != nil || op != (Op{Kind: OpSettle, ID: 1, Amounts: Amounts{ModelCalls: 1, InputTokens: 990, OutputTokens: 120, MicroUSD: 1_234_567}}) {
		t.Fatalf("settle: %v %v", op, err)
	}
	if op, err := l.Release(r2); err != nil || op != (Op{Kind: OpRelease, ID: 2}) {
		t.Fatalf("release: %v %v", op, err)
	}
	spent, reserved := l.Spent()
	if spent != (Amounts{ModelCalls: 1, InputTokens: 990, OutputTokens: 120, MicroUSD: 1_234_567}) || !reserved.IsZero() {
		t.Fatalf("spent %v reserved %v", spent, reserved)
	}
	// Settled twice, released after settle: nothing changes.
	if _, err := l.Settle(r1, usd(1)); !errors.Is(err, ErrNotOpen) {
		t.Errorf("second settle: %v", err)
	}
	if _, err := l.Release(r1); !errors.Is(err, ErrNotOpen) {
		t.Errorf("release after settle: %v", err)
	}
	if s, _ := l.Spent(); s != spent {
		t.Errorf("a refused settle changed spent: %v", s)
	}
	// Another ledger's reservation, with an id this one has open.
	other := New(Ceilings{})
	o1, _ := other.Reserve(1, usd(1))
	mine, _ := l.Reserve(3, usd(1))
	if o1.ID != 1 || mine.ID != 3 {
		t.Fatalf("ids %d %d", o1.ID, mine.ID)
	}
	if _, err := other.Reserve(2, usd(1)); err != nil {
		t.Fatal(err)
	}
	o3, _ := other.Reserve(3, usd(1))
	if _, err := l.Settle(o3, usd(1)); !errors.Is(err, ErrNotOpen) {
		t.Errorf("settle of another ledger's reservation 3: %v", err)
	}
}

func TestModelCallsCeiling(t *testing.T) {
	l := New(Ceilings{}.With(ModelCalls, 2))
	for i := range 2 {
		if _, err := l.Reserve(uint64(i+1), Amounts{ModelCalls: 1}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := l.Reserve(3, Amounts{ModelCalls: 1})
	var ex *ExceededError
	if !errors.As(err, &ex) || ex.Dim != ModelCalls || ex.Left != 0 || ex.Asked != 1 {
		t.Fatalf("third model call: %v", err)
	}
	// A call that asks for none of a spent dimension still goes.
	if _, err := l.Reserve(4, Amounts{ToolCalls: 1}); err != nil {
		t.Fatalf("a tool call under a spent model-call budget: %v", err)
	}
}

func TestOverspendIsRecordedAndSeen(t *testing.T) {
	l := New(Ceilings{}.With(OutputTokens, 1000))
	r, err := l.Reserve(1, Amounts{OutputTokens: 800})
	if err != nil {
		t.Fatal(err)
	}
	// The provider returned more than the reserve (an estimate too low).
	if _, err := l.Settle(r, Amounts{OutputTokens: 1300}); err != nil {
		t.Fatal(err)
	}
	rep := l.Report()
	row := rep.Rows[OutputTokens]
	if row.Spent != 1300 || *row.Left != 0 || row.Over != 300 {
		t.Fatalf("row %+v", row)
	}
	_, err = l.Reserve(2, Amounts{OutputTokens: 1})
	var ex *ExceededError
	if !errors.As(err, &ex) || ex.Spent != 1300 || ex.Left != 0 {
		t.Fatalf("a reserve after the overspend: %v", err)
	}
	if _, err := l.Reserve(3, Amounts{InputTokens: 5}); err != nil {
		t.Fatalf("another dimension: %v", err)
	}
}

func TestCountedDimensionsAreNotReserved(t *testing.T) {
	l := New(Ceilings{}.With(Steps, 2).With(WallSeconds, 60))
	for _, a := range []Amounts{{Steps: 1}, {WallSeconds: 1}} {
		if _, err := l.Reserve(1, a); !errors.Is(err, ErrNotReservable) {
			t.Errorf("Reserve(%v): %v", a, err)
		}
	}
	r, _ := l.Reserve(1, usd(5))
	if _, err := l.Settle(r, Amounts{Steps: 3}); !errors.Is(err, ErrNotReservable) {
		t.Errorf("settle with steps: %v", err)
	}
	if len(l.Open()) != 1 {
		t.Fatalf("a refused settle closed the reservation")
	}
	for i := range 2 {
		if err := l.Step(); err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
	}
	err := l.Step()
	if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "steps: asked 1, 0 left of 2 (2 spent") {
		t.Fatalf("third step: %v", err)
	}
	l.Tick(59)
	if _, err := l.Reserve(2, usd(1)); err != nil {
		t.Fatalf("at 59 of 60 seconds: %v", err)
	}
	l.Tick(60)
	l.Tick(10) // the clock never goes back
	_, err = l.Reserve(3, usd(1))
	if !errors.Is(err, ErrBudget) || err.Error() != "budget exceeded: wall_seconds: 60s elapsed of 60s" {
		t.Fatalf("at 60 of 60 seconds: %v", err)
	}
}

func TestCeilingsOf(t *testing.T) {
	tok := capability.Budget{MicroUSD: capability.Limit(ten), InputTokens: capability.Limit(5000), Steps: capability.Limit(100)}
	grant := capability.Budget{MicroUSD: capability.Limit(2 * capability.MicroPerUSD), InputTokens: capability.Limit(9000), ToolCalls: capability.Limit(4)}
	c := CeilingsOf(tok, grant)
	if got, want := c.String(), "steps=100 input_tokens=5000 micro_usd=$2 tool_calls=4"; got != want {
		t.Fatalf("CeilingsOf = %s, want %s", got, want)
	}
	if _, ok := c.Get(ModelCalls); ok {
		t.Error("model_calls is limited by neither, and is limited")
	}
	full := capability.Budget{Steps: capability.Limit(1), HTTPRequests: capability.Limit(2), ToolCalls: capability.Limit(3),
		WallSeconds: capability.Limit(4), ModelCalls: capability.Limit(5), InputTokens: capability.Limit(6),
		OutputTokens: capability.Limit(7), MicroUSD: capability.Limit(8)}
	// Every ceiling a token can set is a dimension, under the same name.
	got := FromBudget(full)
	for _, name := range full.Set() {
		found := false
		for d := range NumDims {
			if d.String() == name {
				_, found = got.Get(d)
			}
		}
		if !found {
			t.Errorf("the token's %s is not a ceiling of the ledger", name)
		}
	}
}

func TestLowerNeverRaises(t *testing.T) {
	l := New(Ceilings{}.With(ToolCalls, 5))
	r, err := l.Reserve(1, Amounts{ToolCalls: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Used(ToolCalls); got != 2 {
		t.Fatalf("used %d, want 2", got)
	}
	if c := l.Lower(ToolCalls, 9); c.String() != "tool_calls=5" {
		t.Fatalf("raised: %s", c)
	}
	if c := l.Lower(ToolCalls, 3); c.String() != "tool_calls=3" {
		t.Fatalf("not lowered: %s", c)
	}
	if c := l.Lower(HTTPRequests, 0); c.String() != "tool_calls=3 http_requests=0" {
		t.Fatalf("unlimited dimension not limited: %s", c)
	}
	if _, err := l.Reserve(2, Amounts{ToolCalls: 2}); !errors.Is(err, ErrBudget) {
		t.Fatalf("reserve past the lowered ceiling: %v", err)
	}
	if _, err := l.Reserve(2, Amounts{ToolCalls: 1}); err != nil {
		t.Fatalf("reserve within the lowered ceiling: %v", err)
	}
	if _, err := l.Settle(r, Amounts{ToolCalls: 2}); err != nil {
		t.Fatal(err)
	}
	if d, ok := ParseDim("http_requests"); !ok || d != HTTPRequests {
		t.Fatalf("ParseDim(http_requests) = %v, %v", d, ok)
	}
	if _, ok := ParseDim("usd"); ok {
		t.Fatal("ParseDim(usd) is a dimension")
	}
}
