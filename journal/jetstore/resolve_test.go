package jetstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/jetstore/jstest"
	"github.com/agentrt/agentrt/journal/storetest"
	"github.com/nats-io/nats.go"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

// TestUnansweredCommitIsResolvedByItsMessageID: a commit whose batch the
// servers applied but whose answer was lost is adopted when the journal's
// tail is its last record (by message id); one the servers did not apply
// is ErrOutcomeUnknown, and the run's next commit reads the tail again.
func TestUnansweredCommitIsResolvedByItsMessageID(t *testing.T) {
	ctx := context.Background()
	nc := jstest.Connect(t, jstest.Server(t))
	s, err := Open(ctx, nc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	run := journal.NewRunID(time.Now())
	recs := storetest.Chain(t, run, 5)
	lost := errors.New("nats: timeout")

	// Applied, answer lost: the batch is sent as Commit sends it, and
	// resolve is given the timeout instead of the ack.
	b := &journal.Batch{Run: run, Records: recs[:3]}
	msgs, err := s.encode(ctx, b, tail{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jetstreamext.PublishMsgBatch(ctx, s.js, msgs); err != nil {
		t.Fatal(err)
	}
	if err := s.resolve(b, msgs, lost); err != nil {
		t.Fatalf("an applied commit whose answer was lost: %v, want adopted", err)
	}
	if err := s.Commit(ctx, &journal.Batch{Run: run, Next: 3, Records: recs[3:4]}); err != nil {
		t.Fatalf("the commit after an adopted one: %v", err)
	}

	// Not applied: unknown, and nothing is assumed.
	b = &journal.Batch{Run: run, Next: 4, Records: recs[4:]}
	msgs, err = s.encode(ctx, b, tail{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.resolve(b, msgs, lost); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("a commit the servers never saw: %v, want ErrOutcomeUnknown", err)
	}
	if err := s.Commit(ctx, b); err != nil {
		t.Fatalf("the run's next commit: %v", err)
	}
	if n, _ := s.Head(ctx, run); n != 5 {
		t.Fatalf("head %d, want 5", n)
	}

	// Another writer's record at the place: not ours, not adopted.
	other := storetest.Chain(t, run, 6)
	b = &journal.Batch{Run: run, Next: 5, Records: other[5:]}
	mine, _ := s.encode(ctx, b, tail{})
	theirs := []*nats.Msg{{Subject: mine[0].Subject, Header: nats.Header{}, Data: mine[0].Data}}
	for k, v := range mine[0].Header {
		theirs[0].Header[k] = v
	}
	theirs[0].Header.Set("Nats-Msg-Id", "someone-else")
	theirs[0].Header.Del("Nats-Expected-Last-Subject-Sequence")
	theirs[0].Header.Del("Nats-Expected-Last-Subject-Sequence-Subject")
	if _, err := jetstreamext.PublishMsgBatch(ctx, s.js, theirs); err != nil {
		t.Fatal(err)
	}
	if err := s.resolve(b, mine, lost); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("another writer's record at the place: %v, want ErrOutcomeUnknown", err)
	}
}
