package host

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host/caps"
	"github.com/agentrt/agentrt/journal"
)

// ErrFinished is returned by Resume for a run whose journal has its end.
var ErrFinished = errors.New("host: the run has finished")

// Resume continues a run that stopped before its end (its process was
// killed, or its context ended). It verifies the run's journal against this
// cell's key, re-instantiates the recorded module and answers every call the
// journal records with the recorded response, dispatching nothing again.
// Then it decides the effect the run left in doubt, if any, and goes on
// live, appending to the same journal.
//
// An effect in doubt has an intent but no outcome: it may or may not have
// taken place. An idempotent op (an HTTP request to servers the grant says
// honour Idempotency-Key) is dispatched again with the same idempotency key.
// Any other is not re-run: the guest gets StatusInDoubt, and the journal
// records that answer.
func (h *Host) Resume(ctx context.Context, run journal.RunID) (*Result, error) {
	st, err := h.Reopen(ctx, run)
	if err != nil {
		return nil, err
	}
	return st.Execute(ctx)
}

// Reopen verifies and re-instantiates a run that stopped before its end and
// returns it ready to execute (see Resume).
func (h *Host) Reopen(ctx context.Context, run journal.RunID) (*Started, error) {
	return h.reopen(ctx, run, nil)
}

// ReopenChecked is Reopen with check called on the verified journal before
// the run's lease is taken: an error from it leaves the run as it was,
// nothing journaled. A cell resuming a run by hand admits it so, as it
// would a submission.
func (h *Host) ReopenChecked(ctx context.Context, run journal.RunID, check func(Tail) error) (*Started, error) {
	if check == nil {
		return nil, fmt.Errorf("host: reopen %s: no check", run)
	}
	return h.reopen(ctx, run, &reopening{check: check})
}

// TakeOver is Reopen for a run another cell held, whose lease expired: the
// lease entry this host writes carries decision, the canonical CBOR of the
// placement decision that picked this cell (placement.Decision). The
// journal's seals are checked against this cell's key and its trusted
// peers' (Deps.TrustedCells), and its tail against the store's head
// record: a gap is an error, never a shorter journal to resume from.
// check, when not nil, is called on the verified journal before the lease
// is taken (the taking cell's admission): an error from it leaves the run
// and its lease as they were.
func (h *Host) TakeOver(ctx context.Context, run journal.RunID, decision []byte, check func(Tail) error) (*Started, error) {
	if len(decision) == 0 {
		return nil, fmt.Errorf("host: take over %s: no placement decision to journal", run)
	}
	return h.reopen(ctx, run, &reopening{request: decision, takeover: true, check: check})
}

// reopening is what a reopen of a run another cell held adds: the request
// its lease entry carries (a takeover's placement decision, a handoff's
// envelope), and the check of the verified journal before the lease is
// taken (a handoff's; a cell's admission of a run it takes over or
// resumes by hand).
type reopening struct {
	request  []byte
	takeover bool
	check    func(Tail) error
}

func (h *Host) reopen(ctx context.Context, run journal.RunID, ro *reopening) (*Started, error) {
	st := h.deps.Store
	meta, err := st.Meta(ctx, run)
	if err != nil {
		return nil, err
	}
	sum, rec, err := loadLastSegment(ctx, st, run, meta.Checkpoint, h.trust())
	if err != nil {
		return nil, fmt.Errorf("host: resume %s: %w", run, h.deps.verifyFailed(err))
	}
	if sum.End != nil {
		return nil, fmt.Errorf("%w: run %s ended %s", ErrFinished, run, sum.End.Status)
	}
	hdr := sum.Header
	if err := forkUnfinished(hdr, rec); err != nil {
		return nil, fmt.Errorf("host: resume %s: %w", run, err)
	}
	grant, err := DecodeGrant(hdr.Grant)
	if err != nil {
		return nil, err
	}
	limits := grant.recordedLimits()
	// By hash: a module the engine keeps compiled (a daemon waking a
	// parked run) is not read back from the store.
	m, _, err := h.runModule(ctx, RunSpec{ModuleSHA256: hdr.ModuleSHA256}, h.engine.runLimits(limits))
	if err != nil {
		return nil, err
	}
	if err := checkLink(m.Imports, grant); err != nil {
		return nil, err
	}

	lr, err := h.live.enter(run)
	if err != nil {
		return nil, err
	}
	var request []byte
	takeover := false
	if ro != nil {
		request, takeover = ro.request, ro.takeover
		if ro.check != nil {
			t := Tail{Entries: sum.Entries, Head: sum.Head, Token: hdr.Token, h: h, run: run, header: hdr, ceilings: rec.budget.ceilingsOf(grant)}
			if err := ro.check(t); err != nil {
				h.live.leave(run)
				return nil, err
			}
		}
	}
	w := journal.NewWriter(st, journal.ResumeChain(run, h.deps.Key, sum.Entries-1, sum.Head))
	lease, err := h.acquire(ctx, run, w, request, takeover)
	if err != nil {
		h.live.leave(run)
		return nil, err
	}
	if meta.Status != journal.StatusRunning {
		// A cancelled or held run runs again: its index record says so
		// with the lease entry.
		meta.Status, meta.Error, meta.Wait = journal.StatusRunning, "", nil
		if err := w.Commit(ctx, &meta, false); err != nil {
			lease.release(ctx)
			h.live.leave(run)
			return nil, fmt.Errorf("host: resume %s: %w", run, err)
		}
	}
	// The run's index names the engines that ran it and its request limit
	// (for bundles, BUNDLE.md): this one joins the engines, and the limit
	// stays the run's, so that its calls are too large on one rule.
	if len(meta.Engines) > 0 && !slices.Contains(meta.Engines, h.engine.Kind()) {
		meta.Engines = append(meta.Engines, h.engine.Kind())
	}
	maxRequest := h.cfg.MaxRequest
	if meta.MaxRequest > 0 {
		maxRequest = int(meta.MaxRequest)
	}
	events := &eventBuffer{run: run, now: h.deps.Now, sink: h.deps.Sink, keep: h.deps.Events != nil, replaying: true,
		limit: limits.LogBytes}
	if h.deps.Events != nil {
		// The log quota counts what earlier executions of the run kept.
		_ = h.deps.Events.Events(ctx, run, func(b []byte) error {
			events.kept += uint64(len(b))
			return nil
		})
	}
	blog := &budgetLog{}
	events.at = w.Next
	live := h.newLivePath(w, events, lease, &meta, blog)
	p := &resumePath{rec: rec, live: live, events: events}
	p.doubtStep, _, p.doubt = rec.InDoubt()
	p.past = rec.Len() == 0
	events.replaying = !p.past
	// A run that checkpointed starts again from its last checkpoint: the
	// calls before it are not re-executed.
	s := &session{run: run, header: hdr, grant: grant, path: p, deps: &h.deps, slots: &opSlots,
		maxRequest: maxRequest, events: events, seg: rec.base, steps: rec.baseStep, startHash: rec.startHash,
		limits: limits, journaled: rec.base.journaled, blog: blog, started: meta.Started}
	if err := s.rebuildBudget(&rec.budget, p.doubt, p.doubtStep); err != nil {
		lease.release(ctx)
		h.live.leave(run)
		return nil, fmt.Errorf("host: resume %s: %w", run, err)
	}
	started := &Started{Run: run, h: h, m: m, s: s, w: w, meta: &meta, lease: lease, live: lr}
	if h.tr != nil {
		// The resumption's span joins the run's trace, under the span
		// its header names.
		started.span = h.tr.startRun(ctx, run, hdr, hdr.Trace)
		started.span.SetAttributes(AttrSeq.Int64(0), AttrEntryHash.String(hex.EncodeToString(rec.startHash)))
	}
	return started, nil
}

// resumePath serves a resumed run: the recorded calls from the journal,
// then the call left in doubt, then everything live.
type resumePath struct {
	rec    *Recording
	live   *livePath
	events *eventBuffer
	// past is set once the guest is past the recorded calls (a call in
	// doubt, asked again, being the first that is not); onPast, when set,
	// is called then.
	past   bool
	onPast func()
	// progress, when set, is told of the recorded calls answered so far
	// and their number (Started.OnReplay).
	progress  func(served, total int)
	doubt     bool
	doubtStep uint64
}

func (p *resumePath) serve(ctx context.Context, s *session, c *Call, h caps.Handler) (abi.Status, []byte, error) {
	if !p.past {
		status, resp, err := p.rec.Serve(ctx, c)
		if !errors.Is(err, ErrRecordingEnd) {
			if err == nil && p.progress != nil {
				p.progress(p.rec.Served(), p.rec.Len())
			}
			if err == nil && p.rec.Served() == p.rec.Len() {
				// The last recorded call: what the guest does next is
				// live, output included.
				p.goLive()
			}
			return status, resp, err // a recorded answer, or a divergence
		}
		p.goLive()
		if p.doubt && c.Step == p.doubtStep {
			// The guest asks again for the effect in doubt: Serve has
			// checked that it is the same op with the same request.
			return p.decide(ctx, s, c, h)
		}
	}
	return p.live.serve(ctx, s, c, h)
}

func (p *resumePath) goLive() {
	p.past, p.events.replaying = true, false
	if p.onPast != nil {
		p.onPast()
	}
}

// decide answers the effect left in doubt. Its intent (and executing) entries
// are in the journal already; only its outcome is added.
func (p *resumePath) decide(ctx context.Context, s *session, c *Call, h caps.Handler) (abi.Status, []byte, error) {
	p.live.conv = h.Conversation
	defer func() { p.live.conv = "" }()
	if p.rec.Parked(h.Wait != nil) {
		// Not in doubt: parked, with nothing dispatched (park.go).
		return p.resumeWait(ctx, s, c, h)
	}
	if !s.idempotent(c) || h.Serve == nil {
		s.settleInDoubt()
		status, body := errorResponse(abi.StatusInDoubt,
			"%s of step %d was in flight when the run stopped; it may have taken effect, and is not re-run", c.Op.Name, c.Step)
		return p.live.record(ctx, c, false, status, body)
	}
	status, resp := h.Serve(ctx, c)
	if ctx.Err() != nil {
		return 0, nil, fmt.Errorf("%w during step %d (%s), whose effect is in doubt", ErrInterrupted, c.Step, c.Op.Name)
	}
	s.settleBudget(c, status, resp)
	return p.live.record(ctx, c, false, status, resp)
}

// idempotent reports whether the effect of c may be dispatched again with
// the same idempotency key: the op is idempotent, or its capability says
// this call may be (an HTTP request to servers the grant says honour
// Idempotency-Key, a tool the grant declares idempotent).
func (s *session) idempotent(c *Call) bool {
	if c.Op.Idempotent {
		return true
	}
	inst := s.inst[s.ci]
	return inst != nil && inst.Idempotent(c)
}

// Trust accepts the seals of this host's cell and of the peer cells it
// trusts: the trust to read a run of this cell's journal store with.
func (h *Host) Trust() journal.TrustFunc { return h.trust() }

// trust accepts the seals of this host's cell and of the peer cells it
// trusts (Deps.TrustedCells): a run taken over carries entries of both.
func (h *Host) trust() journal.TrustFunc {
	return journal.TrustKeys(append([]ed25519.PublicKey{h.deps.Key.Public().(ed25519.PublicKey)}, h.deps.TrustedCells...)...)
}
