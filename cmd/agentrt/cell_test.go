package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/examples/crawler/site"
	"github.com/agentrt/agentrt/host"
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
	f := &cellFixture{bin: buildCLI(t), code: testutil.BuildGo(t, "examples/crawler"), cache: testutil.CompileCache()}
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
func (f *cellFixture) serve(t *testing.T, data string, flags ...string) *daemon {
	t.Helper()
	return serveDaemon(t, f.bin, f.cache, data, flags...)
}

// serveDaemon starts `bin cell serve flags` on data with the compilation
// cache at cache, and waits until its API answers and it took up its
// unfinished runs.
func serveDaemon(t *testing.T, bin, cache, data string, flags ...string) *daemon {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--data", data, "--cache", cache, "cell", "serve"}, flags...)...)
	d := &daemon{cmd: cmd, log: &bytes.Buffer{}, exited: make(chan error, 1)}
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

// tcpAddr returns the loopback address the daemon said it listens on.
func (d *daemon) tcpAddr(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`and on http://(127\.0\.0\.1:[0-9]+) `).FindStringSubmatch(d.logText())
	if m == nil {
		t.Fatalf("the daemon named no TCP address:\n%s", d.logText())
	}
	return m[1]
}

func (d *daemon) logText() string {
	return d.cmd.Stderr.(*syncWriter).String()
}

// completed waits until run ends, and fails the test unless it completed.
func (d *daemon) completed(t *testing.T, run string) cell.RunInfo {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ri, err := d.client.Run(context.Background(), run)
		if err == nil && ri.Status == journal.StatusCompleted {
			return ri
		}
		if err != nil || ri.Status != journal.StatusRunning {
			t.Fatalf("run %s: %v %+v\n%s", run, err, ri, d.logText())
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s did not end: %+v", run, ri)
		}
		time.Sleep(20 * time.Millisecond)
	}
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

// daemonFixture is what the API attack tests share: the CLI, one
// compilation cache, and the agents they run.
func daemonFixture(t *testing.T) (*cellFixture, map[string]string) {
	t.Helper()
	f := &cellFixture{bin: buildCLI(t), cache: testutil.CompileCache()}
	modules := map[string]string{}
	dir := t.TempDir()
	for name, src := range map[string]string{"hostile": "cmd/agentrt/testdata/agents/hostile", "smoke": "host/testdata/agents/smoke"} {
		modules[name] = filepath.Join(dir, name+".wasm")
		if err := os.WriteFile(modules[name], testutil.BuildGo(t, src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return f, modules
}

// step is one step of the hostile agent (testdata/agents/hostile).
type step struct {
	Op      string            `json:"op"`
	Method  string            `json:"method,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
	Text    string            `json:"text,omitempty"`
	Key     string            `json:"key,omitempty"`
}

const smokeGrantYAML = "capabilities:\n  run: {}\n  kv: {namespace: smoke}\n"

// TestAgentCannotDriveItsCell is the review's attack, end to end: a real
// agent with the crawler's grant (http to 127.0.0.1, any port) runs in a
// real `agentrt cell serve --listen 127.0.0.1:PORT` and, through its http
// capability, submits a run with a grant it wrote itself (a tool that
// writes a host directory), guesses the token, reads the cell's identity,
// and approves another run's parked call under a name it chose. None of
// its calls succeeds: each is the API's 401 naming the token file (today),
// or refused by the http capability before it leaves (once egress to the
// cell's own listeners is denied); no run is created and the other run's
// call still waits. The operator then answers that call through both
// listeners, and the journal names each approver by the credential: the
// API token's fingerprint, the socket peer's user.
func TestAgentCannotDriveItsCell(t *testing.T) {
	f, modules := daemonFixture(t)
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, cell.ModesFile), []byte("rules:\n  - {name: ask-writes, op: kv.put, effect: ask}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := f.serve(t, data, "--listen", "127.0.0.1:0")
	addr := d.tcpAddr(t)
	ctx := context.Background()
	smoke, err := os.ReadFile(modules["smoke"])
	if err != nil {
		t.Fatal(err)
	}
	victim, err := d.client.Submit(ctx, cell.Submission{Module: smoke, Name: "smoke.wasm", Input: []byte("x"), Grant: smokeGrantYAML})
	if err != nil {
		t.Fatal(err)
	}
	parked := func(ri cell.RunInfo) bool { return len(ri.Waiting) == 1 }
	d.waitFor(t, victim, "parked", parked)

	// What the agent wants run: a tool that tees into a host directory.
	evil, _ := json.Marshal(cell.Submission{Module: []byte("\x00asm\x01\x00\x00\x00"), Name: "evil.wasm",
		Grant: "capabilities:\n  run: {}\n  tool: {tools: [{name: w, exec: /usr/bin/tee, args: {positional: [{pattern: '.*'}]}, write: [/], limits: {wall: 5s}}]}\n"})
	asJSON := map[string]string{"Content-Type": "application/json"}
	guess := map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + strings.Repeat("0", 64)}
	base := "http://" + addr
	steps := []step{
		{Op: "http", Method: "POST", URL: base + "/v1/runs", Headers: asJSON, Body: string(evil)},
		{Op: "http", Method: "POST", URL: base + "/v1/runs?follow=1", Headers: guess, Body: string(evil)},
		{Op: "http", Method: "GET", URL: base + "/v1/cell"},
		{Op: "http", Method: "GET", URL: base + "/v1/runs/" + victim},
		{Op: "http", Method: "POST", URL: base + "/v1/runs/" + victim + "/approve", Headers: asJSON, Body: `{"approve": true, "by": "operator"}`},
		{Op: "http", Method: "POST", URL: base + "/v1/runs/" + victim + "/approve", Headers: guess, Body: `{"approve": true}`},
		{Op: "http", Method: "POST", URL: base + "/v1/runs/" + victim + "/cancel"},
	}
	input, _ := json.Marshal(steps)
	crawlerGrant := filepath.Join(testutil.RepoRoot(), "examples/crawler/grant.yaml")
	cmd := f.cmd(data, "run", "--cell", base, modules["hostile"], "--grant", crawlerGrant, "-q", "--json", "--input", string(input))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the hostile agent's run: %v\n%s\n%s", err, out, d.logText())
	}
	var ri cell.RunInfo
	var results []string
	if err := json.Unmarshal(out, &ri); err != nil || ri.Status != journal.StatusCompleted || json.Unmarshal(ri.Output, &results) != nil || len(results) != len(steps) {
		t.Fatalf("the hostile agent's run: %s (%v)", out, err)
	}
	seen401 := 0
	for i, r := range results {
		switch {
		case strings.HasPrefix(r, "status "):
			// The API's own layer: today's outcome, the http capability
			// reaching the listener.
			if !strings.HasPrefix(r, "status 401 ") || !strings.Contains(r, cell.APITokenFile) {
				t.Errorf("step %d (%s %s): %s; want 401 naming %s", i, steps[i].Method, steps[i].URL, r, cell.APITokenFile)
			}
			seen401++
		case strings.HasPrefix(r, "error ") && strings.Contains(r, "denied"):
			// Egress to the cell's listeners refused before it left.
		default:
			t.Errorf("step %d (%s %s): %s; want a 401 or a denial", i, steps[i].Method, steps[i].URL, r)
		}
	}
	t.Logf("%d of %d calls reached the API and got 401; the rest were denied by the http capability", seen401, len(steps))

	runs, err := d.client.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || (runs[0].RunID != ri.RunID && runs[1].RunID != ri.RunID) {
		t.Fatalf("the cell holds %d runs, want the victim and the hostile agent only: %+v", len(runs), runs)
	}
	if v, err := d.client.Run(ctx, victim); err != nil || !parked(v) || v.Status != journal.StatusRunning {
		t.Fatalf("the victim after the attack: %+v %v, want its call still waiting", v, err)
	}

	// The operator lists what waits, and answers: on TCP with the token,
	// then on the socket.
	if out, err := f.cmd(data, "approve", "--list").CombinedOutput(); err != nil || !strings.Contains(string(out), victim+"\tstep 4\tkv.put \"smoke\"\trule \"ask-writes\"") {
		t.Fatalf("agentrt approve --list: %v\n%s", err, out)
	}
	tok, err := os.ReadFile(cell.APITokenPath(data))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bytes.TrimSpace(tok))
	tokenWho := "token:api#" + hex.EncodeToString(sum[:4])
	if out, err := f.cmd(data, "approve", victim, "--cell", base).CombinedOutput(); err != nil || !strings.Contains(string(out), "approved by "+tokenWho) {
		t.Fatalf("agentrt approve --cell %s: %v\n%s", base, err, out)
	}
	d.waitFor(t, victim, "parked again", func(ri cell.RunInfo) bool { return parked(ri) && ri.Waiting[0].Step > 4 })
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	unixWho := fmt.Sprintf("unix:%s(uid %d)", me.Username, os.Geteuid())
	if out, err := f.cmd(data, "approve", victim, "--deny").CombinedOutput(); err != nil || !strings.Contains(string(out), "denied by "+unixWho) {
		t.Fatalf("agentrt approve --deny: %v\n%s", err, out)
	}
	if end := d.waitEnd(t, victim); end.Status != journal.StatusFailed {
		t.Fatalf("the victim ended %s, want failed (its write was denied)", end.Status)
	}
	if err := d.term(t); err != nil {
		t.Fatal(err)
	}
	st, err := badgerstore.Open(cell.StoreDir(data))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id, _ := journal.ParseRunID(victim)
	var approvers []string
	journal.ReadEntries(ctx, st, id, func(e *journal.Entry, _ *journal.Record) error {
		var g host.GateRecord
		if len(e.Gate) > 0 && abi.Unmarshal(e.Gate, &g) == nil && g.Mode == "ask" {
			approvers = append(approvers, fmt.Sprintf("%v:%s", g.Approved, g.Approver))
		}
		return nil
	})
	if want := []string{"true:" + tokenWho, "false:" + unixWho}; !slices.Equal(approvers, want) {
		t.Fatalf("the journal's gate records name %q, want %q", approvers, want)
	}
}

// TestDaemonRefusesBrowsersAndGuesses sends to a real daemon's TCP
// listener what a web page or a local process without the token can: a
// cross-origin text/plain POST of a submission, a request with a rebound
// Host, no token, a wrong token. Each gets its refusal; no run is created.
func TestDaemonRefusesBrowsersAndGuesses(t *testing.T) {
	f, modules := daemonFixture(t)
	data := t.TempDir()
	d := f.serve(t, data, "--listen", "127.0.0.1:0")
	addr := d.tcpAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	tok, err := os.ReadFile(cell.APITokenPath(data))
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(cell.APITokenPath(data)); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the token file: %v %v, want mode 0600", info.Mode(), err)
	}
	smoke, _ := os.ReadFile(modules["smoke"])
	sub, _ := json.Marshal(cell.Submission{Module: smoke, Grant: smokeGrantYAML})
	bearer := "Bearer " + string(bytes.TrimSpace(tok))
	for _, tc := range []struct {
		name   string
		header map[string]string
		host   string
		code   int
		want   string
	}{
		{"cross-origin text/plain POST", map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain"}, "", 403, "Origin header"},
		{"cross-origin text/plain POST with the token", map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain", "Authorization": bearer}, "", 403, "Origin header"},
		{"rebound Host with the token", map[string]string{"Content-Type": "application/json", "Authorization": bearer}, "evil.example:" + port, 403, "is not this listener's"},
		{"no token", map[string]string{"Content-Type": "application/json"}, "", 401, cell.APITokenFile},
		{"wrong token", map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + strings.Repeat("1", 64)}, "", 401, cell.APITokenFile},
	} {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/runs", bytes.NewReader(sub))
		for k, v := range tc.header {
			req.Header.Set(k, v)
		}
		if tc.host != "" {
			req.Host = tc.host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		body.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(body.String(), tc.want) {
			t.Errorf("%s: %d %s, want %d with %q", tc.name, resp.StatusCode, body.String(), tc.code, tc.want)
		}
	}
	if runs, err := d.client.Runs(context.Background()); err != nil || len(runs) != 0 {
		t.Fatalf("refused requests created runs: %+v %v", runs, err)
	}
	// The token's holder gets through, by the CLI, which finds the token
	// in the data directory.
	out, err := f.cmd(data, "run", "--cell", "http://"+addr, modules["smoke"], "--grant", writeTemp(t, smokeGrantYAML), "-q", "--input", "hi").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "input=hi") {
		t.Fatalf("agentrt run --cell http://%s: %v\n%s", addr, err, out)
	}
}

func writeTemp(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
