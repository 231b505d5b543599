package budget

import (
	"fmt"
	"strconv"

	"github.com/agentrt/agentrt/capability"
)

// Dim is one dimension of a budget.
type Dim uint8

// The dimensions, in the order reports list them. Steps and WallSeconds
// are counters (Step, Tick); the others are reserved and settled.
const (
	Steps Dim = iota
	ModelCalls
	InputTokens
	OutputTokens
	MicroUSD
	ToolCalls
	HTTPRequests
	WallSeconds
	// NumDims is the number of dimensions.
	NumDims
)

// dimNames are the dimensions' names: capability.Budget's ceiling names
// (Budget.Set), the keys of a budget record's amounts, and the report's.
var dimNames = [NumDims]string{"steps", "model_calls", "input_tokens", "output_tokens", "micro_usd", "tool_calls", "http_requests", "wall_seconds"}

func (d Dim) String() string {
	if d < NumDims {
		return dimNames[d]
	}
	return "dim(" + strconv.Itoa(int(d)) + ")"
}

// reservable reports whether a reservation may hold an amount of d.
func (d Dim) reservable() bool { return d != Steps && d != WallSeconds }

// format writes an amount of d for people: money in dollars, wall clock
// with its unit, the rest as integers.
func (d Dim) format(n uint64) string {
	switch d {
	case MicroUSD:
		return "$" + capability.FormatUSD(n)
	case WallSeconds:
		return strconv.FormatUint(n, 10) + "s"
	}
	return strconv.FormatUint(n, 10)
}

// Amounts holds an amount per dimension, e.g. a reservation's worst case
// or a call's actual usage: Amounts{InputTokens: 1200, MicroUSD: 340}.
type Amounts [NumDims]uint64

// IsZero reports whether every amount is 0.
func (a Amounts) IsZero() bool { return a == Amounts{} }

// add returns a+b per dimension, saturating at the largest uint64: an
// amount that large is over every ceiling, and exactness below it is
// kept.
func (a Amounts) add(b Amounts) Amounts {
	for d := range a {
		a[d] = sat(a[d], b[d])
	}
	return a
}

func sat(x, y uint64) uint64 {
	if s := x + y; s >= x {
		return s
	}
	return 1<<64 - 1
}

// String writes the non-zero amounts, e.g. "input_tokens=1200 micro_usd=$0.00034".
func (a Amounts) String() string {
	s := ""
	for d, n := range a {
		if n != 0 {
			if s != "" {
				s += " "
			}
			s += Dim(d).String() + "=" + Dim(d).format(n)
		}
	}
	if s == "" {
		return "none"
	}
	return s
}

// Ceilings are the most a ledger allows, per dimension; a dimension
// without a ceiling is unlimited (and still counted). The zero value
// limits nothing.
type Ceilings struct {
	max     Amounts
	limited [NumDims]bool
}

// With returns c with the ceiling of d set to n (0 allows none).
func (c Ceilings) With(d Dim, n uint64) Ceilings {
	c.max[d], c.limited[d] = n, true
	return c
}

// Get returns the ceiling of d, and false when d is unlimited.
func (c Ceilings) Get(d Dim) (uint64, bool) { return c.max[d], c.limited[d] }

// Tighter returns, per dimension, the smaller of the ceilings of c and o
// (an unlimited dimension takes the other's): a run is held to the token's
// ceilings and its grant's alike.
func (c Ceilings) Tighter(o Ceilings) Ceilings {
	for d := range NumDims {
		if o.limited[d] && (!c.limited[d] || o.max[d] < c.max[d]) {
			c.max[d], c.limited[d] = o.max[d], true
		}
	}
	return c
}

// FromBudget returns the ceilings a capability.Budget sets.
func FromBudget(b capability.Budget) Ceilings {
	var c Ceilings
	for _, f := range []struct {
		d Dim
		v *uint64
	}{{Steps, b.Steps}, {ModelCalls, b.ModelCalls}, {InputTokens, b.InputTokens}, {OutputTokens, b.OutputTokens},
		{MicroUSD, b.MicroUSD}, {ToolCalls, b.ToolCalls}, {HTTPRequests, b.HTTPRequests}, {WallSeconds, b.WallSeconds}} {
		if f.v != nil {
			c = c.With(f.d, *f.v)
		}
	}
	return c
}

// CeilingsOf returns the ceilings of a run: those of its token and those of
// its grant, the smaller of the two winning in each dimension.
func CeilingsOf(token, grant capability.Budget) Ceilings {
	return FromBudget(token).Tighter(FromBudget(grant))
}

// String writes the ceilings set, e.g. "model_calls=30 micro_usd=$10".
func (c Ceilings) String() string {
	s := ""
	for d := range NumDims {
		if c.limited[d] {
			if s != "" {
				s += " "
			}
			s += fmt.Sprintf("%s=%s", d, d.format(c.max[d]))
		}
	}
	if s == "" {
		return "unlimited"
	}
	return s
}

// ParseDim returns the dimension named name (Dim.String), and false for a
// name no dimension has.
func ParseDim(name string) (Dim, bool) {
	for d, n := range dimNames {
		if n == name {
			return Dim(d), true
		}
	}
	return 0, false
}

// DimNames returns the dimensions' names, in Dim order.
func DimNames() []string { return dimNames[:] }
