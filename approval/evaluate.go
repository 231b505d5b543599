package approval

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"strings"
	"time"
)

// State is where a request stands.
type State string

// The states of a request.
const (
	// Pending: neither the quorum nor a deny nor the expiry has come.
	Pending State = "pending"
	// Approved: Quorum distinct members approved.
	Approved State = "approved"
	// Denied: a counted deny (a veto), or the expiry with the quorum not
	// reached.
	Denied State = "denied"
)

// Verdict is what Evaluate made of one vote.
type Verdict string

// The verdicts, in the order Evaluate checks for them. Every verdict but
// Counted leaves the tally as it was.
const (
	// Counted: the vote counts (towards the quorum, or as a veto).
	Counted Verdict = "counted"
	// Decided: the request was decided before this vote.
	Decided Verdict = "decided"
	// BadSignature: the signature is malformed, for another namespace, by
	// a key that is not ed25519, or does not verify.
	BadSignature Verdict = "bad-signature"
	// UnknownKey: the signature verifies, by a key that is not among the
	// request's members.
	UnknownKey Verdict = "unknown-key"
	// BadStatement: the signed text is not a statement (ParseStatement).
	BadStatement Verdict = "bad-statement"
	// WrongDigest: the statement is for another run, step, op, group or
	// action digest than the request's.
	WrongDigest Verdict = "wrong-digest"
	// Late: the vote arrived at or after the request's expiry.
	Late Verdict = "late"
	// Duplicate: the same member already has a counted vote.
	Duplicate Verdict = "duplicate"
	// SelfApproval: under the two-person rule, an approval by a member
	// who is one of the requesters (by key or by name).
	SelfApproval Verdict = "self-approval"
	// OutOfOrder: under an ordered rule, an approval while a member listed
	// before it (and allowed to approve) has not approved.
	OutOfOrder Verdict = "out-of-order"
)

// VoteResult is the verdict on one vote.
type VoteResult struct {
	// Approver is the member's name, or "" when the signature names no
	// member.
	Approver string
	// Key is the key that signed, when the signature verified.
	Key     ed25519.PublicKey
	Approve bool
	Verdict Verdict
	// Reason says why, for a person.
	Reason string
}

// Tally is a request's state after its votes.
type Tally struct {
	State  State
	Reason string
	// At is when the state was reached (the deciding vote's At, or the
	// expiry); 0 while pending.
	At int64
	// Approvers and Deniers are the members whose approvals and denials
	// were counted, in vote order.
	Approvers, Deniers []string
	// Votes are the verdicts, one per vote, in order.
	Votes []VoteResult
}

// Evaluate gives the tally of req's votes at time now (Unix ns). It is
// pure and deterministic: the cell calls it on every new vote, the auditor
// on the journaled record, and both get the same verdicts. It walks the
// votes in order and gives each its verdict, checking in this order:
// decided, bad-signature, unknown-key, bad-statement, wrong-digest, late,
// duplicate, self-approval, out-of-order; a vote that passes is counted.
// The request is approved once Quorum distinct members' approvals are
// counted, denied at the first counted deny, and denied when now reaches
// Expires with neither; else it is pending. A request that fails Check is
// denied, and each of its votes is given the verdict decided.
func Evaluate(req *Request, votes []Vote, now int64) Tally {
	t := Tally{State: Pending, Votes: make([]VoteResult, 0, len(votes))}
	if err := req.Check(); err != nil {
		t.State, t.Reason, t.At = Denied, err.Error(), req.Asked
		for range votes {
			t.Votes = append(t.Votes, VoteResult{Verdict: Decided, Reason: "the request is invalid: " + err.Error()})
		}
		return t
	}
	// order is the members who may approve, in file order: under an
	// ordered rule each approval must come from the next of them.
	var order []int
	for i, m := range req.Members {
		if !req.Rule.TwoPerson || !req.isRequester(m) {
			order = append(order, i)
		}
	}
	counted := map[int]bool{}
	for _, v := range votes {
		res := judge(req, v, &t, counted, order)
		if res.Verdict == Counted {
			i := index(req.Members, res.Key)
			counted[i] = true
			if res.Approve {
				t.Approvers = append(t.Approvers, res.Approver)
				if len(t.Approvers) >= req.Rule.Quorum {
					t.State, t.At = Approved, v.At
					t.Reason = fmt.Sprintf("approved by %s (%d of %d)", strings.Join(t.Approvers, ", "), len(t.Approvers), len(req.Members))
				}
			} else {
				t.Deniers = append(t.Deniers, res.Approver)
				t.State, t.At = Denied, v.At
				t.Reason = "denied by " + res.Approver
			}
		}
		t.Votes = append(t.Votes, res)
	}
	if t.State == Pending && req.Expires != 0 && now >= req.Expires {
		t.State, t.At = Denied, req.Expires
		t.Reason = fmt.Sprintf("expired at %s with %d of %d approvals", formatTime(req.Expires), len(t.Approvers), req.Rule.Quorum)
	}
	return t
}

// judge gives one vote its verdict, given the tally so far.
func judge(req *Request, v Vote, t *Tally, counted map[int]bool, order []int) VoteResult {
	if t.State != Pending {
		return VoteResult{Verdict: Decided, Reason: fmt.Sprintf("the request was already %s (%s)", t.State, t.Reason)}
	}
	pub, err := Verify(v.Statement, v.Signature)
	if err != nil {
		reason := err.Error()
		if i := index(req.Members, claimedKey(v.Signature)); i >= 0 {
			reason += " (it claims the key of " + req.Members[i].Name + ")"
		}
		return VoteResult{Verdict: BadSignature, Reason: reason}
	}
	key := edKey(pub)
	i := index(req.Members, key)
	if i < 0 {
		return VoteResult{Key: key, Verdict: UnknownKey, Reason: fmt.Sprintf("signed by %s, which is not a member of group %s", Fingerprint(key), req.Group)}
	}
	m := req.Members[i]
	res := VoteResult{Approver: m.Name, Key: key}
	s, err := ParseStatement(v.Statement)
	if err != nil {
		res.Verdict, res.Reason = BadStatement, err.Error()
		return res
	}
	res.Approve = s.Approve
	if what := mismatch(req, s); what != "" {
		res.Verdict, res.Reason = WrongDigest, "the statement is for another "+what+" than this request"
		return res
	}
	switch {
	case req.Expires != 0 && v.At >= req.Expires:
		res.Verdict, res.Reason = Late, fmt.Sprintf("received at %s, once the request had expired (at %s)", formatTime(v.At), formatTime(req.Expires))
	case counted[i]:
		res.Verdict, res.Reason = Duplicate, m.Name+" has voted already; the first vote stands"
	case s.Approve && req.Rule.TwoPerson && req.isRequester(m):
		res.Verdict, res.Reason = SelfApproval, m.Name+" asked for this approval, and under the two-person rule may not approve it"
	case s.Approve && req.Rule.Ordered && order[len(t.Approvers)] != i:
		res.Verdict, res.Reason = OutOfOrder, fmt.Sprintf("approvals come in the group's order, and %s must approve before %s", req.Members[order[len(t.Approvers)]].Name, m.Name)
	default:
		res.Verdict = Counted
		if s.Approve {
			res.Reason = m.Name + " approves"
		} else {
			res.Reason = m.Name + " denies"
		}
	}
	return res
}

// mismatch names the first field of s that differs from req's, or "".
func mismatch(req *Request, s *Statement) string {
	switch {
	case s.Run != req.Run:
		return "run"
	case s.Step != req.Step:
		return "step"
	case s.Op != req.Op:
		return "op"
	case s.Group != req.Group:
		return "group"
	case !bytes.Equal(s.Digest[:], req.Digest):
		return "action digest"
	}
	return ""
}

func formatTime(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

// Verify checks the record's meaning for an auditor who trusts the
// approver keys in trust (ParseTrust): the request passes Check; the
// votes' times do not go back and none precedes the request; every
// counted vote is signed by a key among trust (and, as Evaluate requires,
// among the request's members); and the decision is the one Evaluate
// gives at the decision's time, reached no later than then, or, when the
// record has none, the votes decide nothing. Its errors name the vote
// (index and approver) and what failed. The journal's hash chain covers
// the record's bytes; Verify checks what they say.
func (r *Record) Verify(trust []Member) error {
	req := &r.Request
	if err := req.Check(); err != nil {
		return err
	}
	last := req.Asked
	for i, v := range r.Votes {
		if v.At < last {
			prev := "the vote before it"
			if i == 0 {
				prev = "the request"
			}
			return fmt.Errorf("approval record: vote %d was received at %s, before %s", i, formatTime(v.At), prev)
		}
		last = v.At
	}
	now := req.Asked
	if r.Decision != nil {
		now = r.Decision.At
	}
	t := Evaluate(req, r.Votes, now)
	for i, res := range t.Votes {
		if res.Verdict == Counted && index(trust, res.Key) < 0 {
			return fmt.Errorf("approval record: vote %d (%s): signed by %s, which is not among the trusted approvers", i, res.Approver, Fingerprint(res.Key))
		}
	}
	switch d := r.Decision; {
	case d == nil && t.State != Pending:
		return fmt.Errorf("approval record: no decision, but its votes decide it (%s: %s)", t.State, t.Reason)
	case d == nil:
		return nil
	case t.State == Pending:
		return fmt.Errorf("approval record: decided %s (%s) at %s, but the votes leave it pending%s", verb(d.Approved), d.Reason, formatTime(d.At), refusals(t))
	case d.Approved != (t.State == Approved) || d.Reason != t.Reason:
		return fmt.Errorf("approval record: decided %s (%s), but the votes give %s (%s)%s", verb(d.Approved), d.Reason, t.State, t.Reason, refusals(t))
	case d.At < t.At:
		return fmt.Errorf("approval record: decided at %s, before the votes decided it (%s)", formatTime(d.At), formatTime(t.At))
	}
	return nil
}

func verb(approved bool) string {
	if approved {
		return "approved"
	}
	return "denied"
}

// refusals lists the votes Evaluate did not count, for an error.
func refusals(t Tally) string {
	var b strings.Builder
	for i, res := range t.Votes {
		if res.Verdict != Counted && res.Verdict != Decided {
			who := res.Approver
			if who == "" {
				who = "no member"
			}
			fmt.Fprintf(&b, "; vote %d (%s) is %s: %s", i, who, res.Verdict, res.Reason)
		}
	}
	return b.String()
}

// Summary describes the record in one line: the group and its rule, the
// call, and the state with who approved or denied.
func (r *Record) Summary() string {
	req := &r.Request
	now := req.Asked
	if r.Decision != nil {
		now = r.Decision.At
	}
	t := Evaluate(req, r.Votes, now)
	s := fmt.Sprintf("group %s (%s) for %s at step %d of run %x: ", req.Group, req.Rule.describe(len(req.Members)), req.Op, req.Step, req.Run[:])
	if r.Decision != nil {
		return s + fmt.Sprintf("%s at %s: %s", verb(r.Decision.Approved), formatTime(r.Decision.At), r.Decision.Reason)
	}
	s += fmt.Sprintf("pending, %d of %d approvals", len(t.Approvers), req.Rule.Quorum)
	if len(t.Approvers) > 0 {
		s += " (" + strings.Join(t.Approvers, ", ") + ")"
	}
	if req.Expires != 0 {
		s += ", expires at " + formatTime(req.Expires)
	}
	return s
}
