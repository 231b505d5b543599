package host

import (
	"context"
	"fmt"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host/caps"
	"github.com/agentrt/agentrt/journal"
	"go.opentelemetry.io/otel/trace"
)

// livePath journals every call and dispatches it. This is the path every
// effect takes, and the order of its steps is the write-ahead rule:
//
//  1. A pure call is dispatched, then recorded as one completed or failed
//     entry, buffered and committed with the next group.
//  2. An effect on the outside world is recorded as intent and executing
//     entries; those and every entry before them are committed durably
//     (fsync, one seal) before the effect is dispatched. Its completed or
//     failed entry is buffered.
//  3. An effect on the agent's own durable state (kv writes) is staged, not
//     performed: its intent, executing and completed entries and the state
//     change are committed durably in one atomic batch. It happens exactly
//     once, with its record, or not at all.
//  4. A group is committed when it reaches groupMax entries (without
//     waiting for the disk: a crash that loses it loses only pure calls,
//     which re-execute; nor for the store: the guest goes on while the
//     store writes the group, and the next commit waits for it), before
//     every effect, and durably at the end of the run.
type livePath struct {
	w        *journal.Writer
	groupMax int
	now      func() time.Time
	events   *eventBuffer
	// lease is the run's lease, renewed as commits go by; nil: unleased.
	lease *holder
	// meta is the run's index record, written again at each checkpoint
	// (RunMeta.Checkpoint).
	meta *journal.RunMeta
	// gate is the gate's record of the call being journaled, for its
	// intent or its one entry.
	gate []byte
	// budget holds the budget records for the next intent or outcome
	// entry (the session's, shared).
	budget *budgetLog
	// approval is the approval record for the outcome entry of the call
	// being journaled (the votes and decision that ended its wait).
	approval []byte
	// conv is the conversation key of the call being journaled
	// (caps.Handler.Conversation): its payloads are stored by hash.
	conv string
	// obs, when set, is told of each call's outcome and each commit.
	obs Observer
	// tr, when set, traces the calls; span gathers the span of the call
	// being journaled.
	tr   *tracer
	span callSpan
	// untraced is set once the run's span is found not sampled: its calls
	// make no spans, and gather nothing for one (see traced).
	untraced, looked bool
}

// newLivePath returns the live path of the run that w writes: its
// entries and events, under lease, with its index record meta and its
// budget records.
func (h *Host) newLivePath(w *journal.Writer, events *eventBuffer, lease *holder, meta *journal.RunMeta, budget *budgetLog) *livePath {
	if obs := h.deps.Observer; obs != nil {
		w.OnGroup = func(took time.Duration) { obs.Commit(took, false) }
	}
	return &livePath{w: w, groupMax: h.cfg.GroupCommit, now: h.deps.Now, events: events, lease: lease, meta: meta, budget: budget, obs: h.deps.Observer, tr: h.tr}
}

// traced reports whether the calls of the run executing under ctx get
// spans: a tracer is set and the run's span is sampled. A call span is a
// child of its run's, so under every standard sampler (parent-based, or by
// trace id ratio, which decides the same for the whole trace) it would be
// sampled out with its run; OTEL_TRACES_SAMPLER therefore samples whole
// runs, and a run sampled out costs its calls nothing.
func (p *livePath) traced(ctx context.Context) bool {
	if p.tr == nil {
		return false
	}
	if !p.looked {
		p.looked, p.untraced = true, !trace.SpanContextFromContext(ctx).IsSampled()
	}
	return !p.untraced
}

// Observer is told of what runs do, for metrics. Its methods are called
// in the run's goroutine and must not block.
type Observer interface {
	// Call is told of each call's outcome as it is journaled: its op,
	// class and ABI status.
	Call(op abi.Op, status abi.Status)
	// Commit is told how long a journal commit took, and whether it was
	// durable (it waited for the disk).
	Commit(d time.Duration, durable bool)
}

// blobThreshold is the size from which a string in a conversation's
// payloads is a blob of its own.
const blobThreshold = 1024

// stored returns payload as the entry of the current call stores it, and
// buffers the blobs it references: itself, unless the call's op holds a
// conversation (then its request is a chain of message blobs and its
// large strings are blobs; a request without a message list is cut like
// a response).
func (p *livePath) stored(payload []byte, request bool) []byte {
	if p.conv == "" || len(payload) == 0 {
		return payload
	}
	var pl journal.Payload
	if request {
		var err error
		if pl, err = journal.EncodeConversation(payload, p.conv, blobThreshold); err != nil {
			pl = journal.Externalize(payload, blobThreshold)
		}
	} else {
		pl = journal.Externalize(payload, blobThreshold)
	}
	p.w.AddBlobs(pl.Blobs...)
	return pl.Stored
}

func (p *livePath) entry(phase journal.Phase, c *Call) *journal.Entry {
	e := &journal.Entry{Phase: phase, Step: c.Step, Op: c.Op.Name, InputHash: c.InputHash(), Time: p.now().UnixNano(), Epoch: p.lease.epoch()}
	if phase != journal.PhaseExecuting {
		e.Budget = p.budget.take()
	}
	return e
}

func (p *livePath) serve(ctx context.Context, s *session, c *Call, h caps.Handler) (abi.Status, []byte, error) {
	d, gate, err := s.gate(ctx, c, h)
	if err != nil {
		return 0, nil, err
	}
	p.gate, p.conv = gate, h.Conversation
	defer func() { p.conv = "" }()
	if p.traced(ctx) {
		p.tr.startCall(&p.span, s.run, c)
		defer p.tr.endCall(ctx, &p.span)
	}
	if d != nil {
		return p.record(ctx, c, true, d.Status, d.Body)
	}
	if s.waiting(h) {
		return p.wait(ctx, s, c, h)
	}
	if c.Op.Class == abi.Effect {
		intent := p.entry(journal.PhaseIntent, c)
		intent.Request, intent.Gate, p.gate = p.stored(c.Request, true), p.gate, nil
		if err := p.w.Add(intent); err != nil {
			return 0, nil, err
		}
		if p.span.on {
			p.span.intent = int64(p.w.Next() - 1)
		}
	}
	return p.dispatch(ctx, s, c, h, true, nil)
}

// dispatch serves c, gated, once its intent (an effect's) is added, and
// records its outcome. An effect's executing entry, with the approval
// record when the call was parked for one, is durable before the effect is
// dispatched; a pure call's outcome carries the request when withRequest
// (it has no intent entry) and the approval record.
func (p *livePath) dispatch(ctx context.Context, s *session, c *Call, h caps.Handler, withRequest bool, approval []byte) (abi.Status, []byte, error) {
	if c.Op.Class != abi.Effect {
		status, resp := h.Serve(ctx, c)
		if err := servedInterrupted(ctx, s, c, h); err != nil {
			return 0, nil, err
		}
		s.settleBudget(c, status, resp)
		p.approval = approval
		status, resp, err := p.record(ctx, c, withRequest, status, resp)
		if err == nil && h.Flush {
			// Its entry is seen at once (a stream's batch), durably or
			// not: a crash that loses it loses a pure call, re-made.
			err = p.commit(ctx, false)
		}
		if err == nil && status == abi.StatusOK && c.Op.Cap == abi.CapRun && c.Op.Code == abi.OpRunCheckpoint {
			// The index names the checkpoint, where a resume starts.
			p.meta.Checkpoint = p.w.Next() - 1
			err = p.commitWith(ctx, p.meta, false)
		}
		return status, resp, err
	}
	executing := p.entry(journal.PhaseExecuting, c)
	executing.Key, executing.Approval = c.Key, approval
	if err := p.w.Add(executing); err != nil {
		return 0, nil, err
	}
	if h.Stage != nil {
		status, resp, write := h.Stage(c)
		if status == abi.StatusOK {
			p.w.AddKV(write)
		}
		s.settleBudget(c, status, resp)
		if err := p.add(c, false, status, resp); err != nil {
			return 0, nil, err
		}
		return status, resp, p.commit(ctx, true)
	}
	if err := p.commit(ctx, true); err != nil {
		return 0, nil, err
	}
	status, resp := h.Serve(ctx, c)
	if ctx.Err() != nil {
		// The effect was cut off: whether it took place is unknown, so no
		// outcome is recorded. The journal ends with the step in doubt.
		return 0, nil, fmt.Errorf("%w during step %d (%s), whose effect is in doubt", ErrInterrupted, c.Step, c.Op.Name)
	}
	s.settleBudget(c, status, resp)
	return p.record(ctx, c, false, status, resp)
}

// servedInterrupted returns the error that stops the run, with nothing of
// pure call c recorded, when the run's context ended while c was served,
// or, for a call that waits on the outside world (a stream's batch,
// h.Flush), when the host asked the run to stop: its answer may be the
// stop's doing (a stream cut by it), and a resume makes the call again.
func servedInterrupted(ctx context.Context, s *session, c *Call, h caps.Handler) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w during step %d (%s)", ErrInterrupted, c.Step, c.Op.Name)
	}
	if h.Flush {
		select {
		case <-s.halt:
			return s.haltError()
		default:
		}
	}
	return nil
}

// add appends the completed or failed entry of c. withRequest says whether
// the entry carries the request (calls with no intent entry).
func (p *livePath) add(c *Call, withRequest bool, status abi.Status, resp []byte) error {
	phase := journal.PhaseCompleted
	if status != abi.StatusOK {
		phase = journal.PhaseFailed
	}
	e := p.entry(phase, c)
	if withRequest {
		e.Request, e.Gate = p.stored(c.Request, true), p.gate
	}
	p.gate = nil
	e.Approval, p.approval = p.approval, nil
	e.Response, e.OutputHash, e.Status = p.stored(resp, false), journal.Sum(resp), uint32(status)
	if p.obs != nil {
		p.obs.Call(*c.Op, status)
	}
	if err := p.w.Add(e); err != nil {
		return err
	}
	if p.span.on {
		p.tr.outcome(&p.span, c, status, resp, p.w.Next()-1, p.w.Head())
	}
	return nil
}

// record adds the outcome of c and commits the group when it is full.
func (p *livePath) record(ctx context.Context, c *Call, withRequest bool, status abi.Status, resp []byte) (abi.Status, []byte, error) {
	if err := p.add(c, withRequest, status, resp); err != nil {
		return 0, nil, err
	}
	if p.w.Pending() >= p.groupMax {
		if err := p.commitGroup(ctx); err != nil {
			return 0, nil, err
		}
	}
	return status, resp, nil
}

// commitGroup starts committing a full group of entries, with the events
// so far, and returns while the store writes it (journal.Writer.
// CommitGroup): the guest's next calls run meanwhile. The next commit, or
// the run's end, waits for it to land; a failed group stops the run there.
func (p *livePath) commitGroup(ctx context.Context) error {
	if err := p.lease.valid(); err != nil {
		return err
	}
	if err := p.events.flushTo(p.w); err != nil {
		return err
	}
	if err := p.w.CommitGroup(ctx); err != nil {
		return fmt.Errorf("host: journal: %w", err)
	}
	return nil
}

// commit writes the buffered entries, with the events the guest produced
// since the last commit.
func (p *livePath) commit(ctx context.Context, durable bool) error {
	return p.commitWith(ctx, nil, durable)
}

// commitWith commits as commit does, with the run's index record meta
// when it is not nil.
func (p *livePath) commitWith(ctx context.Context, meta *journal.RunMeta, durable bool) error {
	if err := p.lease.valid(); err != nil {
		return err
	}
	if err := p.events.flushTo(p.w); err != nil {
		return err
	}
	start := time.Now()
	if err := p.w.Commit(ctx, meta, durable); err != nil {
		return fmt.Errorf("host: journal: %w", err)
	}
	if p.obs != nil {
		p.obs.Commit(time.Since(start), durable)
	}
	return nil
}
