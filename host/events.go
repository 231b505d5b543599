package host

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
)

// EventKind says where an event came from.
type EventKind string

// Event kinds.
const (
	EventStdout EventKind = "stdout"
	EventStderr EventKind = "stderr"
	EventRunLog EventKind = "log"
)

// Event is one line of a run's event log: what the guest wrote to stdout or
// stderr, or logged with run.log. Events are not journal entries: stdout and
// stderr follow from the journal (replay writes them again), and run.log
// calls are journaled as calls. They are kept for people to read.
type Event struct {
	Run   journal.RunID `cbor:"1,keyasint"`
	Time  int64         `cbor:"2,keyasint"`
	Kind  EventKind     `cbor:"3,keyasint"`
	Level uint8         `cbor:"4,keyasint,omitempty"`
	Data  []byte        `cbor:"5,keyasint"`
	// Seq places the event in the run's journal: it was written after
	// the journal's first Seq entries and before entry Seq. Zero in a log
	// written before events were placed (ReadStream puts those last).
	Seq uint64 `cbor:"6,keyasint,omitempty"`
}

// EventLog reads the events of runs, stored as opaque records (the
// canonical CBOR of Event) in order. They are written with the run's
// journal batches.
type EventLog interface {
	Events(ctx context.Context, run journal.RunID, fn func([]byte) error) error
}

// ReadEvents calls fn with every event of run in log, in order.
func ReadEvents(ctx context.Context, log EventLog, run journal.RunID, fn func(Event) error) error {
	return log.Events(ctx, run, func(b []byte) error {
		var e Event
		if err := abi.Unmarshal(b, &e); err != nil {
			return fmt.Errorf("host: corrupt event of run %s: %w", run, err)
		}
		return fn(e)
	})
}

// Stderr returns what run wrote to its standard error, as log holds it:
// the guest's own account of a failure. limit bounds the bytes kept (0:
// all of it).
func Stderr(ctx context.Context, log EventLog, run journal.RunID, limit int) (string, error) {
	var b strings.Builder
	err := ReadEvents(ctx, log, run, func(e Event) error {
		if e.Kind == EventStderr && (limit == 0 || b.Len() < limit) {
			b.Write(e.Data)
		}
		return nil
	})
	return b.String(), err
}

// Limits of the event buffer between two journal commits.
const (
	// maxEventChunk is the most bytes of consecutive output of one kind
	// merged into one event.
	maxEventChunk = 64 << 10
	// maxEventBuffer is the most bytes kept between two commits; output
	// beyond it is counted and dropped, and the drop is logged.
	maxEventBuffer = 1 << 20
)

// eventBuffer collects a run's events, passes each to the live sink at once
// and hands them to the journal writer at the next commit.
type eventBuffer struct {
	run  journal.RunID
	now  func() time.Time
	sink func(Event)
	// at, when set, is the seq the journal's next entry gets (Event.Seq).
	at func() uint64
	// keep says whether events are buffered for the event log.
	keep bool
	// replaying drops every event: a resumed run re-executes calls whose
	// output was logged the first time.
	replaying bool
	// limit is the run's log quota (Limits.LogBytes; zero: none) and kept
	// the bytes of output taken so far, over every execution of the run.
	// Output past the quota is dropped, and the drop said once.
	limit, kept uint64
	overQuota   bool

	sinkMu  sync.Mutex
	mu      sync.Mutex
	buf     []Event
	size    int
	dropped int
}

func (b *eventBuffer) add(e Event) {
	if b.replaying {
		return
	}
	e.Run = b.run
	e.Time = b.now().UnixNano()
	if b.at != nil {
		e.Seq = b.at()
	}
	if b.limit > 0 {
		b.mu.Lock()
		over := b.kept+uint64(len(e.Data)) > b.limit
		first := over && !b.overQuota
		if over {
			b.overQuota = true
		} else {
			b.kept += uint64(len(e.Data))
		}
		b.mu.Unlock()
		if over {
			if first {
				b.push(Event{Run: b.run, Time: e.Time, Kind: EventStderr, Seq: e.Seq,
					Data: fmt.Appendf(nil, "agentrt: the run's log quota of %d bytes is used up (limits.log): its further output is dropped\n", b.limit)})
			}
			return
		}
	}
	b.push(e)
}

// push passes e to the sink and keeps it for the event log.
func (b *eventBuffer) push(e Event) {
	if b.sink != nil {
		// A capability's process (an MCP server's stderr) adds events
		// beside the guest: the sink sees one at a time.
		b.sinkMu.Lock()
		b.sink(e)
		b.sinkMu.Unlock()
	}
	if !b.keep {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.size+len(e.Data) > maxEventBuffer {
		b.dropped += len(e.Data)
		return
	}
	b.size += len(e.Data)
	if n := len(b.buf); n > 0 && e.Kind != EventRunLog && b.buf[n-1].Kind == e.Kind && b.buf[n-1].Seq == e.Seq && len(b.buf[n-1].Data)+len(e.Data) <= maxEventChunk {
		b.buf[n-1].Data = append(b.buf[n-1].Data, e.Data...)
		return
	}
	b.buf = append(b.buf, e)
}

func (b *eventBuffer) writer(kind EventKind) io.Writer {
	return eventWriter{b, kind}
}

// flushTo moves the buffered events into w's next commit.
func (b *eventBuffer) flushTo(w *journal.Writer) error {
	if !b.keep {
		return nil
	}
	b.mu.Lock()
	evs, dropped := b.buf, b.dropped
	b.buf, b.size, b.dropped = nil, 0, 0
	b.mu.Unlock()
	if dropped > 0 {
		var seq uint64
		if b.at != nil {
			seq = b.at()
		}
		evs = append(evs, Event{Run: b.run, Time: b.now().UnixNano(), Kind: EventStderr, Seq: seq,
			Data: fmt.Appendf(nil, "agentrt: %d bytes of guest output dropped (more than %d between two journal commits)\n", dropped, maxEventBuffer)})
	}
	for i := range evs {
		raw, err := abi.Marshal(&evs[i])
		if err != nil {
			return err
		}
		w.AddEvents(raw)
	}
	return nil
}

type eventWriter struct {
	b    *eventBuffer
	kind EventKind
}

func (w eventWriter) Write(p []byte) (int, error) {
	w.b.add(Event{Kind: w.kind, Data: append([]byte(nil), p...)})
	return len(p), nil
}
