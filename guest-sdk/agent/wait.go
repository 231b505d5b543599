package agent

import (
	"errors"
	"time"

	"github.com/agentrt/agentrt/guest-sdk/abi"
)

// Sleep waits d of real time, durably (timer.sleep): the run parks, its
// instance is closed and nothing of it stays in memory, and the cell
// resumes it when d has passed since the call, across restarts of the cell.
// It returns the wake time and the real time the run went on, both
// journaled. time.Sleep, by contrast, only advances the run's virtual
// clock, at once. Sleep needs the timer capability (timer: {} in the
// grant).
func Sleep(d time.Duration) (due, woke time.Time, err error) {
	if d <= 0 {
		return time.Time{}, time.Time{}, errors.New("agent: Sleep needs a duration above 0")
	}
	return sleep(&abi.TimerSleepRequest{For: int64(d)})
}

// SleepUntil waits until t, a wall-clock time, as Sleep does; a time
// already past answers at once.
func SleepUntil(t time.Time) (due, woke time.Time, err error) {
	if t.UnixNano() <= 0 {
		return time.Time{}, time.Time{}, errors.New("agent: SleepUntil needs a time after 1970")
	}
	return sleep(&abi.TimerSleepRequest{Until: t.UnixNano()})
}

func sleep(req *abi.TimerSleepRequest) (time.Time, time.Time, error) {
	var r abi.TimerSleepResponse
	if err := call(timerTransport, abi.CapTimer, abi.OpTimerSleep, req, &r); err != nil {
		return time.Time{}, time.Time{}, err
	}
	return time.Unix(0, r.Due), time.Unix(0, r.Woke), nil
}

// Approval is the answer to RequestApproval.
type Approval struct {
	// Approved says the group's quorum approved; when false, Reason says
	// why not (a veto, the expiry).
	Approved bool
	Reason   string
	// Digest is the action digest the votes were bound to: SHA-256 over
	// the op, the request, the run and the step (approval/SPEC.md).
	Digest []byte
	// Approvers are the names of those who approved.
	Approvers []string
}

// RequestApproval asks the cell's approvers of group to approve action,
// a text they read (approval.request): the run parks until the group's
// quorum decides by signed votes, or the request expires, and the cell
// resumes it then, across restarts. A denial is an answer, not an error;
// the error is for a request the host refused (a group the grant does not
// list, a cell without approvers). It needs the approval capability
// (approval: {groups: [...]} in the grant).
func RequestApproval(action, group string) (*Approval, error) {
	var r abi.ApprovalResponse
	if err := call(approvalTransport, abi.CapApproval, abi.OpApprovalRequest, &abi.ApprovalRequest{Action: action, Group: group}, &r); err != nil {
		return nil, err
	}
	return &Approval{Approved: r.Approved, Reason: r.Reason, Digest: r.Digest, Approvers: r.Approvers}, nil
}
