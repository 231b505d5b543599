package main_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/examples/crawler/site"
	"github.com/agentrt/agentrt/internal/fakellm"
	"github.com/agentrt/agentrt/internal/testutil"
)

// The research agent's tests run it as a user does: the agentrt CLI built
// from source, a data directory with the llm.yaml of the example, the
// fake provider and the crawler's site on loopback (in this test process,
// which outlives the agentrt processes the crash test kills).

// cli is the agentrt command, built once per test binary.
func cli(t *testing.T) string { return testutil.BuildProgram(t, "./cmd/agentrt") }

// TestMain removes the binaries the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemovePrograms()
	os.Exit(code)
}

// module writes the agent, built from source, into a temporary file.
func module(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "research-agent.wasm")
	if err := os.WriteFile(path, testutil.BuildGo(t, "examples/research-agent"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// exampleFile is a file of the example's directory.
func exampleFile(name string) string {
	return filepath.Join(testutil.RepoRoot(), "examples", "research-agent", name)
}

// startSite serves the crawler example's site and counts its requests by
// path.
type siteServer struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
	// hold, when set, is called with each request before it is answered
	// (the crash test parks one there to kill the cell mid-fetch).
	hold func(*http.Request)
}

func startSite(t *testing.T) *siteServer {
	s := &siteServer{hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		hold := s.hold
		s.mu.Unlock()
		if hold != nil {
			hold(r)
		}
		site.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// fakeServer is the fake provider serving the example's script with the
// site's URL written in.
type fakeServer struct {
	*httptest.Server
	Fake   *fakellm.Server
	Script *fakellm.Script
	// arrived, when set, is called as each model request arrives, before
	// the fake answers it; answered once the fake has written its whole
	// answer (flushed to the connection, as each streamed event is).
	mu       sync.Mutex
	arrived  func(n int, r *http.Request)
	answered func(n int)
	n        int
}

// loadScript reads script.yaml with {{site}} replaced by siteURL and edit
// applied to it (nil: none).
func loadScript(t *testing.T, siteURL string, edit func(*fakellm.Script)) *fakellm.Script {
	t.Helper()
	doc, err := os.ReadFile(exampleFile("script.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := fakellm.ParseScript(bytes.ReplaceAll(doc, []byte("{{site}}"), []byte(siteURL)))
	if err != nil {
		t.Fatalf("script.yaml: %v", err)
	}
	if edit != nil {
		edit(sc)
	}
	return sc
}

func startFake(t *testing.T, sc *fakellm.Script) *fakeServer {
	t.Helper()
	f, err := fakellm.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{Fake: f, Script: sc}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			f.ServeHTTP(w, r)
			return
		}
		s.mu.Lock()
		s.n++
		n, arrived, answered := s.n, s.arrived, s.answered
		s.mu.Unlock()
		if arrived != nil {
			arrived(n, r)
		}
		f.ServeHTTP(w, r)
		if answered != nil {
			answered(n)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// settledStats waits until every request the fake got has its outcome
// (a client may read an answer's last byte before the handler records
// it) and returns the stats.
func (s *fakeServer) settledStats(t *testing.T) fakellm.Stats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := s.Fake.Stats()
		if st.Settled() || time.Now().After(deadline) {
			return st
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// cell is a data directory with llm.yaml naming the fake as provider
// "fake", of kind, and the environment its key is read from.
type cell struct {
	t     *testing.T
	bin   string
	data  string
	cache string
	env   []string
}

// newCell writes DATA/llm.yaml from the example's, with the fake's URL
// and kind, and the key in the environment the file names.
func newCell(t *testing.T, fake *fakeServer, kind, key, cache string) *cell {
	t.Helper()
	data := t.TempDir()
	doc, err := os.ReadFile(exampleFile("llm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	base := fake.URL + "/v1"
	if kind == "anthropic" {
		// Anthropic's base URL is the host; the client adds /v1/messages.
		base = fake.URL
	}
	doc = bytes.ReplaceAll(doc, []byte(`"{{fake}}/v1"`), []byte(`"`+base+`"`))
	doc = bytes.ReplaceAll(doc, []byte("kind: openai-chat"), []byte("kind: "+kind))
	if err := os.WriteFile(filepath.Join(data, "llm.yaml"), doc, 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "FAKELLM_API_KEY="+key)
	return &cell{t: t, bin: cli(t), data: data, cache: cache, env: env}
}

// cmd is an agentrt command on the cell.
func (c *cell) cmd(args ...string) *exec.Cmd {
	cmd := exec.Command(c.bin, append([]string{"--data", c.data, "--cache", c.cache}, args...)...)
	cmd.Env = c.env
	return cmd
}

// run runs an agentrt command to its end and returns its stdout, failing
// the test (with stderr) if it fails.
func (c *cell) run(args ...string) []byte {
	c.t.Helper()
	var stderr bytes.Buffer
	cmd := c.cmd(args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("agentrt %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

// input is the agent's input asking the example's question of the site.
func input(siteURL string, stream bool) string {
	b, _ := json.Marshal(map[string]any{
		"question": "How does a durable agent avoid repeating an effect after a crash? Use the handbook at " + siteURL + "/",
		"model":    "fake-mini",
		"stream":   stream,
	})
	return string(b)
}

// output is the agent's output.
type output struct {
	Answer    string   `json:"answer"`
	Sources   []string `json:"sources"`
	Notes     []string `json:"notes"`
	Calls     int      `json:"calls"`
	ToolCalls int      `json:"tool_calls"`
	Usage     struct {
		Input      uint64 `json:"input"`
		Output     uint64 `json:"output"`
		CacheRead  uint64 `json:"cache_read"`
		CacheWrite uint64 `json:"cache_write"`
	} `json:"usage"`
}

// runResult is what agentrt run --json prints.
type runResult struct {
	Run    string          `json:"run_id"`
	Status string          `json:"status"`
	Output json.RawMessage `json:"output"`
	Error  string          `json:"error"`
}

func parseRun(t *testing.T, b []byte) (runResult, output) {
	t.Helper()
	var r runResult
	if err := json.Unmarshal(lastLine(b), &r); err != nil {
		t.Fatalf("agentrt --json printed %q: %v", b, err)
	}
	var o output
	if r.Status == "completed" {
		if err := json.Unmarshal(r.Output, &o); err != nil {
			t.Fatalf("the agent's output %s: %v", r.Output, err)
		}
	}
	return r, o
}

func lastLine(b []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return lines[len(lines)-1]
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
