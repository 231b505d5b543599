package host

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/approval"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/journal"
)

// A run's event stream is its journal and its event log read as one
// sequence of events, in the order they happened:
//
//   - every journal entry is read as the events it records: the run's start
//     and end, a lease taken, each phase of each call (a step), the gate's
//     decision on it (a denial is a call refused by a layer), its approval
//     request and decision, its budget records and, for a streamed model
//     call, the chunks each batch delivered. Each of these events carries
//     the entry's seq.
//   - every event-log record (the guest's stdout, stderr and log lines) sits
//     where Event.Seq places it: after the journal's first Seq entries.
//
// Both are append-only and committed together (an event-log record is
// stored in the batch that commits the entries before it), so the stream
// is too: an event's offset (its ordinal in the stream, from 0) never
// changes as the run goes on, and a reader resumes from an offset without
// losing or repeating one. The events hold no payload: a call's request
// and response show as hashes and sizes, a chunk as its size.

// Kinds of stream events beyond the event log's (stdout, stderr, log).
const (
	StreamStart    EventKind = "start"
	StreamLease    EventKind = "lease"
	StreamCall     EventKind = "call"
	StreamGate     EventKind = "gate"
	StreamDenied   EventKind = "denied"
	StreamApproval EventKind = "approval"
	StreamBudget   EventKind = "budget"
	StreamChunk    EventKind = "chunk"
	StreamEnd      EventKind = "end"
)

// StreamEvent is one event of a run's stream, as agentrt events and the
// daemon's event stream show it.
type StreamEvent struct {
	// Offset is the event's ordinal in the run's stream, from 0.
	Offset uint64    `json:"offset"`
	Kind   EventKind `json:"kind"`
	// Seq is the seq of the journal entry the event is read from; for an
	// event-log record, the seq of the last entry written before it
	// (After is then set).
	Seq   uint64    `json:"seq"`
	After bool      `json:"after,omitempty"`
	Time  time.Time `json:"time"`
	// Step, Op and Phase name the call (call, gate, denied, approval,
	// budget and chunk events).
	Step  uint64 `json:"step,omitempty"`
	Op    string `json:"op,omitempty"`
	Phase string `json:"phase,omitempty"`
	// Status is a call's ABI status ("ok", "denied", ...) on its outcome;
	// a run's status on its end.
	Status string `json:"status,omitempty"`
	// Input and Output are the call's input and output hashes (hex),
	// Size the size of its stored response.
	Input  string `json:"input,omitempty"`
	Output string `json:"output,omitempty"`
	Size   int    `json:"size,omitempty"`
	// Layer and Reason are a gate decision's: the layer that refused and
	// why; Allow says it allowed the call.
	Allow  bool   `json:"allow,omitempty"`
	Layer  string `json:"layer,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Budget is a budget record ("reserve #1 step 3 tool_calls=1").
	Budget string `json:"budget,omitempty"`
	// Epoch and Cell are a lease's (Cell in hex).
	Epoch uint64 `json:"epoch,omitempty"`
	Cell  string `json:"cell,omitempty"`
	// Level and Data are an event-log record's.
	Level uint8  `json:"level,omitempty"`
	Data  string `json:"data,omitempty"`
}

// StreamReader reads a run's event stream as it grows: each Read returns
// the events committed since the last one. It is not safe for concurrent
// use.
type StreamReader struct {
	store journal.Store
	log   EventLog
	run   journal.RunID
	// from is the offset of the first event to return; offset the offset
	// of the next event read.
	from, offset uint64
	// seq is the seq of the next entry to read, logged the number of
	// event-log records read; held are records read whose place is after
	// entries not read yet.
	seq    uint64
	logged int
	held   []Event
}

// NewStreamReader returns a reader of run's stream from offset from.
func NewStreamReader(store journal.Store, log EventLog, run journal.RunID, from uint64) *StreamReader {
	return &StreamReader{store: store, log: log, run: run, from: from}
}

// Offset returns the offset of the next event Read returns.
func (r *StreamReader) Offset() uint64 { return max(r.offset, r.from) }

// Read calls fn with each event committed since the last Read, in order,
// from the reader's offset, until fn returns an error. The journal is
// read before the event log, so that every record placed before an entry
// read is read too (it was committed no later); records placed after the
// last entry read wait for it. After an error, the reader is done: a new
// one resumes from the offset of the last event fn took, plus one.
func (r *StreamReader) Read(ctx context.Context, fn func(StreamEvent) error) error {
	var entries []*journal.Entry
	err := r.store.Records(ctx, r.run, r.seq, func(seq uint64, raw []byte) error {
		rec, err := journal.DecodeRecord(raw)
		if err != nil {
			return fmt.Errorf("host: entry %d of run %s: %w", seq, r.run, err)
		}
		e, err := journal.DecodeEntry(rec.Entry)
		if err != nil {
			return fmt.Errorf("host: entry %d of run %s: %w", seq, r.run, err)
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return err
	}
	if r.log != nil {
		i := 0
		err = r.log.Events(ctx, r.run, func(b []byte) error {
			if i++; i <= r.logged {
				return nil
			}
			var e Event
			if err := abi.Unmarshal(b, &e); err != nil {
				return fmt.Errorf("host: corrupt event of run %s: %w", r.run, err)
			}
			r.held = append(r.held, e)
			r.logged = i
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, e := range entries {
		if err := r.logUpTo(e.Seq, fn); err != nil {
			return err
		}
		for _, ev := range entryEvents(e) {
			if err := r.emit(ev, fn); err != nil {
				return err
			}
		}
		r.seq = e.Seq + 1
	}
	if err := r.logUpTo(r.seq, fn); err != nil {
		return err
	}
	if len(entries) > 0 && entries[len(entries)-1].Phase == journal.PhaseEnd {
		// Records of a log written before events were placed (Seq 0) go
		// after the run's end.
		for _, e := range r.held {
			if err := r.emit(logEvent(e, r.seq), fn); err != nil {
				return err
			}
		}
		r.held = nil
	}
	return nil
}

// logUpTo emits the held event-log records placed before entry seq (and,
// in order, every one before them).
func (r *StreamReader) logUpTo(seq uint64, fn func(StreamEvent) error) error {
	n := 0
	for n < len(r.held) && r.held[n].Seq != 0 && r.held[n].Seq <= seq {
		if err := r.emit(logEvent(r.held[n], r.held[n].Seq), fn); err != nil {
			r.held = r.held[n:]
			return err
		}
		n++
	}
	r.held = r.held[n:]
	return nil
}

func (r *StreamReader) emit(ev StreamEvent, fn func(StreamEvent) error) error {
	ev.Offset = r.offset
	r.offset++
	if ev.Offset < r.from {
		return nil
	}
	return fn(ev)
}

// logEvent is the stream event of event-log record e, placed after the
// journal's first at entries.
func logEvent(e Event, at uint64) StreamEvent {
	return StreamEvent{Kind: e.Kind, Seq: max(at, 1) - 1, After: true, Time: time.Unix(0, e.Time).UTC(),
		Level: e.Level, Data: string(e.Data)}
}

// entryEvents returns the events entry e records, in this order: the
// entry itself (start, lease, a call's phase, end), then the gate's
// decision, the approval, the budget records and the chunks it carries.
func entryEvents(e *journal.Entry) []StreamEvent {
	base := StreamEvent{Seq: e.Seq, Time: time.Unix(0, e.Time).UTC(), Step: e.Step, Op: e.Op}
	var evs []StreamEvent
	add := func(ev StreamEvent) { evs = append(evs, ev) }
	switch e.Phase {
	case journal.PhaseStart:
		ev := base
		ev.Kind, ev.Cell = StreamStart, hex.EncodeToString(e.Cell)
		if e.Header != nil {
			ev.Op = e.Header.ModuleName
			ev.Input = hex.EncodeToString(e.Header.ModuleSHA256)
		}
		add(ev)
	case journal.PhaseLease:
		ev := base
		ev.Kind, ev.Epoch, ev.Cell = StreamLease, e.Epoch, hex.EncodeToString(e.Cell)
		add(ev)
	case journal.PhaseEnd:
		ev := base
		ev.Kind = StreamEnd
		if e.End != nil {
			ev.Status, ev.Reason, ev.Step = string(e.End.Status), e.End.Error, e.End.Steps
		}
		add(ev)
	default:
		ev := base
		ev.Kind, ev.Phase = StreamCall, e.Phase.String()
		ev.Input = hex.EncodeToString(e.InputHash)
		if e.Phase == journal.PhaseCompleted || e.Phase == journal.PhaseFailed {
			ev.Status = abi.Status(e.Status).String()
			ev.Output, ev.Size = hex.EncodeToString(e.OutputHash), len(e.Response)
		}
		add(ev)
	}
	if e.Phase == journal.PhaseFailed && abi.Status(e.Status) != abi.StatusOK {
		if d, ok := denialOf(e); ok {
			d.Time, d.Seq, d.Step, d.Op, d.Phase = base.Time, base.Seq, base.Step, base.Op, e.Phase.String()
			add(d)
		}
	}
	if len(e.Gate) > 0 {
		var g GateRecord
		if abi.Unmarshal(e.Gate, &g) == nil && g.Allow {
			ev := base
			ev.Kind, ev.Phase, ev.Allow, ev.Reason = StreamGate, e.Phase.String(), true, g.Rule
			if g.Approved {
				ev.Reason = "approved by " + g.Approver
			}
			add(ev)
		}
	}
	if len(e.Approval) > 0 {
		if a, err := approval.DecodeRecord(e.Approval); err == nil {
			ev := base
			ev.Kind, ev.Phase, ev.Layer = StreamApproval, "requested", a.Request.Group
			ev.Reason = fmt.Sprintf("%d vote(s)", len(a.Votes))
			if a.Decision != nil {
				ev.Phase, ev.Allow, ev.Reason = "decided", a.Decision.Approved, a.Decision.Reason
			}
			add(ev)
		}
	}
	if len(e.Budget) > 0 {
		if ops, err := budget.DecodeRecord(e.Budget); err == nil {
			for _, o := range ops {
				ev := base
				ev.Kind, ev.Phase, ev.Budget = StreamBudget, o.Kind.String(), o.String()
				add(ev)
			}
		}
	}
	if e.Phase == journal.PhaseCompleted && (e.Op == "llm.complete" || e.Op == "llm.next") {
		var b abi.LLMBatch
		if abi.Unmarshal(e.Response, &b) == nil {
			for _, c := range b.Chunks {
				ev := base
				ev.Kind, ev.Phase, ev.Size = StreamChunk, c.Type, len(c.Text)+len(c.Arguments)
				add(ev)
			}
		}
	}
	return evs
}

// denialOf returns the denial event of a failed call: the layer and
// reason its gate record names or, when the cell kept none (no policy or
// modes), the reason the guest was given, for a call refused with
// StatusDenied or StatusBudget.
func denialOf(e *journal.Entry) (StreamEvent, bool) {
	if len(e.Gate) > 0 {
		var g GateRecord
		if abi.Unmarshal(e.Gate, &g) == nil && !g.Allow {
			return StreamEvent{Kind: StreamDenied, Layer: g.Layer, Reason: g.Reason}, true
		}
	}
	switch abi.Status(e.Status) {
	case abi.StatusDenied:
		return StreamEvent{Kind: StreamDenied, Layer: LayerCapability, Reason: errorMessage(e.Response)}, true
	case abi.StatusBudget:
		return StreamEvent{Kind: StreamDenied, Layer: LayerBudget, Reason: errorMessage(e.Response)}, true
	}
	return StreamEvent{}, false
}
