// Package replay re-executes a recorded run against its journal: every
// import call is answered with its recorded response, after checking that
// the guest asked for the same op with the same input. Together with the
// journal verifier (chain, hashes, seals) this proves that the journal is
// what the module did. CompareFork compares a fork's calls after its fork
// point with its parent's.
//
// Replay never dispatches an effect and never writes to a store.
package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentrt/agentrt/abi"
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
	// requests[i] is the request of recorded call i (nil when the journal
	// kept none), and seqs[i] the seq of its first entry: what a
	// divergence report shows and names.
	requests [][]byte
	seqs     []uint64
	endSeq   uint64
	// blobs resolve the payloads stored in blob form (journal/SPEC.md
	// section 15) as the entries are collected, read under ctx.
	blobs journal.Blobs
	ctx   context.Context
}

// Load verifies the journal of run in store and collects its calls.
func Load(ctx context.Context, store journal.Store, run journal.RunID, trust journal.TrustFunc) (*Journal, error) {
	j, v := newLoader(trust)
	j.blobs, _ = store.(journal.Blobs)
	j.ctx = ctx
	if m, err := store.Meta(ctx, run); err == nil {
		// The index's count of calls sizes what Load collects, so that it
		// is not copied as it grows; only a hint, bounded, since the index
		// is not verified.
		j.grow(int(min(m.Steps, maxGrowHint)))
	}
	sum, err := journal.VerifyStoreWith(ctx, store, run, v)
	if err != nil {
		return nil, err
	}
	j.Summary = sum
	return j, nil
}

// maxGrowHint bounds the calls Load makes room for before it reads them.
const maxGrowHint = 1 << 20

// grow makes room for calls more calls.
func (j *Journal) grow(calls int) {
	j.rec.Grow(calls)
	j.requests = slices.Grow(j.requests, calls)
	j.seqs = slices.Grow(j.seqs, calls)
}

// newLoader returns a journal to fill and the verifier that fills it, entry
// by entry as each passes its checks.
func newLoader(trust journal.TrustFunc) (*Journal, *journal.Verifier) {
	j := &Journal{}
	v := journal.NewVerifier(trust)
	v.OnEntry = func(e *journal.Entry, _ *journal.Record) error { return j.add(e) }
	return j, v
}

func (j *Journal) add(e *journal.Entry) error {
	// The recording serves responses as it holds them: give it what the
	// guest got (journal.ForGuest resolves payloads in blob form).
	e, err := journal.ForGuest(j.ctx, j.blobs, e)
	if err != nil {
		return err
	}
	n := j.rec.Len()
	j.rec.Add(e)
	if j.rec.Len() > n {
		j.requests = append(j.requests, j.rec.Request(n)) // the recording's copy
		j.seqs = append(j.seqs, e.Seq)
	}
	if e.Phase == journal.PhaseEnd {
		j.endSeq = e.Seq
	}
	return nil
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
	// MaxRequest is the recording host's request size limit; zero:
	// abi.MaxRequest, the default of every host.
	MaxRequest int
	// Progress, when set, is told after each recorded call served how
	// many were served of how many (a progress bar).
	Progress func(served, total int)
}

// progressSource tells Options.Progress of each call served.
type progressSource struct {
	callSource
	progress func(served, total int)
}

func (p progressSource) Serve(ctx context.Context, c *host.Call) (abi.Status, []byte, error) {
	status, resp, err := p.callSource.Serve(ctx, c)
	p.progress(p.Served(), p.Len())
	return status, resp, err
}

// Replay re-executes the journal's module on engine against the journal.
// code is the recorded module. It returns a *DivergenceError at the first
// difference.
func (j *Journal) Replay(ctx context.Context, engine *host.Engine, code []byte, opts Options) (*Report, error) {
	rep, _, err := j.replay(ctx, engine, code, opts)
	return rep, err
}

// replay is Replay; it also returns the field-level differences of the
// requests when the guest sent a different request at a recorded step.
func (j *Journal) replay(ctx context.Context, engine *host.Engine, code []byte, opts Options) (*Report, []Change, error) {
	hdr := j.Summary.Header
	if opts.Code != nil {
		code = opts.Code
	} else if !bytes.Equal(journal.Sum(code), hdr.ModuleSHA256) {
		return nil, nil, fmt.Errorf("replay: module hashes to %x, the run header records %x", journal.Sum(code), hdr.ModuleSHA256)
	}
	src := &diffSource{rec: j.rec, requests: j.requests} // a copy: each replay serves from the first call
	rep, err := j.execute(ctx, engine, code, opts, src)
	return rep, src.changes, err
}

func (j *Journal) execute(ctx context.Context, engine *host.Engine, code []byte, opts Options, rec callSource) (*Report, error) {
	if opts.Progress != nil {
		rec = progressSource{rec, opts.Progress}
	}
	hdr := j.Summary.Header
	spec := host.ExecSpec{Run: j.Summary.Run, Header: hdr, Code: code, Source: rec, Sink: opts.Sink, MaxRequest: opts.MaxRequest,
		Refused: rec.Len() == 0 && rec.Finished()}
	if end := j.Summary.End; host.StoppedEnd(end) {
		// The host stopped the recorded guest (a budget, a quota): the
		// re-executed one is stopped after its last recorded call.
		spec.Stopped, spec.Calls = strings.TrimPrefix(end.Error, "stopped: "), rec.Len()
	}
	out, err := engine.Execute(ctx, spec)
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
	if err := compareEnd(j.Summary.End, out, rec); err != nil {
		return nil, err
	}
	return &Report{Run: j.Summary.Run, Entries: j.Summary.Entries, Seals: j.Summary.Seals, Calls: rec.Len(), Output: out.Output}, nil
}

func compareEnd(end *journal.End, out *host.Outcome, rec callSource) error {
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
	case out.Steps != end.Steps && !(out.GuestErr != nil && end.Steps == out.Steps+1 && rec.LastServed() == out.Steps):
		// (Hosts before journal/SPEC.md's rule for end.steps counted a
		// call the guest faulted on before it was journaled: such an end
		// is one above the last step, and still valid.)
		return &DivergenceError{Reason: fmt.Sprintf("the run made %d calls; the journal records %d", out.Steps, end.Steps)}
	}
	return nil
}
