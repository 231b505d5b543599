package host

import (
	"context"
	"fmt"
	"io"
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
}

// EventLog stores the events of runs as opaque records (the canonical CBOR
// of Event), in order.
type EventLog interface {
	AppendEvents(ctx context.Context, run journal.RunID, events [][]byte) error
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

// eventBuffer collects a run's events, passes each to the live sink at once
// and hands them to the event log at the next journal commit.
type eventBuffer struct {
	run  journal.RunID
	now  func() time.Time
	sink func(Event)
	// keep says whether events are buffered for an event log.
	keep bool

	mu  sync.Mutex
	buf []Event
}

func (b *eventBuffer) add(e Event) {
	e.Run = b.run
	e.Time = b.now().UnixNano()
	if b.sink != nil {
		b.sink(e)
	}
	if !b.keep {
		return
	}
	b.mu.Lock()
	b.buf = append(b.buf, e)
	b.mu.Unlock()
}

func (b *eventBuffer) writer(kind EventKind) io.Writer {
	return eventWriter{b, kind}
}

// flush moves the buffered events to log; with no log they are dropped
// once the sink has seen them (replay keeps no events).
func (b *eventBuffer) flush(ctx context.Context, log EventLog) error {
	b.mu.Lock()
	evs := b.buf
	b.buf = nil
	b.mu.Unlock()
	if log == nil || len(evs) == 0 {
		return nil
	}
	raw := make([][]byte, len(evs))
	for i := range evs {
		b, err := abi.Marshal(&evs[i])
		if err != nil {
			return err
		}
		raw[i] = b
	}
	return log.AppendEvents(ctx, b.run, raw)
}

type eventWriter struct {
	b    *eventBuffer
	kind EventKind
}

func (w eventWriter) Write(p []byte) (int, error) {
	w.b.add(Event{Kind: w.kind, Data: append([]byte(nil), p...)})
	return len(p), nil
}
