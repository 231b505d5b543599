package abi

// The ops that wait (SPEC.md §15): agentrt:timer's durable sleep and
// agentrt:approval's explicit request. A call of either parks its run: its
// intent is journaled durably, the instance is closed, and the cell resumes
// the run, through the path of every resume, when the time comes or the
// approvers' quorum decides. Neither is dispatched to the outside world,
// so both are idempotent: a resume asks again whether what the call waits
// for has happened.

// Op codes of agentrt:timer and agentrt:approval.
const (
	OpTimerSleep      uint32 = 1
	OpApprovalRequest uint32 = 1
)

// TimerSleepRequest is the request of timer.sleep: exactly one of For (a
// duration from the call's intent, ns, > 0) and Until (a wall-clock time,
// Unix ns) is set. A time already past answers at once.
type TimerSleepRequest struct {
	For   int64 `cbor:"for,omitempty"`
	Until int64 `cbor:"until,omitempty"`
}

// TimerSleepResponse answers timer.sleep once its time has come: Due is
// the wake time the host computed (Until, or the intent's time plus For),
// Woke the host's real time when the run went on.
type TimerSleepResponse struct {
	Due  int64 `cbor:"due"`
	Woke int64 `cbor:"woke"`
}

// ApprovalRequest is the request of approval.request: the action a person
// is asked to approve, as text they read (at most 4 KiB), and the group of
// approvers the cell asks (its approvers/<group> file).
type ApprovalRequest struct {
	Action string `cbor:"action"`
	Group  string `cbor:"group"`
}

// ApprovalResponse answers approval.request once the quorum decided:
// Approved or not, the action digest the votes were bound to (32 bytes),
// the approvers who approved, and, for a denial, why (a veto, the expiry).
type ApprovalResponse struct {
	Approved  bool     `cbor:"approved,omitempty"`
	Digest    []byte   `cbor:"digest"`
	Approvers []string `cbor:"approvers,omitempty"`
	Reason    string   `cbor:"reason,omitempty"`
}
