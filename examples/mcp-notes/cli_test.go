//go:build linux

package main_test

import (
	"bytes"
	"context"
	"encoding/json"
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

	"github.com/agentrt/agentrt/examples/mcp-notes/notes"
	"github.com/agentrt/agentrt/host/caps/mcp"
	hostcell "github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// These tests run the agent as a user does, with the agentrt CLI built
// from source, each command a process of its own: the crash test kills
// one with SIGKILL.

// cell is a data directory and the agentrt commands run on it.
type cell struct {
	t    *testing.T
	bin  string
	data string
	env  []string
	mod  string
}

func newCell(t *testing.T, env ...string) *cell {
	t.Helper()
	mod := filepath.Join(t.TempDir(), "mcp-notes.wasm")
	if err := os.WriteFile(mod, testutil.BuildGo(t, "examples/mcp-notes"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &cell{t: t, bin: testutil.BuildProgram(t, "./cmd/agentrt"), data: t.TempDir(), env: append(os.Environ(), env...), mod: mod}
}

func (c *cell) cmd(args ...string) *exec.Cmd {
	cmd := exec.Command(c.bin, append([]string{"--data", c.data}, args...)...)
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

// writeGrant writes a grant file and returns its path.
func (c *cell) writeGrant(text string) string {
	c.t.Helper()
	p := filepath.Join(c.t.TempDir(), "grant.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// runResult is what agentrt run --json and resume --json print last.
type runResult struct {
	Run    string          `json:"run_id"`
	Status string          `json:"status"`
	Output json.RawMessage `json:"output"`
	Error  string          `json:"error"`
}

func parseRun(t *testing.T, b []byte) runResult {
	t.Helper()
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	var r runResult
	if err := json.Unmarshal(lines[len(lines)-1], &r); err != nil {
		t.Fatalf("agentrt --json printed %q: %v", b, err)
	}
	return r
}

// storeBytes is every record of run in the cell's store, which no process
// holds, and its event log.
func (c *cell) storeBytes(run string) []byte {
	c.t.Helper()
	st, err := badgerstore.Open(hostcell.StoreDir(c.data))
	if err != nil {
		c.t.Fatal(err)
	}
	defer st.Close()
	id, err := journal.ParseRunID(run)
	if err != nil {
		c.t.Fatal(err)
	}
	all := journalBytes(c.t, st, id)
	err = st.Events(context.Background(), id, func(b []byte) error {
		all = append(all, b...)
		return nil
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return all
}

// TestMCPNotesHTTPCredential: the notes server over streamable HTTP,
// which refuses a request without the right bearer token; the grant names
// the cell's credential, which DATA/mcp.yaml reads from the cell's
// environment. The server gets the token on every request; the journal,
// the event log and the exported bundle never hold it, and the bundle
// verifies offline.
func TestMCPNotesHTTPCredential(t *testing.T) {
	const token = "nt-7f3a9c21e4b85d06"
	srv := notes.NewServer(notesDir(t))
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	var mu sync.Mutex
	seen := map[string]int{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("Authorization")]++
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()

	c := newCell(t, "NOTES_TOKEN="+token)
	grant := c.writeGrant(`capabilities:
  run: {}
  mcp:
    servers:
      - name: notes
        url: ` + ts.URL + `/mcp
        credential: notes-key
        tools: [add_note, list_notes, read_note]
`)
	in := string(input(map[string]string{"milk": "buy milk"}))

	// Without the cell's credential file the run fails, saying so.
	out, _ := c.cmd("run", c.mod, "--grant", grant, "-q", "--json", "--input", in).Output()
	if r := parseRun(t, out); r.Status != "failed" {
		t.Fatalf("without DATA/mcp.yaml: %+v", r)
	} else if logs := c.run("logs", r.Run); !strings.Contains(string(logs), `the cell has no credential "notes-key"`) {
		t.Fatalf("without DATA/mcp.yaml: the run's log says %q", logs)
	}
	doc := "credentials:\n  notes-key:\n    headers:\n      Authorization: {env: NOTES_TOKEN, prefix: \"Bearer \"}\n"
	if err := os.WriteFile(filepath.Join(c.data, mcp.CredentialsFile), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	r := parseRun(t, c.run("run", c.mod, "--grant", grant, "-q", "--json", "--input", in))
	if r.Status != "completed" {
		t.Fatalf("run: %+v", r)
	}
	o := decode(t, r.Output)
	o.call(t, "read_note", "buy milk")
	mu.Lock()
	if seen["Bearer "+token] == 0 {
		t.Errorf("the server never got the cell's token: %v", seen)
	}
	mu.Unlock()

	all := c.storeBytes(r.Run)
	if !bytes.Contains(all, []byte("saved milk")) {
		t.Fatal("the journal's bytes do not hold the tool's answer: the scan below would prove nothing")
	}
	if bytes.Contains(all, []byte(token)) {
		t.Error("the cell's token is in the journal or the event log")
	}
	bundle := filepath.Join(t.TempDir(), "run.bundle")
	c.run("audit", "export", r.Run, "-o", bundle)
	b, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(token)) {
		t.Error("the cell's token is in the exported bundle")
	}
	trust := filepath.Join(t.TempDir(), "cell.pub")
	if err := os.WriteFile(trust, c.run("keys"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Offline: another directory, no store, the bundle and the key alone.
	audit := exec.Command(c.bin, "--data", t.TempDir(), "audit", "verify", bundle, "--trust", trust)
	if out, err := audit.CombinedOutput(); err != nil {
		t.Fatalf("audit verify: %v\n%s", err, out)
	}
}

// TestMCPNotesKilledMidCall kills `agentrt run` with SIGKILL while the
// server is inside a tools/call (a read_note of a note that is a named
// pipe, held open), then resumes the run. The server dies with the
// process. A call the journal completed before the kill is answered from
// it; the call cut off is sent again with the same idempotency key where
// the grant declares read_note idempotent, and is in doubt where it does
// not (the server's own idempotentHint, which read_note carries, never
// counts).
func TestMCPNotesKilledMidCall(t *testing.T) {
	needSandbox(t)
	server := testutil.BuildProgram(t, "./examples/mcp-notes/server")
	for _, idempotent := range []bool{true, false} {
		name := map[bool]string{true: "idempotent", false: "not-idempotent"}[idempotent]
		t.Run(name, func(t *testing.T) {
			c := newCell(t)
			dir := notesDir(t)
			slow := fifo(t, dir, "slow")
			text := grantText(t, server, dir)
			if !idempotent {
				text = strings.Replace(text, "idempotent: [list_notes, read_note]", "idempotent: [list_notes]", 1)
			}
			grant := c.writeGrant(text)
			in := string(input(map[string]string{"milk": "buy milk"}, map[string]any{"tool": "read_note", "arguments": map[string]string{"title": "slow"}}))
			cmd := c.cmd("run", c.mod, "--grant", grant, "-q", "--json", "--input", in)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			w := reading(t, slow)
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			gone(t, server, "after the process running the run was killed")
			w.Close()
			// add_note completed before the kill: if the resume sent it
			// again, the note would be "buy milk" again.
			if err := os.WriteFile(filepath.Join(dir, "milk.txt"), []byte("changed by hand"), 0o644); err != nil {
				t.Fatal(err)
			}

			var runs runResult
			if err := json.Unmarshal(bytes.TrimSpace(c.run("runs", "--json")), &runs); err != nil || runs.Status == "completed" {
				t.Fatalf("the killed run: %+v %v", runs, err)
			}
			resume := c.cmd("resume", runs.Run, "-q", "--json")
			var stdout, stderr bytes.Buffer
			resume.Stdout, resume.Stderr = &stdout, &stderr
			if err := resume.Start(); err != nil {
				t.Fatal(err)
			}
			ended := make(chan error, 1)
			go func() { ended <- resume.Wait() }()
			if idempotent {
				// Sent again: the server is inside read_note once more.
				w := reading(t, slow)
				w.WriteString("written after the crash")
				w.Close()
			}
			select {
			case err := <-ended:
				if err != nil {
					t.Fatalf("resume: %v\n%s%s", err, stdout.String(), stderr.String())
				}
			case <-time.After(2 * time.Minute):
				resume.Process.Kill()
				t.Fatalf("the resume did not end: the call in doubt was sent again and is waiting in the server (%v)", hostPIDs(server))
			}
			r := parseRun(t, stdout.Bytes())
			if r.Status != "completed" {
				t.Fatalf("resumed run: %+v", r)
			}
			o := decode(t, r.Output)
			slowCall := o.Calls[len(o.Calls)-1]
			if idempotent && (slowCall.Text != "written after the crash" || slowCall.Error != "") {
				t.Errorf("the idempotent call cut off: %+v, want it sent again and answered", slowCall)
			}
			if !idempotent && (slowCall.Kind != "in_doubt" || slowCall.Text != "") {
				t.Errorf("the call cut off: %+v, want in_doubt", slowCall)
			}
			o.call(t, "add_note", "saved milk")
			if b, _ := os.ReadFile(filepath.Join(dir, "milk.txt")); string(b) != "changed by hand" {
				t.Errorf("milk.txt is %q: the add_note the journal completed was sent again", b)
			}
			gone(t, server, "after the resumed run ended")
		})
	}
}
