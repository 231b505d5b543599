package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host/caps"
	"github.com/agentrt/agentrt/journal"
)

// Parking. A call that waits for something outside the run (a wake time:
// timer.sleep; a quorum of approvers: approval.request, or any call the
// permission modes answer with ask when the cell keeps an approvals book;
// the end of a child run: agent.await) parks its run:
//
//  1. its intent is journaled and committed durably, with, for an
//     approval, the request its votes will be bound to (Entry.Approval);
//  2. the guest is stopped there (errParked), its instance closed, and the
//     run's index record says it is parked and what it waits for
//     (RunMeta.Wait): the run holds no memory, its state is its journal;
//  3. the cell resumes it when the awaited thing happens (its timer, a
//     vote that decides, an expiry), through Reopen, the path of every
//     resume: the recorded calls are answered from the journal, and the
//     parked call, the last one, whose intent has no outcome, is asked
//     again (resumePath.decide). If it is still waiting, the run parks
//     again and nothing is written; otherwise its outcome is journaled
//     and the run goes on live.
//
// Nothing is dispatched while a call waits, and an approved effect is
// dispatched once, after its approval is journaled on its executing entry:
// a crash anywhere leaves either a parked call (asked again) or an effect
// in doubt (decided as any other).

// errParked stops the guest at a call that parked its run.
var errParked = errors.New("host: the run parked")

// Approvals is the cell's book of the approvals its runs wait for (the
// gate's approval stage for signed quorum approvals; host/cell keeps it on
// the cell's records). The host journals what it returns; the book keeps
// the votes and decides.
type Approvals interface {
	// Open registers the approval call c of run asks for, at its intent,
	// and returns the approval record to journal on the intent (the
	// request the votes are bound to) and what the run waits for (group,
	// digest, expiry).
	Open(ctx context.Context, a ApprovalAsk) (record []byte, w journal.Wait, err error)
	// Decision returns the decision on the approval whose intent record is
	// rec, at now: Done false while it is pending.
	Decision(ctx context.Context, rec []byte, now time.Time) (ApprovalDecision, error)
	// Wait returns what the approval whose intent record is rec waits for.
	Wait(rec []byte) (journal.Wait, error)
}

// ApprovalAsk is an approval a call asks for, as the host knows it.
type ApprovalAsk struct {
	Run  journal.RunID
	Step uint64
	// Op and Request are the call's: the action digest covers them.
	Op      string
	Request []byte
	// Group is the approvers' group asked: approval.request's, or the
	// permission mode rule's (empty: the cell's default).
	Group string
	// Action is the text an approver reads: approval.request's action,
	// or a description of the call a mode asked about.
	Action string
	// Rule is the permission mode rule that asked; empty for
	// approval.request. Quorum, TwoPerson and Expires are its tightening
	// of the group's rule (zero: none): the book applies the stricter.
	Rule      string
	Quorum    int
	TwoPerson bool
	Expires   time.Duration
	// Token is the run's capability token (its header's): who asked, for
	// the two-person rule.
	Token []byte
	// Asked is the intent's time.
	Asked time.Time
}

// ApprovalDecision is the book's answer on an approval.
type ApprovalDecision struct {
	// Done says the approval is decided: approved, or denied (a veto, an
	// expiry).
	Done, Approved bool
	// Approvers are the names of those whose votes approved it; Reason
	// says why it was denied.
	Approvers []string
	Reason    string
	// Digest is the action digest the votes are bound to.
	Digest []byte
	// Record is the approval record to journal on the entry that ends the
	// wait: the request, every vote that counted with its signature, and
	// the decision.
	Record []byte
}

// askState is the gate's ask on the current call: the mode rule, its
// approvers' group, and what the approvers read.
type askState struct {
	rule, group, action string
	// quorum, twoPerson and expires are the rule's tightening of its
	// group's rule.
	quorum    int
	twoPerson bool
	expires   time.Duration
}

// parking is what the current call of a session parks for.
type parking struct {
	wait journal.Wait
}

// waiting reports whether call c waits: its op is a wait, or the gate's
// permission modes asked about it and the cell keeps an approvals book.
func (s *session) waiting(h caps.Handler) bool { return h.Wait != nil || s.asking != nil }

// wait journals the intent of c, a waiting call, and either answers it at
// once (a wake time already past) or parks the run.
func (p *livePath) wait(ctx context.Context, s *session, c *Call, h caps.Handler) (abi.Status, []byte, error) {
	intent := p.entry(journal.PhaseIntent, c)
	intent.Request, intent.Gate, p.gate = p.stored(c.Request, true), p.gate, nil
	since := time.Unix(0, intent.Time)
	var w journal.Wait
	switch {
	case h.Wait != nil && c.Op.Cap == abi.CapTimer:
		cw := h.Wait(c, since)
		if !cw.Until.After(since) {
			// Due already: answered at once, with nothing to wait for.
			if err := p.w.Add(intent); err != nil {
				return 0, nil, err
			}
			status, resp := caps.OK(&abi.TimerSleepResponse{Due: cw.Until.UnixNano(), Woke: since.UnixNano()})
			s.settleBudget(c, status, resp)
			return p.record(ctx, c, false, status, resp)
		}
		w = journal.Wait{Kind: journal.WaitTimer, Until: cw.Until.UnixNano()}
	case h.Wait != nil && c.Op.Cap == abi.CapAgent:
		cw := h.Wait(c, since)
		if done, status, resp := cw.Answer(ctx); done {
			// The child has ended (or the call is refused): answered at
			// once.
			if err := p.w.Add(intent); err != nil {
				return 0, nil, err
			}
			s.settleBudget(c, status, resp)
			return p.record(ctx, c, false, status, resp)
		}
		w = journal.Wait{Kind: journal.WaitRun, Run: cw.Run}
	default:
		if s.deps.Approvals == nil {
			s.asking = nil
			d := caps.Deny(abi.StatusDenied, "%s asks for approval, and this cell keeps no approvals (run it in a cell with DATA/approvers, or under agentrt cell serve)", c.Op.Name)
			s.releaseBudget()
			return p.record(ctx, c, true, d.Status, d.Body)
		}
		a := ApprovalAsk{Run: s.run, Step: c.Step, Op: c.Op.Name, Request: c.Request, Token: s.header.Token, Asked: since}
		if h.Wait != nil {
			cw := h.Wait(c, since)
			a.Group, a.Action = cw.Group, cw.Action
		} else {
			as := s.asking
			a.Group, a.Action, a.Rule = as.group, as.action, as.rule
			a.Quorum, a.TwoPerson, a.Expires = as.quorum, as.twoPerson, as.expires
		}
		s.asking = nil
		rec, aw, err := s.deps.Approvals.Open(ctx, a)
		if err != nil {
			// The book cannot take the request (an unknown group, a
			// group whose file is broken): the call is denied, and says
			// why.
			d := caps.Deny(abi.StatusDenied, "%s: approval: %v", c.Op.Name, err)
			s.releaseBudget()
			return p.record(ctx, c, true, d.Status, d.Body)
		}
		intent.Approval, w = rec, aw
	}
	if err := p.w.Add(intent); err != nil {
		return 0, nil, err
	}
	if err := p.commit(ctx, true); err != nil {
		return 0, nil, err
	}
	w.Step, w.Op, w.Since = c.Step, c.Op.Name, since.UnixNano()
	s.park = &parking{wait: w}
	return 0, nil, errParked
}

// resumeWait answers, on resume, the parked call c: the journal's last call,
// whose intent has no outcome. Still waiting, the run parks again, writing
// nothing.
func (p *resumePath) resumeWait(ctx context.Context, s *session, c *Call, h caps.Handler) (abi.Status, []byte, error) {
	since, rec := p.rec.waitingIntent()
	now := s.deps.Now()
	w := journal.Wait{Step: c.Step, Op: c.Op.Name, Since: since.UnixNano()}
	if h.Wait != nil && c.Op.Cap == abi.CapTimer {
		cw := h.Wait(c, since)
		if now.Before(cw.Until) {
			w.Kind, w.Until = journal.WaitTimer, cw.Until.UnixNano()
			s.park = &parking{wait: w}
			return 0, nil, errParked
		}
		status, resp := caps.OK(&abi.TimerSleepResponse{Due: cw.Until.UnixNano(), Woke: now.UnixNano()})
		s.settleBudget(c, status, resp)
		return p.live.record(ctx, c, false, status, resp)
	}
	if h.Wait != nil && c.Op.Cap == abi.CapAgent {
		cw := h.Wait(c, since)
		done, status, resp := cw.Answer(ctx)
		if !done {
			w.Kind, w.Run = journal.WaitRun, cw.Run
			s.park = &parking{wait: w}
			return 0, nil, errParked
		}
		s.settleBudget(c, status, resp)
		return p.live.record(ctx, c, false, status, resp)
	}
	if s.deps.Approvals == nil {
		return 0, nil, fmt.Errorf("host: step %d (%s) waits for an approval, and this cell keeps no approvals book", c.Step, c.Op.Name)
	}
	d, err := s.deps.Approvals.Decision(ctx, rec, now)
	if err != nil {
		return 0, nil, fmt.Errorf("host: approval of step %d (%s): %w", c.Step, c.Op.Name, err)
	}
	if !d.Done {
		aw, err := s.deps.Approvals.Wait(rec)
		if err != nil {
			return 0, nil, err
		}
		aw.Step, aw.Op, aw.Since = w.Step, w.Op, w.Since
		s.park = &parking{wait: aw}
		return 0, nil, errParked
	}
	if h.Wait != nil {
		// approval.request: the decision is its answer.
		status, resp := caps.OK(&abi.ApprovalResponse{Approved: d.Approved, Digest: d.Digest, Approvers: d.Approvers, Reason: d.Reason})
		p.live.approval = d.Record
		s.settleBudget(c, status, resp)
		return p.live.record(ctx, c, false, status, resp)
	}
	// A call the modes asked about.
	if !d.Approved {
		s.releaseBudget()
		p.live.approval = d.Record
		st, body := errorResponse(abi.StatusDenied, "%s was not approved: %s", c.Op.Name, d.Reason)
		return p.live.record(ctx, c, false, st, body)
	}
	// Approved: it runs from where its intent left it.
	return p.live.dispatch(ctx, s, c, h, false, d.Record)
}
