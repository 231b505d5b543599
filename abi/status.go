package abi

import "fmt"

// Status is the numeric outcome of a call, the upper 32 bits of a Result.
// Every status other than StatusOK and StatusPending comes with an Error
// body in the response buffer.
type Status uint32

// The status table of ABI v1. Numbers are stable: never renumber, only add.
const (
	// StatusOK: the call succeeded; the response holds its CBOR result.
	StatusOK Status = 0
	// StatusPending: the response did not fit; its length is the low 32
	// bits. Fetch it with take. The call is not re-run.
	StatusPending Status = 1
	// StatusBadRequest: the request is not valid CBOR for the op, or the
	// op code is unknown.
	StatusBadRequest Status = 2
	// StatusTooLarge: the request, or a value in it, exceeds a host limit.
	StatusTooLarge Status = 3
	// StatusDenied: the grant does not allow this resource (an HTTP host,
	// a kv namespace).
	StatusDenied Status = 4
	// StatusNotFound: the thing asked for does not exist (kv.get).
	StatusNotFound Status = 5
	// StatusFailed: the effect was attempted and failed (a network error).
	StatusFailed Status = 6
	// StatusInDoubt: a crash left the effect's outcome unknown and the op
	// is not idempotent, so it was not re-run.
	StatusInDoubt Status = 7
	// StatusInternal: the host could not serve the call (a response that
	// failed to encode). A host that cannot journal a call does not answer
	// it at all: it stops the run.
	StatusInternal Status = 8
	// StatusNoPending: take was called with nothing pending.
	StatusNoPending Status = 9
	// StatusBufferTooSmall: take was called with a buffer smaller than the
	// pending response.
	StatusBufferTooSmall Status = 10
	// StatusBudget: the call's worst case does not fit in what is left of
	// a budget ceiling of the run (its token's, its grant's, or one its
	// loop set); nothing of it was sent. The message names the dimension
	// and the amounts.
	StatusBudget Status = 11
)

var statusNames = map[Status]string{
	StatusOK:             "ok",
	StatusPending:        "pending",
	StatusBadRequest:     "bad_request",
	StatusTooLarge:       "too_large",
	StatusDenied:         "denied",
	StatusNotFound:       "not_found",
	StatusFailed:         "failed",
	StatusInDoubt:        "in_doubt",
	StatusInternal:       "internal",
	StatusNoPending:      "no_pending",
	StatusBufferTooSmall: "buffer_too_small",
	StatusBudget:         "budget",
}

func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("status(%d)", uint32(s))
}

// Result packs a status and a length into the i64 that call and take return:
// status<<32 | length.
type Result uint64

// Pack returns the Result for a status and length.
func Pack(s Status, n uint32) Result { return Result(uint64(s)<<32 | uint64(n)) }

// Status returns the status half of r.
func (r Result) Status() Status { return Status(r >> 32) }

// Len returns the length half of r.
func (r Result) Len() uint32 { return uint32(r) }

// Error is the response body of every failed call, and the Go error the SDK
// returns for it.
type Error struct {
	Code    Status `cbor:"code"`
	Message string `cbor:"message"`
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code.String()
	}
	return e.Code.String() + ": " + e.Message
}

// Is makes errors.Is(err, &abi.Error{Code: c}) match on the code alone.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Message == ""
}
