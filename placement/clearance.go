package placement

import (
	"errors"
	"fmt"
	"strings"
)

// Clearance is the level of data a cell may hold, or a run may touch. The
// levels are ordered: Public < Internal < Confidential < Secret. A run
// needing clearance C is placed only on a cell whose clearance is C or
// higher. The empty Clearance is Public: a cell that declares none may
// take only public runs, and a need that names none may land anywhere.
type Clearance string

// The clearance levels, lowest first.
const (
	Public       Clearance = "public"
	Internal     Clearance = "internal"
	Confidential Clearance = "confidential"
	Secret       Clearance = "secret"
)

// Levels are the clearance levels, lowest first.
var Levels = []Clearance{Public, Internal, Confidential, Secret}

// ErrUnknownClearance is wrapped by the *InputError Place and the parsers
// return for a clearance that is not one of Levels.
var ErrUnknownClearance = errors.New("unknown clearance")

// Rank returns the clearance's position in Levels (Public is 0; the empty
// Clearance is Public), or ErrUnknownClearance. Names are exact: "Secret"
// is not "secret", so that a typo is refused rather than read as a level.
func (c Clearance) Rank() (int, error) {
	if c == "" {
		return 0, nil
	}
	for i, l := range Levels {
		if c == l {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w %q", ErrUnknownClearance, string(c))
}

// level returns the clearance's name, Public for the empty one.
func (c Clearance) level() Clearance {
	if c == "" {
		return Public
	}
	return c
}

func levelNames() string {
	names := make([]string, len(Levels))
	for i, l := range Levels {
		names[i] = string(l)
	}
	return strings.Join(names, " < ")
}
