package placement

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// id returns a valid cell id ending in n, so that id(1) < id(2).
func id(n int) string { return fmt.Sprintf("%064x", n) }

func ptr[T any](v T) *T { return &v }

// c returns an idle, public, free cell with room for 8 runs; opts change it.
func c(n int, opts ...func(*Cell)) Cell {
	cell := Cell{ID: id(n), Name: fmt.Sprintf("cell-%d", n), MaxRuns: 8}
	for _, o := range opts {
		o(&cell)
	}
	return cell
}

func level(l Clearance) func(*Cell) { return func(c *Cell) { c.Clearance = l } }
func load(run, max int) func(*Cell) { return func(c *Cell) { c.Running, c.MaxRuns = run, max } }
func gpus(free int, k string) func(*Cell) {
	return func(c *Cell) { c.GPUs = GPUs{Free: free, Kind: k} }
}
func models(m ...string) func(*Cell) { return func(c *Cell) { c.Models = m } }
func data(d ...string) func(*Cell)   { return func(c *Cell) { c.Datasets = d } }
func cost(s string) func(*Cell) {
	return func(c *Cell) {
		v, err := ParseCost(s)
		if err != nil {
			panic(err)
		}
		c.Cost = v
	}
}
func labels(kv ...string) func(*Cell) {
	return func(c *Cell) {
		c.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			c.Labels[kv[i]] = kv[i+1]
		}
	}
}

func TestPlace(t *testing.T) {
	cases := []struct {
		name  string
		need  Need
		cells []Cell
		// want is the cell chosen, 0 for none (a *NoEligibleError).
		want int
		tie  bool
		// refused are the codes of each refused cell's reasons.
		refused map[int][]Code
	}{{
		name: "no cells",
		need: Need{},
	}, {
		name: "no eligible cell: each refused for its own reasons",
		need: Need{Clearance: Internal, Topology: map[string]string{"region": "eu"}, GPUs: 2, GPUKind: "a100", MaxCost: ptr(Cost(2_000_000))},
		cells: []Cell{
			c(1, level(Internal), labels("region", "eu"), gpus(4, "a100"), load(8, 8)),
			c(2, level(Internal), labels("region", "eu"), gpus(1, "a100")),
			c(3, level(Internal), labels("region", "eu"), gpus(4, "a100"), cost("2.000001")),
			c(4, level(Internal), labels("region", "us"), gpus(4, "h100")),
			c(5, level(Public), gpus(0, "")),
		},
		refused: map[int][]Code{1: {Full}, 2: {NoGPUs}, 3: {Dear}, 4: {Topology, GPUKind}, 5: {Topology, Below, NoGPUs}},
	}, {
		name:  "tie goes to the lowest id",
		need:  Need{Models: []string{"m"}},
		cells: []Cell{c(7, models("m")), c(3, models("m")), c(5, models("m"))},
		want:  3,
		tie:   true,
	}, {
		name:  "a lower id with a lower score does not win",
		need:  Need{Models: []string{"m"}},
		cells: []Cell{c(7, models("m")), c(3)},
		want:  7,
	}, {
		name: "clearance excludes every cell but one, though the others score higher",
		need: Need{Clearance: Secret, Models: []string{"m"}, Datasets: []string{"d"}},
		cells: []Cell{
			c(1, level(Public), models("m"), data("d")),
			c(2, level(Internal), models("m"), data("d")),
			c(3, level(Confidential), models("m"), data("d")),
			c(4, level(Secret), load(7, 8), cost("9")),
			c(5, models("m"), data("d")), // no clearance stated: public
		},
		want:    4,
		refused: map[int][]Code{1: {Below}, 2: {Below}, 3: {Below}, 5: {Below}},
	}, {
		name:  "a cell at exactly the clearance needed is eligible",
		need:  Need{Clearance: Confidential},
		cells: []Cell{c(1, level(Internal)), c(2, level(Confidential))},
		want:  2, refused: map[int][]Code{1: {Below}},
	}, {
		name: "topology: every label must match",
		need: Need{Topology: map[string]string{"region": "eu", "zone": "a"}},
		cells: []Cell{
			c(1, labels("region", "eu", "zone", "b")),
			c(2, labels("region", "us", "zone", "a")),
			c(3),
			c(4, labels("region", "eu", "zone", "a", "rack", "9")),
		},
		want:    4,
		refused: map[int][]Code{1: {Topology}, 2: {Topology}, 3: {Topology, Topology}},
	}, {
		name:  "load penalty changes the choice",
		need:  Need{Models: []string{"m"}},
		cells: []Cell{c(1, models("m"), load(7, 8)), c(2)},
		want:  1, // 1000 - 875 = 125 beats 0
	}, {
		name:  "a heavier load weight changes it back",
		need:  Need{Models: []string{"m"}, Weights: &Weights{Load: ptr(2)}},
		cells: []Cell{c(1, models("m"), load(7, 8)), c(2)},
		want:  2, // 1000 - 1750 = -750 loses to 0
	}, {
		name:  "more free GPUs score higher; too few are refused",
		need:  Need{GPUs: 2},
		cells: []Cell{c(1, gpus(1, "a100")), c(2, gpus(2, "a100")), c(3, gpus(4, "h100"))},
		want:  3, refused: map[int][]Code{1: {NoGPUs}},
	}, {
		name:  "gpu kind is a hard constraint",
		need:  Need{GPUs: 1, GPUKind: "h100"},
		cells: []Cell{c(1, gpus(8, "a100")), c(2, gpus(1, "h100")), c(3, gpus(8, ""))},
		want:  2, refused: map[int][]Code{1: {GPUKind}, 3: {GPUKind}},
	}, {
		name:  "data locality decides between equal cells",
		need:  Need{Datasets: []string{"s3://a", "s3://b"}},
		cells: []Cell{c(1, data("s3://a")), c(2, data("s3://b", "s3://a")), c(3)},
		want:  2,
	}, {
		name:  "cheaper wins; a cost at the max is eligible, over it refused",
		need:  Need{MaxCost: ptr(Cost(3_000_000))},
		cells: []Cell{c(1, cost("3")), c(2, cost("2.5")), c(3, cost("3.01"))},
		want:  2, refused: map[int][]Code{3: {Dear}},
	}, {
		name:  "with no max cost, the dearest candidate is the top of the scale",
		need:  Need{},
		cells: []Cell{c(1, cost("10")), c(2, cost("0"))},
		want:  2,
	}, {
		name:  "a cost weight of 0 lets a dearer cell with the model win",
		need:  Need{Models: []string{"m"}, Weights: &Weights{Cost: ptr(0)}},
		cells: []Cell{c(1, cost("1")), c(2, cost("50"), models("m"))},
		want:  2,
	}, {
		name:  "with the default cost weight, the cheap cell wins that one",
		need:  Need{Models: []string{"m"}, Weights: &Weights{Model: ptr(0)}},
		cells: []Cell{c(1, cost("1")), c(2, cost("50"), models("m"))},
		want:  1,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Place(tc.need, tc.cells)
			var ne *NoEligibleError
			if tc.want == 0 {
				if !errors.As(err, &ne) || !errors.Is(err, ErrNoEligible) {
					t.Fatalf("err = %v, want a *NoEligibleError", err)
				}
				if !reflect.DeepEqual(ne.Refused, d.Refused) || d.Cell != "" || len(d.Candidates) != 0 {
					t.Fatalf("the decision of a failed placement: cell %q, %d candidates, refusals %v (error's %v)", d.Cell, len(d.Candidates), d.Refused, ne.Refused)
				}
				for _, r := range ne.Refused {
					if !strings.Contains(err.Error(), short(r.Cell)+": "+r.details(", ")) {
						t.Errorf("error %q does not say why %s was refused (%s)", err, short(r.Cell), r.details(", "))
					}
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if d.Cell != id(tc.want) {
					t.Fatalf("chose %s, want %s\n%s", short(d.Cell), short(id(tc.want)), d.Explain())
				}
			}
			if d.Tie != tc.tie {
				t.Errorf("tie = %v, want %v", d.Tie, tc.tie)
			}
			got := map[int][]Code{}
			for _, r := range d.Refused {
				var n int
				fmt.Sscanf(r.Cell, "%x", &n)
				for _, why := range r.Reasons {
					got[n] = append(got[n], why.Code)
				}
			}
			if tc.refused == nil {
				tc.refused = map[int][]Code{}
			}
			if !reflect.DeepEqual(got, tc.refused) {
				t.Errorf("refusals %v, want %v\n%s", got, tc.refused, d.Explain())
			}
			if len(d.Candidates)+len(d.Refused) != len(tc.cells) {
				t.Errorf("%d candidates and %d refused of %d cells", len(d.Candidates), len(d.Refused), len(tc.cells))
			}
			for i := 1; i < len(d.Candidates); i++ {
				a, b := d.Candidates[i-1], d.Candidates[i]
				if a.Score.Total < b.Score.Total || a.Score.Total == b.Score.Total && a.Cell > b.Cell {
					t.Errorf("candidates out of order: %s (%d) before %s (%d)", short(a.Cell), a.Score.Total, short(b.Cell), b.Score.Total)
				}
			}
		})
	}
}

// TestScoreParts checks each part against its formula on the example
// files: the numbers the README's explain output shows.
func TestScoreParts(t *testing.T) {
	d := placeExample(t, "need.yaml")
	want := []Candidate{
		// 4 of 4+1 GPUs; the model; the dataset; (4.5-3.2)/4.5; 6 of 8 runs.
		{Cell: "d028590f7fa9b556e743fa6523c61003227c4240a5346f9aacff374199fe8958", Score: Score{GPU: 800, Model: 1000, Data: 1000, Cost: 288, Load: 750, Total: 2338}},
		// 2 of 2+1; the model; no dataset; (4.5-4.1)/4.5; 1 of 8.
		{Cell: "00603bd94cf5cdc4fbda1bd01c1abf135eaf572d515271f7386b3ae47986df4f", Score: Score{GPU: 666, Model: 1000, Data: 0, Cost: 88, Load: 125, Total: 1629}},
	}
	if !reflect.DeepEqual(d.Candidates, want) {
		t.Fatalf("candidates\n%+v\nwant\n%+v", d.Candidates, want)
	}
	if d.Cell != want[0].Cell || d.Tie {
		t.Fatalf("chose %s (tie %v)", d.Cell, d.Tie)
	}
}

// TestWeightsScaleTheParts checks that each weight multiplies its part
// alone, and that a weight left out is DefaultWeight.
func TestWeightsScaleTheParts(t *testing.T) {
	cells := []Cell{c(1, gpus(3, "a100"), models("m"), data("d"), cost("1"), load(1, 4)), c(2, gpus(1, "a100"), cost("4"))}
	base := Need{GPUs: 1, Models: []string{"m"}, Datasets: []string{"d"}}
	d0, err := Place(base, cells)
	if err != nil {
		t.Fatal(err)
	}
	s0 := d0.Candidates[0].Score
	if d0.Candidates[0].Cell != id(1) {
		t.Fatalf("chose %s", d0.Cell)
	}
	for _, tc := range []struct {
		w     Weights
		total int
	}{
		{Weights{GPU: ptr(3)}, s0.Total + 2*s0.GPU},
		{Weights{Model: ptr(0)}, s0.Total - s0.Model},
		{Weights{Data: ptr(5)}, s0.Total + 4*s0.Data},
		{Weights{Cost: ptr(10)}, s0.Total + 9*s0.Cost},
		{Weights{Load: ptr(4)}, s0.Total - 3*s0.Load},
		{Weights{GPU: ptr(0), Model: ptr(0), Data: ptr(0), Cost: ptr(0), Load: ptr(0)}, 0},
		{Weights{}, s0.Total},
	} {
		n := base
		n.Weights = &tc.w
		d, err := Place(n, cells)
		if err != nil {
			t.Fatal(err)
		}
		var got Candidate
		for _, cand := range d.Candidates {
			if cand.Cell == id(1) {
				got = cand
			}
		}
		if got.Score.Total != tc.total {
			t.Errorf("weights %s: total %d, want %d", d.Explain(), got.Score.Total, tc.total)
		}
		parts := got.Score
		parts.Total = s0.Total
		if parts != s0 {
			t.Errorf("weights changed the parts: %+v, want %+v", got.Score, s0)
		}
	}
}

// TestPlaceIsOrderIndependent places the same cells in many orders: the
// decision's bytes, CBOR and JSON, are the same each time.
func TestPlaceIsOrderIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cells := randomCells(rng, 40)
	// Some ties: copies of a cell under other ids.
	for i := 0; i < 5; i++ {
		twin := copyCell(cells[i])
		twin.ID = id(1000 + i)
		cells = append(cells, twin)
	}
	for trial := 0; trial < 20; trial++ {
		need := randomNeed(rng)
		d, err := Place(need, cells)
		var ne *NoEligibleError
		if err != nil && !errors.As(err, &ne) {
			t.Fatal(err)
		}
		want, err := d.EncodeCBOR()
		if err != nil {
			t.Fatal(err)
		}
		wantJSON, err := d.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		for shuffle := 0; shuffle < 10; shuffle++ {
			order := append([]Cell(nil), cells...)
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			again, _ := Place(need, order)
			got, err := again.EncodeCBOR()
			if err != nil {
				t.Fatal(err)
			}
			gotJSON, _ := again.MarshalJSON()
			if string(got) != string(want) || string(gotJSON) != string(wantJSON) {
				t.Fatalf("trial %d: another order gives another decision: %s, then %s", trial, short(d.Cell), short(again.Cell))
			}
		}
	}
}

// TestChosenCellMeetsEveryHardConstraint places random needs on random
// cells: the cell chosen is never below the clearance needed, nor fails
// any other hard constraint, and a need is refused only when every cell
// fails one.
func TestChosenCellMeetsEveryHardConstraint(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	placed := 0
	for trial := 0; trial < 500; trial++ {
		cells := randomCells(rng, 1+rng.IntN(12))
		need := randomNeed(rng)
		d, err := Place(need, cells)
		var ne *NoEligibleError
		if err != nil && !errors.As(err, &ne) {
			t.Fatal(err)
		}
		meets := func(c *Cell) bool {
			nr, _ := need.Clearance.Rank()
			cr, _ := c.Clearance.Rank()
			for k, v := range need.Topology {
				if c.Labels[k] != v {
					return false
				}
			}
			return cr >= nr && c.Running < c.MaxRuns && c.GPUs.Free >= need.GPUs &&
				(need.GPUKind == "" || need.GPUs == 0 || c.GPUs.Kind == need.GPUKind) &&
				(need.MaxCost == nil || c.Cost <= *need.MaxCost)
		}
		some := false
		for i := range cells {
			ok := meets(&cells[i])
			some = some || ok
			if cells[i].ID == d.Cell && !ok {
				t.Fatalf("trial %d: chose %s, which fails a hard constraint\n%s", trial, short(d.Cell), d.Explain())
			}
		}
		if some != (err == nil) {
			t.Fatalf("trial %d: some cell eligible: %v, but Place says %v", trial, some, err)
		}
		if err == nil {
			placed++
		}
	}
	if placed < 50 || placed > 450 {
		t.Fatalf("placed %d of 500: the random inputs do not exercise both outcomes", placed)
	}
}

func randomCells(rng *rand.Rand, n int) []Cell {
	var cells []Cell
	for i := 0; i < n; i++ {
		most := 1 + rng.IntN(8)
		cell := Cell{
			ID:        id(1 + rng.IntN(1<<30)*64 + i), // distinct, in no order
			Running:   rng.IntN(most + 1),
			MaxRuns:   most,
			GPUs:      GPUs{Free: rng.IntN(4), Kind: []string{"a100", "h100", ""}[rng.IntN(3)]},
			Cost:      Cost(rng.IntN(5)) * 1_000_000,
			Clearance: []Clearance{"", Public, Internal, Confidential, Secret}[rng.IntN(5)],
			Labels:    map[string]string{"region": []string{"eu", "us"}[rng.IntN(2)]},
		}
		for _, m := range []string{"m1", "m2", "m3"} {
			if rng.IntN(2) == 0 {
				cell.Models = append(cell.Models, m)
			}
		}
		for _, ds := range []string{"d1", "d2"} {
			if rng.IntN(2) == 0 {
				cell.Datasets = append(cell.Datasets, ds)
			}
		}
		cells = append(cells, cell)
	}
	return cells
}

func randomNeed(rng *rand.Rand) Need {
	n := Need{Clearance: Levels[rng.IntN(len(Levels))], GPUs: rng.IntN(3), Models: []string{"m1", "m3"}[:rng.IntN(3)], Datasets: []string{"d2"}[:rng.IntN(2)]}
	if rng.IntN(2) == 0 {
		n.Topology = map[string]string{"region": "eu"}
	}
	if n.GPUs > 0 && rng.IntN(2) == 0 {
		n.GPUKind = "a100"
	}
	if rng.IntN(2) == 0 {
		n.MaxCost = ptr(Cost(rng.IntN(5)) * 1_000_000)
	}
	if rng.IntN(3) == 0 {
		n.Weights = &Weights{Load: ptr(rng.IntN(4)), Cost: ptr(rng.IntN(4))}
	}
	return n
}

func TestPlaceRefusesBadInput(t *testing.T) {
	ok := func() []Cell { return []Cell{c(1), c(2)} }
	cases := []struct {
		name  string
		need  Need
		cells func([]Cell)
		field string
		msg   string
		is    error
	}{
		{"unknown clearance in the need", Need{Clearance: "top-secret"}, nil, "need.clearance", `unknown clearance "top-secret"`, ErrUnknownClearance},
		{"clearance names are exact", Need{Clearance: "Secret"}, nil, "need.clearance", `unknown clearance "Secret"`, ErrUnknownClearance},
		{"unknown clearance in a cell", Need{}, func(cs []Cell) { cs[1].Clearance = "restricted" }, "cells[1].clearance", `unknown clearance "restricted"`, ErrUnknownClearance},
		{"id in capitals", Need{}, func(cs []Cell) { cs[0].ID = strings.ToUpper(id(0xabc)) }, "cells[0].id", "not 64 lowercase hex digits", nil},
		{"id too short", Need{}, func(cs []Cell) { cs[0].ID = "abcd" }, "cells[0].id", "not 64 lowercase hex digits", nil},
		{"cell listed twice", Need{}, func(cs []Cell) { cs[1].ID = cs[0].ID }, "cells[1].id", "listed twice (also cells[0])", nil},
		{"max_runs 0", Need{}, func(cs []Cell) { cs[0].MaxRuns = 0 }, "cells[0].max_runs", "0 is outside 1", nil},
		{"negative running", Need{}, func(cs []Cell) { cs[1].Running = -1 }, "cells[1].running", "-1 is outside", nil},
		{"negative free GPUs", Need{}, func(cs []Cell) { cs[1].GPUs.Free = -2 }, "cells[1].gpus.free", "-2 is outside", nil},
		{"negative cost", Need{}, func(cs []Cell) { cs[0].Cost = -1 }, "cells[0].cost_per_hour", "outside 0", nil},
		{"control character in a name", Need{}, func(cs []Cell) { cs[0].Name = "gpu\x1b[2J" }, "cells[0].name", "control character U+001B", nil},
		{"bidi override in a model", Need{}, func(cs []Cell) { cs[0].Models = []string{"m\u202e"} }, "cells[0].models[0]", "control character U+202E", nil},
		{"empty label key", Need{}, func(cs []Cell) { cs[0].Labels = map[string]string{"": "x"} }, "cells[0].labels key", "is empty", nil},
		{"model listed twice", Need{Models: []string{"m", "m"}}, nil, "need.models[1]", `"m" is listed twice`, nil},
		{"negative weight", Need{Weights: &Weights{Load: ptr(-1)}}, nil, "need.weights.load", "-1 is outside 0 to 1000", nil},
		{"weight too high", Need{Weights: &Weights{GPU: ptr(1001)}}, nil, "need.weights.gpu", "1001 is outside", nil},
		{"gpu kind without gpus", Need{GPUKind: "a100"}, nil, "need.gpu_kind", "gpus is 0", nil},
		{"negative gpus", Need{GPUs: -1}, nil, "need.gpus", "-1 is outside", nil},
		{"max cost over the limit", Need{MaxCost: ptr(MaxCost + 1)}, nil, "need.max_cost_per_hour", "outside 0", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cells := ok()
			if tc.cells != nil {
				tc.cells(cells)
			}
			d, err := Place(tc.need, cells)
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("err = %v, want an *InputError", err)
			}
			if ie.Field != tc.field || !strings.Contains(ie.Msg, tc.msg) {
				t.Fatalf("field %q, msg %q; want %q, containing %q", ie.Field, ie.Msg, tc.field, tc.msg)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("%v does not wrap %v", err, tc.is)
			}
			if tc.is == ErrUnknownClearance && !strings.Contains(ie.Hint, "public < internal < confidential < secret") {
				t.Fatalf("hint %q does not list the levels", ie.Hint)
			}
			if d.Cell != "" || d.Version != 0 {
				t.Fatalf("a refused input still gave a decision: %+v", d)
			}
		})
	}
	if _, err := Place(Need{}, make([]Cell, MaxCells+1)); err == nil || !strings.Contains(err.Error(), "over the 10000 allowed") {
		t.Fatalf("too many cells: %v", err)
	}
}

// TestDecisionKeepsItsInputs changes the caller's need and cells after
// Place: the decision, and its encoding, do not change.
func TestDecisionKeepsItsInputs(t *testing.T) {
	cells := []Cell{c(2, models("m"), labels("region", "eu")), c(1, data("d"))}
	need := Need{Models: []string{"m"}, Topology: map[string]string{"region": "eu"}, MaxCost: ptr(Cost(5)), Weights: &Weights{Load: ptr(2)}}
	d, err := Place(need, cells)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := d.EncodeCBOR()
	cells[0].Models[0] = "x"
	cells[0].Labels["region"] = "us"
	cells[1].ID = id(9)
	need.Models[0] = "y"
	need.Topology["region"] = "us"
	*need.MaxCost = 0
	*need.Weights.Load = 0
	after, _ := d.EncodeCBOR()
	if string(before) != string(after) {
		t.Fatal("changing the inputs after Place changed the decision")
	}
	if got := d.Inputs.Cells[0].ID; got != id(1) {
		t.Fatalf("inputs' first cell %s, want the lowest id", short(got))
	}
}
