package cell_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/jetstore/jstest"
	"github.com/agentrt/agentrt/placement"
	"github.com/agentrt/agentrt/replay"
)

// clusterCell is a cell of a test cluster, serving its API on its unix
// socket, with its cluster duties started.
type clusterCell struct {
	cell   *cell.Cell
	srv    *cell.Server
	client *cell.Client
	mu     sync.Mutex
	log    []string
}

func (c *clusterCell) logf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, fmt.Sprintf(format, args...))
}

func (c *clusterCell) logged(s string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.log {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// count returns how many log lines contain s.
func (c *clusterCell) count(s string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, l := range c.log {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// crawlInFlight submits a crawl of g's site (examples/crawler, with its
// grant) to cell c and returns the run once it is inside its first fetch
// of /replay, which g holds until it is opened.
func crawlInFlight(t *testing.T, c *clusterCell, g *gatedSite) journal.RunID {
	t.Helper()
	return crawlInFlightToken(t, c, g, nil)
}

// crawlInFlightToken is crawlInFlight with the submission carrying token
// (nil: none, the cell grants the run its grant file).
func crawlInFlightToken(t *testing.T, c *clusterCell, g *gatedSite, token []byte) journal.RunID {
	t.Helper()
	grant, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "examples/crawler/grant.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.client.Submit(context.Background(), cell.Submission{Module: testutil.BuildGo(t, "examples/crawler"), Name: "crawler",
		Grant: string(grant), Token: token, Input: []byte(`{"start":"` + g.URL + `/"}`)})
	if err != nil {
		t.Fatal(err)
	}
	run, err := journal.ParseRunID(id)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.reached:
	case <-time.After(time.Minute):
		t.Fatal("the crawl never reached /replay")
	}
	return run
}

func openClusterCell(t *testing.T, dir, url string, ttl time.Duration, self placement.Cell) *clusterCell {
	t.Helper()
	return openClusterCellWith(t, dir, cell.ClusterOptions{URLs: []string{url}, Heartbeat: 100 * time.Millisecond, Self: self}, ttl)
}

// openClusterCellWith is openClusterCell with the cluster options given.
func openClusterCellWith(t *testing.T, dir string, copts cell.ClusterOptions, ttl time.Duration) *clusterCell {
	t.Helper()
	return openClusterCellSched(t, dir, copts, ttl, cell.SchedulerOptions{})
}

// openClusterCellSched is openClusterCellWith with the server's scheduler
// options given.
func openClusterCellSched(t *testing.T, dir string, copts cell.ClusterOptions, ttl time.Duration, sched cell.SchedulerOptions) *clusterCell {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c, err := cell.Open(ctx, dir, cached(cell.Options{LeaseTTL: ttl, Cluster: &copts}))
	if err != nil {
		t.Fatal(err)
	}
	cc := &clusterCell{cell: c}
	cc.srv = cell.NewServer(c, cell.ServerOptions{Logf: func(f string, a ...any) { cc.logf(f, a...); t.Logf(f, a...) }, Scheduler: sched})
	c.AddSink(cc.srv.Sink)
	ln, err := cell.ListenSocket(cell.SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	hs, err := cc.srv.Endpoint(ln)
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	t.Cleanup(func() {
		cancel()
		hs.Close()
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		cc.srv.Shutdown(sctx)
		c.Close(context.Background())
	})
	if cc.client, err = cell.Dial("unix:" + cell.SocketPath(dir)); err != nil {
		t.Fatal(err)
	}
	if err := cc.srv.StartCluster(ctx); err != nil {
		t.Fatal(err)
	}
	return cc
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClusterPeerTakesOverACutOffHolder runs a crawl on cell A of a
// two-cell cluster on a real JetStream server, and cuts A off from the
// server (its connection goes through a proxy that stops forwarding) while
// A is inside a page fetch. A cannot renew its lease: at the lease's TTL
// less its margin, on its own clock, it stops the run by itself, its fetch
// cancelled, while still cut off, so not because an append was refused.
// Cell B sees the lease expired, is picked by placement, takes the run over
// and finishes it: the fetch A left is in doubt (the crawler asks again,
// with a new key), and no page is fetched twice under one key. A wrote
// nothing after B's lease entry. The journal verifies with the seals of
// both cells, B's lease entry carries the placement decision that picked
// B, and the exported bundle verifies offline.
func TestClusterPeerTakesOverACutOffHolder(t *testing.T) {
	ctx := context.Background()
	srv := jstest.Server(t)
	link := jstest.NewProxy(t, srv)
	dirs, cellKeys := testutil.TrustingCells(t, 2)
	pubs := testutil.PublicKeys(cellKeys)

	// A's fetch of /replay is held, and never answered while A lives.
	web := newGatedSite(t)

	a := openClusterCell(t, dirs[0], link.URL(), time.Second, placement.Cell{Name: "a"})
	run := crawlInFlight(t, a, web)
	runID := run.String()
	link.Freeze()
	// A stops the run on its own clock, with no word from the store.
	waitFor(t, "cell A to stop the run while cut off", func() bool { return !a.cell.Host.Live(run) })
	// B joins only now, and takes the run over once the lease lapsed.
	b := openClusterCell(t, dirs[1], srv.ClientURL(), time.Second, placement.Cell{Name: "b"})
	waitFor(t, "cell B to finish the run", func() bool {
		m, err := b.cell.Journal.Meta(ctx, run)
		return err == nil && m.Status == journal.StatusCompleted
	})
	link.Thaw()
	waitFor(t, "cell A to log why its run stopped", func() bool {
		return a.logged("run " + runID + " stopped: ")
	})
	if !a.logged(host.ErrLeaseExpired.Error()) {
		t.Fatalf("cell A's run did not stop for its lease running out: %q", a.log)
	}
	// Both cells were in the registry, with what they said of themselves.
	hbs, err := b.cell.Cluster.Registry.Cells(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, h := range hbs {
		names[h.Cell.ID] = h.Cell.Name
	}
	if names[hex.EncodeToString(pubs[0])] != "a" || names[hex.EncodeToString(pubs[1])] != "b" {
		t.Fatalf("registry: %v", names)
	}

	// The journal verifies with entries of both cells, and every entry
	// after B's lease entry is B's.
	v := journal.NewVerifier(journal.TrustKeys(pubs...))
	var leases []*journal.Entry
	var afterB []string
	v.OnEntry = func(e *journal.Entry, _ *journal.Record) error {
		if e.Phase == journal.PhaseLease {
			leases = append(leases, e)
		}
		if len(leases) > 0 && bytes.Equal(leases[len(leases)-1].Cell, pubs[1]) && !bytes.Equal(e.Cell, pubs[1]) {
			afterB = append(afterB, fmt.Sprintf("%d:%x", e.Seq, e.Cell[:4]))
		}
		return nil
	}
	sum, err := journal.VerifyStoreWith(ctx, b.cell.Journal, run, v)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Cells[hex.EncodeToString(pubs[0])] == 0 || sum.Cells[hex.EncodeToString(pubs[1])] == 0 {
		t.Fatalf("seals by cell: %v, want both cells", sum.Cells)
	}
	if len(afterB) > 0 {
		t.Fatalf("entries of another cell after B's lease: %v", afterB)
	}
	last := leases[len(leases)-1]
	if len(leases) != 2 || !bytes.Equal(leases[0].Cell, pubs[0]) || !bytes.Equal(last.Cell, pubs[1]) || last.Epoch != leases[0].Epoch+1 {
		t.Fatalf("lease entries: %d, last by %x epoch %d", len(leases), last.Cell[:4], last.Epoch)
	}
	d, err := placement.DecodeDecision(last.Request)
	if err != nil {
		t.Fatal(err)
	}
	if d.Cell != hex.EncodeToString(pubs[1]) {
		t.Fatalf("the takeover's decision chose %s", d.Cell)
	}
	if err := placement.Recheck(d); err != nil {
		t.Fatal(err)
	}
	web.exactlyOnce(t)

	// The bundle verifies offline, with both keys, and not with B's alone.
	var bundle bytes.Buffer
	if _, err := replay.ExportTo(ctx, b.cell.Journal, run, b.cell.Key, replay.EngineSettings{}, &bundle); err != nil {
		t.Fatal(err)
	}
	if _, err := replay.VerifyBundle(ctx, bundle.Bytes(), replay.VerifyOptions{Engine: testutil.SharedEngine(t), Trusted: pubs}); err != nil {
		t.Fatal(err)
	}
	_, err = replay.VerifyBundle(ctx, bundle.Bytes(), replay.VerifyOptions{Engine: testutil.SharedEngine(t), Trusted: pubs[1:]})
	if !errors.Is(err, journal.ErrUntrusted) {
		t.Fatalf("bundle verified with B's key alone: %v", err)
	}
}
