package cell_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/jetstore/jstest"
	"github.com/agentrt/agentrt/placement"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// TestFaultStreamLeaderKilledMidRun is part of the cluster fault matrix
// (make test-cluster): a crawl runs on a cell whose journal stream is
// replicated on three JetStream servers, and the server leading the
// stream is stopped while a page fetch is under way. The run completes
// (on its cell, or on the cell again after its lease lapsed in the stall
// of the election), every idempotency key is sent once, and the journal
// verifies.
func TestFaultStreamLeaderKilledMidRun(t *testing.T) {
	if os.Getenv("AGENTRT_TEST_CLUSTER") == "" {
		t.Skip("part of the cluster fault matrix: run it with make test-cluster (AGENTRT_TEST_CLUSTER=1)")
	}
	ctx := context.Background()
	servers := jstest.Cluster(t, 3)
	dirs, cellKeys := testutil.TrustingCells(t, 1)
	pubs := testutil.PublicKeys(cellKeys)

	web := newGatedSite(t)

	a := openClusterCellWith(t, dirs[0], cell.ClusterOptions{URLs: []string{jstest.URL(servers...)}, Replicas: 3,
		Heartbeat: 200 * time.Millisecond, Self: placement.Cell{Name: "a"}}, 3*time.Second)
	run := crawlInFlight(t, a, web)
	leader := journalLeader(t, servers)
	t.Logf("stopping nats-server %s, the leader of the journal stream", leader.Name())
	jstest.Stop(leader)
	web.open()
	waitFor(t, "the run to complete", func() bool {
		m, err := a.cell.Journal.Meta(ctx, run)
		return err == nil && m.Status == journal.StatusCompleted
	})
	if _, err := journal.VerifyStore(ctx, a.cell.Journal, run, journal.TrustKeys(pubs...)); err != nil {
		t.Fatal(err)
	}
	web.exactlyOnce(t)
}

// journalLeader returns the server leading the journal stream (JOURNAL).
func journalLeader(t *testing.T, servers []*server.Server) *server.Server {
	t.Helper()
	nc := jstest.Connect(t, servers...)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		st, err := js.Stream(context.Background(), "JOURNAL")
		if err == nil && st.CachedInfo().Cluster != nil {
			for _, s := range servers {
				if strings.EqualFold(s.Name(), st.CachedInfo().Cluster.Leader) {
					return s
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the journal stream has no leader among the servers")
	return nil
}
