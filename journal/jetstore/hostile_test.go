package jetstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/jetstore"
	"github.com/agentrt/agentrt/journal/jetstore/jstest"
	"github.com/agentrt/agentrt/journal/storetest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestUndecodableRecordIsNamedAndNothingIsWrittenAfterIt: a message on a
// run's records subject that is not a record (published by another
// client with access to the stream) makes reads fail with an error
// naming the run and the entry, and a commit after it is refused without
// writing anything; the records before it still read.
func TestUndecodableRecordIsNamedAndNothingIsWrittenAfterIt(t *testing.T) {
	ctx := context.Background()
	nc := jstest.Connect(t, jstest.Server(t))
	st := opener(nc, 1)(t)
	run := journal.NewRunID(time.Now())
	recs := storetest.Chain(t, run, 4)
	if err := st.Commit(ctx, &journal.Batch{Run: run, Records: recs[:2]}); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	for _, m := range []*nats.Msg{
		{Subject: "j1." + run.String(), Header: nats.Header{"Agentrt-Seq": []string{"2"}}, Data: []byte("\xff not cbor")},
	} {
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	var re *jetstore.RecordError
	n := 0
	err := st.Records(ctx, run, 0, func(uint64, []byte) error { n++; return nil })
	if !errors.As(err, &re) || re.Run != run || re.Seq != 2 || !errors.Is(err, journal.ErrIncomplete) ||
		!strings.Contains(err.Error(), run.String()) || !strings.Contains(err.Error(), "entry 2") {
		t.Fatalf("records over an undecodable message: %v", err)
	}
	if n != 2 {
		t.Fatalf("%d records delivered before the bad one, want 2", n)
	}
	// The store's cached tail is stale: the server's fence refuses the
	// commit; the next reads the tail and names the message.
	for i := range 2 {
		err := st.Commit(ctx, &journal.Batch{Run: run, Next: 2, Records: recs[2:],
			KV: []journal.KVWrite{{Namespace: "n", Key: "k", Value: []byte("v")}}})
		if err == nil {
			t.Fatalf("commit %d after an undecodable record was taken", i)
		}
		if i == 1 && !errors.As(err, &re) {
			t.Fatalf("second commit after an undecodable record: %v, want a *RecordError", err)
		}
	}
	if _, ok, _ := st.KVGet("n", "k"); ok {
		t.Fatal("a refused commit's kv write was applied")
	}
	info, err := js.Stream(ctx, "J1")
	if err != nil {
		t.Fatal(err)
	}
	// 2 records, their head, the foreign message: nothing more.
	if got := info.CachedInfo().State.Msgs; got != 4 {
		t.Fatalf("the stream holds %d messages, want 4", got)
	}
}

// TestDeposedWriterIsRefused: two stores on the same stream, as two cells:
// the one whose view is stale (the other appended) is refused, whatever
// it cached, and its entries are not stored.
func TestDeposedWriterIsRefused(t *testing.T) {
	ctx := context.Background()
	srv := jstest.Server(t)
	a := opener(jstest.Connect(t, srv), 1)(t)
	b := opener(jstest.Connect(t, srv), 1)(t)
	run := journal.NewRunID(time.Now())
	old := storetest.Chain(t, run, 4)
	if err := a.Commit(ctx, &journal.Batch{Run: run, Records: old[:2]}); err != nil {
		t.Fatal(err)
	}
	// b takes over from a's journal: it appends a's own entry 2.
	if err := b.Commit(ctx, &journal.Batch{Run: run, Next: 2, Records: old[2:3]}); err != nil {
		t.Fatal(err)
	}
	// a, deposed, still thinks the journal holds 2.
	if err := a.Commit(ctx, &journal.Batch{Run: run, Next: 2, Records: old[2:]}); !errors.Is(err, journal.ErrConflict) {
		t.Fatalf("the deposed writer's append: %v, want ErrConflict", err)
	}
	if n, _ := a.Head(ctx, run); n != 3 {
		t.Fatalf("head %d, want 3", n)
	}
	var got [][]byte
	if err := a.Records(ctx, run, 0, func(_ uint64, raw []byte) error { got = append(got, bytes.Clone(raw)); return nil }); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if i >= len(got) || !bytes.Equal(got[i], journal.AppendRecord(nil, &old[i])) {
			t.Fatalf("entry %d of %d read is not the one committed", i, len(got))
		}
	}
}

// TestOptionsAreCheckedAndTheStreamKeepsItsReplicas: a replica count
// other than 1 or 3 is refused, and so is opening an R1 stream as R3.
func TestOptionsAreCheckedAndTheStreamKeepsItsReplicas(t *testing.T) {
	ctx := context.Background()
	nc := jstest.Connect(t, jstest.Server(t))
	if _, err := jetstore.Open(ctx, nc, jetstore.Options{Replicas: 2}); err == nil || !strings.Contains(err.Error(), "Replicas to 1 or 3") {
		t.Fatalf("2 replicas: %v", err)
	}
	if _, err := jetstore.Open(ctx, nc, jetstore.Options{Prefix: "a.b"}); err == nil {
		t.Fatal("a prefix of two tokens was taken")
	}
	if _, err := jetstore.Open(ctx, nc, jetstore.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := jetstore.Open(ctx, nc, jetstore.Options{Replicas: 3}); err == nil || !strings.Contains(err.Error(), "has 1 replicas") {
		t.Fatalf("the R1 stream opened as R3: %v", err)
	}
}

// TestDeletedLeaseKeyIsRefused: a lease key someone deleted is not taken
// for a run never leased (its epochs would start again at 1).
func TestDeletedLeaseKeyIsRefused(t *testing.T) {
	ctx := context.Background()
	nc := jstest.Connect(t, jstest.Server(t))
	st := opener(nc, 1)(t)
	run := journal.NewRunID(time.Now())
	now := time.Unix(100, 0)
	if _, err := st.Acquire(ctx, run, []byte("a"), now, time.Second); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(ctx, "L1")
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, run.String()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Acquire(ctx, run, []byte("b"), now.Add(time.Minute), time.Second); err == nil || !strings.Contains(err.Error(), "was deleted") {
		t.Fatalf("acquire over a deleted lease key: %v", err)
	}
}

// TestStoresOpenedTogetherReadTheirLeases opens stores on one lease bucket
// at the same moment, as the cells of a cluster started together do, and
// has each take and renew a lease. Once a bucket's config was updated by
// every opener, one store could be left bound to direct gets another had
// just switched off, and no server answered its lease reads ("no
// responders"); none may be.
func TestStoresOpenedTogetherReadTheirLeases(t *testing.T) {
	ctx := context.Background()
	srv := jstest.Server(t)
	for round := range 5 {
		const n = 6
		stores := make([]*jetstore.Store, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			nc := jstest.Connect(t, srv)
			wg.Add(1)
			go func() {
				defer wg.Done()
				stores[i], errs[i] = jetstore.Open(ctx, nc, jetstore.Options{
					Stream: fmt.Sprintf("J%d", round), Prefix: fmt.Sprintf("j%d", round), LeaseBucket: fmt.Sprintf("L%d", round)})
			}()
		}
		wg.Wait()
		for i, st := range stores {
			if errs[i] != nil {
				t.Fatalf("round %d, store %d: open: %v", round, i, errs[i])
			}
			var run journal.RunID
			run[0], run[1] = byte(round), byte(i)
			now := time.Now()
			l, err := st.Acquire(ctx, run, []byte{byte(i)}, now, time.Minute)
			if err != nil {
				t.Fatalf("round %d, store %d: acquire: %v", round, i, err)
			}
			if _, err := st.Renew(ctx, l, now, time.Minute); err != nil {
				t.Fatalf("round %d, store %d: renew: %v", round, i, err)
			}
		}
	}
}

// TestRecordPastAStaleHeadIsNamed: a record published on a run's records
// subject outside a commit (no head names it) is not taken for a live
// writer's commit: reads stop with the head named stale, after the
// entries the head names.
func TestRecordPastAStaleHeadIsNamed(t *testing.T) {
	ctx := context.Background()
	nc := jstest.Connect(t, jstest.Server(t))
	st := opener(nc, 1)(t)
	run := journal.NewRunID(time.Now())
	recs := storetest.Chain(t, run, 3)
	if err := st.Commit(ctx, &journal.Batch{Run: run, Records: recs[:2]}); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	m := &nats.Msg{Subject: "j1." + run.String(), Header: nats.Header{"Agentrt-Seq": []string{"2"}}, Data: journal.AppendRecord(nil, &recs[2])}
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	n := 0
	err := st.Records(ctx, run, 0, func(uint64, []byte) error { n++; return nil })
	if !errors.Is(err, journal.ErrIncomplete) || !strings.Contains(err.Error(), "head record is stale") {
		t.Fatalf("records past their head: %v, want the head named stale", err)
	}
	if n != 2 {
		t.Fatalf("%d records delivered, want the 2 the head names", n)
	}
}
