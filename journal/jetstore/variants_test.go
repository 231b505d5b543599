package jetstore_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/jetstore/jstest"
	"github.com/agentrt/agentrt/journal/storetest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

// BenchmarkPublishVariants measures what each way of writing a journal
// record costs on the servers, without the store: a bare publish, a
// publish fenced on the subject's last sequence, and atomic batches of 1,
// 2 and 8 messages fenced on their first, on one server and on three,
// with sync_interval: always and with JetStream's default. Each variant
// writes one record's bytes (a batch: that many) per op on a stream of
// its own, configured as the journal stream is.
func BenchmarkPublishVariants(b *testing.B) {
	nosync := func(o *server.Options) { o.SyncAlways = false }
	for _, c := range []struct {
		name  string
		start func(testing.TB) []*server.Server
		r     int
	}{
		{"R1/sync", func(t testing.TB) []*server.Server { return []*server.Server{jstest.Server(t)} }, 1},
		{"R1/nosync", func(t testing.TB) []*server.Server { return []*server.Server{jstest.ServerWith(t, nosync)} }, 1},
		{"R3/sync", func(t testing.TB) []*server.Server { return jstest.Cluster(t, 3) }, 3},
		{"R3/nosync", func(t testing.TB) []*server.Server { return jstest.ClusterWith(t, 3, nosync) }, 3},
	} {
		b.Run(c.name, func(b *testing.B) {
			nc := jstest.Connect(b, c.start(b)...)
			js, err := jetstream.New(nc)
			if err != nil {
				b.Fatal(err)
			}
			run := journal.NewRunID(time.Now())
			raw := journal.AppendRecord(nil, &storetest.Chain(b, run, 2)[1])
			n := 0
			stream := func(b *testing.B) string {
				n++
				name := fmt.Sprintf("V%d", n)
				_, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
					Name: name, Subjects: []string{name + ".>"}, Storage: jetstream.FileStorage,
					Replicas: c.r, AllowRollup: true, DenyDelete: true, AllowAtomicPublish: true,
					Duplicates: 2 * time.Minute,
				})
				if err != nil {
					b.Fatal(err)
				}
				return name
			}
			b.Run("publish", func(b *testing.B) {
				subj := stream(b) + ".r"
				for b.Loop() {
					if _, err := js.Publish(context.Background(), subj, raw); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			})
			b.Run("fenced", func(b *testing.B) {
				subj := stream(b) + ".r"
				var last uint64
				for b.Loop() {
					ack, err := js.Publish(context.Background(), subj, raw, jetstream.WithExpectLastSequencePerSubject(last))
					if err != nil {
						b.Fatal(err)
					}
					last = ack.Sequence
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			})
			for _, k := range []int{1, 2, 8} {
				b.Run(fmt.Sprintf("batch%d", k), func(b *testing.B) {
					name := stream(b)
					var last uint64
					fc := jetstreamext.BatchFlowControl{AckEvery: 64, AckTimeout: 10 * time.Second}
					for b.Loop() {
						msgs := make([]*nats.Msg, k)
						for i := range msgs {
							msgs[i] = &nats.Msg{Subject: name + ".p" + strconv.Itoa(i), Data: raw}
						}
						msgs[0].Subject = name + ".r"
						msgs[0].Header = nats.Header{
							jetstream.ExpectedLastSubjSeqHeader:     []string{strconv.FormatUint(last, 10)},
							jetstream.ExpectedLastSubjSeqSubjHeader: []string{name + ".r"},
						}
						ack, err := jetstreamext.PublishMsgBatch(context.Background(), js, msgs, fc)
						if err != nil {
							b.Fatal(err)
						}
						last = ack.Sequence - ack.BatchSize + 1
					}
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
				})
			}
		})
	}
}
