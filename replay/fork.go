package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/agentrt/agentrt/journal"
)

// ForkReport compares a fork (journal.Fork) with its parent, call by call,
// after the fork point: where and how the fork's calls diverge from the
// original run's.
//
// It says what the two journals claim: verify them (Load, audit) before
// relying on it.
type ForkReport struct {
	Fork, Parent journal.RunID
	// Seq and Step are the fork point: the parent's entry and the last
	// call the fork answered from the parent's journal.
	Seq, Step uint64
	// Calls are the steps after Step that either run made, in order.
	Calls []ForkCall
	// Diverged is the first step of Calls that does not match, 0 when
	// every one does.
	Diverged uint64
	// Finished says both runs have ended; SameOutput that they ended the
	// same way with the same output.
	Finished, SameOutput bool
}

// ForkCall is one step after the fork point, in the fork and in its
// parent.
type ForkCall struct {
	Step uint64
	// Op and ParentOp are the op of each run's call at Step, "" when that
	// run made none.
	Op, ParentOp string
	// Match says both runs called the same op with the same input hash.
	Match bool
	// SameOutput says both calls have an outcome with the same output
	// hash and status (a live call may answer otherwise than it did).
	SameOutput bool
	// Changes are the request fields that differ, when both requests are
	// in the journals and decode.
	Changes []Change
}

// ErrNotFork is returned by CompareFork for a run whose header names no
// fork.
var ErrNotFork = errors.New("replay: the run is not a fork")

// CompareFork reads the journals of fork and of the run it was forked
// from, in store, and compares their calls after the fork point.
func CompareFork(ctx context.Context, store journal.Store, fork journal.RunID) (*ForkReport, error) {
	mine, err := readCalls(ctx, store, fork)
	if err != nil {
		return nil, err
	}
	f := mine.header.Fork
	if f == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotFork, fork)
	}
	theirs, err := readCalls(ctx, store, f.Parent)
	if err != nil {
		return nil, fmt.Errorf("replay: the parent of fork %s: %w", fork, err)
	}
	rep := &ForkReport{Fork: fork, Parent: f.Parent, Seq: f.Seq, Step: f.Step}
	for step := f.Step + 1; ; step++ {
		a, b := mine.calls[step], theirs.calls[step]
		if a == nil && b == nil {
			break
		}
		c := ForkCall{Step: step}
		if a != nil {
			c.Op = a.op
		}
		if b != nil {
			c.ParentOp = b.op
		}
		if a != nil && b != nil {
			c.Match = a.op == b.op && bytes.Equal(a.inputHash, b.inputHash)
			c.SameOutput = a.done && b.done && a.status == b.status && bytes.Equal(a.outputHash, b.outputHash)
			if !c.Match && a.op == b.op && a.request != nil && b.request != nil {
				c.Changes = DiffRequests(b.request, a.request)
			}
		}
		if !c.Match && rep.Diverged == 0 {
			rep.Diverged = step
		}
		rep.Calls = append(rep.Calls, c)
	}
	if mine.end != nil && theirs.end != nil {
		rep.Finished = true
		rep.SameOutput = mine.end.Status == theirs.end.Status && bytes.Equal(mine.end.Output, theirs.end.Output)
	}
	return rep, nil
}

// journalCalls are the calls of one journal by step.
type journalCalls struct {
	header *journal.Header
	end    *journal.End
	calls  map[uint64]*journalCall
}

type journalCall struct {
	op                             string
	inputHash, request, outputHash []byte
	status                         uint32
	done                           bool
}

func readCalls(ctx context.Context, store journal.Store, run journal.RunID) (*journalCalls, error) {
	out := &journalCalls{calls: map[uint64]*journalCall{}}
	err := journal.ReadEntries(ctx, store, run, func(e *journal.Entry, _ *journal.Record) error {
		switch e.Phase {
		case journal.PhaseStart:
			out.header = e.Header
		case journal.PhaseEnd:
			out.end = e.End
		case journal.PhaseIntent, journal.PhaseExecuting, journal.PhaseCompleted, journal.PhaseFailed:
			c := out.calls[e.Step]
			if c == nil {
				c = &journalCall{op: e.Op, inputHash: e.InputHash}
				out.calls[e.Step] = c
			}
			if e.Request != nil && !journal.StoredInBlobForm(e.Request, e.InputHash) {
				c.request = e.Request
			}
			if e.Phase == journal.PhaseCompleted || e.Phase == journal.PhaseFailed {
				c.outputHash, c.status, c.done = e.OutputHash, e.Status, true
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if out.header == nil {
		return nil, fmt.Errorf("replay: the journal of %s has no start entry", run)
	}
	return out, nil
}
