package placement

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentrt/agentrt/abi"
)

// MaxDecision is the largest encoded Decision DecodeDecision reads.
const MaxDecision = 16 << 20

// EncodeCBOR returns the decision's canonical CBOR (RFC 8949 core
// deterministic encoding, as abi.Marshal writes it, with integer map
// keys): the bytes the cluster journals. Equal decisions encode to equal
// bytes, and Place makes equal decisions from the same need and set of
// cells, in whatever order.
func (d *Decision) EncodeCBOR() ([]byte, error) {
	b, err := abi.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("placement: encode decision: %w", err)
	}
	return b, nil
}

// ErrBadDecision is wrapped by DecodeDecision's errors and returned by
// Recheck for a decision Place would not make from its own inputs.
var ErrBadDecision = errors.New("placement: bad decision")

// DecodeDecision decodes a decision EncodeCBOR wrote. It refuses bytes
// that are not canonical, hold unknown fields, or are of another version.
// It does not recompute the decision: Recheck does.
func DecodeDecision(b []byte) (*Decision, error) {
	if len(b) == 0 || len(b) > MaxDecision {
		return nil, fmt.Errorf("%w: %d bytes (a decision is 1 to %d)", ErrBadDecision, len(b), MaxDecision)
	}
	var d Decision
	if err := abi.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadDecision, err)
	}
	if d.Version != Version {
		return nil, fmt.Errorf("%w: version %d (this build reads version %d)", ErrBadDecision, d.Version, Version)
	}
	return &d, nil
}

// Recheck places d's inputs again and returns nil when that gives d
// exactly (the same encoding), an error wrapping ErrBadDecision when it
// does not: what an auditor runs over a journaled decision.
func Recheck(d *Decision) error {
	again, err := Place(d.Inputs.Need, d.Inputs.Cells)
	var ne *NoEligibleError
	if err != nil && !errors.As(err, &ne) {
		return fmt.Errorf("%w: its inputs are refused: %v", ErrBadDecision, err)
	}
	want, err := again.EncodeCBOR()
	if err != nil {
		return err
	}
	got, err := d.EncodeCBOR()
	if err != nil {
		return err
	}
	switch {
	case again.Cell != d.Cell:
		return fmt.Errorf("%w: its inputs place the run on %q, not %q", ErrBadDecision, again.Cell, d.Cell)
	case !bytes.Equal(want, got):
		return fmt.Errorf("%w: its inputs choose %q too, but its scores, refusals or weights are not theirs", ErrBadDecision, d.Cell)
	}
	return nil
}

// MarshalJSON writes the decision as JSON, with empty lists as [] rather
// than null. Maps are written with sorted keys, so equal decisions give
// equal JSON too.
func (d Decision) MarshalJSON() ([]byte, error) {
	type plain Decision // without this method
	p := plain(d)
	if p.Candidates == nil {
		p.Candidates = []Candidate{}
	}
	if p.Refused == nil {
		p.Refused = []Refusal{}
	}
	if p.Inputs.Cells == nil {
		p.Inputs.Cells = []Cell{}
	}
	return json.Marshal(p)
}
