package cell_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/jetstore/jstest"
	"github.com/agentrt/agentrt/placement"
)

// TestTakeoverIsAdmitted: a peer takes a run over only if its admission
// admits it, as a submission. Cell A runs a crawl and is cut off from the
// server. Cell B, the only live peer, admits runs of at most 100 HTTP
// requests (its run budget); the crawl's grant leaves them unlimited. B
// refuses the takeover with the reason budget, says so once over many
// heartbeats, and writes nothing: the run stays running, its lease
// expired, A's. Then cell C joins, cheaper than B, so placement picks it;
// C admits the run, takes it over and finishes it, and the run's lease
// entries are A's and C's.
func TestTakeoverIsAdmitted(t *testing.T) {
	ctx := context.Background()
	srv := jstest.Server(t)
	link := jstest.NewProxy(t, srv)
	dirs, cellKeys := testutil.TrustingCells(t, 3)
	pubs := testutil.PublicKeys(cellKeys)
	web := newGatedSite(t)

	a := openClusterCell(t, dirs[0], link.URL(), time.Second, placement.Cell{Name: "a"})
	run := crawlInFlight(t, a, web)
	runID := run.String()
	link.Freeze()
	waitFor(t, "cell A to stop the run while cut off", func() bool { return !a.cell.Host.Live(run) })

	dear, err := placement.ParseCost("1")
	if err != nil {
		t.Fatal(err)
	}
	b := openClusterCellSched(t, dirs[1], cell.ClusterOptions{URLs: []string{srv.ClientURL()}, Heartbeat: 100 * time.Millisecond,
		Self: placement.Cell{Name: "b", Cost: dear}}, time.Second, cell.SchedulerOptions{RunBudget: "http_requests=100"})
	const refusal = "take over run "
	waitFor(t, "cell B to refuse the takeover", func() bool { return b.logged(refusal + runID + ": admission refused (budget)") })
	time.Sleep(10 * 100 * time.Millisecond) // ten heartbeats more
	if n := b.count(refusal + runID); n != 1 {
		t.Fatalf("cell B said %d times that it refused the takeover, want once: %q", n, b.log)
	}
	if b.cell.Host.Live(run) {
		t.Fatal("cell B executes the run it refused")
	}
	m, err := b.cell.Journal.Meta(ctx, run)
	if err != nil || m.Status != journal.StatusRunning {
		t.Fatalf("the refused run is %s (%v), want running", m.Status, err)
	}
	if l, ok, err := b.cell.Cluster.Store.Lease(ctx, run); err != nil || !ok || !bytes.Equal(l.Owner, pubs[0]) {
		t.Fatalf("the refused run's lease: %+v %v %v; want A's still", l, ok, err)
	}

	openClusterCell(t, dirs[2], srv.ClientURL(), time.Second, placement.Cell{Name: "c"})
	waitFor(t, "cell C to finish the run", func() bool {
		m, err := b.cell.Journal.Meta(ctx, run)
		return err == nil && m.Status == journal.StatusCompleted
	})
	var owners []string
	err = journal.ReadEntries(ctx, b.cell.Journal, run, func(e *journal.Entry, _ *journal.Record) error {
		if e.Phase == journal.PhaseLease {
			switch {
			case bytes.Equal(e.Cell, pubs[0]):
				owners = append(owners, "a")
			case bytes.Equal(e.Cell, pubs[2]):
				owners = append(owners, "c")
			default:
				owners = append(owners, "other")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(owners, ",") != "a,c" {
		t.Fatalf("lease entries by %v, want a,c", owners)
	}
	web.exactlyOnce(t)
	link.Thaw()
}
