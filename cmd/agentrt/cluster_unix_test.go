//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentrt/agentrt/examples/crawler/site"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/jetstore"
	"github.com/agentrt/agentrt/replay"
	"github.com/nats-io/nats.go"
)

// buildNATSServer builds nats-server from the module go.mod names.
func buildNATSServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nats-server")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2").CombinedOutput(); err != nil {
		t.Fatalf("go build nats-server: %v\n%s", err, out)
	}
	return bin
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startNATSCluster starts n nats-server processes routed on loopback, with
// JetStream syncing every write, and returns their client URLs.
func startNATSCluster(t *testing.T, bin string, n int) []string {
	t.Helper()
	clients, routes := make([]int, n), make([]string, n)
	for i := range n {
		clients[i] = freePort(t)
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", freePort(t))
	}
	var urls []string
	for i := range n {
		dir := t.TempDir()
		conf := fmt.Sprintf(`server_name: n%d
listen: 127.0.0.1:%d
max_payload: 8MB
jetstream { store_dir: %q, sync_interval: always }
cluster { name: agentrt-accept, listen: %s, routes: [%s] }
`, i+1, clients[i], dir, strings.TrimPrefix(routes[i], "nats-route://"), strings.Join(routes, ", "))
		path := filepath.Join(dir, "nats.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-c", path)
		log := &syncWriter{w: new(bytes.Buffer)}
		cmd.Stderr = log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
			if t.Failed() {
				t.Logf("nats-server %d's log:\n%s", i+1, log)
			}
		})
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", clients[i]))
	}
	// A server takes a moment to listen (longer on a loaded machine): a
	// client that dials before finds no server at all.
	deadline := time.Now().Add(time.Minute)
	for _, port := range clients {
		for {
			c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("nats-server on port %d does not listen after a minute: %v", port, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return urls
}

// TestClusterOfProcessesSurvivesAKilledAndAFrozenCell is the cluster's
// acceptance test, with real processes on loopback: 3 nats-server processes
// built from the server module, and 3 `agentrt cell serve --nats`
// processes, their journals on R3. A crawl runs on a cell that is SIGKILLed
// inside a page fetch: a peer finishes it; no request is sent twice under
// one idempotency key; the journal verifies with the seals of both cells;
// the bundle verifies offline. Then a crawl runs on a cell that is
// SIGSTOPped inside a fetch past its lease: a peer takes it over and
// finishes it, and after SIGCONT the frozen cell finds, on its own clock,
// that its lease ran out unrenewed and stops its run (its log says so),
// the journal untouched by it. (A deposed holder that did append would be
// refused by the journal's fencing: journal/storetest, appendIsFenced.)
// Last, agentrt cell handoff moves a live crawl from one cell to another.
func TestClusterOfProcessesSurvivesAKilledAndAFrozenCell(t *testing.T) {
	if testing.Short() {
		t.Skip("builds nats-server and runs 6 processes")
	}
	ctx := context.Background()
	bin := buildCLI(t)
	urls := startNATSCluster(t, buildNATSServer(t), 3)
	module := testutil.BuildGo(t, "examples/crawler")
	grant, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "examples/crawler/grant.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	// Three cells, each trusting the others' seals.
	dirs, keys := testutil.TrustingCells(t, 3)
	pubs := testutil.PublicKeys(keys)
	nc, err := nats.Connect(strings.Join(urls, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	store, err := jetstore.Open(ctx, nc, jetstore.Options{Replicas: 3, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}

	// The R3 stream and buckets are made before the cells start: on a
	// loaded machine a raft group may take longer to form than a cell
	// waits for its store.
	octx, ocancel := context.WithTimeout(ctx, time.Minute)
	defer ocancel()
	if _, err := cell.OpenRegistry(octx, nc, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := cell.OpenHandoffs(octx, nc, 3); err != nil {
		t.Fatal(err)
	}
	cache := testutil.CompileCache()
	procs := make([]*exec.Cmd, 3)
	logs := make([]*syncWriter, 3)
	for i, d := range dirs {
		logs[i] = &syncWriter{w: new(bytes.Buffer)}
		cmd := exec.Command(bin, "--data", d, "--cache", cache, "cell", "serve", "--nats", strings.Join(urls, ","),
			"--replicas", "3", "--lease-ttl", "2s", "--heartbeat", "200ms")
		cmd.Stderr = logs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[i] = cmd
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGCONT)
			cmd.Process.Kill()
			cmd.Wait()
			if t.Failed() {
				t.Logf("cell %d's log:\n%s", i, logs[i])
			}
		})
	}
	for i := range dirs {
		waitUntil(t, fmt.Sprintf("cell %d in the registry", i), 2*time.Minute, func() bool {
			return strings.Contains(logs[i].String(), "in the cluster registry")
		})
	}
	// crawl submits a crawl to cell i whose first fetch of /replay hangs
	// until release is closed; it returns the run once that fetch is in.
	type crawlSite struct {
		mu      sync.Mutex
		keys    map[string]int
		hung    chan struct{}
		release chan struct{}
	}
	crawl := func(i int) (journal.RunID, *crawlSite) {
		s := &crawlSite{keys: map[string]int{}, hung: make(chan struct{}), release: make(chan struct{})}
		var once sync.Once
		web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			s.keys[r.Header.Get("Idempotency-Key")]++
			s.mu.Unlock()
			first := false
			if r.URL.Path == "/replay" {
				once.Do(func() { first = true })
			}
			if first {
				close(s.hung)
				select {
				case <-s.release:
				case <-r.Context().Done():
					return
				}
			}
			site.Handler().ServeHTTP(w, r)
		}))
		t.Cleanup(web.Close)
		cl, err := cell.Dial("unix:" + cell.SocketPath(dirs[i]))
		if err != nil {
			t.Fatal(err)
		}
		id, err := cl.Submit(ctx, cell.Submission{Module: module, Name: "crawler", Grant: string(grant),
			Input: []byte(`{"start":"` + web.URL + `/"}`)})
		if err != nil {
			t.Fatal(err)
		}
		run, err := journal.ParseRunID(id)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-s.hung:
		case <-time.After(2 * time.Minute):
			t.Fatal("the crawl never reached /replay")
		}
		return run, s
	}
	completed := func(run journal.RunID) {
		waitUntil(t, "a peer to finish run "+run.String(), 2*time.Minute, func() bool {
			m, err := store.Meta(ctx, run)
			return err == nil && m.Status == journal.StatusCompleted
		})
	}
	// check verifies the run's journal: seals of the dead cell and of the
	// one peer that finished it, nothing of the dead cell after the
	// peer's lease entry, each key sent once, and the bundle offline.
	check := func(run journal.RunID, s *crawlSite, dead int) {
		t.Helper()
		v := journal.NewVerifier(journal.TrustKeys(pubs...))
		var holder []byte
		var late []uint64
		v.OnEntry = func(e *journal.Entry, _ *journal.Record) error {
			if e.Phase == journal.PhaseLease {
				holder = e.Cell
			}
			if holder != nil && !bytes.Equal(holder, pubs[dead]) && bytes.Equal(e.Cell, pubs[dead]) {
				late = append(late, e.Seq)
			}
			return nil
		}
		sum, err := journal.VerifyStoreWith(ctx, store, run, v)
		if err != nil {
			t.Fatal(err)
		}
		if len(sum.Cells) != 2 || sum.Cells[hex.EncodeToString(pubs[dead])] == 0 {
			t.Fatalf("seals by cell: %v, want the dead cell's and one peer's", sum.Cells)
		}
		if len(late) > 0 {
			t.Fatalf("entries %v of the deposed cell after the peer's lease", late)
		}
		s.mu.Lock()
		for k, n := range s.keys {
			if k == "" || n != 1 {
				t.Errorf("idempotency key %q sent %d times", k, n)
			}
		}
		s.mu.Unlock()
		// The cell that finished the run exports it.
		peer := -1
		for i, p := range pubs {
			if i != dead && sum.Cells[hex.EncodeToString(p)] > 0 {
				peer = i
			}
		}
		var bundle bytes.Buffer
		if _, err := replay.ExportTo(ctx, store, run, keys[peer], replay.EngineSettings{}, &bundle); err != nil {
			t.Fatal(err)
		}
		if _, err := replay.VerifyBundle(ctx, bundle.Bytes(), replay.VerifyOptions{Engine: testutil.SharedEngine(t), Trusted: pubs}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("sigkill", func(t *testing.T) {
		run, s := crawl(0)
		if err := procs[0].Process.Kill(); err != nil {
			t.Fatal(err)
		}
		procs[0].Wait()
		close(s.release)
		completed(run)
		check(run, s, 0)
	})
	t.Run("sigstop", func(t *testing.T) {
		run, s := crawl(1)
		if err := procs[1].Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		completed(run)
		close(s.release)
		if err := procs[1].Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "the frozen cell to stop its run", time.Minute, func() bool {
			_, why, ok := strings.Cut(logs[1].String(), "run "+run.String()+" stopped: ")
			why, _, _ = strings.Cut(why, "\n")
			return ok && strings.Contains(why, host.ErrLeaseExpired.Error())
		})
		check(run, s, 1)
	})
	// A crawl on cell 2 moved to cell 1 with agentrt cell handoff while
	// it is inside a fetch: the command returns once the fetch completed
	// on cell 2 and cell 1 took the run; cell 1 finishes it, and its
	// lease entry carries the envelope.
	t.Run("handoff", func(t *testing.T) {
		run, s := crawl(2)
		var out, errb bytes.Buffer
		cmd := exec.Command(bin, "--data", dirs[2], "cell", "handoff", run.String(), "--to", hex.EncodeToString(pubs[1]))
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cl, err := cell.Dial("unix:" + cell.SocketPath(dirs[2]))
		if err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "cell 2 to stop the run for the handoff", time.Minute, func() bool {
			ri, err := cl.Run(ctx, run.String())
			return err == nil && ri.Stopping
		})
		close(s.release)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("agentrt cell handoff: %v\n%s", err, errb.String())
		}
		if want := "run " + run.String() + " handed to cell " + hex.EncodeToString(pubs[1]); !strings.Contains(out.String(), want) {
			t.Fatalf("agentrt cell handoff printed %q, want %q", out.String(), want)
		}
		completed(run)
		check(run, s, 2)
		var last *journal.Entry
		if err := journal.ReadEntries(ctx, store, run, func(e *journal.Entry, _ *journal.Record) error {
			if e.Phase == journal.PhaseLease {
				last = e
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(last.Cell, pubs[1]) || len(last.Request) == 0 || !bytes.Equal(last.InputHash, journal.Sum(last.Request)) {
			t.Fatalf("cell 1's lease entry carries no envelope")
		}
	})
}

// waitUntil polls cond until it holds, failing after limit.
func waitUntil(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
