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
	st, listen := deafenable(t, "NL", time.Second)
	run := journal.NewRunID(time.Now())
	chain := storetest.Chain(t, run, 3)
	if err := st.Commit(ctx, &journal.Batch{Run: run, Records: chain[:1], Durable: true}); err != nil {
		t.Fatal(err)
	}

	// Nobody listens for the whole timeout: refused, nothing written.
	listen(false)
	err := st.Commit(ctx, &journal.Batch{Run: run, Next: 1, Records: chain[1:2], Durable: true})
	if err == nil || errors.Is(err, jetstore.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("a commit nobody took for the whole timeout: %v; want a refusal, nothing written", err)
	}

	// The stream listens again while the commit is being sent again.
	go func() {
		time.Sleep(300 * time.Millisecond)
		listen(true)
	}()
	if err := st.Commit(ctx, &journal.Batch{Run: run, Next: 1, Records: chain[1:2], Durable: true}); err != nil {
		t.Fatalf("a commit sent again until the stream listened: %v", err)
	}
	if n, err := st.Head(ctx, run); err != nil || n != 2 {
		t.Fatalf("the journal holds %d entries (%v), want the 2 committed", n, err)
	}
}

// TestGroupNoServerTookIsRefusedAtOnce: commits of several runs that wait
// for one batch together (group commit), sent while no server of the
// stream listens, are each refused as not written once the batch's
// timeout has passed: not sent again one by one, each waiting a whole
// timeout more.
func TestGroupNoServerTookIsRefusedAtOnce(t *testing.T) {
	ctx := context.Background()
	const timeout = time.Second
	st, listen := deafenable(t, "NG", timeout)
	listen(false)
	const runs = 8
	errs := make(chan error, runs)
	began := time.Now()
	for range runs {
		run := journal.NewRunID(time.Now())
		chain := storetest.Chain(t, run, 1)
		go func() { errs <- st.Commit(ctx, &journal.Batch{Run: run, Records: chain, Durable: true}) }()
	}
	for range runs {
		err := <-errs
		if err == nil || errors.Is(err, jetstore.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "nothing was written") {
			t.Fatalf("a commit nobody took: %v; want a refusal, nothing written", err)
		}
	}
	// The first commit goes alone, the others wait and go together: two
	// timeouts. Sent again one by one, the group's would take one more
	// each (nine in all).
	if took := time.Since(began); took > 5*timeout {
		t.Fatalf("%d commits nobody took were refused after %v; want about two timeouts of %v", runs, took, timeout)
	}
}

// deafenable opens a store on a stream of its own (name) on a server of
// its own, with the store's timeout, and returns it with listen, which
// makes the stream listen on the journal's subjects again, or stop: a
// stopped stream leaves a batch without responders, as a stream between
// two leaders does.
func deafenable(t *testing.T, name string, timeout time.Duration) (*jetstore.Store, func(on bool)) {
	t.Helper()
	ctx := context.Background()
	nc := jstest.Connect(t, jstest.Server(t))
	low := strings.ToLower(name)
	st, err := jetstore.Open(ctx, nc, jetstore.Options{Stream: name, Prefix: low, LeaseBucket: name + "L", Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	listening := stream.CachedInfo().Config
	deaf := listening
	deaf.Subjects = []string{"elsewhere.>"}
	return st, func(on bool) {
		cfg := deaf
		if on {
			cfg = listening
		}
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Error(err)
		}
	}
}
