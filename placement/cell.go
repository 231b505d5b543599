package placement

import (
	"fmt"
	"sort"
	"unicode"
	"unicode/utf8"
)

// Cell describes one cell as placement sees it: what the cell reports of
// itself in its heartbeat (the cluster's registry keeps these).
type Cell struct {
	// ID is the cell's identity, its ed25519 public key: 64 lowercase hex
	// digits.
	ID string `json:"id" yaml:"id" cbor:"1,keyasint"`
	// Name is an optional name for people (gpu-eu-1); placement decides
	// nothing by it.
	Name string `json:"name,omitempty" yaml:"name" cbor:"2,keyasint,omitempty"`
	// Running is how many runs the cell runs now, MaxRuns how many it
	// takes at most (at least 1). A cell with Running >= MaxRuns is full.
	Running int `json:"running" yaml:"running" cbor:"3,keyasint,omitempty"`
	MaxRuns int `json:"max_runs" yaml:"max_runs" cbor:"4,keyasint,omitempty"`
	// GPUs are the cell's free GPUs.
	GPUs GPUs `json:"gpus" yaml:"gpus" cbor:"5,keyasint"`
	// Models are the models the cell can serve without fetching them.
	Models []string `json:"models,omitempty" yaml:"models" cbor:"6,keyasint,omitempty"`
	// Datasets are the datasets (names or paths) the cell holds locally.
	Datasets []string `json:"datasets,omitempty" yaml:"datasets" cbor:"7,keyasint,omitempty"`
	// Cost is what an hour on the cell costs.
	Cost Cost `json:"cost_per_hour" yaml:"cost_per_hour" cbor:"8,keyasint,omitempty"`
	// Clearance is the highest level of data the cell may hold.
	Clearance Clearance `json:"clearance" yaml:"clearance" cbor:"9,keyasint,omitempty"`
	// Labels are the cell's topology labels (region=eu, zone=a).
	Labels map[string]string `json:"labels,omitempty" yaml:"labels" cbor:"10,keyasint,omitempty"`
}

// GPUs are a cell's free GPUs: how many, and of which kind (a100, h100;
// a cell reports one kind).
type GPUs struct {
	Free int    `json:"free" yaml:"free" cbor:"1,keyasint,omitempty"`
	Kind string `json:"kind,omitempty" yaml:"kind" cbor:"2,keyasint,omitempty"`
}

// Need is what a run requires of its cell (the hard constraints) and what
// it prefers (the scored ones).
type Need struct {
	// Clearance is the lowest clearance the run's cell may have (hard).
	Clearance Clearance `json:"clearance" yaml:"clearance" cbor:"1,keyasint,omitempty"`
	// Topology are labels the cell must carry, each with this value
	// (hard; all must match).
	Topology map[string]string `json:"topology,omitempty" yaml:"topology" cbor:"2,keyasint,omitempty"`
	// GPUs is how many free GPUs the run needs (hard), and GPUKind, when
	// set, their kind (hard).
	GPUs    int    `json:"gpus,omitempty" yaml:"gpus" cbor:"3,keyasint,omitempty"`
	GPUKind string `json:"gpu_kind,omitempty" yaml:"gpu_kind" cbor:"4,keyasint,omitempty"`
	// Models and Datasets are what the run would rather find on its cell
	// (scored: the share of them the cell has).
	Models   []string `json:"models,omitempty" yaml:"models" cbor:"5,keyasint,omitempty"`
	Datasets []string `json:"datasets,omitempty" yaml:"datasets" cbor:"6,keyasint,omitempty"`
	// MaxCost, when set, is the most an hour may cost (hard); it is also
	// the top of the cost score's scale.
	MaxCost *Cost `json:"max_cost_per_hour,omitempty" yaml:"max_cost_per_hour" cbor:"7,keyasint,omitempty"`
	// Weights, when set, change the weight of each part of the score;
	// a weight left out keeps its default (DefaultWeight).
	Weights *Weights `json:"weights,omitempty" yaml:"weights" cbor:"8,keyasint,omitempty"`
}

// Weights are the weights of the parts of a score, each from 0 (the part
// counts for nothing) to MaxWeight. A nil weight is DefaultWeight.
type Weights struct {
	GPU   *int `json:"gpu,omitempty" yaml:"gpu" cbor:"1,keyasint,omitempty"`
	Model *int `json:"model,omitempty" yaml:"model" cbor:"2,keyasint,omitempty"`
	Data  *int `json:"data,omitempty" yaml:"data" cbor:"3,keyasint,omitempty"`
	Cost  *int `json:"cost,omitempty" yaml:"cost" cbor:"4,keyasint,omitempty"`
	Load  *int `json:"load,omitempty" yaml:"load" cbor:"5,keyasint,omitempty"`
}

// Weight bounds.
const (
	// DefaultWeight is the weight of a part a need does not weigh.
	DefaultWeight = 1
	// MaxWeight is the highest weight: it keeps totals within an int.
	MaxWeight = 1000
)

// Input limits: a cluster's registry holds far fewer, and a descriptor
// with more is refused rather than scored slowly.
const (
	MaxCells   = 10_000
	MaxItems   = 1_000 // models, datasets or labels of one cell or need
	MaxText    = 1_024 // bytes of one id, name, label, model or dataset
	MaxRunsCap = 1 << 20
	MaxGPUs    = 1 << 16
)

// InputError is a cell descriptor or a need that Place, ParseCells or
// ParseNeed refuses: which field, what is wrong, and what to write.
type InputError struct {
	// File names the document the fault is in, when it came from one.
	File string
	// Field is where the fault is: need.clearance, cells[2].gpus.free.
	Field string
	// Msg says what is wrong with it.
	Msg string
	// Hint says what to write instead, when that is known.
	Hint string
	// Err is a sentinel the fault wraps (ErrUnknownClearance), or nil.
	Err error
}

func (e *InputError) Error() string {
	if e.File != "" {
		return e.File + ": " + e.Field + ": " + e.Msg
	}
	return e.Field + ": " + e.Msg
}

// Unwrap returns the sentinel the fault wraps.
func (e *InputError) Unwrap() error { return e.Err }

func bad(field, hint, format string, args ...any) *InputError {
	return &InputError{Field: field, Msg: fmt.Sprintf(format, args...), Hint: hint}
}

const idHint = "a cell's id is its ed25519 public key as 64 lowercase hex digits"

// validID reports whether id is 64 lowercase hex digits.
func validID(id string) bool {
	if len(id) != 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// checkText refuses text that is empty (unless may be), too long, not
// UTF-8, or holds a control character: such text is shown to people, by
// --explain among others, and must not act on their terminal.
func checkText(field, s string, mayBeEmpty bool) error {
	switch {
	case s == "" && !mayBeEmpty:
		return bad(field, "", "is empty")
	case len(s) > MaxText:
		return bad(field, "", "is %d bytes, over the %d allowed", len(s), MaxText)
	case !utf8.ValidString(s):
		return bad(field, "", "is not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == 0x2028 || r == 0x2029 {
			return bad(field, "", "holds the control character %U", r)
		}
	}
	return nil
}

func checkList(field string, items []string) error {
	if len(items) > MaxItems {
		return bad(field, "", "has %d items, over the %d allowed", len(items), MaxItems)
	}
	seen := make(map[string]bool, len(items))
	for i, s := range items {
		if err := checkText(fmt.Sprintf("%s[%d]", field, i), s, false); err != nil {
			return err
		}
		if seen[s] {
			return bad(fmt.Sprintf("%s[%d]", field, i), "list each once", "%q is listed twice", s)
		}
		seen[s] = true
	}
	return nil
}

func checkLabels(field string, m map[string]string) error {
	if len(m) > MaxItems {
		return bad(field, "", "has %d labels, over the %d allowed", len(m), MaxItems)
	}
	for _, k := range sortedKeys(m) {
		if err := checkText(field+" key", k, false); err != nil {
			return err
		}
		if err := checkText(field+"."+k, m[k], true); err != nil {
			return err
		}
	}
	return nil
}

func checkClearance(field string, c Clearance) error {
	if _, err := c.Rank(); err != nil {
		return &InputError{Field: field, Msg: err.Error(), Err: ErrUnknownClearance,
			Hint: "clearance is one of " + levelNames() + " (lowercase)"}
	}
	return nil
}

func checkCost(field string, c Cost) error {
	if c < 0 || c > MaxCost {
		return bad(field, "", "%s is outside 0 to %s", c, MaxCost)
	}
	return nil
}

// Validate reports the first fault of the cell, whose place in a list of
// cells is field (cells[2]).
func (c *Cell) Validate(field string) error {
	if !validID(c.ID) {
		if err := checkText(field+".id", c.ID, false); err != nil {
			return err
		}
		return bad(field+".id", idHint, "%q is not 64 lowercase hex digits", c.ID)
	}
	if err := checkText(field+".name", c.Name, true); err != nil {
		return err
	}
	switch {
	case c.MaxRuns < 1 || c.MaxRuns > MaxRunsCap:
		return bad(field+".max_runs", "max_runs is how many runs the cell takes at most, at least 1", "%d is outside 1 to %d", c.MaxRuns, MaxRunsCap)
	case c.Running < 0 || c.Running > MaxRunsCap:
		return bad(field+".running", "", "%d is outside 0 to %d", c.Running, MaxRunsCap)
	case c.GPUs.Free < 0 || c.GPUs.Free > MaxGPUs:
		return bad(field+".gpus.free", "", "%d is outside 0 to %d", c.GPUs.Free, MaxGPUs)
	}
	if err := checkText(field+".gpus.kind", c.GPUs.Kind, true); err != nil {
		return err
	}
	if err := checkList(field+".models", c.Models); err != nil {
		return err
	}
	if err := checkList(field+".datasets", c.Datasets); err != nil {
		return err
	}
	if err := checkCost(field+".cost_per_hour", c.Cost); err != nil {
		return err
	}
	if err := checkClearance(field+".clearance", c.Clearance); err != nil {
		return err
	}
	return checkLabels(field+".labels", c.Labels)
}

// Validate reports the first fault of the need.
func (n *Need) Validate() error {
	if err := checkClearance("need.clearance", n.Clearance); err != nil {
		return err
	}
	if err := checkLabels("need.topology", n.Topology); err != nil {
		return err
	}
	if n.GPUs < 0 || n.GPUs > MaxGPUs {
		return bad("need.gpus", "", "%d is outside 0 to %d", n.GPUs, MaxGPUs)
	}
	if err := checkText("need.gpu_kind", n.GPUKind, true); err != nil {
		return err
	}
	if n.GPUKind != "" && n.GPUs == 0 {
		return bad("need.gpu_kind", "set gpus to how many GPUs of this kind the run needs, or leave gpu_kind out", "%q names a GPU kind but gpus is 0", n.GPUKind)
	}
	if err := checkList("need.models", n.Models); err != nil {
		return err
	}
	if err := checkList("need.datasets", n.Datasets); err != nil {
		return err
	}
	if n.MaxCost != nil {
		if err := checkCost("need.max_cost_per_hour", *n.MaxCost); err != nil {
			return err
		}
	}
	if w := n.Weights; w != nil {
		for _, p := range w.parts() {
			if p.w != nil && (*p.w < 0 || *p.w > MaxWeight) {
				return bad("need.weights."+p.name, "a weight is from 0 (the part counts for nothing) to 1000; the load weight is a penalty already, so it is not negative either",
					"%d is outside 0 to %d", *p.w, MaxWeight)
			}
		}
	}
	return nil
}

type weightPart struct {
	name string
	w    *int
}

func (w *Weights) parts() []weightPart {
	return []weightPart{{"gpu", w.GPU}, {"model", w.Model}, {"data", w.Data}, {"cost", w.Cost}, {"load", w.Load}}
}

// resolve returns the weights in force: w's, DefaultWeight for each left
// out. All five are set in the result.
func (w *Weights) resolve() Weights {
	pick := func(p *int) *int {
		v := DefaultWeight
		if p != nil {
			v = *p
		}
		return &v
	}
	if w == nil {
		w = &Weights{}
	}
	return Weights{GPU: pick(w.GPU), Model: pick(w.Model), Data: pick(w.Data), Cost: pick(w.Cost), Load: pick(w.Load)}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
