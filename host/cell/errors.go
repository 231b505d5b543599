package cell

import (
	"encoding/hex"
	"errors"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell/handoff"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	"github.com/agentrt/agentrt/replay"
)

// errorKinds names the classes an API error can belong to, as the
// answer's "kinds" lists them: a client tells the errors apart by these
// (RemoteError matches each with errors.Is) rather than by their text, and
// the CLI gives the hint it gives the same error from its own store. The
// names are part of the API (API.md); a class is added, never renamed.
var errorKinds = []struct {
	name string
	err  error
}{
	{"not_found", journal.ErrNotFound},
	{"no_runs", ErrNoRuns},
	{"ambiguous", ErrAmbiguous},
	{"bad_run_id", journal.ErrBadRunID},
	{"incomplete", journal.ErrIncomplete},
	{"damaged", badgerstore.ErrDamaged},
	{"conflict", journal.ErrConflict},
	{"bad_filter", journal.ErrBadFilter},
	{"checkpoint", journal.ErrCheckpoint},
	{"export", replay.ErrExport},
	{"decode", journal.ErrDecode},
	{"sequence", journal.ErrSequence},
	{"chain", journal.ErrChain},
	{"hash", journal.ErrHash},
	{"signature", journal.ErrSignature},
	{"untrusted", journal.ErrUntrusted},
	{"uncovered", journal.ErrUncovered},
	{"finished", host.ErrFinished},
	{"active", host.ErrActive},
	{"not_wasm", host.ErrNotWasm},
	{"bad_module", host.ErrBadModule},
	{"module_limit", host.ErrModuleLimit},
	{"limit_raised", host.ErrLimitRaised},
	{"module_too_large", ErrModuleTooLarge},
	{"no_module", host.ErrUnknownModule},
	{"module_mismatch", host.ErrModuleMismatch},
	{"not_waiting", ErrNotWaiting},
	{"vote_refused", ErrVoteRefused},
	{"no_task", ErrNoTask},
	{"task_state", ErrTaskState},
	{"bad_task", ErrBadTask},
	{"shutting_down", ErrShuttingDown},
	{"admission_refused", ErrAdmissionRefused},
	{"queue_full", ErrQueueFull},
	{"no_cluster", ErrNoCluster},
	{"no_cell", ErrNoCell},
	{"not_live", host.ErrNotLive},
	{"handoff_refused", ErrHandoffRefused},
	{"handoff_decode", handoff.ErrDecode},
	{"handoff_payload_type", handoff.ErrPayloadType},
	{"handoff_untrusted", handoff.ErrUntrusted},
	{"handoff_signature", handoff.ErrSignature},
	{"handoff_audience", handoff.ErrAudience},
	{"handoff_expired", handoff.ErrExpired},
	{"handoff_replayed", handoff.ErrReplayed},
	{"handoff_epoch", handoff.ErrEpoch},
	{"handoff_head", handoff.ErrHead},
	{"handoff_token", handoff.ErrToken},
	{"handoff_admission", handoff.ErrAdmission},
}

// Gap is a *journal.GapError as an API error carries it ("gap"): entries
// of a journal the store's head record names and cannot give back.
type Gap struct {
	Run    string `json:"run"`
	From   uint64 `json:"from"`
	To     uint64 `json:"to"`
	Length uint64 `json:"length"`
	Reason string `json:"reason"`
}

// apiError is err as the API answers it: its text, the hint (Hint's when
// hint is empty), the kinds it belongs to and the gap it names.
func apiError(err error, hint string) APIError {
	if hint == "" {
		hint = Hint(err)
	}
	e := APIError{Error: err.Error(), Hint: hint}
	for _, k := range errorKinds {
		if errors.Is(err, k.err) {
			e.Kinds = append(e.Kinds, k.name)
		}
	}
	var gap *journal.GapError
	if errors.As(err, &gap) {
		e.Gap = &Gap{Run: gap.Run.String(), From: gap.From, To: gap.To, Length: gap.Length, Reason: gap.Reason}
	}
	return e
}

// newRemoteError returns the client's error for an error answer: its
// text is the cell's, and it wraps the sentinel of each kind the answer
// lists and the gap it names, so that errors.Is and errors.As see what
// they would see in the cell.
func newRemoteError(code int, e APIError) *RemoteError {
	re := &RemoteError{Code: code, APIError: e}
	for _, name := range e.Kinds {
		for _, k := range errorKinds {
			if k.name == name {
				re.wrapped = append(re.wrapped, k.err)
			}
		}
	}
	if g := e.Gap; g != nil {
		gap := &journal.GapError{From: g.From, To: g.To, Length: g.Length, Reason: g.Reason}
		if b, err := hex.DecodeString(g.Run); err == nil && len(b) == len(gap.Run) {
			copy(gap.Run[:], b)
		}
		re.wrapped = append(re.wrapped, gap)
	}
	return re
}
