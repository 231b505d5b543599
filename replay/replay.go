// Package replay re-executes a recorded run against its journal: every
// import call is answered with its recorded response, after checking that
// the guest asked for the same op with the same input. Together with the
// journal verifier (chain, hashes, seals) this proves that the journal is
// what the module did.
//
// Replay never dispatches an effect and never writes to a store.
package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/journal"
)

// ErrUnfinished is returned by Run for a run whose journal has no end entry:
// its recorded prefix was verified and replayed, but there is no outcome to
// compare.
var ErrUnfinished = errors.New("replay: the run has not finished")

// DivergenceError reports the first point where re-execution differs from
// the journal.
type DivergenceError = host.DivergenceError

// Journal is a verified journal, ready to be replayed.
type Journal struct {
	Summary *journal.Summary
	rec     host.Recording
}

// Load verifies the journal of run in store and collects its calls.
func Load(ctx context.Context, store journal.Store, run journal.RunID, trust journal.TrustFunc) (*Journal, error) {
	sum, rec, err := host.LoadRecording(ctx, store, run, trust)
	if err != nil {
		return nil, err
	}
	return &Journal{Summary: sum, rec: *rec}, nil
}

// Report is the result of a successful replay.
type Report struct {
	Run     journal.RunID
	Entries uint64
	Seals   uint64
	Calls   int
	Output  []byte
}

// Options tune Replay.
type Options struct {
	// Code replaces the recorded module (to check whether a new build is
	// compatible with recorded runs); nil: the recorded module, whose hash
	// must match the header.
	Code []byte
	// Sink sees the guest's events.
	Sink func(host.Event)
}

// Replay re-executes the journal's module on engine against the journal.
// code is the recorded module. It returns a *DivergenceError at the first
// difference.
func (j *Journal) Replay(ctx context.Context, engine *host.Engine, code []byte, opts Options) (*Report, error) {
	hdr := j.Summary.Header
	if opts.Code != nil {
		code = opts.Code
	} else if !bytes.Equal(journal.Sum(code), hdr.ModuleSHA256) {
		return nil, fmt.Errorf("replay: module hashes to %x, the run header records %x", journal.Sum(code), hdr.ModuleSHA256)
	}
	rec := j.rec // a copy: each replay serves from the first call
	out, err := engine.Execute(ctx, host.ExecSpec{Run: j.Summary.Run, Header: hdr, Code: code, Source: &rec, Sink: opts.Sink})
	var div *DivergenceError
	if errors.As(err, &div) {
		return nil, div
	}
	if errors.Is(err, host.ErrRecordingEnd) || err == nil && !rec.Finished() {
		return nil, fmt.Errorf("%w: verified %d entries and replayed all %d recorded calls", ErrUnfinished, j.Summary.Entries, rec.Len())
	}
	if err != nil {
		return nil, err
	}
	if err := compareEnd(j.Summary.End, out, &rec); err != nil {
		return nil, err
	}
	return &Report{Run: j.Summary.Run, Entries: j.Summary.Entries, Seals: j.Summary.Seals, Calls: rec.Len(), Output: out.Output}, nil
}

func compareEnd(end *journal.End, out *host.Outcome, rec *host.Recording) error {
	if step, op, ok := rec.Unserved(); ok {
		return &DivergenceError{Step: step, Op: op, Reason: fmt.Sprintf("the guest ended after %d calls; the journal records %d", rec.Served(), rec.Len())}
	}
	status := journal.StatusCompleted
	if out.GuestErr != nil {
		status = journal.StatusFailed
	}
	switch {
	case status != end.Status:
		return &DivergenceError{Reason: fmt.Sprintf("the run %s now (%v); the journal records %s", status, out.GuestErr, end.Status)}
	case !bytes.Equal(out.Output, end.Output):
		return &DivergenceError{Reason: fmt.Sprintf("output differs: recorded %d bytes (%x), now %d bytes (%x)",
			len(end.Output), journal.Sum(end.Output), len(out.Output), journal.Sum(out.Output))}
	case out.Steps != end.Steps:
		return &DivergenceError{Reason: fmt.Sprintf("the run made %d calls; the journal records %d", out.Steps, end.Steps)}
	}
	return nil
}
