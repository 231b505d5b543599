package replay

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/approval"
	"github.com/agentrt/agentrt/journal"
)

// ErrApproval is the failure class of an approval record whose meaning
// does not hold (BUNDLE.md step 2b): a request not bound to its call's
// action digest, a vote whose signature does not verify or whose key the
// auditor does not trust, a decision its votes do not give, an effect
// dispatched without an approval that approved it. The journal's hashes
// and seals may hold, yet its approvals do not.
var ErrApproval = errors.New("approval")

// ApprovalReport is what the audit established of a run's approvals.
type ApprovalReport struct {
	// Requests counts the approval requests journaled; Decided those with
	// a decision, and Votes the counted votes checked.
	Requests int `json:"requests"`
	Decided  int `json:"decided"`
	Votes    int `json:"votes"`
	// ApproversTrusted says the votes were checked against the auditor's
	// approver keys (--trust-approvers); otherwise against the keys each
	// request names, which only the cell vouches for.
	ApproversTrusted bool `json:"approvers_trusted"`
}

// approvalAudit checks the approval records of a journal's entries as
// they pass (BUNDLE.md step 2b). Its first failure is reported once the
// journal has verified, as the ledger's is: a changed record is a chain
// failure first.
type approvalAudit struct {
	run   journal.RunID
	trust []approval.Member
	// open are the requests journaled on intents, by step, until the entry
	// that ends their wait.
	open map[uint64]*approval.Record
	rep  ApprovalReport
	err  *AuditError
}

func newApprovalAudit(trust []approval.Member) *approvalAudit {
	return &approvalAudit{trust: trust, open: map[uint64]*approval.Record{}, rep: ApprovalReport{ApproversTrusted: trust != nil}}
}

func (a *approvalAudit) fail(e *journal.Entry, format string, args ...any) {
	if a.err == nil {
		a.err = &AuditError{Class: ErrApproval, Seq: e.Seq, HasSeq: true, Step: e.Step, Op: e.Op, Err: fmt.Errorf(format, args...)}
	}
}

// add checks entry e.
func (a *approvalAudit) add(e *journal.Entry) {
	if a.err != nil {
		return
	}
	if e.Phase == journal.PhaseStart {
		a.run = e.Run
	}
	if len(e.Approval) == 0 {
		if r := a.open[e.Step]; r != nil && e.Step != 0 && e.Phase != journal.PhaseLease {
			// The wait of step e.Step ended without its decision: only a
			// refusal before dispatch (nothing executes, nothing completes
			// OK) may do that.
			if e.Phase == journal.PhaseExecuting || (e.Phase == journal.PhaseCompleted) {
				a.fail(e, "step %d went on past its approval request without a decision", e.Step)
			}
			delete(a.open, e.Step)
		}
		return
	}
	rec, err := approval.DecodeRecord(e.Approval)
	if err != nil {
		a.fail(e, "%v", err)
		return
	}
	switch e.Phase {
	case journal.PhaseIntent:
		if rec.Decision != nil || len(rec.Votes) > 0 {
			a.fail(e, "the request of step %d is journaled with votes or a decision on its intent", e.Step)
			return
		}
		want := approval.ActionDigest(e.Op, e.Request, e.Run, e.Step)
		req := &rec.Request
		switch {
		case req.Run != e.Run || req.Step != e.Step || req.Op != e.Op:
			a.fail(e, "the approval request names run %s step %d op %s, not its call's", journal.RunID(req.Run), req.Step, req.Op)
			return
		case !bytes.Equal(req.Digest, want[:]):
			a.fail(e, "the approval request's action digest %x is not SHA-256 of its call (%x)", req.Digest, want)
			return
		}
		if err := req.Check(); err != nil {
			a.fail(e, "%v", err)
			return
		}
		a.open[e.Step] = rec
		a.rep.Requests++
	default:
		asked := a.open[e.Step]
		delete(a.open, e.Step)
		if asked == nil {
			a.fail(e, "a decision on step %d, which asked for no approval", e.Step)
			return
		}
		first, _ := approval.EncodeRecord(&approval.Record{Request: asked.Request})
		again, _ := approval.EncodeRecord(&approval.Record{Request: rec.Request})
		if !bytes.Equal(first, again) {
			a.fail(e, "the decision of step %d is on another request than its intent's", e.Step)
			return
		}
		if rec.Decision == nil {
			a.fail(e, "the wait of step %d ended without a decision", e.Step)
			return
		}
		trust := a.trust
		if trust == nil {
			trust = rec.Request.Members
		}
		if err := rec.Verify(trust); err != nil {
			a.fail(e, "%v", err)
			return
		}
		// What went on agrees with the decision: an effect is dispatched
		// only when approved, and approval.request answers as decided.
		switch {
		case e.Phase == journal.PhaseExecuting && !rec.Decision.Approved:
			a.fail(e, "step %d was dispatched, and its approval denied it (%s)", e.Step, rec.Decision.Reason)
			return
		case e.Op == "approval.request" && e.Phase == journal.PhaseCompleted:
			var resp abi.ApprovalResponse
			if err := abi.Unmarshal(e.Response, &resp); err != nil || resp.Approved != rec.Decision.Approved {
				a.fail(e, "approval.request of step %d answered approved=%v, and its votes decided %v", e.Step, resp.Approved, rec.Decision.Approved)
				return
			}
		case e.Op != "approval.request" && e.Phase == journal.PhaseCompleted && !rec.Decision.Approved:
			a.fail(e, "step %d completed, and its approval denied it (%s)", e.Step, rec.Decision.Reason)
			return
		}
		a.rep.Decided++
		t := approval.Evaluate(&rec.Request, rec.Votes, rec.Decision.At)
		for _, v := range t.Votes {
			if v.Verdict == approval.Counted {
				a.rep.Votes++
			}
		}
	}
}
