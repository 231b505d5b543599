package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/journal"
)

// callSource serves the recorded calls of a journal to a re-execution, and
// says what it holds: host.Recording (through diffSource) holds them all in
// memory; streamSource reads them from a bundle as the guest asks for them.
type callSource interface {
	host.Source
	// Len is the number of recorded calls, Served the number served.
	Len() int
	Served() int
	// Finished says whether the journal has its end entry.
	Finished() bool
	// Unserved returns the first recorded call not served yet.
	Unserved() (step uint64, op string, ok bool)
	// LastServed returns the step of the last call served, 0 for none.
	LastServed() uint64
}

// recordedCall is one recorded import call, collapsed from its entries as
// host.Recording collapses them: an intent and its outcome, or a pure
// call's one entry.
type recordedCall struct {
	seq       uint64 // of its first entry
	step      uint64
	op        string
	inputHash []byte
	request   []byte
	status    abi.Status
	response  []byte
	// outputHash is the response's, which says whether it is stored in
	// blob form (journal/SPEC.md 15.3).
	outputHash []byte
	done       bool
}

// callReader turns a journal's entries, in order, into its calls.
type callReader struct {
	next func() (*journal.Entry, error)
	// pending is an entry read past the call returned last.
	pending *journal.Entry
}

// call returns the next recorded call, or io.EOF after the last.
func (cr *callReader) call() (*recordedCall, error) {
	var c *recordedCall
	for {
		e := cr.pending
		cr.pending = nil
		if e == nil {
			var err error
			if e, err = cr.next(); err != nil {
				if err == io.EOF && c != nil {
					return c, nil // an intent the journal ends after: in doubt
				}
				return nil, err
			}
		}
		switch e.Phase {
		case journal.PhaseIntent:
			if c != nil {
				cr.pending = e
				return c, nil
			}
			c = &recordedCall{seq: e.Seq, step: e.Step, op: e.Op, inputHash: e.InputHash, request: e.Request}
		case journal.PhaseCompleted, journal.PhaseFailed:
			if c != nil && c.step == e.Step && !c.done {
				c.status, c.response, c.outputHash, c.done = abi.Status(e.Status), e.Response, e.OutputHash, true
				return c, nil
			}
			if c != nil {
				cr.pending = e
				return c, nil
			}
			return &recordedCall{seq: e.Seq, step: e.Step, op: e.Op, inputHash: e.InputHash, request: e.Request,
				status: abi.Status(e.Status), response: e.Response, outputHash: e.OutputHash, done: true}, nil
		}
	}
}

// streamSource serves a bundle's recorded calls as the guest makes its
// calls, reading the records again from the file: it holds one call at a
// time. It was told by the verification pass how many calls there are and
// whether the run finished, and it checks that the records it reads chain
// to the head that pass verified, so that a file changed in between is
// caught rather than replayed.
type streamSource struct {
	calls    *callReader
	total    int
	finished bool
	served   int
	last     uint64 // the step of the last call served
	// cur is the next call to serve, read ahead; err why there is none.
	cur     *recordedCall
	err     error
	changes []Change
	// prev is the hash of the last entry read; head the verified one.
	prev, head []byte
	endSeq     uint64
	// blobs resolve payloads stored in blob form, read under ctx.
	blobs journal.Blobs
	ctx   context.Context
}

// newStreamSource returns a source of the records rr reads, which the
// journal verifier passed with summary sum and calls recorded calls.
func newStreamSource(rr *recordReader, sum *journal.Summary, calls int) *streamSource {
	s := &streamSource{total: calls, finished: sum.End != nil, head: sum.Head, prev: make([]byte, journal.HashSize)}
	s.calls = &callReader{next: func() (*journal.Entry, error) {
		raw, err := rr.next()
		if err == io.EOF {
			if !bytes.Equal(s.prev, s.head) {
				return nil, errChanged
			}
			return nil, io.EOF
		}
		if err != nil {
			return nil, err
		}
		rec, err := journal.DecodeRecord(raw)
		if err != nil {
			return nil, errChanged
		}
		e, err := journal.DecodeEntry(rec.Entry)
		if err != nil || !bytes.Equal(e.Prev, s.prev) {
			return nil, errChanged
		}
		s.prev = journal.Sum(rec.Entry)
		if e.Phase == journal.PhaseEnd {
			s.endSeq = e.Seq
		}
		return e, nil
	}}
	s.advance()
	return s
}

// errChanged is the error of a bundle whose records, read again for the
// re-execution, are not the ones verified.
var errChanged = errors.New("replay: the bundle's records changed while it was being verified")

func (s *streamSource) advance() {
	s.cur, s.err = s.calls.call()
	if s.err == io.EOF {
		s.err = nil
	}
}

func (s *streamSource) Len() int           { return s.total }
func (s *streamSource) Served() int        { return s.served }
func (s *streamSource) Finished() bool     { return s.finished }
func (s *streamSource) LastServed() uint64 { return s.last }

func (s *streamSource) Unserved() (uint64, string, bool) {
	if s.cur != nil {
		return s.cur.step, s.cur.op, true
	}
	return 0, "", false
}

// Serve answers the guest's call with the recorded one, exactly as
// host.Recording.Serve does (the same divergences, the same end of an
// unfinished run), with the request's field-level differences when the
// guest sent another request at the recorded step.
func (s *streamSource) Serve(_ context.Context, hc *host.Call) (abi.Status, []byte, error) {
	if s.err != nil {
		return 0, nil, s.err
	}
	rc := s.cur
	if rc == nil {
		if !s.finished {
			return 0, nil, host.ErrRecordingEnd
		}
		return 0, nil, &host.DivergenceError{Step: hc.Step, Op: "(none)", ActualOp: hc.Op.Name, ActualInputHash: hc.InputHash(),
			Reason: fmt.Sprintf("the guest called %s after the last of the %d recorded calls", hc.Op.Name, s.total)}
	}
	if rc.step == hc.Step && rc.op == hc.Op.Name && rc.done && sameInput(rc, hc) {
		status, resp := rc.status, rc.response
		// A response in blob form is fed to the guest resolved, byte for
		// byte what the recorded guest got (the verification pass checked
		// that it hashes to the output hash; it is checked again).
		resp, err := resolved(s.ctx, s.blobs, resp, rc.outputHash)
		if err != nil {
			return 0, nil, fmt.Errorf("replay: the response of step %d: %w", rc.step, err)
		}
		s.served, s.last = s.served+1, rc.step
		s.advance()
		return status, resp, nil
	}
	div := &host.DivergenceError{Step: hc.Step, Op: rc.op, ActualOp: hc.Op.Name, InputHash: rc.inputHash, ActualInputHash: hc.InputHash()}
	switch {
	case rc.step != hc.Step:
		div.Reason = fmt.Sprintf("the journal's next call is step %d", rc.step)
	case rc.op != hc.Op.Name:
		div.Reason = fmt.Sprintf("the guest called %s", hc.Op.Name)
	case !sameInput(rc, hc):
		div.Reason = "the request differs"
		if rc.request != nil && hc.Request != nil {
			if cs := DiffRequests(rc.request, hc.Request); len(cs) > 0 {
				s.changes = cs
				div.Reason += ": " + formatChanges(cs)
			}
		}
	default: // !rc.done
		if !s.finished {
			return 0, nil, host.ErrRecordingEnd
		}
		div.Reason = "the journal records no outcome for this call"
	}
	return 0, nil, div
}

// sameInput reports whether the guest sent the recorded request: the
// bytes when the journal has them, the hashes otherwise (as
// host.Recording compares them).
func sameInput(rc *recordedCall, hc *host.Call) bool {
	if rc.request != nil && !hc.TooLarge && !journal.StoredInBlobForm(rc.request, rc.inputHash) {
		return bytes.Equal(rc.request, hc.Request)
	}
	return bytes.Equal(rc.inputHash, hc.InputHash())
}

// seqOf returns the seq of the entry a divergence at step names: the first
// entry of the call being served, or the end entry.
func (s *streamSource) seqOf(step uint64) uint64 {
	if s.cur != nil && step > 0 && s.cur.step == step {
		return s.cur.seq
	}
	return s.endSeq
}
