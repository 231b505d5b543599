package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
)

// cellFixture is what the daemon tests share: the CLI, the crawler module
// and its grant, one compilation cache, and the uninterrupted run's output.
type cellFixture struct {
	bin, module, grant, cache string
	code                      []byte
	baseline                  string
	requests                  int // page requests of the uninterrupted run
}

func newCellFixture(t *testing.T) *cellFixture {
	t.Helper()
	f := &cellFixture{bin: buildCLI(t), code: testutil.BuildGo(t, "examples/crawler"), cache: t.TempDir()}
	f.module = filepath.Join(t.TempDir(), "crawler.wasm")
	if err := os.WriteFile(f.module, f.code, 0o644); err != nil {
		t.Fatal(err)
	}
	f.grant = filepath.Join(testutil.RepoRoot(), "examples/crawler/grant.yaml")
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		f.requests++
		mu.Unlock()
		site.Handler().ServeHTTP(w, r)
	}))
	defer srv.Close()
	out, err := f.cmd(t.TempDir(), "run", f.module, "--grant", f.grant, "-q", "--json", "--input", `{"start":"`+srv.URL+`/"}`).Output()
	if err != nil {
		t.Fatalf("uninterrupted run: %v", err)
	}
	f.baseline = outputOf(t, out, srv.URL)
	return f
}

func (f *cellFixture) cmd(data string, args ...string) *exec.Cmd {
	return exec.Command(f.bin, append([]string{"--data", data, "--cache", f.cache}, args...)...)
}

// daemon is an `agentrt cell serve` process.
type daemon struct {
	cmd    *exec.Cmd
	log    *bytes.Buffer
	client *cell.Client
	exited chan error
}

// serve starts a daemon on data and waits until its API answers.
func (f *cellFixture) serve(t *testing.T, data string) *daemon {
	t.Helper()
	d := &daemon{cmd: f.cmd(data, "cell", "serve"), log: &bytes.Buffer{}, exited: make(chan error, 1)}
	d.cmd.Stderr = &syncWriter{w: d.log}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.exited <- d.cmd.Wait() }()
	t.Cleanup(func() { d.cmd.Process.Kill() })
	var err error
	if d.client, err = cell.Dial("unix:" + cell.SocketPath(data)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Ready: the API answers and the unfinished runs were taken up.
		ci, err := d.client.Cell(context.Background())
		if err == nil && !ci.ControlOnly && strings.Contains(d.logText(), "recovered ") {
			return d
		}
		select {
		case err := <-d.exited:
			t.Fatalf("the daemon exited: %v\n%s", err, d.logText())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon's API did not answer: %v\n%s", err, d.logText())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (d *daemon) logText() string {
	return d.cmd.Stderr.(*syncWriter).String()
}

// kill ends the daemon with SIGKILL.
func (d *daemon) kill() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
}

// term sends SIGTERM and returns how the daemon exited.
func (d *daemon) term(t *testing.T) error {
	t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.exited:
		return err
	case <-time.After(60 * time.Second):
		t.Fatalf("the daemon did not exit after SIGTERM\n%s", d.logText())
		return nil
	}
}

// waitEnd polls run until it has ended and returns it.
func (d *daemon) waitEnd(t *testing.T, run string) cell.RunInfo {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ri, err := d.client.Run(context.Background(), run)
		if err == nil && ri.Status.Finished() {
			return ri
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s did not end (%+v, %v)\n%s", run, ri, err, d.logText())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFor polls run until ok says yes.
func (d *daemon) waitFor(t *testing.T, run string, what string, ok func(cell.RunInfo) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ri, err := d.client.Run(context.Background(), run)
		if err == nil && ok(ri) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s never %s (%+v, %v)\n%s", run, what, ri, err, d.logText())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

// site is the crawler's site behind a server that counts idempotency keys
// and can hold the k-th page request open.
type siteServer struct {
	*httptest.Server
	mu   sync.Mutex
	keys map[string]int
	// hold, when not zero, is the request to hold: it signals held and
	// waits for release (or for the client to go away).
	hold    int
	held    chan struct{}
	release chan struct{}
}

func newSite(t *testing.T, hold int) *siteServer {
	s := &siteServer{keys: map[string]int{}, hold: hold, held: make(chan struct{}, 1), release: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.keys[r.Header.Get("Idempotency-Key")]++
		n, hold := len(s.keys), s.hold
		s.mu.Unlock()
		if n == hold {
			s.held <- struct{}{}
			select {
			case <-s.release:
			case <-r.Context().Done():
				return // the client died with the request open
			}
		}
		site.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// onceEach fails unless every idempotency key was served once, and returns
// how many there were.
func (s *siteServer) onceEach(t *testing.T) int {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, n := range s.keys {
		if n != 1 {
			t.Errorf("idempotency key %q was sent %d times", k, n)
		}
	}
	return len(s.keys)
}

func (f *cellFixture) submission(t *testing.T, s *siteServer) cell.Submission {
	grant, err := os.ReadFile(f.grant)
	if err != nil {
		t.Fatal(err)
	}
	return cell.Submission{Module: f.code, Name: "crawler.wasm", Grant: string(grant), Input: []byte(`{"start":"` + s.URL + `/"}`)}
}

// checkEnded checks a run that ended on a daemon: completed with the
// uninterrupted run's output.
func (f *cellFixture) checkEnded(t *testing.T, ri cell.RunInfo, s *siteServer) {
	t.Helper()
	if ri.Status != journal.StatusCompleted {
		t.Fatalf("run %s ended %s: %s", ri.RunID, ri.Status, ri.Error)
	}
	if got := strings.ReplaceAll(string(ri.Output), s.URL, "URL"); got != f.baseline {
		t.Fatalf("the run's output differs from the uninterrupted run's:\n got  %s\n want %s", got, f.baseline)
	}
}

// replayed stops nothing: it runs `agentrt replay` on a data directory no
// daemon holds and checks the run verifies.
func (f *cellFixture) replayed(t *testing.T, data, run string) {
	t.Helper()
	if out, err := f.cmd(data, "replay", run).CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "verified ") {
		t.Fatalf("replay of run %s: %v\n%s", run, err, out)
	}
}

// TestDaemonKilledMidRunFinishesTheRunOnRestart kills `agentrt cell serve`
// with SIGKILL while a run it executes has a page request open, at several
// points of the crawl, then starts the daemon again: the run completes on
// its own, with the uninterrupted run's output, no idempotency key sent
// twice, and a journal that replays and verifies.
func TestDaemonKilledMidRunFinishesTheRunOnRestart(t *testing.T) {
	f := newCellFixture(t)
	for _, k := range []int{1, 3, 6} {
		t.Run(fmt.Sprint("fetch-", k), func(t *testing.T) {
			data := t.TempDir()
			s := newSite(t, k)
			d := f.serve(t, data)
			run, err := d.client.Submit(context.Background(), f.submission(t, s))
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-s.held:
			case <-time.After(60 * time.Second):
				t.Fatalf("the run never made request %d\n%s", k, d.logText())
			}
			d.kill()

			d = f.serve(t, data)
			ri := d.waitEnd(t, run)
			f.checkEnded(t, ri, s)
			if !strings.Contains(d.logText(), "recovered 1 unfinished runs") {
				t.Errorf("the restarted daemon did not say it recovered the run:\n%s", d.logText())
			}
			n := s.onceEach(t)
			if n <= f.requests {
				t.Errorf("%d requests; the one in flight at the kill was in doubt, and the crawler retries it with a new key, so want more than %d", n, f.requests)
			}
			if err := d.term(t); err != nil {
				t.Fatalf("the daemon exited with %v after SIGTERM\n%s", err, d.logText())
			}
			f.replayed(t, data, run)
		})
	}
}

// TestDaemonDrainsOnSIGTERMAndResumesOnRestart: SIGTERM while a request is
// in flight lets that step complete and journals it, stops the run at the
// next step boundary, and exits 0; the run stays running with nothing in
// doubt, and the next daemon finishes it, sending no request twice.
func TestDaemonDrainsOnSIGTERMAndResumesOnRestart(t *testing.T) {
	f := newCellFixture(t)
	data := t.TempDir()
	s := newSite(t, 2)
	d := f.serve(t, data)
	run, err := d.client.Submit(context.Background(), f.submission(t, s))
	if err != nil {
		t.Fatal(err)
	}
	<-s.held
	d.cmd.Process.Signal(syscall.SIGTERM)
	d.waitFor(t, run, "stopping", func(ri cell.RunInfo) bool { return ri.Stopping })
	close(s.release)
	select {
	case err := <-d.exited:
		if err != nil {
			t.Fatalf("the drained daemon exited with %v\n%s", err, d.logText())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the daemon did not exit after SIGTERM\n%s", d.logText())
	}

	st, err := badgerstore.Open(cell.StoreDir(data))
	if err != nil {
		t.Fatal(err)
	}
	id, _ := journal.ParseRunID(run)
	meta, err := st.Meta(context.Background(), id)
	if err != nil || meta.Status != journal.StatusRunning {
		t.Fatalf("the drained run's index: %v %v, want running", meta.Status, err)
	}
	var last *journal.Entry
	journal.ReadEntries(context.Background(), st, id, func(e *journal.Entry, _ *journal.Record) error { last = e; return nil })
	st.Close()
	if last.Phase != journal.PhaseCompleted || last.Op != "http.request" {
		t.Fatalf("the drained run's journal ends with %s %s; the request in flight must complete", last.Phase, last.Op)
	}

	d = f.serve(t, data)
	f.checkEnded(t, d.waitEnd(t, run), s)
	if n := s.onceEach(t); n != f.requests {
		t.Errorf("%d requests, want %d as in the uninterrupted run: nothing was in doubt", n, f.requests)
	}
	if err := d.term(t); err != nil {
		t.Fatal(err)
	}
	f.replayed(t, data, run)
}

// TestCancelAndResumeThroughTheDaemon: agentrt cancel stops a run the
// daemon executes at its next step boundary and marks it cancelled; a
// restarted daemon leaves it alone; agentrt resume continues it in the
// daemon, and a second resume while it executes is refused.
func TestCancelAndResumeThroughTheDaemon(t *testing.T) {
	f := newCellFixture(t)
	data := t.TempDir()
	s := newSite(t, 2)
	d := f.serve(t, data)
	ctx := context.Background()
	run, err := d.client.Submit(ctx, f.submission(t, s))
	if err != nil {
		t.Fatal(err)
	}
	<-s.held
	cancel := f.cmd(data, "cancel", run)
	var cancelOut bytes.Buffer
	cancel.Stdout, cancel.Stderr = &cancelOut, &cancelOut
	if err := cancel.Start(); err != nil {
		t.Fatal(err)
	}
	d.waitFor(t, run, "stopping", func(ri cell.RunInfo) bool { return ri.Stopping })
	s.release <- struct{}{} // this request completes; hold the next resumed one
	if err := cancel.Wait(); err != nil || !strings.Contains(cancelOut.String(), "cancelled") {
		t.Fatalf("agentrt cancel: %v\n%s", err, cancelOut.String())
	}
	ri, err := d.client.Run(ctx, run)
	if err != nil || ri.Status != journal.StatusCancelled || ri.Live {
		t.Fatalf("the cancelled run: %+v %v", ri, err)
	}
	// A cancelled run is not resumed by a daemon on its own.
	d.kill()
	d = f.serve(t, data)
	if !strings.Contains(d.logText(), "recovered 0 unfinished runs") {
		t.Fatalf("the daemon resumed a cancelled run:\n%s", d.logText())
	}

	// Hold the first request of the resumed run open, so that a second
	// resume meets it executing.
	s.mu.Lock()
	s.hold = len(s.keys) + 1
	s.mu.Unlock()
	resume := f.cmd(data, "resume", run, "-q", "--json")
	var resumeOut, resumeErr bytes.Buffer
	resume.Stdout, resume.Stderr = &resumeOut, &resumeErr
	if err := resume.Start(); err != nil {
		t.Fatal(err)
	}
	<-s.held
	if _, err = d.client.Resume(ctx, run); err == nil || !strings.Contains(err.Error(), "running in this process") {
		t.Fatalf("a second resume while the run executes: %v, want it refused", err)
	}
	var re *cell.RemoteError
	if !errors.As(err, &re) || re.Code != http.StatusConflict {
		t.Fatalf("the refused resume answered %v, want 409", err)
	}
	close(s.release)
	if err := resume.Wait(); err != nil {
		t.Fatalf("agentrt resume through the daemon: %v\n%s%s", err, resumeOut.String(), resumeErr.String())
	}
	if !strings.Contains(resumeErr.String(), "a cell daemon holds the data directory") {
		t.Errorf("agentrt resume did not say it went to the daemon:\n%s", resumeErr.String())
	}
	f.checkEnded(t, d.waitEnd(t, run), s)
	if n := s.onceEach(t); n != f.requests {
		t.Errorf("%d requests, want %d: a cancel leaves nothing in doubt", n, f.requests)
	}
	if err := d.term(t); err != nil {
		t.Fatal(err)
	}
	f.replayed(t, data, run)
}

// TestRunRefusesAModuleOverTheLimitBeforeReadingIt: agentrt run, local or
// with --cell, stats the module first: a 64 GiB sparse file is refused at
// once with the limit named (not read whole, not badger's error with a hex
// dump), and so are a FIFO (which would block) and a symlink to /dev/zero
// (which would never end). The refusal comes before the cell is dialed.
func TestRunRefusesAModuleOverTheLimitBeforeReadingIt(t *testing.T) {
	bin := buildCLI(t)
	dir := t.TempDir()
	big := filepath.Join(dir, "big.wasm")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("\x00asm\x01\x00\x00\x00"))
	if err := f.Truncate(64 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	fifo := filepath.Join(dir, "fifo.wasm")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.wasm")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		module string
		want   []string
	}{
		{big, []string{"agentrt: error: module " + big + ": module over the cell's limit of 32 MiB (it is 68719476736 bytes)", "hint: a cell takes modules of up to 32 MiB"}},
		{fifo, []string{"is not a regular file but a named pipe", "hint: give the path of a .wasm file"}},
		{zero, []string{"is not a regular file but a device"}},
	} {
		for _, cellFlag := range [][]string{nil, {"--cell", "unix:" + filepath.Join(dir, "no.sock")}, {"--cell", "http://127.0.0.1:1"}} {
			args := append([]string{"--data", filepath.Join(dir, "data"), "run", tc.module}, cellFlag...)
			cmd := exec.Command(bin, args...)
			cmd.Env = append(os.Environ(), cell.EnvAPIToken+"="+strings.Repeat("a", 64))
			start := time.Now()
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("%v: accepted\n%s", args, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("%v:\n%s\nwant %q", args, out, w)
				}
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("%v took %s: the module was read", args, d)
			}
		}
	}
}
