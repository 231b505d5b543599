package cell

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/agentrt/agentrt/approval"
	"github.com/agentrt/agentrt/journal"
)

// SignedApproval is an approval a parked run waits for in a cell with
// approvers, as GET /v1/approvals and GET /v1/runs/{run}/approvals/{step}
// show it: the request, the votes counted so far, and the statements an
// approver signs (`ssh-keygen -Y sign -n agentrt-approval`, or agentrt
// approve --key).
type SignedApproval struct {
	RunID  string `json:"run_id"`
	Step   uint64 `json:"step"`
	Op     string `json:"op"`
	Group  string `json:"group"`
	Digest string `json:"digest"`
	// Action is what the approvers are asked to approve; Rule the
	// permission mode rule that asked (empty for approval.request).
	Action  string     `json:"action,omitempty"`
	Rule    string     `json:"rule,omitempty"`
	Asked   time.Time  `json:"asked"`
	Expires *time.Time `json:"expires,omitempty"`
	// Quorum, TwoPerson and Ordered are the rule as it applies; Members
	// the group's approvers, in order.
	Quorum    int      `json:"quorum"`
	TwoPerson bool     `json:"two_person,omitempty"`
	Ordered   bool     `json:"ordered,omitempty"`
	Members   []string `json:"members"`
	// State is "pending", "approved" or "denied"; Reason says why.
	State     string   `json:"state"`
	Reason    string   `json:"reason,omitempty"`
	Approvers []string `json:"approvers,omitempty"`
	Deniers   []string `json:"deniers,omitempty"`
	Votes     []Vote   `json:"votes,omitempty"`
	// Statement and DenyStatement are the texts to sign to approve and to
	// deny.
	Statement     string `json:"statement"`
	DenyStatement string `json:"deny_statement"`
}

// Vote is one counted vote.
type Vote struct {
	Approver string    `json:"approver"`
	Approve  bool      `json:"approve"`
	At       time.Time `json:"at"`
	Key      string    `json:"key"`
}

// VoteSubmission is the body of POST /v1/runs/{run}/votes: a statement and
// its armored SSH signature, as ssh-keygen writes them.
type VoteSubmission struct {
	Step      uint64 `json:"step"`
	Statement string `json:"statement"`
	Signature string `json:"signature"`
}

// VoteAnswer answers a vote that counted: the approval as it stands.
type VoteAnswer struct {
	Verdict  string         `json:"verdict"`
	Approval SignedApproval `json:"approval"`
}

// MaxVote bounds a vote submission's body.
const MaxVote = 64 << 10

// SignedApprovalOf is p as the API shows it.
func SignedApprovalOf(p *Pending) SignedApproval {
	r := &p.Record.Request
	a := SignedApproval{RunID: p.Run.String(), Step: p.Step, Op: r.Op, Group: r.Group, Digest: hex.EncodeToString(r.Digest),
		Action: p.Action, Rule: p.Rule, Asked: time.Unix(0, r.Asked).UTC(), Quorum: r.Rule.Quorum, TwoPerson: r.Rule.TwoPerson,
		Ordered: r.Rule.Ordered, State: string(p.Tally.State), Reason: p.Tally.Reason, Approvers: p.Tally.Approvers, Deniers: p.Tally.Deniers}
	if r.Expires != 0 {
		t := time.Unix(0, r.Expires).UTC()
		a.Expires = &t
	}
	for _, m := range r.Members {
		a.Members = append(a.Members, m.Name)
	}
	for i, v := range p.Tally.Votes {
		if v.Verdict == approval.Counted {
			a.Votes = append(a.Votes, Vote{Approver: v.Approver, Approve: v.Approve, At: time.Unix(0, p.Record.Votes[i].At).UTC(), Key: approval.Fingerprint(v.Key)})
		}
	}
	yes, no := p.Statement(true), p.Statement(false)
	a.Statement, a.DenyStatement = string(yes.Marshal()), string(no.Marshal())
	return a
}

func (s *Server) listSigned(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("follow") != "" {
		s.followApprovals(w, r)
		return
	}
	runs, err := s.cell.Journal.Runs(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err, "")
		return
	}
	ps, err := s.cell.Book.List(runs)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err, "")
		return
	}
	out := []SignedApproval{}
	for _, p := range ps {
		out = append(out, SignedApprovalOf(p))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getApproval(w http.ResponseWriter, r *http.Request) {
	run, ok := s.findRun(w, r)
	if !ok {
		return
	}
	step, err := strconv.ParseUint(r.PathValue("step"), 10, 64)
	if err != nil || step == 0 {
		writeError(w, http.StatusBadRequest, fmt.Errorf("step %q is not a step number", r.PathValue("step")), "steps count from 1")
		return
	}
	if s.cell.Book == nil {
		writeError(w, http.StatusNotFound, ErrNotWaiting, "this cell has no approvers (DATA/approvers): it takes answers at POST /v1/runs/{run}/approve")
		return
	}
	p, err := s.cell.Book.Get(run, step)
	if err != nil {
		writeError(w, http.StatusNotFound, err, "GET /v1/approvals lists the approvals waiting")
		return
	}
	writeJSON(w, http.StatusOK, SignedApprovalOf(p))
}

func (s *Server) vote(w http.ResponseWriter, r *http.Request) {
	run, ok := s.findRun(w, r)
	if !ok {
		return
	}
	var sub VoteSubmission
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxVote))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sub); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("vote: %w", err), `send {"step": N, "statement": TEXT, "signature": "-----BEGIN SSH SIGNATURE-----..."}`)
		return
	}
	ans, code, hint, err := s.castVote(r.Context(), run, sub)
	if err != nil {
		writeError(w, code, err, hint)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

// castVote counts sub on the approval run waits for, with every check of
// the book (Book.Vote), and answers as POST /v1/runs/{run}/votes does: on
// a refusal, the status, the error and a hint. The API and the dashboard
// both vote through it.
func (s *Server) castVote(ctx context.Context, run journal.RunID, sub VoteSubmission) (VoteAnswer, int, string, error) {
	if s.cell.Book == nil {
		return VoteAnswer{}, http.StatusNotFound, "this cell has no approvers (DATA/approvers): it takes answers at POST /v1/runs/{run}/approve", ErrNotWaiting
	}
	m, err := s.cell.Journal.Meta(ctx, run)
	if err != nil {
		return VoteAnswer{}, startErrorCode(err), "", err
	}
	if m.Wait == nil || m.Wait.Kind != journal.WaitApproval || (sub.Step != 0 && sub.Step != m.Wait.Step) || m.Status.Finished() {
		return VoteAnswer{}, http.StatusConflict, "GET /v1/approvals lists the approvals waiting; a vote after its run went on changes nothing",
			fmt.Errorf("%w: run %s (%s) waits for no approval at step %d", ErrNotWaiting, run, m.Status, sub.Step)
	}
	t, err := s.cell.Book.Vote(run, m.Wait.Step, []byte(sub.Statement), []byte(sub.Signature))
	var ve *VoteError
	if errors.As(err, &ve) {
		return VoteAnswer{}, http.StatusConflict, "nothing changed: the vote was not counted", err
	}
	if err != nil {
		return VoteAnswer{}, http.StatusInternalServerError, "", err
	}
	p, err := s.cell.Book.Get(run, m.Wait.Step)
	if err != nil {
		return VoteAnswer{}, http.StatusInternalServerError, "", err
	}
	last := t.Votes[len(t.Votes)-1]
	s.logf("run %s step %d: vote by %s (%s) counted; %s", run, m.Wait.Step, last.Approver, map[bool]string{true: "approve", false: "deny"}[last.Approve], t.State)
	return VoteAnswer{Verdict: string(last.Verdict), Approval: SignedApprovalOf(p)}, http.StatusOK, "", nil
}

// publishApproval sends l to the followers of GET /v1/approvals?follow=1.
func (s *Server) publishApproval(l StreamLine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.approvalSubs {
		select {
		case ch <- l:
		default:
			delete(s.approvalSubs, ch)
			close(ch)
		}
	}
}

// followApprovals streams, as JSON lines, each new approval request from
// now on, until the client leaves.
func (s *Server) followApprovals(w http.ResponseWriter, r *http.Request) {
	ch := make(chan StreamLine, 256)
	s.mu.Lock()
	s.approvalSubs[ch] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.approvalSubs[ch] {
			delete(s.approvalSubs, ch)
			close(ch)
		}
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "application/x-ndjson")
	sw := newStreamWriter(w)
	sw.send(StreamLine{Time: s.cell.Clock.Now().UTC(), Kind: EventApproval, Data: "following new approval requests"})
	for {
		select {
		case l, ok := <-ch:
			if !ok || !sw.send(l) {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}
