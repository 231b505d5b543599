package jetstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/jetstore"
	"github.com/agentrt/agentrt/journal/jetstore/jstest"
	"github.com/agentrt/agentrt/journal/storetest"
	"github.com/nats-io/nats.go/jetstream"
)

// TestBatchNoServerTookIsSentAgain: a commit whose batch finds no server
// of the stream (no responders: a stream between two leaders looks so to
// its writers; here the stream stops listening on the journal's subjects
// for a while) is sent again until one answers, and lands once the stream
// listens again; with none within the store's timeout it is refused as
// not written, never left as an unknown outcome, and the journal holds
// nothing of it.
func TestBatchNoServerTookIsSentAgain(t *testing.T) {
	ctx := context.Background()
	nc := jstest.Connect(t, jstest.Server(t))
	st, err := jetstore.Open(ctx, nc, jetstore.Options{Stream: "NL", Prefix: "nl", LeaseBucket: "NLL", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, "NL")
	if err != nil {
		t.Fatal(err)
	}
	listening := stream.CachedInfo().Config
	deaf := listening
	deaf.Subjects = []string{"elsewhere.>"}
	run := journal.NewRunID(time.Now())
	chain := storetest.Chain(t, run, 3)
	if err := st.Commit(ctx, &journal.Batch{Run: run, Records: chain[:1], Durable: true}); err != nil {
		t.Fatal(err)
	}

	// Nobody listens for the whole timeout: refused, nothing written.
	if _, err := js.UpdateStream(ctx, deaf); err != nil {
		t.Fatal(err)
	}
	err = st.Commit(ctx, &journal.Batch{Run: run, Next: 1, Records: chain[1:2], Durable: true})
	if err == nil || errors.Is(err, jetstore.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("a commit nobody took for the whole timeout: %v; want a refusal, nothing written", err)
	}

	// The stream listens again while the commit is being sent again.
	go func() {
		time.Sleep(300 * time.Millisecond)
		if _, err := js.UpdateStream(ctx, listening); err != nil {
			t.Error(err)
		}
	}()
	if err := st.Commit(ctx, &journal.Batch{Run: run, Next: 1, Records: chain[1:2], Durable: true}); err != nil {
		t.Fatalf("a commit sent again until the stream listened: %v", err)
	}
	if n, err := st.Head(ctx, run); err != nil || n != 2 {
		t.Fatalf("the journal holds %d entries (%v), want the 2 committed", n, err)
	}
}
