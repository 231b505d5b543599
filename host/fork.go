package host

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host/caps"
	"github.com/agentrt/agentrt/journal"
)

// ForkSpec describes a fork: a new run that answers its first calls with
// the responses another run recorded, up to a fork point in that run's
// journal, and then goes on live.
type ForkSpec struct {
	// Parent is the run forked.
	Parent journal.RunID
	// At is the fork point: the seq of an entry of the parent's journal
	// at a call boundary (journal/SPEC.md section 6.2).
	At uint64
	// Code is the fork's module; nil: the parent's. Another module must
	// make the parent's calls up to the fork point, and may make others
	// after it.
	Code []byte
	// Name is the module's name; "" with Code nil: the parent's.
	Name string
	// Provider and Model, when set, replace the provider and the model of
	// every llm.complete the fork makes live, after the fork point (the
	// calls before it are the parent's answers). They must be within the
	// parent's grant and this cell's providers: an override loosens
	// nothing. The fork's header records them (journal.Fork).
	Provider, Model string
}

// ErrOverride is returned by Fork for a provider or model override the
// run's grant or the cell's providers do not allow.
var ErrOverride = errors.New("host: llm override refused")

// ForkPointError is returned by Fork for a fork point that is not a call
// boundary of the parent's journal: past its last entry, or between the
// first and the last entry of a call. Before and After are the nearest
// boundaries around At (After is 0 when there is none: a call left in
// doubt, or a fork point past the end).
type ForkPointError struct {
	Run journal.RunID
	At  uint64
	// Last is the seq of the parent's last entry.
	Last uint64
	// Step and Op name the call At falls in; 0 and "" for a fork point
	// past the end.
	Step          uint64
	Op            string
	Before, After uint64
}

func (e *ForkPointError) Error() string {
	switch {
	case e.Step == 0:
		return fmt.Sprintf("host: fork point %d is past the end of run %s, whose last entry is %d", e.At, e.Run, e.Last)
	case e.After == 0:
		return fmt.Sprintf("host: fork point %d of run %s is inside step %d (%s), which has no outcome (it was left in doubt)", e.At, e.Run, e.Step, e.Op)
	}
	return fmt.Sprintf("host: fork point %d of run %s is inside step %d (%s), entries %d to %d", e.At, e.Run, e.Step, e.Op, e.Before+1, e.After)
}

// ErrForkIncomplete is returned by Resume for a fork that stopped before it
// had made the calls it answers from its parent's journal: going on live
// from there would run again effects its parent ran. Fork again instead.
var ErrForkIncomplete = errors.New("host: the fork stopped before its fork point")

// Fork verifies the journal of spec.Parent against this cell's key and
// starts a new run from it, ready to execute: the new run has the parent's
// input, seed, wall base and grant, its own id and journal, and the fork
// point in its header (journal.Fork). Its calls up to the fork point are
// answered with the parent's recorded responses, after checking that each
// is the parent's op with the parent's request at the same step, and are
// journaled in the new run as its own (an effect as an intent and its
// outcome: it is not dispatched again); every call after it is live. The
// served calls do not pass the gate again: they were decided, and their
// effects took place, in the parent; the live ones pass it as any call.
// The parent's journal must verify against this cell's key.
//
// A module other than the parent's is first re-executed against the
// parent's journal up to the fork point, writing nothing: a divergence
// there is returned as a *DivergenceError naming the step, and no run
// starts. A fork point past a checkpoint of the parent is refused: the
// calls before a checkpoint are not re-executed, so the fork could not
// journal them.
func (h *Host) Fork(ctx context.Context, spec ForkSpec) (*Started, error) {
	pt, err := h.forkPoint(ctx, spec.Parent, spec.At)
	if err != nil {
		return nil, err
	}
	hdr := pt.header
	grant, err := DecodeGrant(hdr.Grant)
	if err != nil {
		return nil, err
	}
	if err := h.checkOverride(grant, spec.Provider, spec.Model); err != nil {
		return nil, err
	}
	pt.point.Provider, pt.point.Model = spec.Provider, spec.Model
	code, name := spec.Code, spec.Name
	if code == nil {
		if code, err = h.deps.Store.Module(ctx, hdr.ModuleSHA256); err != nil {
			return nil, err
		}
		if name == "" {
			name = hdr.ModuleName
		}
	}
	if !bytes.Equal(journal.Sum(code), hdr.ModuleSHA256) {
		_, err := h.engine.Execute(ctx, ExecSpec{Run: spec.Parent, Header: hdr, Code: code, Source: pt.rec})
		if err == nil && pt.rec.Served() < pt.rec.Len() {
			step, op := pt.rec.Step(pt.rec.Served())
			err = &DivergenceError{Step: step, Op: op, Reason: fmt.Sprintf("the guest ended after %d of the %d calls before the fork point", pt.rec.Served(), pt.rec.Len())}
		}
		if err != nil && !errors.Is(err, ErrRecordingEnd) {
			// A divergence alone, without the engine's wrapping: it
			// names the step and the guest function.
			var div *DivergenceError
			if errors.As(err, &div) {
				err = div
			}
			return nil, fmt.Errorf("host: fork of %s at %d: %w", spec.Parent, spec.At, err)
		}
		pt.rec.next = 0
	}
	run := RunSpec{Code: code, Name: name, Input: hdr.Input, Grant: grant, Seed: hdr.Seed, WallBase: hdr.WallBase}
	return h.start(ctx, run, pt)
}

// checkOverride refuses an llm override outside grant g or the cell's
// providers.
func (h *Host) checkOverride(g *Grant, provider, model string) error {
	if provider == "" && model == "" {
		return nil
	}
	switch {
	case g.LLM == nil:
		return fmt.Errorf("%w: the run's grant has no llm capability, so it makes no llm.complete to override", ErrOverride)
	case provider != "" && !slices.Contains(g.LLM.Providers, provider):
		return fmt.Errorf("%w: provider %q is not in the run's grant (granted: %s)", ErrOverride, provider, strings.Join(g.LLM.Providers, ", "))
	case model != "" && !slices.Contains(g.LLM.Models, model):
		return fmt.Errorf("%w: model %q is not in the run's grant (granted: %s)", ErrOverride, model, strings.Join(g.LLM.Models, ", "))
	case h.deps.LLM == nil:
		return fmt.Errorf("%w: this cell has no model providers (llm.yaml)", ErrOverride)
	}
	if provider == "" {
		return nil
	}
	p := h.deps.LLM.Config().Providers[provider]
	if p == nil {
		return fmt.Errorf("%w: provider %q is not configured in this cell's llm.yaml (it has: %s)", ErrOverride, provider, strings.Join(h.deps.LLM.Config().ProviderNames(), ", "))
	}
	if _, ok := p.Models[model]; model != "" && !ok {
		return fmt.Errorf("%w: provider %s of this cell does not offer model %q (it prices: %s)", ErrOverride, provider, model, strings.Join(p.ModelNames(), ", "))
	}
	return nil
}

// forked is what a fork starts from: the parent's header, its calls up to
// the fork point, and the fork's header field.
type forked struct {
	header *journal.Header
	rec    *Recording
	point  *journal.Fork
}

// forkPoint verifies the journal of parent and collects its calls up to
// the fork point at, checking that at is a call boundary.
func (h *Host) forkPoint(ctx context.Context, parent journal.RunID, at uint64) (*forked, error) {
	st := h.deps.Store
	blobs, _ := st.(journal.Blobs)
	pt := &forked{rec: &Recording{}, point: &journal.Fork{Parent: parent, Seq: at}}
	// open is the call whose intent was read and outcome not yet; bad,
	// when set, is the call at falls inside.
	var open, bad *ForkPointError
	var last, checkpoint uint64
	v := journal.NewVerifier(journal.TrustKeys(h.deps.Key.Public().(ed25519.PublicKey)))
	v.OnEntry = func(e *journal.Entry, r *journal.Record) error {
		last = e.Seq
		if e.Seq == 0 {
			pt.header = e.Header
		}
		if e.Seq == at {
			pt.point.Entry = journal.Sum(r.Entry)
		}
		switch e.Phase {
		case journal.PhaseIntent:
			open = &ForkPointError{Run: parent, At: at, Step: e.Step, Op: e.Op, Before: e.Seq - 1}
		case journal.PhaseCompleted, journal.PhaseFailed:
			c := open
			if c == nil || c.Step != e.Step {
				c = &ForkPointError{Run: parent, At: at, Step: e.Step, Op: e.Op, Before: e.Seq - 1}
			}
			open, c.After = nil, e.Seq
			if c.Before < at && at < c.After {
				bad = c
			}
			if e.Seq <= at {
				pt.point.Step = e.Step
				if e.Op == "run.checkpoint" && checkpoint == 0 {
					checkpoint = e.Seq
				}
			}
		case journal.PhaseEnd:
			return nil // a fork's calls after the parent's last are live
		}
		if e.Seq > at {
			return nil
		}
		ge, err := journal.ForGuest(ctx, blobs, e)
		if err != nil {
			return err
		}
		pt.rec.Add(ge)
		return nil
	}
	if _, err := journal.VerifyStoreWith(ctx, st, parent, v); err != nil {
		return nil, fmt.Errorf("host: fork of %s: %w", parent, h.deps.verifyFailed(err))
	}
	if open != nil && open.Before < at {
		bad = open
	}
	switch {
	case at > last:
		return nil, &ForkPointError{Run: parent, At: at, Last: last, Before: last}
	case bad != nil:
		bad.Last = last
		return nil, bad
	case checkpoint > 0:
		return nil, fmt.Errorf("host: fork point %d of run %s is past its checkpoint at entry %d; fork at or before entry %d",
			at, parent, checkpoint, checkpoint-1)
	}
	return pt, nil
}

// forkPath serves a fork: the parent's recorded calls up to the fork
// point, journaled as the fork's own, then everything live.
type forkPath struct {
	rec  *Recording
	live *livePath
	past bool
}

func (p *forkPath) serve(ctx context.Context, s *session, c *Call, h caps.Handler) (abi.Status, []byte, error) {
	if !p.past {
		status, resp, err := p.rec.Serve(ctx, c)
		switch {
		case err == nil:
			p.past = p.rec.Served() == p.rec.Len()
			return p.live.served(ctx, c, h, status, resp)
		case !errors.Is(err, ErrRecordingEnd):
			return 0, nil, err // a divergence before the fork point
		}
		p.past = true
	}
	return p.live.serve(ctx, s, c, h)
}

// served journals a call answered from another run's journal (a fork's
// calls up to its fork point) as serve journals a live one, except that
// an effect, which is not dispatched, is an intent and its outcome with no
// executing entry between them. A conversation's payloads are stored by
// hash, as serve stores them.
func (p *livePath) served(ctx context.Context, c *Call, h caps.Handler, status abi.Status, resp []byte) (abi.Status, []byte, error) {
	p.conv = h.Conversation
	defer func() { p.conv = "" }()
	if c.Op.Class != abi.Effect {
		return p.record(ctx, c, true, status, resp)
	}
	intent := p.entry(journal.PhaseIntent, c)
	intent.Request = p.stored(c.Request, true)
	if err := p.w.Add(intent); err != nil {
		return 0, nil, err
	}
	return p.record(ctx, c, false, status, resp)
}

// forkUnfinished reports, for a resume of a fork, whether its journal
// holds fewer calls than it answers from its parent's: rec is its last
// segment.
func forkUnfinished(hdr *journal.Header, rec *Recording) error {
	if hdr.Fork == nil {
		return nil
	}
	step := rec.baseStep
	if n := rec.Len(); n > 0 {
		step, _ = rec.Step(n - 1)
	}
	if step >= hdr.Fork.Step {
		return nil
	}
	return fmt.Errorf("%w: it journaled %d of the %d calls it answers from run %s; fork %s again at %d",
		ErrForkIncomplete, step, hdr.Fork.Step, hdr.Fork.Parent, hdr.Fork.Parent, hdr.Fork.Seq)
}
