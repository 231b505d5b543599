package main

import (
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentrt/agentrt/examples/crawler/site"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	"github.com/agentrt/agentrt/journal/cellkey"
	"github.com/agentrt/agentrt/replay"
	badger "github.com/dgraph-io/badger/v4"
)

// TestKilledRunLeavesAVerifiableJournal kills a real `agentrt run` process
// with SIGKILL at varied points, among them in the middle of an HTTP effect,
// and checks what it left: the store opens, every stored entry is covered
// by a valid seal, an effect cut off is in doubt (intent and executing, no
// outcome), the server saw each idempotency key once, and the journal
// replays as an unfinished prefix. Then `agentrt resume` finishes the run:
// its output is the uninterrupted run's, no key is sent twice, and the
// whole journal replays.
func TestKilledRunLeavesAVerifiableJournal(t *testing.T) {
	bin := buildCLI(t)
	module := filepath.Join(t.TempDir(), "crawler.wasm")
	if err := os.WriteFile(module, testutil.BuildGo(t, "examples/crawler"), 0o644); err != nil {
		t.Fatal(err)
	}
	grant := filepath.Join(testutil.RepoRoot(), "examples/crawler/grant.yaml")
	// One compilation cache for every cell of the tests: the module is
	// compiled once, and each run starts in milliseconds.
	cache := testutil.CompileCache()
	agentrt := func(data string, args ...string) *exec.Cmd {
		return exec.Command(bin, append([]string{"--data", data, "--cache", cache}, args...)...)
	}

	// The uninterrupted run's output, with its server's address written
	// as URL, to compare every resumed run's with, and how long the run
	// goes on after its first request: the span the timed kills cover.
	var first time.Time
	var firstOnce sync.Once
	baseSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		firstOnce.Do(func() { first = time.Now() })
		site.Handler().ServeHTTP(w, r)
	}))
	out, err := agentrt(t.TempDir(), "run", module, "--grant", grant, "-q", "--json", "--input", `{"start":"`+baseSrv.URL+`/"}`).Output()
	span := time.Since(first)
	baseSrv.Close()
	if err != nil {
		t.Fatalf("uninterrupted run: %v", err)
	}
	baseline := outputOf(t, out, baseSrv.URL)

	// Kill points: while the k-th page request is in flight, or a delay
	// after the first request arrived, spread over the span of the run, so
	// that kills land inside fetches, commits and fsyncs, and between
	// calls.
	type point struct {
		duringFetch int
		after       time.Duration
	}
	var points []point
	for k := 1; k <= 7; k++ { // every page fetch of the crawl
		points = append(points, point{duringFetch: k})
	}
	// The journal's end comes at about 40% of the span, the store's
	// shutdown after it: 80 kills spread over the run, 13 over the shutdown
	// (where a kill once left a store badger would not open).
	for i := 0; i < 80; i++ {
		points = append(points, point{after: span * 45 * time.Duration(i) / 8000})
	}
	for i := 0; len(points) < 100; i++ {
		points = append(points, point{after: span*45/100 + span*55*time.Duration(i)/1300})
	}
	if testing.Short() {
		points = []point{points[0], points[5], points[40], points[80]}
	}
	for _, p := range points {
		name := fmt.Sprintf("fetch-%d", p.duringFetch)
		if p.duringFetch == 0 {
			name = fmt.Sprint("after-", p.after)
		}
		t.Run(name, func(t *testing.T) {
			data := t.TempDir()
			var mu sync.Mutex
			keys := map[string]int{}
			inFlight := make(chan struct{}, 1)
			started := make(chan struct{})
			var once sync.Once
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				once.Do(func() { close(started) })
				mu.Lock()
				keys[r.Header.Get("Idempotency-Key")]++
				n := len(keys)
				mu.Unlock()
				if n == p.duringFetch {
					inFlight <- struct{}{}
					<-r.Context().Done() // the client dies with the request open
					return
				}
				site.Handler().ServeHTTP(w, r)
			}))
			defer srv.Close()

			cmd := agentrt(data, "run", module, "--grant", grant, "-q", "--input", `{"start":"`+srv.URL+`/"}`)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			arrived := started
			if p.duringFetch > 0 {
				arrived = inFlight
			}
			select {
			case <-arrived:
				time.Sleep(p.after)
			case <-time.After(60 * time.Second):
				t.Fatal("the run never made the request to be killed at")
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()

			st, err := badgerstore.Open(cell.StoreDir(data))
			if err != nil {
				t.Fatalf("the store does not open after the kill: %v", err)
			}
			ctx := context.Background()
			runs, err := st.Runs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) == 0 {
				t.Fatal("a run killed after its first request left no journal: that request's intent was durable before it was sent")
			}
			key, err := cellkey.Load(filepath.Join(data, cellkey.FileName))
			if err != nil {
				t.Fatal(err)
			}
			trust := journal.TrustKeys(key.Public().(ed25519.PublicKey))
			run := runs[0].ID
			sum, err := journal.VerifyStore(ctx, st, run, trust)
			if err != nil {
				t.Fatalf("the journal left by the kill does not verify: %v", err)
			}
			var last *journal.Entry
			journal.ReadEntries(ctx, st, run, func(e *journal.Entry, _ *journal.Record) error { last = e; return nil })
			if p.duringFetch > 0 {
				if last.Phase != journal.PhaseExecuting || last.Op != "http.request" {
					t.Fatalf("killed during fetch %d, the journal ends with %s %s; want the fetch's executing entry", p.duringFetch, last.Phase, last.Op)
				}
				if want := fmt.Sprintf("%s-%d", run, last.Step); keys[want] != 1 {
					t.Fatalf("the request in flight had key %q %d times; keys %v", want, keys[want], keys)
				}
			}
			for k, n := range keys {
				if n != 1 {
					t.Fatalf("idempotency key %q sent %d times", k, n)
				}
			}
			if sum.End == nil {
				j, err := replay.Load(ctx, st, run, trust)
				if err != nil {
					t.Fatal(err)
				}
				eng := testutil.SharedEngine(t)
				code, err := st.Module(ctx, sum.Header.ModuleSHA256)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := j.Replay(ctx, eng, code, replay.Options{}); !errors.Is(err, replay.ErrUnfinished) {
					t.Fatalf("replay of the killed run: %v, want ErrUnfinished", err)
				}
			}
			t.Logf("killed: %d entries, %d seals, last %s of step %d (%s); %d requests", sum.Entries, sum.Seals, last.Phase, last.Step, last.Op, len(keys))
			st.Close()

			if sum.End != nil {
				// Killed after it ended: there is nothing to resume,
				// and its outcome must be the uninterrupted one.
				if got := strings.ReplaceAll(string(sum.End.Output), srv.URL, "URL"); got != baseline {
					t.Fatalf("the run that ended before the kill output %s, want %s", got, baseline)
				}
				return
			}
			out, err := agentrt(data, "resume", "last", "-q", "--json").Output()
			if err != nil {
				t.Fatalf("resume: %v\n%s", err, out)
			}
			if got := outputOf(t, out, srv.URL); got != baseline {
				t.Fatalf("the resumed run's output differs from the uninterrupted run's:\n got  %s\n want %s", got, baseline)
			}
			mu.Lock()
			for k, n := range keys {
				if n != 1 {
					t.Errorf("after resume, idempotency key %q was sent %d times", k, n)
				}
			}
			mu.Unlock()
			verify := agentrt(data, "replay", "last")
			if out, err := verify.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "verified ") {
				t.Fatalf("replay of the resumed run: %v\n%s", err, out)
			}
			// The ledger rebuilt across the kill charges every request
			// the server saw, and at most one more: the request in doubt,
			// whose intent was durable, charged at its worst case whether
			// or not it left before the kill. Nothing stays reserved.
			out, err = agentrt(data, "budget", "last", "--json").Output()
			if err != nil {
				t.Fatalf("budget: %v\n%s", err, out)
			}
			var rep struct {
				Dims []struct {
					Name            string `json:"dimension"`
					Reserved, Spent uint64
				} `json:"dimensions"`
				Open int `json:"open_reservations"`
			}
			if err := json.Unmarshal(out, &rep); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			sent := uint64(len(keys))
			mu.Unlock()
			for _, d := range rep.Dims {
				if d.Name == "http_requests" && (d.Reserved != 0 || d.Spent < sent || d.Spent > sent+1) {
					t.Fatalf("http_requests %+v after resume; the server saw %d requests", d, sent)
				}
			}
			if rep.Open != 0 {
				t.Fatalf("%d reservations open after the resumed run ended", rep.Open)
			}
		})
	}
}

// outputOf returns the output of a run printed with --json, with the site's
// address written as URL.
func outputOf(t *testing.T, out []byte, siteURL string) string {
	t.Helper()
	var res struct {
		Status string
		Output json.RawMessage
	}
	if err := json.Unmarshal(out, &res); err != nil || res.Status != "completed" {
		t.Fatalf("run output %s (%v): want a completed run", out, err)
	}
	return strings.ReplaceAll(string(res.Output), siteURL, "URL")
}

// TestKillDuringHeavyWritingLeavesNoHalfWrittenEntry kills runs that write
// as fast as the journal takes it (a guest making 200 000 pure calls,
// group-committed) at varied points, and checks that the store opens and
// the journal verifies: badger's recovery shows whole commits or nothing,
// never a half-written entry, and every entry it shows is sealed. A kill
// between badger creating a memtable or value-log file and sizing it
// leaves an empty one, which badger refuses to open ("Create a new file")
// and the store removes: a third of the kills are timed in the first 40 ms
// (the store opens), a third over the run, and a third (on Linux) are
// sent the moment a value-log or memtable file appears (inotify), to land
// in that window. AGENTRT_CRASH_KILLS sets the number of kills (default
// 12).
func TestKillDuringHeavyWritingLeavesNoHalfWrittenEntry(t *testing.T) {
	bin := buildCLI(t)
	module := filepath.Join(t.TempDir(), "loop.wasm")
	if err := os.WriteFile(module, testutil.BuildWAT(t, "bench/testdata/loop.wat"), 0o644); err != nil {
		t.Fatal(err)
	}
	input := filepath.Join(t.TempDir(), "count")
	if err := os.WriteFile(input, binary.LittleEndian.AppendUint64(nil, 200_000), 0o644); err != nil {
		t.Fatal(err)
	}
	kills := 12
	if n, err := strconv.Atoi(os.Getenv("AGENTRT_CRASH_KILLS")); err == nil && n > 0 {
		kills = n
	}
	cache := testutil.CompileCache()
	var emptyLogs, emptyMems, before, refusedByBadger int
	firstEmptyLog := 0
	for i := range kills {
		after := time.Duration(i*7919%300) * time.Millisecond
		if i%3 == 0 {
			after = time.Duration(i*7919%40000) * time.Microsecond
		}
		data := t.TempDir()
		if err := os.MkdirAll(cell.StoreDir(data), 0o700); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "--data", data, "--cache", cache, "run", module, "-q", "--input-file", input)
		var killed <-chan struct{}
		var stop func()
		started := make(chan struct{})
		if i%3 == 2 {
			// Watched from before the start, killed when the file appears.
			suffix := []string{".vlog", ".mem"}[i/3%2]
			var err error
			killed, stop, err = killOnCreate(cell.StoreDir(data), suffix, func() {
				<-started
				cmd.Process.Signal(syscall.SIGKILL)
			})
			if err != nil {
				killed = nil
			}
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		close(started)
		if killed != nil {
			select {
			case <-killed:
				after = -1
			case <-time.After(2 * time.Second):
			}
			stop()
		} else {
			time.Sleep(after)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		// What the kill left, before anything opens the store; and what
		// badger alone makes of it, on a copy.
		emptyBefore := emptyLogs + emptyMems
		for _, pattern := range []string{"*.vlog", "*.mem"} {
			files, _ := filepath.Glob(filepath.Join(cell.StoreDir(data), pattern))
			for _, f := range files {
				if info, err := os.Stat(f); err == nil && info.Size() == 0 {
					if pattern == "*.vlog" {
						emptyLogs++
						if firstEmptyLog == 0 {
							firstEmptyLog = i + 1
						}
					} else {
						emptyMems++
					}
				}
			}
		}
		if emptyLogs+emptyMems > emptyBefore {
			if err := badgerAlone(t, cell.StoreDir(data)); err != nil && strings.Contains(err.Error(), "Create a new file") {
				refusedByBadger++
			}
		}
		if _, err := os.Stat(filepath.Join(cell.StoreDir(data), "MANIFEST")); err != nil {
			before++
			continue // killed before badger made the store
		}
		st, err := badgerstore.Open(cell.StoreDir(data))
		if err != nil {
			t.Fatalf("kill %d after %v: the store does not open: %v", i, after, err)
		}
		ctx := context.Background()
		runs, err := st.Runs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) == 0 {
			st.Close()
			continue
		}
		key, err := cellkey.Load(filepath.Join(data, cellkey.FileName))
		if err != nil {
			t.Fatal(err)
		}
		sum, err := journal.VerifyStore(ctx, st, runs[0].ID, journal.TrustKeys(key.Public().(ed25519.PublicKey)))
		st.Close()
		if err != nil {
			t.Fatalf("kill %d after %v: the journal does not verify: %v", i, after, err)
		}
		if testing.Verbose() {
			t.Logf("kill after %v: %d entries, %d seals, finished %v", after, sum.Entries, sum.Seals, sum.End != nil)
		}
	}
	t.Logf("%d kills: %d before badger made the store; %d left an empty value-log file (the first at kill %d), %d an empty memtable file, "+
		"%d of which badger alone refused to open (\"Create a new file\"); every store opened at the first try",
		kills, before, emptyLogs, firstEmptyLog, emptyMems, refusedByBadger)
}

// badgerAlone opens a copy of the store in dir with plain badger, as the
// store did before it removed empty files, and returns the error.
func badgerAlone(t *testing.T, dir string) error {
	t.Helper()
	cp := t.TempDir()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Type().IsRegular() {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(cp, e.Name()), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	db, err := badger.Open(badger.DefaultOptions(cp).WithLogger(nil))
	if err == nil {
		db.Close()
	}
	return err
}

// buildCLI builds the agentrt command, to run as a process that can be
// killed: once per test binary (testutil.BuildProgram), not once per test;
// TestMain removes it.
func buildCLI(t *testing.T) string {
	t.Helper()
	return testutil.BuildProgram(t, "./cmd/agentrt")
}
