package budget

import (
	"errors"
	"fmt"
)

// ErrBudget is matched (errors.Is) by every *ExceededError: a call was
// refused because its worst case does not fit in what is left of a
// dimension. The gate answers the guest with the ABI status `budget`.
var ErrBudget = errors.New("budget exceeded")

// ExceededError names the dimension a reservation (or a step) did not fit
// in, the amount asked and what was left, with the ceiling, spent and
// reserved amounts it was computed from (left = ceiling - spent -
// reserved, or 0).
type ExceededError struct {
	Dim                      Dim
	Asked, Left              uint64
	Ceiling, Spent, Reserved uint64
}

func (e *ExceededError) Error() string {
	d := e.Dim
	if d == WallSeconds {
		return fmt.Sprintf("budget exceeded: wall_seconds: %s elapsed of %s", d.format(e.Spent), d.format(e.Ceiling))
	}
	return fmt.Sprintf("budget exceeded: %s: asked %s, %s left of %s (%s spent, %s reserved)",
		d, d.format(e.Asked), d.format(e.Left), d.format(e.Ceiling), d.format(e.Spent), d.format(e.Reserved))
}

// Is makes every *ExceededError match ErrBudget.
func (e *ExceededError) Is(target error) bool { return target == ErrBudget }

// ErrNotReservable is returned by Reserve and Carve for an amount of steps
// or wall-clock seconds: those are counters (Step, Tick), not reserved.
var ErrNotReservable = errors.New("steps and wall_seconds are counted, not reserved")

// ErrNotOpen is returned by Settle and Release (and in a *RecordError by
// Replay) for a reservation that the ledger does not hold: never made by
// it, or already settled or released.
var ErrNotOpen = errors.New("the reservation is not open in this ledger")

// ErrClosed is returned by every method of a child ledger after Close.
var ErrClosed = errors.New("the ledger is closed")

// ErrOpenReservations is returned by Close while the child still holds
// reservations: settle or release them first, or the parent could not
// know what they cost.
var ErrOpenReservations = errors.New("the ledger still holds open reservations")

// ErrCarve is returned by Carve for ceilings a child may not have: none
// where its parent has one (a child of a limited parent is limited, as a
// token's narrowing requires), or more wall clock than the parent has
// left.
var ErrCarve = errors.New("a child's ceilings must fit in its parent's")

// ErrRecord is matched by every *RecordError: budget records that do not
// decode, or that no ledger could have written (a settle of a reservation
// that is not open, a reservation id used twice).
var ErrRecord = errors.New("bad budget record")

// RecordError names the record (its index in the records given to Replay
// or Rebuild, -1 for a decoding failure of the whole) and what is wrong
// with it.
type RecordError struct {
	Index  int
	Reason string
	Err    error
}

func (e *RecordError) Error() string {
	if e.Index < 0 {
		return "budget record: " + e.Reason
	}
	return fmt.Sprintf("budget record %d: %s", e.Index, e.Reason)
}

// Is makes every *RecordError match ErrRecord.
func (e *RecordError) Is(target error) bool { return target == ErrRecord }

// Unwrap returns the cause, e.g. ErrNotOpen.
func (e *RecordError) Unwrap() error { return e.Err }
