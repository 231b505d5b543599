package placement

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Version is the version of the Decision format, in Decision.Version.
const Version = 1

// Decision is what Place decided and everything it decided from: the cell
// chosen, every eligible candidate's score with its parts, each refused
// cell's reasons, the weights in force and the inputs themselves. It is
// what the cluster journals, and it encodes the same bytes for the same
// inputs whatever the order of their cells (MarshalCBOR).
type Decision struct {
	// Version is the format's version (Version).
	Version int `json:"version" cbor:"1,keyasint"`
	// Cell is the id of the cell chosen, "" when none is eligible.
	Cell string `json:"cell" cbor:"2,keyasint,omitempty"`
	// Tie is set when another candidate had the chosen cell's score: the
	// lowest id won.
	Tie bool `json:"tie,omitempty" cbor:"3,keyasint,omitempty"`
	// Candidates are the eligible cells, best first: highest total, then
	// lowest id.
	Candidates []Candidate `json:"candidates" cbor:"4,keyasint,omitempty"`
	// Refused are the cells a hard constraint excluded, by id.
	Refused []Refusal `json:"refused" cbor:"5,keyasint,omitempty"`
	// Weights are the weights in force, all five set.
	Weights Weights `json:"weights" cbor:"6,keyasint"`
	// Inputs are the need and the cells decided from, the cells by id.
	Inputs Inputs `json:"inputs" cbor:"7,keyasint"`
}

// Inputs are what a Decision was made from: a copy, which later changes
// to the caller's need or cells do not reach. Its cells are sorted by id.
type Inputs struct {
	Need  Need   `json:"need" cbor:"1,keyasint"`
	Cells []Cell `json:"cells" cbor:"2,keyasint,omitempty"`
}

// Candidate is an eligible cell and its score.
type Candidate struct {
	Cell  string `json:"cell" cbor:"1,keyasint"`
	Score Score  `json:"score" cbor:"2,keyasint"`
}

// Score is a candidate's score and its parts. Each part is from 0 to 1000
// (parts per thousand); Total is the sum of the parts times their weights,
// less Load times its weight:
//
//   - GPU: 0 when the need asks for none; else 1000 × free / (free +
//     needed), so that a cell with more GPUs to spare scores higher
//     (from 500, exactly enough, towards 1000).
//   - Model, Data: 0 when the need names none; else 1000 × the share of
//     the models (datasets) named that the cell has.
//   - Cost: 1000 × (top − cost) / top, where top is the need's max cost
//     per hour, or when it has none the dearest candidate's cost: a free
//     cell scores 1000, one at the top 0 (all score 1000 when top is 0).
//   - Load: the penalty, 1000 × running / max_runs.
//
// Integer arithmetic throughout, rounding down, so that every platform
// computes the same score.
type Score struct {
	GPU   int `json:"gpu" cbor:"1,keyasint,omitempty"`
	Model int `json:"model" cbor:"2,keyasint,omitempty"`
	Data  int `json:"data" cbor:"3,keyasint,omitempty"`
	Cost  int `json:"cost" cbor:"4,keyasint,omitempty"`
	Load  int `json:"load" cbor:"5,keyasint,omitempty"`
	Total int `json:"total" cbor:"6,keyasint,omitempty"`
}

// Refusal is a cell a hard constraint excluded, and every reason why.
type Refusal struct {
	Cell    string   `json:"cell" cbor:"1,keyasint"`
	Reasons []Reason `json:"reasons" cbor:"2,keyasint"`
}

// Reason is one hard constraint a cell fails.
type Reason struct {
	Code   Code   `json:"code" cbor:"1,keyasint"`
	Detail string `json:"detail" cbor:"2,keyasint"`
}

// Code names a hard constraint.
type Code string

// The hard constraints, in the order Place checks them.
const (
	// Topology: a label the need requires is missing or has another value.
	Topology Code = "topology"
	// Below: the cell's clearance is below the need's.
	Below Code = "clearance"
	// Full: the cell runs as many runs as it takes.
	Full Code = "full"
	// NoGPUs: the cell has fewer free GPUs than the need asks.
	NoGPUs Code = "gpus"
	// GPUKind: the cell's GPUs are not of the kind the need asks.
	GPUKind Code = "gpu_kind"
	// Dear: an hour on the cell costs more than the need's max.
	Dear Code = "cost"
)

// ErrNoEligible is wrapped by *NoEligibleError.
var ErrNoEligible = errors.New("no eligible cell")

// NoEligibleError is returned by Place when no cell meets the need's hard
// constraints (or there are no cells): it lists why each was refused.
type NoEligibleError struct {
	Refused []Refusal
}

func (e *NoEligibleError) Error() string {
	if len(e.Refused) == 0 {
		return "no eligible cell: there are no cells to place on"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "no eligible cell: all %d refused", len(e.Refused))
	for _, r := range e.Refused {
		fmt.Fprintf(&b, "; %s: %s", short(r.Cell), r.details(", "))
	}
	return b.String()
}

// Unwrap returns ErrNoEligible.
func (e *NoEligibleError) Unwrap() error { return ErrNoEligible }

// Place chooses the cell a run with need n runs on, among cells.
//
// It first validates the inputs (an *InputError names the first fault: an
// unknown clearance, a malformed id, a cell listed twice, ...). It then
// applies the hard constraints to each cell: the need's topology labels
// must all match, the cell's clearance must be at least the need's, the
// cell must not be full, must have the GPUs asked (of the kind asked) and
// must not cost more than the need's max. The cells that pass are scored
// (see Score) and ranked by total, highest first, ties going to the lowest
// id. The result depends on the set of cells alone, not on their order.
//
// When no cell passes, Place returns the Decision, with no cell chosen and
// every refusal, and a *NoEligibleError: the refusal can be journaled too.
//
// Place does no I/O and keeps no state: the cluster calls it when a run is
// submitted and when a takeover picks a cell, and journals the Decision.
func Place(n Need, cells []Cell) (Decision, error) {
	if err := n.Validate(); err != nil {
		return Decision{}, err
	}
	if len(cells) > MaxCells {
		return Decision{}, bad("cells", "", "%d cells, over the %d allowed", len(cells), MaxCells)
	}
	first := make(map[string]int, len(cells))
	for i := range cells {
		field := fmt.Sprintf("cells[%d]", i)
		if err := cells[i].Validate(field); err != nil {
			return Decision{}, err
		}
		if j, dup := first[cells[i].ID]; dup {
			return Decision{}, bad(field+".id", "list each cell once", "cell %s is listed twice (also cells[%d])", short(cells[i].ID), j)
		}
		first[cells[i].ID] = i
	}

	d := Decision{Version: Version, Weights: n.Weights.resolve(), Inputs: Inputs{Need: copyNeed(n)}}
	for _, c := range cells {
		d.Inputs.Cells = append(d.Inputs.Cells, copyCell(c))
	}
	sort.Slice(d.Inputs.Cells, func(i, j int) bool { return d.Inputs.Cells[i].ID < d.Inputs.Cells[j].ID })

	var eligible []*Cell
	for i := range d.Inputs.Cells {
		c := &d.Inputs.Cells[i]
		if why := refuse(&d.Inputs.Need, c); len(why) > 0 {
			d.Refused = append(d.Refused, Refusal{Cell: c.ID, Reasons: why})
			continue
		}
		eligible = append(eligible, c)
	}
	if len(eligible) == 0 {
		return d, &NoEligibleError{Refused: d.Refused}
	}

	top := Cost(0)
	if n.MaxCost != nil {
		top = *n.MaxCost
	} else {
		for _, c := range eligible {
			top = max(top, c.Cost)
		}
	}
	for _, c := range eligible {
		d.Candidates = append(d.Candidates, Candidate{Cell: c.ID, Score: score(&d.Inputs.Need, c, d.Weights, top)})
	}
	// Cells are in id order already: a stable sort by total alone breaks
	// ties by lowest id.
	sort.SliceStable(d.Candidates, func(i, j int) bool { return d.Candidates[i].Score.Total > d.Candidates[j].Score.Total })
	d.Cell = d.Candidates[0].Cell
	d.Tie = len(d.Candidates) > 1 && d.Candidates[1].Score.Total == d.Candidates[0].Score.Total
	return d, nil
}

// refuse returns every hard constraint c fails for n, in the order of the
// Code constants (topology labels by key).
func refuse(n *Need, c *Cell) []Reason {
	var why []Reason
	for _, k := range sortedKeys(n.Topology) {
		want := n.Topology[k]
		if have, ok := c.Labels[k]; !ok {
			why = append(why, Reason{Topology, fmt.Sprintf("no label %s (needs %s=%s)", k, k, want)})
		} else if have != want {
			why = append(why, Reason{Topology, fmt.Sprintf("label %s=%s (needs %s=%s)", k, have, k, want)})
		}
	}
	need, _ := n.Clearance.Rank()
	have, _ := c.Clearance.Rank()
	if have < need {
		why = append(why, Reason{Below, fmt.Sprintf("clearance %s is below %s", c.Clearance.level(), n.Clearance.level())})
	}
	if c.Running >= c.MaxRuns {
		why = append(why, Reason{Full, fmt.Sprintf("full (%d of %d runs)", c.Running, c.MaxRuns)})
	}
	if n.GPUs > 0 {
		if c.GPUs.Free < n.GPUs {
			why = append(why, Reason{NoGPUs, fmt.Sprintf("%s free (needs %d)", plural(c.GPUs.Free, "GPU"), n.GPUs)})
		}
		// A cell with no GPU free is refused for that alone.
		if n.GPUKind != "" && c.GPUs.Free > 0 && c.GPUs.Kind != n.GPUKind {
			kind := c.GPUs.Kind
			if kind == "" {
				kind = "of no stated kind"
			}
			why = append(why, Reason{GPUKind, fmt.Sprintf("GPUs %s (needs %s)", kind, n.GPUKind)})
		}
	}
	if n.MaxCost != nil && c.Cost > *n.MaxCost {
		why = append(why, Reason{Dear, fmt.Sprintf("cost %s/h is over the max %s/h", c.Cost, *n.MaxCost)})
	}
	return why
}

// score scores an eligible cell c for n; top is the top of the cost scale.
func score(n *Need, c *Cell, w Weights, top Cost) Score {
	var s Score
	if n.GPUs > 0 {
		s.GPU = 1000 * c.GPUs.Free / (c.GPUs.Free + n.GPUs)
	}
	s.Model = share(n.Models, c.Models)
	s.Data = share(n.Datasets, c.Datasets)
	s.Cost = 1000
	if top > 0 {
		s.Cost = int(1000 * int64(top-c.Cost) / int64(top))
	}
	s.Load = 1000 * c.Running / c.MaxRuns
	s.Total = *w.GPU*s.GPU + *w.Model*s.Model + *w.Data*s.Data + *w.Cost*s.Cost - *w.Load*s.Load
	return s
}

// share is 1000 × the share of want that have holds, 0 for no want.
func share(want, have []string) int {
	if len(want) == 0 {
		return 0
	}
	n := 0
	for _, x := range want {
		if slices.Contains(have, x) {
			n++
		}
	}
	return 1000 * n / len(want)
}

func copyCell(c Cell) Cell {
	c.Models = slices.Clone(c.Models)
	c.Datasets = slices.Clone(c.Datasets)
	c.Labels = maps.Clone(c.Labels)
	return c
}

func copyNeed(n Need) Need {
	n.Topology = maps.Clone(n.Topology)
	n.Models = slices.Clone(n.Models)
	n.Datasets = slices.Clone(n.Datasets)
	n.MaxCost = clonePtr(n.MaxCost)
	if w := n.Weights; w != nil {
		n.Weights = &Weights{GPU: clonePtr(w.GPU), Model: clonePtr(w.Model), Data: clonePtr(w.Data), Cost: clonePtr(w.Cost), Load: clonePtr(w.Load)}
	}
	return n
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// short is a cell id cut to 12 hex digits, for messages.
func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
