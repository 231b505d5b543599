package jetstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/jetstore/jstest"
	"github.com/agentrt/agentrt/journal/storetest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkAppend measures, on one server and on three, fenced appends of
// one entry a commit (each an atomic batch of the record and the head)
// against the floor of a bare JetStream publish of the same bytes, and
// fenced appends of 8 entries a commit (entries/s counts entries).
func BenchmarkAppend(b *testing.B) {
	for _, c := range []struct {
		name  string
		start func(testing.TB) []*server.Server
		r     int
	}{
		{"R1", func(t testing.TB) []*server.Server { return []*server.Server{jstest.Server(t)} }, 1},
		{"R3", func(t testing.TB) []*server.Server { return jstest.Cluster(t, 3) }, 3},
	} {
		b.Run(c.name, func(b *testing.B) {
			nc := jstest.Connect(b, c.start(b)...)
			b.Run("fenced", func(b *testing.B) { benchFenced(b, nc, c.r, 1) })
			b.Run("fenced8", func(b *testing.B) { benchFenced(b, nc, c.r, 8) })
			b.Run("publish", func(b *testing.B) { benchPublish(b, nc, c.r) })
			b.Run("fenced16runs", func(b *testing.B) { benchFencedRuns(b, nc, c.r, 16) })
		})
	}
}

// benchFencedRuns commits one entry a commit to each of runs runs at once,
// one writer a run, as a cell's runs do; an op is one commit, and
// appends/s counts them all.
func benchFencedRuns(b *testing.B, nc *nats.Conn, replicas, runs int) {
	ctx := context.Background()
	st := opener(nc, replicas)(b)
	per := (b.N + runs - 1) / runs
	chains := make([][]journal.Record, runs)
	ids := make([]journal.RunID, runs)
	for i := range runs {
		ids[i] = journal.NewRunID(time.Now().Add(time.Duration(i) * time.Millisecond))
		chains[i] = storetest.Chain(b, ids[i], per)
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range per {
				if err := st.Commit(ctx, &journal.Batch{Run: ids[i], Next: uint64(n), Records: chains[i][n : n+1], Durable: true}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(per*runs)/b.Elapsed().Seconds(), "appends/s")
}

// benchFenced commits k entries a commit; an op is one commit.
func benchFenced(b *testing.B, nc *nats.Conn, replicas, k int) {
	ctx := context.Background()
	st := opener(nc, replicas)(b)
	run := journal.NewRunID(time.Now())
	recs := storetest.Chain(b, run, k*b.N)
	b.ResetTimer()
	for i := range b.N {
		next := k * i
		if err := st.Commit(ctx, &journal.Batch{Run: run, Next: uint64(next), Records: recs[next : next+k], Durable: true}); err != nil {
			b.Fatal(err)
		}
	}
	if k == 1 {
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
	} else {
		b.ReportMetric(float64(k*b.N)/b.Elapsed().Seconds(), "entries/s")
	}
}

func benchPublish(b *testing.B, nc *nats.Conn, replicas int) {
	ctx := context.Background()
	js, _ := jetstream.New(nc)
	name := "FLOOR" + time.Now().Format("150405.000000")
	name = name[:11] + name[12:]
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Replicas: replicas}); err != nil {
		b.Fatal(err)
	}
	run := journal.NewRunID(time.Now())
	raw := journal.AppendRecord(nil, &storetest.Chain(b, run, 2)[1])
	b.ResetTimer()
	for range b.N {
		if _, err := js.Publish(ctx, name+".x", raw); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "publishes/s")
}
