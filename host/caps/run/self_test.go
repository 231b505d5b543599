package run_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host/caps"
	"github.com/agentrt/agentrt/host/caps/run"
	"github.com/agentrt/agentrt/journal"
)

// journalSession is a Session whose SelfJournal counts its calls; the
// rest of Session is not used by these tests (the embedded nil panics).
type journalSession struct {
	run.Session
	calls int
}

func (s *journalSession) SelfJournal(context.Context, abi.JournalRequest) (abi.JournalResponse, error) {
	s.calls++
	return abi.JournalResponse{Entries: []abi.JournalEntry{}}, nil
}

func serveJournal(t *testing.T, s *journalSession, req []byte) (abi.Status, string) {
	t.Helper()
	inst, err := run.Capability{}.Open(&run.Grant{}, s, &caps.Run{ID: journal.RunID{1}})
	if err != nil {
		t.Fatal(err)
	}
	op, _ := abi.LookupOp(abi.CapRun, abi.OpRunSelfJournal)
	h := inst.Handler(op)
	st, body := h.Serve(context.Background(), &caps.Call{Step: 2, Op: &op, Request: req})
	var e abi.Error
	if st != abi.StatusOK {
		if err := abi.Unmarshal(body, &e); err != nil {
			t.Fatal(err)
		}
	}
	return st, e.Message
}

// A journal query names no run: one that tries (another run's id in a
// "run" field) is refused as malformed before the host reads anything,
// and so is a page above the cap, with the cap named.
func TestSelfJournalReachesNoOtherRun(t *testing.T) {
	s := &journalSession{}
	other, err := abi.Marshal(map[string]any{"run": "0189c4f1d2a3b4c5fedcba9876543210", "limit": 10})
	if err != nil {
		t.Fatal(err)
	}
	if st, msg := serveJournal(t, s, other); st != abi.StatusBadRequest || !strings.Contains(msg, "run") {
		t.Fatalf("a query naming another run: %s %q, want bad_request", st, msg)
	}
	over, _ := abi.Marshal(&abi.JournalRequest{Limit: abi.MaxJournalPage + 1})
	if st, msg := serveJournal(t, s, over); st != abi.StatusBadRequest || !strings.Contains(msg, "cap of 100 entries") {
		t.Fatalf("a page of 101: %s %q, want bad_request naming the cap", st, msg)
	}
	if s.calls != 0 {
		t.Fatalf("the host was asked %d times", s.calls)
	}
	ok, _ := abi.Marshal(&abi.JournalRequest{Limit: abi.MaxJournalPage})
	if st, _ := serveJournal(t, s, ok); st != abi.StatusOK || s.calls != 1 {
		t.Fatalf("a page of 100: %s, %d calls", st, s.calls)
	}
}
