package agent

import (
	"fmt"

	"github.com/agentrt/agentrt/guest-sdk/abi"
)

// The run.self family: the run asking about itself. Every answer is a
// pure call, journaled, so a replay of the run gets the same answers.

// Self says who the run is (run.Self).
type Self = abi.SelfResponse

// Whoami says who the run is: its id, the task it is an attempt of, the
// run and step that spawned it, its module's hash, the cell that runs it
// and its depth among sub-agents (run.self).
func Whoami() (*Self, error) {
	var r abi.SelfResponse
	err := call(runTransport, abi.CapRun, abi.OpRunSelf, nil, &r)
	return &r, err
}

// Caps is what the run may do (MyCaps).
type Caps = abi.SelfCapsResponse

// MyCaps returns the capabilities the gate enforces for the run: their
// names, the token's claims as JSON and its budget ceilings
// (run.self_caps).
func MyCaps() (*Caps, error) {
	var r abi.SelfCapsResponse
	err := call(runTransport, abi.CapRun, abi.OpRunSelfCaps, nil, &r)
	return &r, err
}

// Decision is the gate's answer to MayI: Decision is abi.MayAllow,
// abi.MayDeny or abi.MayAsk; Stage the gate layer that decided
// ("capability", "policy", "budget", "mode"); Reason what the gate would
// tell the call; Status the status a denied call would get.
type Decision = abi.MayResponse

// MayI asks the gate whether it would let the call of op with request req
// (the op's request, as the SDK's own function for it would send it, e.g.
// &abi.HTTPRequest{...}) through, were the run to make it next. Nothing
// happens: no budget is reserved, no one is asked, the call is not made
// (run.self_may).
func MayI(op string, req any) (*Decision, error) {
	var body []byte
	if req != nil {
		b, err := abi.Marshal(req)
		if err != nil {
			return nil, fmt.Errorf("agent: encode %s request: %w", op, err)
		}
		body = b
	}
	var r abi.MayResponse
	err := call(runTransport, abi.CapRun, abi.OpRunSelfMay, &abi.MayRequest{Op: op, Request: body}, &r)
	return &r, err
}

// MayHTTP asks whether an HTTP request of method to url would pass the
// gate (MayI of http.request).
func MayHTTP(method, url string) (*Decision, error) {
	return MayI("http.request", &abi.HTTPRequest{Method: method, URL: url})
}

// MayKVPut asks whether a kv.put of key would pass the gate.
func MayKVPut(key string) (*Decision, error) {
	return MayI("kv.put", &abi.KVPutRequest{Key: key})
}

// MayTool asks whether tool.run of the tool name with args would pass the
// gate.
func MayTool(name string, args ...string) (*Decision, error) {
	return MayI("tool.run", &abi.ToolRunRequest{Name: name, Args: args})
}

// Budget is what the run has spent and has left (MyBudget).
type Budget = abi.SelfBudgetResponse

// MyBudget reports, per budget dimension, the ceiling, what settled calls
// spent, what open reservations hold (and of that, what is carved out for
// children) and what is left (run.self_budget).
func MyBudget() (*Budget, error) {
	var r abi.SelfBudgetResponse
	err := call(runTransport, abi.CapRun, abi.OpRunSelfBudget, nil, &r)
	return &r, err
}

// Mode is the run's mode and the permission modes over it (MyMode).
type Mode = abi.SelfModeResponse

// MyMode reports the mode the policy sees the run in ("interactive" or
// "unattended") and the permission-mode rules of its cell (run.self_mode).
func MyMode() (*Mode, error) {
	var r abi.SelfModeResponse
	err := call(runTransport, abi.CapRun, abi.OpRunSelfMode, nil, &r)
	return &r, err
}

// JournalQuery selects a page of the run's own journal (MyJournal).
type JournalQuery = abi.JournalRequest

// JournalPage is a page of the run's own journal: entry summaries, and
// Next, the From of the next page (0: none).
type JournalPage = abi.JournalResponse

// MyJournal returns a page of the run's own journal: the entries from
// q.From on, at most q.Limit (0: abi.MaxJournalPage, 100; more is refused),
// of op q.Op and phase q.Phase when set (run.self_journal). Only the run's
// own journal can be read.
func MyJournal(q JournalQuery) (*JournalPage, error) {
	var r abi.JournalResponse
	err := call(runTransport, abi.CapRun, abi.OpRunSelfJournal, &q, &r)
	return &r, err
}
