package host

import (
	"context"
	"fmt"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
)

// livePath journals every call and dispatches it. This is the path every
// effect takes, and the order of its steps is the write-ahead rule:
//
//  1. A pure call is dispatched, then recorded as one completed or failed
//     entry. It is buffered and committed with the next group.
//  2. An effect is recorded as intent and executing entries; those and
//     every entry before them are committed (fsync, one seal) before the
//     effect is dispatched. Its completed or failed entry is buffered.
//  3. A group is committed when it reaches groupMax entries, before every
//     effect, and at the end of the run.
type livePath struct {
	w        *journal.Writer
	groupMax int
	epoch    uint64
	now      func() time.Time
	// flushed is called after every successful commit.
	flushed func(ctx context.Context) error
}

func (p *livePath) entry(phase journal.Phase, c *Call) *journal.Entry {
	return &journal.Entry{Phase: phase, Step: c.Step, Op: c.Op.Name, InputHash: c.InputHash, Time: p.now().UnixNano(), Epoch: p.epoch}
}

func (p *livePath) serve(ctx context.Context, s *session, c *Call, h handler) (abi.Status, []byte, error) {
	if d := s.gate(c, h); d != nil {
		return p.record(ctx, c, true, d.status, d.body)
	}
	if c.Op.Class == abi.Effect {
		intent := p.entry(journal.PhaseIntent, c)
		intent.Request = c.Request
		executing := p.entry(journal.PhaseExecuting, c)
		executing.Key = c.Key
		if err := p.w.Add(intent); err != nil {
			return 0, nil, err
		}
		if err := p.w.Add(executing); err != nil {
			return 0, nil, err
		}
		if err := p.commit(ctx); err != nil {
			return 0, nil, err
		}
		status, resp := h.serve(ctx, s, c)
		return p.record(ctx, c, false, status, resp)
	}
	status, resp := h.serve(ctx, s, c)
	return p.record(ctx, c, true, status, resp)
}

// record appends the completed or failed entry of c. withRequest says
// whether the entry carries the request (calls with no intent entry).
func (p *livePath) record(ctx context.Context, c *Call, withRequest bool, status abi.Status, resp []byte) (abi.Status, []byte, error) {
	phase := journal.PhaseCompleted
	if status != abi.StatusOK {
		phase = journal.PhaseFailed
	}
	e := p.entry(phase, c)
	if withRequest {
		e.Request = c.Request
	}
	e.Response, e.OutputHash, e.Status = resp, journal.Sum(resp), uint32(status)
	if err := p.w.Add(e); err != nil {
		return 0, nil, err
	}
	if p.w.Pending() >= p.groupMax {
		if err := p.commit(ctx); err != nil {
			return 0, nil, err
		}
	}
	return status, resp, nil
}

func (p *livePath) commit(ctx context.Context) error {
	if err := p.w.Commit(ctx, nil); err != nil {
		return fmt.Errorf("host: journal: %w", err)
	}
	if p.flushed != nil {
		return p.flushed(ctx)
	}
	return nil
}

// sourcePath serves every call from a Source (replay). Nothing is
// dispatched and nothing is written.
type sourcePath struct{ src Source }

func (p sourcePath) serve(ctx context.Context, _ *session, c *Call, _ handler) (abi.Status, []byte, error) {
	return p.src.Serve(ctx, c)
}
