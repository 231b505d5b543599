package main_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentrt/agentrt/examples/crawler/site"
	"github.com/agentrt/agentrt/host"
	hostcell "github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/fakellm"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
)

// The team example runs as a user runs it: the agentrt CLI built from
// source serving a cell (agentrt cell serve, which sub-agents need), the
// four modules built from source and pushed to it, the crawler's site and
// the fake model provider on loopback, in this test process, which
// outlives the daemon the crash test kills.

// cli is the agentrt command, built once per test binary.
func cli(t *testing.T) string { return testutil.BuildProgram(t, "./cmd/agentrt") }

// TestMain removes the binaries the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemovePrograms()
	os.Exit(code)
}

func exampleFile(name string) string {
	return filepath.Join(testutil.RepoRoot(), "examples", "team", name)
}

// team is a cell with the example's modules pushed, the site and the
// fake provider: everything one run of the team needs.
type team struct {
	t           *testing.T
	bin         string
	data, cache string
	env         []string
	modules     map[string]string // "team", "fetch", "count", "write" -> sha256 hex
	code        []byte

	site *httptest.Server
	fake *fakellm.Server

	mu   sync.Mutex
	hits map[string]int // site path -> requests
	// arrived, when set, is called with each model request before the
	// fake answers it; a request it returns false for is not answered.
	arrived func(r *http.Request) bool
	// calls counts the model requests that arrived.
	calls int
}

func newTeam(t *testing.T) *team {
	tm := &team{t: t, bin: cli(t), data: t.TempDir(), cache: testutil.CompileCache(), hits: map[string]int{}}
	tm.site = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tm.mu.Lock()
		tm.hits[r.URL.Path]++
		tm.mu.Unlock()
		site.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(tm.site.Close)
	doc, err := os.ReadFile(exampleFile("script.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := fakellm.ParseScript(doc)
	if err != nil {
		t.Fatalf("script.yaml: %v", err)
	}
	if tm.fake, err = fakellm.New(sc); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tm.mu.Lock()
		arrived := tm.arrived
		if r.Method == http.MethodPost {
			tm.calls++
		}
		tm.mu.Unlock()
		if arrived != nil && r.Method == http.MethodPost && !arrived(r) {
			return
		}
		tm.fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	llm, err := os.ReadFile(exampleFile("llm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tm.data, "llm.yaml"), bytes.ReplaceAll(llm, []byte("{{fake}}"), []byte(srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	tm.env = append(os.Environ(), "FAKELLM_API_KEY="+sc.APIKey)
	return tm
}

// daemon is an `agentrt cell serve` of the team's cell.
type daemon struct {
	cmd    *exec.Cmd
	log    *syncBuffer
	exited chan error
	client *hostcell.Client
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serve starts the daemon and waits until it answers and has taken up
// the runs it owned.
func (tm *team) serve() *daemon {
	t := tm.t
	t.Helper()
	d := &daemon{cmd: exec.Command(tm.bin, "--data", tm.data, "--cache", tm.cache, "cell", "serve"), log: &syncBuffer{}, exited: make(chan error, 1)}
	d.cmd.Env = tm.env
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.exited <- d.cmd.Wait() }()
	t.Cleanup(func() { d.cmd.Process.Kill() })
	var err error
	if d.client, err = hostcell.Dial("unix:" + hostcell.SocketPath(tm.data)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ci, err := d.client.Cell(context.Background())
		if err == nil && !ci.ControlOnly && strings.Contains(d.log.String(), "recovered ") {
			return d
		}
		select {
		case err := <-d.exited:
			t.Fatalf("cell serve exited: %v\n%s", err, d.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon's API did not answer: %v\n%s", err, d.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *daemon) kill() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
}

// stop drains the daemon with SIGTERM, so that the store is free.
func (d *daemon) stop(t *testing.T) {
	t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.exited:
		if err != nil {
			t.Fatalf("cell serve: %v\n%s", err, d.log)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("cell serve did not exit on SIGTERM\n%s", d.log)
	}
}

// push builds the four modules from source and pushes them to d.
func (tm *team) push(d *daemon) {
	t := tm.t
	t.Helper()
	tm.modules = map[string]string{}
	for _, m := range []string{"fetch", "count", "write", "team"} {
		dir := "examples/team/" + m
		if m == "team" {
			dir = "examples/team"
		}
		code := testutil.BuildGo(t, dir)
		mi, err := d.client.PushModule(context.Background(), code)
		if err != nil {
			t.Fatalf("push %s: %v", m, err)
		}
		tm.modules[m] = mi.SHA256
		if m == "team" {
			tm.code = code
		}
	}
}

// submit starts the team's run in d with the example's grant.
func (tm *team) submit(d *daemon) string {
	t := tm.t
	t.Helper()
	grant, err := os.ReadFile(exampleFile("grant.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal(map[string]any{"site": tm.site.URL, "model": "fake-mini",
		"modules": map[string]string{"fetch": tm.modules["fetch"], "count": tm.modules["count"], "write": tm.modules["write"]}})
	run, err := d.client.Submit(context.Background(), hostcell.Submission{ModuleSHA256: tm.modules["team"], Name: "team.wasm", Grant: string(grant), Input: in})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// report is the team's output.
type report struct {
	Title, URL, Summary, Strategy, Draft, Reflection string
	Words                                            int
	Refused                                          []string
	Children                                         []struct {
		Run    string
		Step   uint64
		Status string
	}
	Plan struct {
		Done    []string
		Runs    map[string]string
		Undone  []string
		Outcome string
		Signals []struct{ Kind, Step, Reason string }
	}
	Effects map[string]int
}

// wait waits for run's end in d and returns the team's report.
func (tm *team) wait(d *daemon, run string) report {
	t := tm.t
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for {
		ri, err := d.client.Run(context.Background(), run)
		if err == nil && ri.Status.Finished() {
			if ri.Status != journal.StatusCompleted {
				t.Fatalf("the team ended %s: %s\n%s", ri.Status, ri.Error, d.log)
			}
			var r report
			if err := json.Unmarshal(ri.Output, &r); err != nil {
				t.Fatalf("output %q: %v", ri.Output, err)
			}
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("the team did not end within 120 s (%+v, %v)\n%s", ri, err, d.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// check asserts the report of a team run: the three children's results,
// each refused the power it tried, the failing step's rollback, each
// effect made once.
func (tm *team) check(r report) {
	t := tm.t
	t.Helper()
	if r.Title != "Effects" || r.URL != tm.site.URL+"/effects" || r.Words != 35 ||
		!strings.HasPrefix(r.Summary, "Effects change the world, so each is journaled") {
		t.Fatalf("the report: %+v", r)
	}
	if r.Strategy != "brief" && r.Strategy != "detailed" {
		t.Fatalf("strategy %q", r.Strategy)
	}
	want := []string{
		`denied: http.request: host example.com:80 is not in the grant (allowed: 127.0.0.1)`,
		`denied: tool.run: no tool "cat" in the grant (granted: count-words)`,
	}
	if !reflect.DeepEqual(r.Refused, want) {
		t.Fatalf("refused %q, want %q", r.Refused, want)
	}
	if len(r.Children) != 3 {
		t.Fatalf("%d children, want 3: %+v", len(r.Children), r.Children)
	}
	for i, c := range r.Children {
		if c.Status != "completed" || c.Run != r.Plan.Runs[[]string{"fetch", "count", "write"}[i]] {
			t.Fatalf("child %d: %+v, plan runs %v", i, c, r.Plan.Runs)
		}
	}
	if !reflect.DeepEqual(r.Plan.Done, []string{"fetch", "count", "write", "assemble", "stage"}) ||
		!reflect.DeepEqual(r.Plan.Undone, []string{"stage"}) || len(r.Plan.Signals) != 1 ||
		r.Plan.Signals[0].Kind != "step_failed" || r.Plan.Signals[0].Step != "publish" ||
		!strings.Contains(r.Plan.Outcome, "the replanner gave up: there is no other channel to announce on") {
		t.Fatalf("the plan: %+v", r.Plan)
	}
	if r.Draft != "removed" {
		t.Fatalf("the staged draft is %s after the rollback", r.Draft)
	}
	if !reflect.DeepEqual(r.Effects, map[string]int{"assemble": 1, "stage": 1}) {
		t.Fatalf("effects %v: a step's effect was made more than once", r.Effects)
	}
	if r.Reflection != "plan/reflection/team-report/000001" {
		t.Fatalf("reflection %q", r.Reflection)
	}
}

// family checks, with the daemon stopped, that each child's journal names
// the team as its parent and the spawning step, that each child was
// granted only its own power, and that `agentrt replay` verifies every
// journal of the family.
func (tm *team) family(parent string, r report) {
	t := tm.t
	t.Helper()
	pid, err := journal.ParseRunID(parent)
	if err != nil {
		t.Fatal(err)
	}
	st, err := badgerstore.Open(hostcell.StoreDir(tm.data))
	if err != nil {
		t.Fatal(err)
	}
	powers := map[string]string{}
	for i, c := range r.Children {
		id, err := journal.ParseRunID(c.Run)
		if err != nil {
			t.Fatal(err)
		}
		var hdr *journal.Header
		err = journal.ReadEntries(context.Background(), st, id, func(e *journal.Entry, _ *journal.Record) error {
			if e.Header != nil {
				hdr = e.Header
			}
			return nil
		})
		if err != nil || hdr == nil {
			t.Fatalf("child %s: header: %v", c.Run, err)
		}
		if !bytes.Equal(hdr.Parent, pid[:]) || hdr.Origin == nil || hdr.Origin.Kind != "spawn" || hdr.Origin.ID != parent || hdr.Origin.Seq != c.Step {
			t.Fatalf("child %d's journal: parent %x, origin %+v; want parent %s, step %d", i, hdr.Parent, hdr.Origin, parent, c.Step)
		}
		g, err := host.DecodeGrant(hdr.Grant)
		if err != nil {
			t.Fatal(err)
		}
		var has []string
		if g.HTTP != nil {
			has = append(has, "http")
		}
		if g.Tool != nil {
			has = append(has, "tool")
		}
		if g.LLM != nil {
			has = append(has, "llm")
		}
		if g.KV != nil || g.Agent != nil || g.Random != nil {
			has = append(has, "more")
		}
		powers[hex.EncodeToString(hdr.ModuleSHA256)] = strings.Join(has, ",")
	}
	st.Close()
	if want := map[string]string{tm.modules["fetch"]: "http", tm.modules["count"]: "tool", tm.modules["write"]: "llm"}; !reflect.DeepEqual(powers, want) {
		t.Fatalf("the children's powers by module: %v, want %v", powers, want)
	}
	for _, run := range []string{parent, r.Children[0].Run, r.Children[1].Run, r.Children[2].Run} {
		out, err := exec.Command(tm.bin, "--data", tm.data, "--cache", tm.cache, "replay", run).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "verified ") {
			t.Fatalf("replay of run %s: %v\n%s", run, err, out)
		}
	}
}

// TestTeam runs the example in a cell daemon: the planner's three
// sub-agents, each with a power of its own, report; each child trying a
// power it was not given is refused; the failing step is rolled back; each
// child's journal names its parent; every journal replays and verifies.
func TestTeam(t *testing.T) {
	tm := newTeam(t)
	d := tm.serve()
	tm.push(d)
	run := tm.submit(d)
	r := tm.wait(d, run)
	d.stop(t)
	tm.check(r)
	if n := tm.hits["/effects"]; n != 1 {
		t.Errorf("the site served /effects %d times, want 1", n)
	}
	if n := len(tm.fake.Stats().Requests); n != 1 {
		t.Errorf("the model was called %d times, want 1", n)
	}
	tm.family(run, r)
}

// TestTeamSurvivesDaemonKill kills the daemon with SIGKILL mid-plan: the
// team parked awaiting its second wave, the writer's model call held open
// at the provider. The restarted daemon finishes the plan with the same
// report: no child spawned again, each local step's effect made once, the
// page fetched once, no model call answered in a journal sent again; and
// every journal of the family replays and verifies.
func TestTeamSurvivesDaemonKill(t *testing.T) {
	tm := newTeam(t)
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	tm.arrived = func(r *http.Request) bool {
		first := false
		once.Do(func() { first = true })
		if first {
			close(held)
			// The daemon dies with the call open; release lets a failing
			// test's cleanup close the server.
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return false
		}
		return true
	}
	defer close(release)
	d := tm.serve()
	tm.push(d)
	run := tm.submit(d)
	select {
	case <-held:
	case <-time.After(120 * time.Second):
		t.Fatalf("the writer's model call never arrived\n%s", d.log)
	}
	d.kill()

	d = tm.serve()
	r := tm.wait(d, run)
	runs, err := d.client.Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d.stop(t)
	tm.check(r)
	if len(runs) != 4 {
		t.Fatalf("the cell holds %d runs, want the team and its 3 children: a child was spawned again", len(runs))
	}
	if n := tm.hits["/effects"]; n != 1 {
		t.Errorf("the site served /effects %d times, want 1", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !tm.fake.Stats().Settled() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	st := tm.fake.Stats()
	if again := st.ResentAfterCompletion(); len(again) != 0 {
		t.Fatalf("model calls answered before were sent again: %+v", again)
	}
	tm.mu.Lock()
	calls := tm.calls
	tm.mu.Unlock()
	if calls != 2 || len(st.Requests) != 1 || st.Requests[0].Outcome != fakellm.OutcomeCompleted {
		t.Fatalf("%d model requests arrived, %+v answered; want the held one (never answered), then one answered after the restart", calls, st.Requests)
	}
	tm.family(run, r)
}
