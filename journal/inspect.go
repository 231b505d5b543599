package journal

import (
	"bytes"
	"context"
	"errors"
)

// Inspected is one record as a person inspecting a journal sees it: decoded
// when it decodes, with whether its link and its coverage by a valid seal
// hold. Unlike Verify, Inspect does not stop at the first bad entry.
type Inspected struct {
	Seq   uint64
	Entry *Entry
	// Err is why the record or entry did not decode.
	Err error
	// Sealed says whether the record carries a seal; SealOK whether that
	// seal verifies for the entry's cell and is trusted.
	Sealed, SealOK bool
	// LinkOK says whether prev is the hash of the entry before.
	LinkOK bool
	// SigOK says whether the entry is covered by a valid, trusted seal on
	// it or on a later entry, with every link in between intact.
	SigOK bool
}

// Inspect reads every record of run and reports on each. When the store
// cannot give back the whole journal (ErrIncomplete), Inspect returns the
// entries it read with that error, so that a person sees what is left and
// where it stops.
func Inspect(ctx context.Context, store Store, run RunID, trust TrustFunc) ([]Inspected, error) {
	var out []Inspected
	prev := make([]byte, HashSize)
	err := store.Records(ctx, run, 0, func(seq uint64, raw []byte) error {
		in := Inspected{Seq: seq}
		p := new(prepared) // the verifier's per-record checks
		prepare(raw, false, p)
		if p.decodeErr != nil {
			in.Err = p.decodeErr
			prev = nil
			out = append(out, in)
			return nil
		}
		in.Entry = p.e
		in.LinkOK = prev != nil && bytes.Equal(p.e.Prev, prev)
		if s := p.rec.Seal; s != nil {
			in.Sealed = true
			in.SealOK = p.sealErr == nil && bytes.Equal(s.Cell, p.e.Cell) && trust(s.Cell)
		}
		prev = p.head
		out = append(out, in)
		return nil
	})
	if err != nil && !errors.Is(err, ErrIncomplete) {
		return nil, err
	}
	// An entry is covered when a valid seal at or after it is reached
	// through intact links only.
	covered := false
	for i := len(out) - 1; i >= 0; i-- {
		in := &out[i]
		if in.Err != nil {
			covered = false
			continue
		}
		if in.SealOK {
			covered = true
		}
		in.SigOK = covered
		if !in.LinkOK {
			covered = false
		}
	}
	return out, err
}
