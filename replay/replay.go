// Package replay re-executes a recorded run against its journal: every
// import call is answered with its recorded response, after checking that
// the guest asked for the same op with the same input. Together with the
// journal verifier (chain, hashes, seals) this proves that the journal is
// what the module did.
//
// Replay never dispatches an effect and never writes to a store.
package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/journal"
)

// ErrUnfinished is returned by Run for a run whose journal has no end entry:
// its recorded prefix was verified and replayed, but there is no outcome to
// compare.
var ErrUnfinished = errors.New("replay: the run has not finished")

// DivergenceError reports the first point where re-execution differs from
// the journal.
type DivergenceError struct {
	// Step is the import call's ordinal; 0 for a difference in the run's
	// outcome.
	Step uint64
	// Op is the recorded op; ActualOp the one the guest called.
	Op, ActualOp string
	// InputHash is the recorded input hash; ActualInputHash the guest's.
	InputHash, ActualInputHash []byte
	// Reason says what differs.
	Reason string
	// Func is the guest function at the call site, when the module has a
	// name section; Stack is the wasm stack trace.
	Func  string
	Stack []string
}

func (e *DivergenceError) Error() string {
	var b strings.Builder
	if e.Step > 0 {
		fmt.Fprintf(&b, "replay diverged at step %d (%s): %s", e.Step, e.Op, e.Reason)
	} else {
		fmt.Fprintf(&b, "replay diverged at the end of the run: %s", e.Reason)
	}
	if e.InputHash != nil && !bytes.Equal(e.InputHash, e.ActualInputHash) {
		fmt.Fprintf(&b, "; input hash recorded %x, actual %x", e.InputHash, e.ActualInputHash)
	}
	if e.Func != "" {
		fmt.Fprintf(&b, "; called from %s", e.Func)
	}
	return b.String()
}

// call is one recorded import call, collapsed from its entries.
type call struct {
	step      uint64
	op        string
	inputHash []byte
	request   []byte
	status    abi.Status
	response  []byte
	done      bool
}

// Journal is a verified journal, ready to be replayed.
type Journal struct {
	Summary *journal.Summary
	calls   []call
}

// Load verifies the journal of run in store and collects its calls.
func Load(ctx context.Context, store journal.Store, run journal.RunID, trust journal.TrustFunc) (*Journal, error) {
	v, j := newCollector(trust)
	err := journal.VerifyStream(ctx, v, func(fn func([]byte) error) error {
		return store.Records(ctx, run, 0, func(_ uint64, raw []byte) error { return fn(raw) })
	})
	if err != nil {
		return nil, err
	}
	return j.finish(v, run)
}

// LoadRecords verifies a journal given as raw records, in order.
func LoadRecords(records [][]byte, trust journal.TrustFunc) (*Journal, error) {
	v, j := newCollector(trust)
	for _, r := range records {
		if err := v.Add(r); err != nil {
			return nil, err
		}
	}
	return j.finish(v, journal.RunID{})
}

func newCollector(trust journal.TrustFunc) (*journal.Verifier, *Journal) {
	j := &Journal{}
	v := journal.NewVerifier(trust)
	v.OnEntry = func(e *journal.Entry, _ *journal.Record) error {
		switch e.Phase {
		case journal.PhaseIntent:
			j.calls = append(j.calls, call{step: e.Step, op: e.Op, inputHash: e.InputHash, request: e.Request})
		case journal.PhaseCompleted, journal.PhaseFailed:
			if n := len(j.calls); n > 0 && j.calls[n-1].step == e.Step && !j.calls[n-1].done {
				c := &j.calls[n-1]
				c.status, c.response, c.done = abi.Status(e.Status), e.Response, true
				return nil
			}
			j.calls = append(j.calls, call{step: e.Step, op: e.Op, inputHash: e.InputHash, request: e.Request,
				status: abi.Status(e.Status), response: e.Response, done: true})
		}
		return nil
	}
	return v, j
}

func (j *Journal) finish(v *journal.Verifier, run journal.RunID) (*Journal, error) {
	sum, err := v.Finish()
	if err != nil {
		return nil, err
	}
	if !run.IsZero() && sum.Run != run {
		return nil, &journal.VerifyError{Class: journal.ErrSequence, Err: fmt.Errorf("journal holds run %s, not %s", sum.Run, run)}
	}
	if sum.Header == nil {
		return nil, &journal.VerifyError{Class: journal.ErrDecode, Err: errors.New("journal has no start entry")}
	}
	j.Summary = sum
	return j, nil
}

// Calls returns the number of import calls recorded.
func (j *Journal) Calls() int { return len(j.calls) }

// Report is the result of a successful replay.
type Report struct {
	Run     journal.RunID
	Entries uint64
	Seals   uint64
	Calls   int
	Output  []byte
}

// Options tune Replay.
type Options struct {
	// Code replaces the recorded module (to check whether a new build is
	// compatible with recorded runs); nil: the recorded module, whose hash
	// must match the header.
	Code []byte
	// Sink sees the guest's events.
	Sink func(host.Event)
}

// Replay re-executes the journal's module on engine against the journal.
// code is the recorded module. It returns a *DivergenceError at the first
// difference.
func (j *Journal) Replay(ctx context.Context, engine *host.Engine, code []byte, opts Options) (*Report, error) {
	hdr := j.Summary.Header
	if opts.Code != nil {
		code = opts.Code
	} else if !bytes.Equal(journal.Sum(code), hdr.ModuleSHA256) {
		return nil, fmt.Errorf("replay: module hashes to %x, the run header records %x", journal.Sum(code), hdr.ModuleSHA256)
	}
	cur := &cursor{calls: j.calls, finished: j.Summary.End != nil}
	out, err := engine.Execute(ctx, host.ExecSpec{Run: j.Summary.Run, Header: hdr, Code: code, Source: cur, Sink: opts.Sink})
	var div *DivergenceError
	if errors.As(err, &div) {
		div.Stack = stackOf(err)
		div.Func = guestFunc(div.Stack)
		return nil, div
	}
	if errors.Is(err, errJournalEnd) {
		return nil, fmt.Errorf("%w: verified %d entries and replayed all %d recorded calls", ErrUnfinished, j.Summary.Entries, len(j.calls))
	}
	if err != nil {
		return nil, err
	}
	if !cur.finished {
		return nil, fmt.Errorf("%w: verified %d entries and replayed all %d recorded calls", ErrUnfinished, j.Summary.Entries, len(j.calls))
	}
	if err := compareEnd(j.Summary.End, out, cur); err != nil {
		return nil, err
	}
	return &Report{Run: j.Summary.Run, Entries: j.Summary.Entries, Seals: j.Summary.Seals, Calls: len(j.calls), Output: out.Output}, nil
}

func compareEnd(end *journal.End, out *host.Outcome, cur *cursor) error {
	if cur.next < len(cur.calls) {
		c := cur.calls[cur.next]
		return &DivergenceError{Step: c.step, Op: c.op, Reason: fmt.Sprintf("the guest ended after %d calls; the journal records %d", cur.next, len(cur.calls))}
	}
	status := journal.StatusCompleted
	if out.GuestErr != nil {
		status = journal.StatusFailed
	}
	switch {
	case status != end.Status:
		return &DivergenceError{Reason: fmt.Sprintf("the run %s now (%v); the journal records %s", status, out.GuestErr, end.Status)}
	case !bytes.Equal(out.Output, end.Output):
		return &DivergenceError{Reason: fmt.Sprintf("output differs: recorded %d bytes (%x), now %d bytes (%x)",
			len(end.Output), journal.Sum(end.Output), len(out.Output), journal.Sum(out.Output))}
	case out.Steps != end.Steps:
		return &DivergenceError{Reason: fmt.Sprintf("the run made %d calls; the journal records %d", out.Steps, end.Steps)}
	}
	return nil
}

var errJournalEnd = errors.New("replay: the journal of an unfinished run ends here")

// cursor serves calls from the journal in order.
type cursor struct {
	calls    []call
	next     int
	finished bool
}

func (c *cursor) Serve(_ context.Context, hc *host.Call) (abi.Status, []byte, error) {
	if c.next >= len(c.calls) {
		if !c.finished {
			return 0, nil, errJournalEnd
		}
		return 0, nil, &DivergenceError{Step: hc.Step, Op: "(none)", ActualOp: hc.Op.Name, ActualInputHash: hc.InputHash(),
			Reason: fmt.Sprintf("the guest called %s after the last of the %d recorded calls", hc.Op.Name, len(c.calls))}
	}
	rc := &c.calls[c.next]
	if rc.step == hc.Step && rc.op == hc.Op.Name && rc.done && sameInput(rc, hc) {
		c.next++
		return rc.status, rc.response, nil
	}
	div := &DivergenceError{Step: hc.Step, Op: rc.op, ActualOp: hc.Op.Name, InputHash: rc.inputHash, ActualInputHash: hc.InputHash()}
	switch {
	case rc.step != hc.Step:
		div.Reason = fmt.Sprintf("the journal's next call is step %d", rc.step)
	case rc.op != hc.Op.Name:
		div.Reason = fmt.Sprintf("the guest called %s", hc.Op.Name)
	case !sameInput(rc, hc):
		div.Reason = "the request differs" + requestDiff(rc.request, hc.Request)
	default: // !rc.done
		if !c.finished {
			return 0, nil, errJournalEnd
		}
		div.Reason = "the journal records no outcome for this call"
	}
	return 0, nil, div
}

// sameInput reports whether the guest sent the recorded request. The bytes
// are compared when the journal has them (the verifier has checked that
// they hash to the recorded input hash), the hashes otherwise.
func sameInput(rc *call, hc *host.Call) bool {
	if rc.request != nil && !hc.TooLarge {
		return bytes.Equal(rc.request, hc.Request)
	}
	return bytes.Equal(rc.inputHash, hc.InputHash())
}

// requestDiff describes how two CBOR requests differ, decoded, when both
// decode.
func requestDiff(recorded, actual []byte) string {
	var a, b any
	if abi.Unmarshal(recorded, &a) != nil || abi.Unmarshal(actual, &b) != nil {
		return ""
	}
	return fmt.Sprintf(" (recorded %s, actual %s)", short(fmt.Sprint(a)), short(fmt.Sprint(b)))
}

func short(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// stackOf extracts the wasm stack trace wazero appends to a host panic.
func stackOf(err error) []string {
	_, trace, ok := strings.Cut(err.Error(), "wasm stack trace:\n")
	if !ok {
		return nil
	}
	var frames []string
	for _, l := range strings.Split(trace, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			break
		}
		frames = append(frames, l)
	}
	return frames
}

// guestFunc returns the first frame of stack that is the agent's own code:
// not the host import, the guest SDK or the Go runtime. wazero prefixes
// each name with the module's name and a dot (empty for our anonymous
// instances), and Go's wasm linker writes package paths with '_' for '/'.
func guestFunc(stack []string) string {
	for _, f := range stack {
		name, _, _ := strings.Cut(f, "(")
		name = strings.TrimPrefix(name, ".")
		switch {
		case strings.HasPrefix(name, abi.ModulePrefix),
			strings.Contains(name, "guest_sdk_agent."), strings.Contains(name, "guest-sdk/agent."),
			strings.HasPrefix(name, "runtime."), strings.HasPrefix(name, "$"),
			strings.HasPrefix(name, "_rt0"), strings.HasPrefix(name, "wasm_pc_f_loop"):
			continue
		}
		return name
	}
	return ""
}
