package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
)

// A Recording holds the calls of a journal, collected entry by entry as the
// journal is verified, and serves them back in order: it is the Source of
// replay, and of the completed part of a resumed run.
type Recording struct {
	calls []recordedCall
	next  int
	// finished says whether the journal has an end entry: without one, a
	// call past the last recorded one is not a divergence but the point
	// where the recorded run stopped.
	finished bool
	// lastSegment keeps only the calls since the last checkpoint, which
	// base then describes (baseStep is the checkpoint's step).
	lastSegment bool
	base        segment
	baseStep    uint64
	err         error
	// startHash is the hash of the run's start entry.
	startHash []byte
	// buf holds copies of the calls' requests, responses and hashes, so
	// that a recording keeps only them and not every record it was read
	// from; ops interns the op names.
	buf []byte
	ops map[string]string
	// budget is what the journal says of the run's budget, from every
	// entry read (a resume rebuilds the run's ledger from it).
	budget budgetJournal
}

// keepChunk is the size of the chunks a Recording copies the bytes it
// keeps into.
const keepChunk = 64 << 10

// keep copies b into the recording's chunks (nil stays nil).
func (r *Recording) keep(b []byte) []byte {
	switch {
	case b == nil:
		return nil
	case len(b) == 0:
		return []byte{}
	case len(b) > keepChunk/8:
		return bytes.Clone(b)
	}
	if cap(r.buf)-len(r.buf) < len(b) {
		r.buf = make([]byte, 0, keepChunk)
	}
	n := len(r.buf)
	r.buf = append(r.buf, b...)
	return r.buf[n:len(r.buf):len(r.buf)]
}

// op returns the interned op name.
func (r *Recording) op(name string) string {
	if o, ok := r.ops[name]; ok {
		return o
	}
	if r.ops == nil {
		r.ops = map[string]string{}
	}
	r.ops[name] = name
	return name
}

// Step returns the step and op of recorded call i.
func (r *Recording) Step(i int) (uint64, string) { return r.calls[i].step, r.calls[i].op }

// Request returns the request of recorded call i as the journal holds it,
// nil when it holds none (a request refused by the size limit).
func (r *Recording) Request(i int) []byte { return r.calls[i].request }

// LoadRecording verifies the journal of run in store, with seals by keys
// trust approves, and collects its calls.
func LoadRecording(ctx context.Context, store journal.Store, run journal.RunID, trust journal.TrustFunc) (*journal.Summary, *Recording, error) {
	rec := &Recording{}
	v := journal.NewVerifier(trust)
	v.OnEntry = func(e *journal.Entry, _ *journal.Record) error {
		return rec.addFrom(ctx, store, e)
	}
	sum, err := journal.VerifyStoreWith(ctx, store, run, v)
	if err != nil {
		return nil, nil, err
	}
	return sum, rec, nil
}

// loadLastSegment is LoadRecording for a resume: it keeps only the calls
// made since the run's last checkpoint, and returns where that segment
// starts (the zero segment, step 0, for a run without checkpoints). When
// the run's index names its last checkpoint (seq checkpoint > 0), only the
// start entry and the journal from the checkpoint on are read and
// verified: the checkpoint's seals authenticate it, and it names the hash
// of the start entry. So a resume costs the last segment, not the whole
// history. Should that fail (an index that does not name a checkpoint), the
// whole journal is verified, which says precisely what is wrong if
// anything is.
func loadLastSegment(ctx context.Context, store journal.Store, run journal.RunID, checkpoint uint64, trust journal.TrustFunc) (*journal.Summary, *Recording, error) {
	if checkpoint > 0 {
		if sum, rec, err := loadSuffix(ctx, store, run, checkpoint, trust); err == nil {
			return sum, rec, nil
		}
	}
	rec := &Recording{lastSegment: true}
	v := journal.NewVerifier(trust)
	v.OnEntry = func(e *journal.Entry, r *journal.Record) error {
		if e.Seq == 0 {
			rec.startHash = journal.Sum(r.Entry)
		}
		if err := rec.addFrom(ctx, store, e); err != nil {
			return err
		}
		return rec.err
	}
	sum, err := journal.VerifyStoreWith(ctx, store, run, v)
	if err != nil {
		return nil, nil, err
	}
	return sum, rec, nil
}

// errStop ends a read of records early.
var errStop = errors.New("stop")

// loadSuffix verifies run's journal from its checkpoint entry at seq from
// on, and binds it to the start entry, which it reads alone.
func loadSuffix(ctx context.Context, store journal.Store, run journal.RunID, from uint64, trust journal.TrustFunc) (*journal.Summary, *Recording, error) {
	var hdr *journal.Header
	rec := &Recording{lastSegment: true}
	err := store.Records(ctx, run, 0, func(_ uint64, raw []byte) error {
		r, err := journal.DecodeRecord(raw)
		if err != nil {
			return err
		}
		e, err := journal.DecodeEntry(r.Entry)
		if err != nil {
			return err
		}
		if e.Seq != 0 || e.Run != run || e.Phase != journal.PhaseStart || e.Header == nil {
			return fmt.Errorf("host: the first entry of %s is not its start", run)
		}
		hdr, rec.startHash = e.Header, journal.Sum(r.Entry)
		return errStop
	})
	if err != errStop {
		return nil, nil, fmt.Errorf("host: read the start of %s: %v", run, err)
	}

	v := journal.NewVerifier(trust)
	v.StartAt(from)
	first := true
	v.OnEntry = func(e *journal.Entry, _ *journal.Record) error {
		if first {
			first = false
			var cp abi.CheckpointResponse
			if e.Op != "run.checkpoint" || e.Phase != journal.PhaseCompleted || abi.Unmarshal(e.Response, &cp) != nil {
				return fmt.Errorf("host: entry %d of %s is not a checkpoint", from, run)
			}
			if !bytes.Equal(cp.Header, rec.startHash) {
				return fmt.Errorf("host: the checkpoint at entry %d of %s names start entry %x, not %x", from, run, cp.Header, rec.startHash)
			}
		}
		if err := rec.addFrom(ctx, store, e); err != nil {
			return err
		}
		return rec.err
	}
	sum, err := journal.VerifyStoreFrom(ctx, store, run, from, v)
	if err != nil {
		return nil, nil, err
	}
	if first {
		return nil, nil, fmt.Errorf("host: the journal of %s has no entry %d", run, from)
	}
	sum.Header = hdr
	return sum, rec, nil
}

// ErrRecordingEnd is returned by Recording.Serve for a call past the end of
// the journal of a run that has not finished.
var ErrRecordingEnd = errors.New("host: the journal of an unfinished run ends here")

// addFrom adds e, an entry of store's, as the guest got it: its payloads
// in blob form resolved from the store's blob area (journal.ForGuest).
func (r *Recording) addFrom(ctx context.Context, store journal.Store, e *journal.Entry) error {
	blobs, _ := store.(journal.Blobs)
	e, err := journal.ForGuest(ctx, blobs, e)
	if err != nil {
		return err
	}
	r.Add(e)
	return nil
}

// Add collects entry e; call it with every entry of a verified journal, in
// order.
func (r *Recording) Add(e *journal.Entry) {
	r.budget.add(e)
	switch e.Phase {
	case journal.PhaseIntent:
		r.calls = append(r.calls, recordedCall{step: e.Step, op: r.op(e.Op), inputHash: r.keep(e.InputHash), request: r.keep(e.Request),
			since: e.Time, approval: r.keep(e.Approval)})
	case journal.PhaseExecuting:
		if n := len(r.calls); n > 0 && r.calls[n-1].step == e.Step {
			r.calls[n-1].executing = true
		}
	case journal.PhaseCompleted, journal.PhaseFailed:
		if n := len(r.calls); n > 0 && r.calls[n-1].step == e.Step && !r.calls[n-1].done {
			c := &r.calls[n-1]
			c.status, c.response, c.done = abi.Status(e.Status), r.keep(e.Response), true
			return
		}
		if r.lastSegment && e.Op == "run.checkpoint" && e.Phase == journal.PhaseCompleted {
			// The calls before a checkpoint are not re-executed: the
			// next segment starts from its state.
			next, err := checkpointSegment(e.Request, e.Response)
			if err != nil {
				r.err = fmt.Errorf("checkpoint of step %d: %w", e.Step, err)
				return
			}
			r.base, r.baseStep, r.calls = *next, e.Step, r.calls[:0]
			if err := r.budget.restart(e.Response); err != nil {
				r.err = fmt.Errorf("checkpoint of step %d: %w", e.Step, err)
			}
			return
		}
		r.calls = append(r.calls, recordedCall{step: e.Step, op: r.op(e.Op), inputHash: r.keep(e.InputHash), request: r.keep(e.Request),
			status: abi.Status(e.Status), response: r.keep(e.Response), done: true})
	case journal.PhaseEnd:
		r.finished = true
	}
}

// Grow makes room for calls more recorded calls, so that a recording of a
// long run is not copied as it grows (a hint: Add works without it).
func (r *Recording) Grow(calls int) { r.calls = slices.Grow(r.calls, calls) }

// Len returns the number of calls recorded; Served the number served so
// far.
func (r *Recording) Len() int    { return len(r.calls) }
func (r *Recording) Served() int { return r.next }

// Finished reports whether the journal has an end entry.
func (r *Recording) Finished() bool { return r.finished }

// InDoubt returns the last recorded call when it has an intent but no
// outcome: an effect the recorded run left in doubt.
func (r *Recording) InDoubt() (step uint64, op string, ok bool) {
	if n := len(r.calls); n > 0 && !r.calls[n-1].done {
		return r.calls[n-1].step, r.calls[n-1].op, true
	}
	return 0, "", false
}

// Parked reports whether the last recorded call is parked: it has an intent
// and no outcome, and nothing was dispatched for it (no executing entry),
// so it waits, for a timer or its approvers (park.go), and is asked again.
func (r *Recording) Parked(waitOp bool) bool {
	n := len(r.calls)
	if n == 0 || r.calls[n-1].done || r.calls[n-1].executing {
		return false
	}
	return waitOp || r.calls[n-1].approval != nil
}

// waitingIntent returns the time and the approval record of the last
// recorded call's intent.
func (r *Recording) waitingIntent() (time.Time, []byte) {
	c := r.calls[len(r.calls)-1]
	return time.Unix(0, c.since), c.approval
}

// Unserved returns the first recorded call not served yet.
func (r *Recording) Unserved() (step uint64, op string, ok bool) {
	if r.next < len(r.calls) {
		return r.calls[r.next].step, r.calls[r.next].op, true
	}
	return 0, "", false
}

// recordedCall is one recorded import call, collapsed from its entries.
type recordedCall struct {
	step      uint64
	op        string
	inputHash []byte
	request   []byte
	status    abi.Status
	response  []byte
	done      bool
	// since is the intent's time; approval its approval record (a call
	// parked for an approval); executing says an executing entry follows
	// the intent (an effect was dispatched, or may have been).
	since     int64
	approval  []byte
	executing bool
}

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

// Serve answers call hc with its recorded response, after checking that it
// is the recorded op with the recorded request at the recorded step; it
// returns a *DivergenceError otherwise.
func (c *Recording) Serve(_ context.Context, hc *Call) (abi.Status, []byte, error) {
	if c.next >= len(c.calls) {
		if !c.finished {
			return 0, nil, ErrRecordingEnd
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
			return 0, nil, ErrRecordingEnd
		}
		div.Reason = "the journal records no outcome for this call"
	}
	return 0, nil, div
}

// sameInput reports whether the guest sent the recorded request. The bytes
// are compared when the journal has them (the verifier has checked that
// they hash to the recorded input hash), the hashes otherwise.
func sameInput(rc *recordedCall, hc *Call) bool {
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

// locate fills in the stack and the guest function of a divergence from
// the error the engine returned, which carries the wasm stack trace.
func (e *DivergenceError) locate(err error) {
	e.Stack = stackOf(err)
	e.Func = guestFunc(e.Stack)
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
