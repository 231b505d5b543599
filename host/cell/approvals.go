package cell

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/journal"
)

// Approvals holds the calls a cell daemon's permission modes parked until
// someone answers through the API (POST /v1/runs/{run}/approve): it is the
// daemon's host.Approver. A parked call blocks its run; a cancel or a
// drain ends the wait, and the call, not journaled, is asked again when the
// run resumes.
type Approvals struct {
	mu      sync.Mutex
	pending map[approvalKey]*parked
	// notify, when set, is told of each call parked.
	notify func(host.Approval)
}

type approvalKey struct {
	run  journal.RunID
	step uint64
}

type parked struct {
	a      host.Approval
	answer chan answer
}

type answer struct {
	ok  bool
	who string
}

// NewApprovals returns an empty set of parked calls.
func NewApprovals() *Approvals { return &Approvals{pending: map[approvalKey]*parked{}} }

// Approve implements host.Approver: it parks a until Answer or ctx ends.
func (s *Approvals) Approve(ctx context.Context, a host.Approval) (bool, string, error) {
	p := &parked{a: a, answer: make(chan answer, 1)}
	k := approvalKey{a.Run, a.Step}
	s.mu.Lock()
	s.pending[k] = p
	notify := s.notify
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.pending[k] == p {
			delete(s.pending, k)
		}
		s.mu.Unlock()
	}()
	if notify != nil {
		notify(a)
	}
	select {
	case ans := <-p.answer:
		return ans.ok, ans.who, nil
	case <-ctx.Done():
		return false, "", ctx.Err()
	}
}

// Pending returns the parked calls, of run only unless run is zero, oldest
// step first.
func (s *Approvals) Pending(run journal.RunID) []host.Approval {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []host.Approval
	for k, p := range s.pending {
		if run.IsZero() || k.run == run {
			out = append(out, p.a)
		}
	}
	slices.SortFunc(out, func(a, b host.Approval) int {
		if c := bytes.Compare(a.Run[:], b.Run[:]); c != 0 {
			return c
		}
		return int(a.Step) - int(b.Step)
	})
	return out
}

// ErrNotPending is returned by Answer for a call that is not waiting.
var ErrNotPending = errors.New("no call of the run is waiting for approval at that step")

// Answer answers the call of run parked at step (the run's only parked call
// when step is 0): ok lets it through; who is recorded in the journal, and
// must name an authenticated credential, never what a request says.
func (s *Approvals) Answer(run journal.RunID, step uint64, ok bool, who string) (host.Approval, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var p *parked
	for k, q := range s.pending {
		if k.run == run && (step == 0 || k.step == step) {
			if p != nil {
				return host.Approval{}, fmt.Errorf("run %s has several calls waiting: name the step", run)
			}
			p = q
		}
	}
	if p == nil {
		return host.Approval{}, fmt.Errorf("%w (run %s, step %d)", ErrNotPending, run, step)
	}
	delete(s.pending, approvalKey{run, p.a.Step})
	p.answer <- answer{ok, who}
	return p.a, nil
}

// ApprovalInfo is a parked call as the API shows it.
type ApprovalInfo struct {
	RunID    string `json:"run_id"`
	Step     uint64 `json:"step"`
	Op       string `json:"op"`
	Resource string `json:"resource,omitempty"`
	Method   string `json:"method,omitempty"`
	Rule     string `json:"rule,omitempty"`
	// Approver is who answered, in the answer to POST .../approve: the
	// name the journal records, taken from the request's credential.
	Approver string `json:"approver,omitempty"`
}

func approvalInfo(a host.Approval) ApprovalInfo {
	return ApprovalInfo{RunID: a.Run.String(), Step: a.Step, Op: a.Op, Resource: a.Resource, Method: a.Method, Rule: a.Rule}
}

// Answer is the body of POST /v1/runs/{run}/approve.
type Answer struct {
	// Step names the call; 0: the run's only waiting call.
	Step uint64 `json:"step,omitempty"`
	// Approve lets the call through; false denies it.
	Approve bool `json:"approve"`
}
