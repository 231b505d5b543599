package cell

import (
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
	if s.cell.Book == nil {
		writeError(w, http.StatusNotFound, ErrNotWaiting, "this cell has no approvers (DATA/approvers): it takes answers at POST /v1/runs/{run}/approve")
		return
	}
	var sub VoteSubmission
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxVote))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sub); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("vote: %w", err), `send {"step": N, "statement": TEXT, "signature": "-----BEGIN SSH SIGNATURE-----..."}`)
		return
	}
	m, err := s.cell.Journal.Meta(r.Context(), run)
	if err != nil {
		writeError(w, startErrorCode(err), err, "")
		return
	}
	if m.Wait == nil || m.Wait.Kind != journal.WaitApproval || (sub.Step != 0 && sub.Step != m.Wait.Step) || m.Status.Finished() {
		writeError(w, http.StatusConflict, fmt.Errorf("%w: run %s (%s) waits for no approval at step %d", ErrNotWaiting, run, m.Status, sub.Step),
			"GET /v1/approvals lists the approvals waiting; a vote after its run went on changes nothing")
		return
	}
	t, err := s.cell.Book.Vote(run, m.Wait.Step, []byte(sub.Statement), []byte(sub.Signature))
	var ve *VoteError
	if errors.As(err, &ve) {
		writeError(w, http.StatusConflict, err, "nothing changed: the vote was not counted")
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, err, "")
		return
	}
	p, err := s.cell.Book.Get(run, m.Wait.Step)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err, "")
		return
	}
	last := t.Votes[len(t.Votes)-1]
	s.logf("run %s step %d: vote by %s (%s) counted; %s", run, m.Wait.Step, last.Approver, map[bool]string{true: "approve", false: "deny"}[last.Approve], t.State)
	writeJSON(w, http.StatusOK, VoteAnswer{Verdict: string(last.Verdict), Approval: SignedApprovalOf(p)})
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
