package journal

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/fxamacker/cbor/v2"
)

// Lineage: which runs called which op, on which resource, on which cell,
// when, with which input and output, and which runs consumed a given output.
// SPEC.md section 10.1 defines the terms and the badger store's index.
//
// Everything here is derived from journals, and is for finding runs, never
// for trusting them: a Call says what a journal claims, not that the journal
// verifies. Verify a run found here with a Verifier before relying on it.

// Outcome says how far a call got.
type Outcome string

// Outcomes of a call.
const (
	// OutcomeCompleted: the call has a completed entry.
	OutcomeCompleted Outcome = "completed"
	// OutcomeFailed: the call has a failed entry (Call.Status says why).
	OutcomeFailed Outcome = "failed"
	// OutcomeOpen: the effect's intent (and perhaps executing) entry is in
	// the journal, its outcome is not: in progress, or in doubt after a
	// crash.
	OutcomeOpen Outcome = "open"
)

// Call is one import call of a run as the lineage index keeps it: one row
// per step, whatever the number of entries that record it.
type Call struct {
	Run RunID `cbor:"1,keyasint"`
	// Parent is the run that started Run (its header's parent), or zero.
	Parent RunID  `cbor:"2,keyasint"`
	Step   uint64 `cbor:"3,keyasint"`
	// Seq is the seq of the call's first entry (the intent of an effect).
	Seq uint64 `cbor:"4,keyasint"`
	Op  string `cbor:"5,keyasint"`
	// Resource is what the call acted on, per op (see Resource); "" when the
	// op names none or the request did not decode.
	Resource string `cbor:"6,keyasint,omitempty"`
	// Cell is the key of the cell whose seal covers the call's last entry
	// read (the first seal at or after it), or, when no seal follows, the
	// cell the entry names.
	Cell []byte `cbor:"7,keyasint"`
	// Time is the host time of the call's first entry, Unix ns.
	Time      int64  `cbor:"8,keyasint"`
	InputHash []byte `cbor:"9,keyasint"`
	// OutputHash is the hash of the response; nil while the call is open.
	OutputHash []byte  `cbor:"10,keyasint,omitempty"`
	Outcome    Outcome `cbor:"11,keyasint"`
	// Status is the ABI status of a completed or failed call.
	Status uint32 `cbor:"12,keyasint,omitempty"`
	// ForkOf is the run that Run was forked from (its header's fork), or
	// zero: the way from a fork to its parent, as Parent is from a
	// sub-run to the run that started it.
	ForkOf RunID `cbor:"13,keyasint,omitzero"`
}

// RunInfo is what lineage keeps of a run's header.
type RunInfo struct {
	Run    RunID
	Parent RunID
	// ForkOf is the run Run was forked from, or zero.
	ForkOf RunID
	// InputHash is the SHA-256 of the header's input; nil when the input
	// is empty (an empty input names no data, so nothing consumes it).
	InputHash []byte
	// Namespace is the kv namespace of the run's grant, "" without one.
	Namespace string
	// Started is the host time of the start entry, Unix ns.
	Started int64
}

// Consumer is a run that consumed a hash (SPEC.md section 10.1): through
// its header input (Input), through the responses of the calls Steps, or
// both.
type Consumer struct {
	Run    RunID
	Parent RunID
	Input  bool
	Steps  []uint64
	// Time is when the run first consumed the hash: its start when
	// through its input, else the time of its first such call.
	Time int64
}

// Skip is a record that lineage could not decode and left out.
type Skip struct {
	Run RunID  `cbor:"1,keyasint"`
	Seq uint64 `cbor:"2,keyasint"`
	Err string `cbor:"3,keyasint"`
}

func (s Skip) String() string {
	return fmt.Sprintf("run %s entry %d: not indexed: %s", s.Run, s.Seq, s.Err)
}

// IndexReport says what bringing a lineage index up to date did.
type IndexReport struct {
	// Runs is the number of journals read, Entries the records read and
	// Calls the call rows written.
	Runs, Entries, Calls int
	// Skipped lists every record the index has left out because it did not
	// decode, in this pass or an earlier one, by run and seq.
	Skipped []Skip
}

// Lineage answers lineage queries over the journals of a store. An
// implementation keeps an index derived from the journals and brings it up
// to date before it answers; the index is never trusted for verification.
type Lineage interface {
	// Index brings the index up to date with every journal and reports
	// the records it could not decode.
	Index(ctx context.Context) (IndexReport, error)
	// Query returns the calls that match f, oldest first (by Time, then
	// run, then step), at most f.Limit of them when it is not 0.
	Query(ctx context.Context, f Filter) ([]Call, error)
	// Consumers returns the runs that consumed h, oldest first, at most
	// limit of them when it is not 0.
	Consumers(ctx context.Context, h []byte, limit int) ([]Consumer, error)
}

// Filter selects calls. Every field that is set must match; the zero Filter
// matches every call.
type Filter struct {
	// Run, when set, keeps the calls of that run, and with SubRuns also
	// those of the runs it started, transitively (Header.Parent); with
	// Forks also those of the runs forked from it, transitively
	// (Header.Fork). With both, the runs either relation reaches.
	Run     *RunID
	SubRuns bool
	Forks   bool
	// Op is an op name ("kv.put"), or a prefix of one ending in "." or "*"
	// ("http.", "kv.*").
	Op string
	// Resource is a resource ("smoke/k1", "example.com:8080"), or a prefix
	// of one ending in "*" ("smoke/*").
	Resource string
	// Cell is a prefix of the cell key in lower-case hex.
	Cell string
	// Since (inclusive) and Until (exclusive) bound Call.Time; zero is
	// unbounded.
	Since, Until time.Time
	InputHash    []byte
	OutputHash   []byte
	// Limit is the most calls returned; 0 is no limit.
	Limit int
}

// ErrBadFilter is returned by Filter.Check, and by queries given a filter
// that fails it.
var ErrBadFilter = errors.New("journal: bad lineage filter")

// Check reports a filter that cannot match as its author meant.
func (f *Filter) Check() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrBadFilter, fmt.Sprintf(format, a...))
	}
	switch {
	case f.Limit < 0:
		return bad("negative limit %d", f.Limit)
	case f.InputHash != nil && len(f.InputHash) != HashSize:
		return bad("input hash is %d bytes, want %d", len(f.InputHash), HashSize)
	case f.OutputHash != nil && len(f.OutputHash) != HashSize:
		return bad("output hash is %d bytes, want %d", len(f.OutputHash), HashSize)
	case len(f.Cell) > 2*HashSize || strings.Trim(f.Cell, "0123456789abcdef") != "":
		return bad("cell %q is not a prefix of a key in lower-case hex", f.Cell)
	case !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until):
		return bad("since %s is not before until %s", f.Since.Format(time.RFC3339), f.Until.Format(time.RFC3339))
	case f.SubRuns && f.Run == nil:
		return bad("sub-runs of no run")
	case f.Forks && f.Run == nil:
		return bad("forks of no run")
	case strings.ContainsRune(strings.TrimSuffix(f.Op, "*"), '*'), strings.ContainsRune(strings.TrimSuffix(f.Resource, "*"), '*'):
		return bad("a * may only end an op or a resource")
	}
	return nil
}

// OpPrefix returns the prefix f.Op selects and whether it is a prefix
// rather than a whole name.
func (f *Filter) OpPrefix() (string, bool) { return opPattern(f.Op) }

// ResourcePrefix returns the prefix f.Resource selects and whether it is a
// prefix rather than a whole resource.
func (f *Filter) ResourcePrefix() (string, bool) {
	if p, ok := strings.CutSuffix(f.Resource, "*"); ok {
		return p, true
	}
	return f.Resource, false
}

func opPattern(op string) (string, bool) {
	if p, ok := strings.CutSuffix(op, "*"); ok {
		return p, true
	}
	return op, strings.HasSuffix(op, ".")
}

// Match reports whether c matches every field of f but Run and SubRuns,
// which name runs rather than calls and which the caller resolves (a run's
// sub-runs are known only from other runs' headers).
func (f *Filter) Match(c *Call) bool {
	if f.Op != "" {
		p, prefix := f.OpPrefix()
		if prefix && !strings.HasPrefix(c.Op, p) || !prefix && c.Op != p {
			return false
		}
	}
	if f.Resource != "" {
		p, prefix := f.ResourcePrefix()
		if prefix && !strings.HasPrefix(c.Resource, p) || !prefix && c.Resource != p {
			return false
		}
	}
	switch {
	case f.Cell != "" && !strings.HasPrefix(hex.EncodeToString(c.Cell), f.Cell),
		!f.Since.IsZero() && c.Time < f.Since.UnixNano(),
		!f.Until.IsZero() && c.Time >= f.Until.UnixNano(),
		f.InputHash != nil && !bytes.Equal(c.InputHash, f.InputHash),
		f.OutputHash != nil && !bytes.Equal(c.OutputHash, f.OutputHash):
		return false
	}
	return true
}

// CallLess orders calls as queries return them: by time, then run, then
// step.
func CallLess(a, b *Call) int {
	switch {
	case a.Time != b.Time:
		if a.Time < b.Time {
			return -1
		}
		return 1
	case a.Run != b.Run:
		return bytes.Compare(a.Run[:], b.Run[:])
	case a.Step < b.Step:
		return -1
	case a.Step > b.Step:
		return 1
	}
	return 0
}

// emptyHash is the SHA-256 of no bytes: the hash of an empty payload, which
// names no data.
var emptyHash = Sum(nil)

// Consumes reports whether a call's response counts as consuming h: it was
// received (the call completed or failed) and h is not the empty hash.
func (c *Call) Consumes(h []byte) bool {
	return c.Outcome != OutcomeOpen && len(h) == HashSize && !bytes.Equal(h, emptyHash) && bytes.Equal(c.OutputHash, h)
}

// resourceOf is the one table of what each op acts on. An op not in it (run.*,
// clock.now, random.bytes: they act on the run itself or on nothing outside)
// has no resource. A request that does not decode has none either: the host
// refused it with bad_request. kv resources are "<namespace>/<key>" (the
// namespace is the grant's, recorded in the header); kv.list's is
// "<namespace>/<prefix>*", the keys it may have read; tool.run's is
// "tool:<name>".
var resourceOf = map[string]func(ns string, req []byte) (string, bool){
	"kv.get": func(ns string, req []byte) (string, bool) {
		var r abi.KVGetRequest
		return ns + "/" + r.Key, abi.Unmarshal(req, &r) == nil
	},
	"kv.put": func(ns string, req []byte) (string, bool) {
		var r abi.KVPutRequest
		err := abi.Unmarshal(req, &r)
		return ns + "/" + r.Key, err == nil
	},
	"kv.delete": func(ns string, req []byte) (string, bool) {
		var r abi.KVDeleteRequest
		err := abi.Unmarshal(req, &r)
		return ns + "/" + r.Key, err == nil
	},
	"kv.list": func(ns string, req []byte) (string, bool) {
		var r abi.KVListRequest
		err := abi.Unmarshal(req, &r)
		return ns + "/" + r.Prefix + "*", err == nil
	},
	"http.request": func(_ string, req []byte) (string, bool) {
		var r abi.HTTPRequest
		if abi.Unmarshal(req, &r) != nil {
			return "", false
		}
		u, err := url.Parse(r.URL)
		if err != nil || u.Host == "" {
			return "", false
		}
		return strings.ToLower(u.Host), true
	},
	"tool.run": func(_ string, req []byte) (string, bool) {
		var r abi.ToolRunRequest
		err := abi.Unmarshal(req, &r)
		return "tool:" + r.Name, err == nil
	},
}

// Resource returns what a call of op with request req acts on in a run
// whose kv namespace is ns, or "" if it names nothing (see resourceOf).
func Resource(op, ns string, req []byte) string {
	fn := resourceOf[op]
	if fn == nil || len(req) == 0 {
		return ""
	}
	r, ok := fn(ns, req)
	if !ok {
		return ""
	}
	return r
}

// grantNamespace returns the kv namespace of a grant's canonical CBOR
// ({"kv": {"namespace": ns}, ...}), "" when it has none. It reads only that
// field, so a grant with capabilities this package does not know still
// yields it.
func grantNamespace(grant []byte) string {
	var g map[string]cbor.RawMessage
	if len(grant) == 0 || abi.DecodeStrict(grant, &g) != nil {
		return ""
	}
	var kv map[string]cbor.RawMessage
	if abi.DecodeStrict(g["kv"], &kv) != nil {
		return ""
	}
	var ns string
	if abi.DecodeStrict(kv["namespace"], &ns) != nil {
		return ""
	}
	return ns
}

// TraceState is what a Tracer needs to go on with a journal later: what a
// lineage index keeps per run beside its rows.
type TraceState struct {
	// Seen is the number of records read; Next the seq to read from next:
	// Seen, or the first entry of the call open at Seen, which is read
	// again so that its outcome finds its request.
	Seen uint64 `cbor:"1,keyasint"`
	Next uint64 `cbor:"2,keyasint"`
	// Header says the start entry was read; Parent, InputHash, Namespace,
	// Started and ForkOf come from it.
	Header    bool   `cbor:"3,keyasint,omitempty"`
	Parent    RunID  `cbor:"4,keyasint"`
	InputHash []byte `cbor:"5,keyasint,omitempty"`
	Namespace string `cbor:"6,keyasint,omitempty"`
	Started   int64  `cbor:"7,keyasint,omitempty"`
	// ForkOf is the header's fork parent.
	ForkOf RunID `cbor:"8,keyasint,omitzero"`
}

// Tracer turns the records of one journal, read in seq order, into the
// calls they record. It is a state machine without I/O: the caller reads
// records and stores what it returns. It does not verify: it assumes the
// entries are in a verifiable order, and on a journal that is not it still
// returns what the entries say.
type Tracer struct {
	// Blobs, when set, resolves a request stored in blob form (SPEC.md
	// section 15) of an op that has a resource, so that its resource is
	// the one its payload names.
	Blobs Blobs
	run   RunID
	state TraceState
	// open is the effect whose intent was read and outcome not yet.
	open *Call
	// pending are calls read since the last seal, which will be stamped
	// with that seal's cell.
	pending []Call
}

// NewTracer starts tracing run's journal from seq 0.
func NewTracer(run RunID) *Tracer { return &Tracer{run: run} }

// ResumeTracer goes on tracing run's journal from st, which an earlier
// Tracer's State returned; the caller reads records from st.Next.
func ResumeTracer(run RunID, st TraceState) *Tracer {
	st.Seen = st.Next
	return &Tracer{run: run, state: st}
}

// State returns what a later ResumeTracer needs. Call it after Flush.
func (t *Tracer) State() TraceState { return t.state }

// Info returns what the tracer learnt from the run's header, and false if
// it has not read it.
func (t *Tracer) Info() (RunInfo, bool) {
	s := &t.state
	return RunInfo{Run: t.run, Parent: s.Parent, ForkOf: s.ForkOf, InputHash: s.InputHash, Namespace: s.Namespace, Started: s.Started}, s.Header
}

// Add reads the record at seq and returns the calls it settles: when the
// record carries a seal, every call read since the previous seal, stamped
// with the sealing cell, and a row for the effect still open, if any. A
// record that does not decode is skipped: Add returns its error and the
// tracer's state is as if the record were absent.
func (t *Tracer) Add(seq uint64, raw []byte) ([]Call, error) {
	rec, err := DecodeRecord(raw)
	if err != nil {
		t.state.Seen = seq + 1
		t.advance()
		return nil, err
	}
	e, err := DecodeEntry(rec.Entry)
	if err != nil {
		t.state.Seen = seq + 1
		t.advance()
		return nil, err
	}
	t.state.Seen = seq + 1
	switch e.Phase {
	case PhaseStart:
		h := e.Header
		t.state.Header, t.state.Started = true, e.Time
		t.state.Namespace = grantNamespace(h.Grant)
		t.state.Parent = RunID{}
		if len(h.Parent) == len(RunID{}) {
			t.state.Parent = RunID(h.Parent)
		}
		t.state.ForkOf = RunID{}
		if h.Fork != nil {
			t.state.ForkOf = h.Fork.Parent
		}
		t.state.InputHash = nil
		if len(h.Input) > 0 {
			t.state.InputHash = Sum(h.Input)
		}
	case PhaseIntent:
		c := t.call(seq, e)
		t.open = &c
	case PhaseExecuting:
		if t.open == nil || t.open.Step != e.Step {
			// Its intent is missing or damaged: the executing entry
			// still names the call, with no request.
			c := t.call(seq, e)
			t.open = &c
		}
	case PhaseCompleted, PhaseFailed:
		var c Call
		if t.open != nil && t.open.Step == e.Step {
			c, t.open = *t.open, nil
		} else {
			c = t.call(seq, e)
		}
		c.Cell = e.Cell
		c.OutputHash = bytes.Clone(e.OutputHash)
		c.Status = e.Status
		c.Outcome = OutcomeCompleted
		if e.Phase == PhaseFailed {
			c.Outcome = OutcomeFailed
		}
		t.pending = append(t.pending, c)
	}
	if t.open != nil {
		t.open.Cell = e.Cell
	}
	var out []Call
	if rec.Seal != nil {
		out = t.settle(rec.Seal.Cell)
	}
	t.advance()
	return out, nil
}

// Flush returns the calls read since the last seal, with the cells their
// entries name (no seal covers them: a journal that ends without one is
// damaged or cut), and the open effect, if any.
func (t *Tracer) Flush() []Call {
	out := t.settle(nil)
	t.advance()
	return out
}

func (t *Tracer) settle(cell []byte) []Call {
	out := t.pending
	t.pending = nil
	if t.open != nil {
		out = append(out, *t.open)
	}
	if cell != nil {
		for i := range out {
			out[i].Cell = cell
		}
	}
	for i := range out {
		out[i].Cell = bytes.Clone(out[i].Cell)
	}
	return out
}

func (t *Tracer) advance() {
	t.state.Next = t.state.Seen
	if t.open != nil {
		t.state.Next = t.open.Seq
	}
}

// call starts the row of the call e belongs to, at its first entry seq.
func (t *Tracer) call(seq uint64, e *Entry) Call {
	return Call{
		Run:       t.run,
		Parent:    t.state.Parent,
		ForkOf:    t.state.ForkOf,
		Step:      e.Step,
		Seq:       seq,
		Op:        e.Op,
		Resource:  Resource(e.Op, t.state.Namespace, t.request(e)),
		Cell:      e.Cell,
		Time:      e.Time,
		InputHash: bytes.Clone(e.InputHash),
		Outcome:   OutcomeOpen,
	}
}

// request returns e's request as the guest sent it when its op has a
// resource to find in it: resolved from blob form when the tracer has a
// blob area, as stored otherwise (then it names no resource).
func (t *Tracer) request(e *Entry) []byte {
	if t.Blobs == nil || resourceOf[e.Op] == nil || !StoredInBlobForm(e.Request, e.InputHash) {
		return e.Request
	}
	req, err := ResolvePayload(context.Background(), t.Blobs, e.Request, e.InputHash, MaxResolved)
	if err != nil {
		return e.Request
	}
	return req
}

// Trace reads run's journal from store and returns its calls, one per
// step, in step order, what its header says, and the records it skipped.
// It is the reference every lineage index must agree with.
func Trace(ctx context.Context, store Store, run RunID) ([]Call, RunInfo, []Skip, error) {
	t := NewTracer(run)
	t.Blobs, _ = store.(Blobs)
	var (
		calls []Call
		skips []Skip
	)
	byStep := map[uint64]int{}
	keep := func(cs []Call) {
		for _, c := range cs {
			if i, ok := byStep[c.Step]; ok {
				calls[i] = c
				continue
			}
			byStep[c.Step] = len(calls)
			calls = append(calls, c)
		}
	}
	err := store.Records(ctx, run, 0, func(seq uint64, raw []byte) error {
		cs, err := t.Add(seq, raw)
		if err != nil {
			skips = append(skips, Skip{Run: run, Seq: seq, Err: err.Error()})
		}
		keep(cs)
		return nil
	})
	keep(t.Flush())
	slices.SortFunc(calls, func(a, b Call) int { return cmp.Compare(a.Step, b.Step) })
	info, _ := t.Info()
	return calls, info, skips, err
}
