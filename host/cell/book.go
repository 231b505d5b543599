package cell

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/approval"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/journal"
)

// Book is the cell's book of signed quorum approvals (host.Approvals): the
// requests its parked runs wait for and the votes counted so far, kept in
// the cell's records (table "approvals"), so that a vote survives every
// restart before the run it decides resumes. The approvers and their rules
// are the cell's DATA/approvers/<group> files and DATA/approvals.yaml
// (package approval), read as each request is made: the request records
// the group and the rule as they stood, so a later edit decides nothing
// already asked.
//
// A vote is checked as it arrives (approval.Evaluate, the auditor's own
// check): one that does not count (a forged or unknown signature, another
// digest, a duplicate, a late vote, a self-approval, out of order, after
// the decision) is refused with its reason and changes nothing; one that
// counts is stored durably before it is acknowledged. The run's journal
// gets the votes that counted, with their signatures, on the entry that
// ends its wait.
type Book struct {
	dir string
	st  journal.CellRecords
	now func() time.Time

	mu sync.Mutex
	// decided, when set, is told of each approval a vote decided: the
	// daemon resumes its run.
	decided func(run journal.RunID, step uint64)
}

// ApproversDir is the directory of the cell's approvers' groups.
const ApproversDir = "approvers"

// tableApprovals holds one bookEntry per request, under bookKey.
const tableApprovals = "approvals"

// OpenBook returns the approvals book of the cell in dir when the cell has
// approvers (DATA/approvers), and nil when it has none: a cell without
// approvers asks its operator, in memory (Approvals), as before signed
// approvals.
func OpenBook(dir string, st journal.CellRecords, now func() time.Time) (*Book, error) {
	fi, err := os.Stat(filepath.Join(dir, ApproversDir))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("cell: approvers: %w", err)
	case !fi.IsDir():
		return nil, fmt.Errorf("cell: %s is not a directory (it holds one file of authorized_keys lines per group)", filepath.Join(dir, ApproversDir))
	}
	// The configuration is checked now, so that a broken file stops the
	// cell at start rather than denying its first request.
	if _, err := approval.LoadConfig(dir); err != nil {
		return nil, fmt.Errorf("cell: %w", err)
	}
	return &Book{dir: dir, st: st, now: now}, nil
}

// bookEntry is a request as the book keeps it: the record (the request and
// the votes counted so far, in arrival order) and the action text the
// approvers read.
type bookEntry struct {
	Record approval.Record `cbor:"1,keyasint"`
	Action string          `cbor:"2,keyasint,omitempty"`
	// Rule is the permission mode rule that asked; empty for
	// approval.request.
	Rule string `cbor:"3,keyasint,omitempty"`
}

func bookKey(run journal.RunID, step uint64) string {
	return run.String() + "/" + fmt.Sprintf("%020d", step)
}

// DefaultGroup is the group a permission mode rule's ask goes to when the
// rule names none.
const DefaultGroup = "default"

// Open implements host.Approvals: it makes the request of a, from the
// group's file and rule as they stand, and keeps it.
func (b *Book) Open(_ context.Context, a host.ApprovalAsk) ([]byte, journal.Wait, error) {
	cfg, err := approval.LoadConfig(b.dir)
	if err != nil {
		return nil, journal.Wait{}, err
	}
	name := a.Group
	if name == "" {
		name = DefaultGroup
	}
	g, rule, err := cfg.Group(name)
	if err != nil {
		return nil, journal.Wait{}, err
	}
	// A permission mode rule may tighten its group's rule, never loosen it.
	rule = rule.Stricter(approval.Rule{Quorum: a.Quorum, TwoPerson: a.TwoPerson, Expires: a.Expires})
	req, err := approval.NewRequest(a.Op, a.Request, a.Run, a.Step, g, rule, requesters(a.Token), a.Asked.UnixNano())
	if err != nil {
		return nil, journal.Wait{}, err
	}
	rec := approval.Record{Request: *req}
	enc, err := approval.EncodeRecord(&rec)
	if err != nil {
		return nil, journal.Wait{}, err
	}
	e := bookEntry{Record: rec, Action: a.Action, Rule: a.Rule}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.put(a.Run, a.Step, &e); err != nil {
		return nil, journal.Wait{}, err
	}
	return enc, waitOf(req), nil
}

func waitOf(req *approval.Request) journal.Wait {
	return journal.Wait{Kind: journal.WaitApproval, Group: req.Group, Digest: req.Digest, Until: req.Expires}
}

// Wait returns what the approval whose intent record is rec waits for.
func (b *Book) Wait(rec []byte) (journal.Wait, error) {
	r, err := approval.DecodeRecord(rec)
	if err != nil {
		return journal.Wait{}, fmt.Errorf("cell: the journaled approval request does not decode: %w", err)
	}
	return waitOf(&r.Request), nil
}

// requesters are the principals of a run's token: every key that issued
// or holds a link of its chain. Under the two-person rule none of them
// may approve what the run asks.
func requesters(token []byte) []approval.Principal {
	t, err := capability.Parse(token)
	if err != nil {
		return nil
	}
	var out []approval.Principal
	seen := map[string]bool{}
	add := func(k ed25519.PublicKey) {
		if len(k) == ed25519.PublicKeySize && !seen[string(k)] {
			seen[string(k)] = true
			out = append(out, approval.Principal{Key: k})
		}
	}
	for _, l := range t.Links {
		add(l.Claims.Issuer)
		add(l.Claims.Subject)
	}
	return out
}

// Decision implements host.Approvals: the tally of the votes counted for
// the request journaled as rec, at now.
func (b *Book) Decision(_ context.Context, rec []byte, now time.Time) (host.ApprovalDecision, error) {
	r, err := approval.DecodeRecord(rec)
	if err != nil {
		return host.ApprovalDecision{}, fmt.Errorf("the journaled approval request does not decode: %w", err)
	}
	b.mu.Lock()
	e, ok, err := b.get(journal.RunID(r.Request.Run), r.Request.Step)
	b.mu.Unlock()
	if err != nil {
		return host.ApprovalDecision{}, err
	}
	var votes []approval.Vote
	if ok {
		if string(e.Record.Request.Digest) != string(r.Request.Digest) {
			return host.ApprovalDecision{}, fmt.Errorf("the book's request for run %s step %d is bound to another action digest than its journal's", journal.RunID(r.Request.Run), r.Request.Step)
		}
		votes = e.Record.Votes
	}
	t := approval.Evaluate(&r.Request, votes, now.UnixNano())
	d := host.ApprovalDecision{Digest: r.Request.Digest, Approvers: t.Approvers, Reason: t.Reason}
	if t.State == approval.Pending {
		return d, nil
	}
	d.Done, d.Approved = true, t.State == approval.Approved
	out := approval.Record{Request: r.Request, Votes: votes, Decision: &approval.Decision{Approved: d.Approved, Reason: t.Reason, At: t.At}}
	if d.Record, err = approval.EncodeRecord(&out); err != nil {
		return host.ApprovalDecision{}, err
	}
	return d, nil
}

// ErrNotWaiting is returned by Vote for a run and step that wait for no
// approval.
var ErrNotWaiting = errors.New("no approval is waiting at that run and step")

// ErrVoteRefused wraps the reason a vote does not count (its verdict).
var ErrVoteRefused = errors.New("vote refused")

// VoteError is a vote that does not count: its verdict and why.
type VoteError struct {
	Verdict approval.Verdict
	Reason  string
}

func (e *VoteError) Error() string { return fmt.Sprintf("vote refused (%s): %s", e.Verdict, e.Reason) }

// Unwrap makes a VoteError match ErrVoteRefused.
func (e *VoteError) Unwrap() error { return ErrVoteRefused }

// Vote submits a signed statement for the approval of run at step: it is
// checked against the request and the votes so far, and kept, durably, if
// it counts; a vote that does not count is refused with a *VoteError and
// changes nothing. It returns the tally with it; when the vote decides the
// request, the daemon is told (decided) and resumes the run.
func (b *Book) Vote(run journal.RunID, step uint64, statement, signature []byte) (approval.Tally, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok, err := b.get(run, step)
	if err != nil {
		return approval.Tally{}, err
	}
	if !ok {
		return approval.Tally{}, fmt.Errorf("%w (run %s, step %d)", ErrNotWaiting, run, step)
	}
	now := b.now().UnixNano()
	before := approval.Evaluate(&e.Record.Request, e.Record.Votes, now)
	votes := append(append([]approval.Vote(nil), e.Record.Votes...), approval.Vote{Statement: statement, Signature: signature, At: now})
	t := approval.Evaluate(&e.Record.Request, votes, now)
	res := t.Votes[len(t.Votes)-1]
	if before.State != approval.Pending {
		return before, &VoteError{Verdict: approval.Decided, Reason: "the request was decided already: " + before.Reason}
	}
	if res.Verdict != approval.Counted {
		return before, &VoteError{Verdict: res.Verdict, Reason: res.Reason}
	}
	e.Record.Votes = votes
	if err := b.put(run, step, e); err != nil {
		return before, err
	}
	if t.State != approval.Pending && b.decided != nil {
		go b.decided(run, step)
	}
	return t, nil
}

// Pending is an approval a parked run waits for, as `agentrt approvals`
// and GET /v1/approvals show it.
type Pending struct {
	Run    journal.RunID
	Step   uint64
	Action string
	Rule   string
	Record approval.Record
	Tally  approval.Tally
}

// Statement returns the statement an approver signs to vote on p.
func (p *Pending) Statement(approve bool) approval.Statement {
	r := &p.Record.Request
	st := approval.Statement{Run: r.Run, Step: r.Step, Op: r.Op, Group: r.Group, Approve: approve}
	copy(st.Digest[:], r.Digest)
	return st
}

// Get returns the approval of run at step.
func (b *Book) Get(run journal.RunID, step uint64) (*Pending, error) {
	b.mu.Lock()
	e, ok, err := b.get(run, step)
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w (run %s, step %d)", ErrNotWaiting, run, step)
	}
	return &Pending{Run: run, Step: step, Action: e.Action, Rule: e.Rule, Record: e.Record,
		Tally: approval.Evaluate(&e.Record.Request, e.Record.Votes, b.now().UnixNano())}, nil
}

// List returns the approvals of the parked runs in runs (those waiting
// for one), oldest first.
func (b *Book) List(runs []journal.RunMeta) ([]*Pending, error) {
	var out []*Pending
	for _, m := range runs {
		if m.Status != journal.StatusParked || m.Wait == nil || m.Wait.Kind != journal.WaitApproval {
			continue
		}
		p, err := b.Get(m.ID, m.Wait.Step)
		if errors.Is(err, ErrNotWaiting) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Record.Request.Asked < out[j].Record.Request.Asked })
	return out, nil
}

func (b *Book) get(run journal.RunID, step uint64) (*bookEntry, bool, error) {
	v, ok, err := b.st.CellGet(tableApprovals, bookKey(run, step))
	if err != nil || !ok {
		return nil, ok, err
	}
	var e bookEntry
	if err := abi.Unmarshal(v, &e); err != nil {
		return nil, false, fmt.Errorf("cell: the approvals book's entry of run %s step %d does not decode: %w", run, step, err)
	}
	return &e, true, nil
}

func (b *Book) put(run journal.RunID, step uint64, e *bookEntry) error {
	v, err := abi.Marshal(e)
	if err != nil {
		return err
	}
	return b.st.CellPut(tableApprovals, bookKey(run, step), v)
}
