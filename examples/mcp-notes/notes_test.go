//go:build linux

package main_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	sandbox "github.com/agentrt/agentrt/native-sandbox"
	"github.com/agentrt/agentrt/replay"
)

// The example's tests run the agent, built from source, on a host whose
// notes server is the example's server program, built from source and
// launched under bubblewrap (so they run on Linux); or the same server
// over streamable HTTP in this test process.

// TestMain lets the test binary serve as the sandbox helper, as agentrt
// does, and removes what it built.
func TestMain(m *testing.M) {
	sandbox.HelperMain()
	code := m.Run()
	testutil.RemovePrograms()
	os.Exit(code)
}

func needSandbox(t *testing.T) {
	t.Helper()
	if rep, err := sandbox.Check(); err != nil || !rep.Ready() {
		t.Fatalf("the sandbox is not ready on this machine (make deps installs bubblewrap): %v %v", err, rep)
	}
}

// notesDir is a directory for the notes that the server can write: when
// the test runs as root, the server runs as the sandbox's default user.
func notesDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "notes")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, sandbox.DefaultUser.UID, sandbox.DefaultUser.GID); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// grantText is grant.yaml with the server program and the notes
// directory in place of /srv/mcp-notes/server and /srv/notes.
func grantText(t *testing.T, server, dir string) string {
	t.Helper()
	b, err := os.ReadFile("grant.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(b), "/srv/mcp-notes/server", server)
	return strings.ReplaceAll(s, "/srv/notes", dir)
}

func parseGrant(t *testing.T, text string) *host.Grant {
	t.Helper()
	g, err := host.ParseGrant([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// output is the agent's output.
type output struct {
	Tools []struct {
		Name        string
		Idempotent  bool
		Annotations string
	}
	Calls []result
}

type result struct {
	Server  string
	Tool    string
	Text    string
	IsError bool `json:"is_error"`
	Error   string
	Kind    string
}

func (o *output) call(t *testing.T, tool, text string) result {
	t.Helper()
	for _, c := range o.Calls {
		if c.Tool == tool && (text == "" || c.Text == text) {
			return c
		}
	}
	t.Fatalf("no call of %s with text %q in %+v", tool, text, o.Calls)
	return result{}
}

func decode(t *testing.T, b []byte) *output {
	t.Helper()
	var o output
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatalf("output %s: %v", b, err)
	}
	return &o
}

// input is the agent's input: the notes to save, then calls.
func input(notes map[string]string, calls ...map[string]any) []byte {
	in := map[string]any{"calls": calls}
	var ns []map[string]string
	for _, title := range []string{"eggs", "milk", "slow"} {
		if text, ok := notes[title]; ok {
			ns = append(ns, map[string]string{"title": title, "text": text})
		}
	}
	in["notes"] = ns
	b, _ := json.Marshal(in)
	return b
}

// hostPIDs returns the host's processes whose command line holds s.
func hostPIDs(s string) []string {
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' || e.Name() == fmt.Sprint(os.Getpid()) {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(s)) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// eventLog is the run's event log: the guest's and the server's stderr.
func eventLog(t *testing.T, env *testutil.Env, run journal.RunID) string {
	t.Helper()
	var b strings.Builder
	err := host.ReadEvents(context.Background(), env.Store, run, func(e host.Event) error {
		b.Write(e.Data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// journalBytes is every record of run as the store holds it, with the
// blobs its entries name.
func journalBytes(t *testing.T, st journal.Store, run journal.RunID) []byte {
	t.Helper()
	var all bytes.Buffer
	err := st.Records(context.Background(), run, 0, func(_ uint64, raw []byte) error {
		all.Write(raw)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return all.Bytes()
}

// verifyOffline exports run's bundle and verifies it with the cell's
// public key alone, re-executing the module; it returns the bundle.
func verifyOffline(t *testing.T, env *testutil.Env, run journal.RunID) []byte {
	t.Helper()
	ctx := context.Background()
	var buf bytes.Buffer
	if _, err := replay.ExportTo(ctx, env.Store, run, env.Key, replay.EngineSettings{}, &buf); err != nil {
		t.Fatal(err)
	}
	rep, err := replay.VerifyBundle(ctx, buf.Bytes(), replay.VerifyOptions{Trusted: []ed25519.PublicKey{env.Key.Public().(ed25519.PublicKey)}, Engine: env.Engine})
	if err != nil || !rep.OK || !rep.ReplayIdentical {
		t.Fatalf("the bundle does not verify offline: %v %+v", err, rep)
	}
	return buf.Bytes()
}

// TestMCPNotesStdio runs the agent with the example's grant against the
// example's server, launched under the sandbox: the agent is shown and
// calls only the granted tools, a tool and a server the grant does not
// declare are refused before anything reaches a server, the server is gone
// when the run ends, replay answers every call from the journal, and the
// exported bundle verifies offline.
func TestMCPNotesStdio(t *testing.T) {
	needSandbox(t)
	server := testutil.BuildProgram(t, "./examples/mcp-notes/server")
	dir := notesDir(t)
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	code := testutil.BuildGo(t, "examples/mcp-notes")
	ctx := context.Background()
	in := input(map[string]string{"milk": "buy milk", "eggs": "a dozen"},
		map[string]any{"tool": "delete_note", "arguments": map[string]string{"title": "milk"}},
		map[string]any{"server": "files", "tool": "read_file", "arguments": map[string]string{"path": "/etc/shadow"}})
	res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Input: in, Grant: parseGrant(t, grantText(t, server, dir))})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != journal.StatusCompleted {
		t.Fatalf("run ended %s: %v\n%s", res.Status, res.Err, eventLog(t, env, res.Run))
	}
	o := decode(t, res.Output)
	var names []string
	for _, tl := range o.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "add_note,list_notes,read_note" {
		t.Fatalf("the agent was shown %v, want the granted add_note, list_notes, read_note (not delete_note)", names)
	}
	if o.Tools[0].Idempotent || !o.Tools[2].Idempotent || !strings.Contains(o.Tools[2].Annotations, `"idempotentHint":true`) {
		t.Errorf("idempotent as the grant says, the server's hints shown: %+v", o.Tools)
	}
	if c := o.call(t, "list_notes", ""); c.Text != "eggs\nmilk" || c.Error != "" {
		t.Errorf("list_notes: %+v", c)
	}
	o.call(t, "read_note", "buy milk")
	o.call(t, "read_note", "a dozen")
	if c := o.call(t, "delete_note", ""); c.Kind != "denied" || !strings.Contains(c.Error, `tool "delete_note" of mcp server notes is not in the grant`) {
		t.Errorf("delete_note: %+v, want denied", c)
	}
	if c := o.call(t, "read_file", ""); c.Kind != "denied" || !strings.Contains(c.Error, `no mcp server "files" in the grant`) {
		t.Errorf("a server the grant does not declare: %+v, want denied", c)
	}
	// The refused delete never reached the server.
	if b, err := os.ReadFile(filepath.Join(dir, "milk.txt")); err != nil || string(b) != "buy milk" {
		t.Errorf("milk.txt: %q %v", b, err)
	}
	gone(t, server, "after the run ended")
	if !strings.Contains(eventLog(t, env, res.Run), "mcp server notes: notes: serving the notes in "+dir+"\n") {
		t.Errorf("the server's stderr is not in the run's event log: %q", eventLog(t, env, res.Run))
	}

	// Replay answers every call from the journal: with the notes gone
	// and the server unable to start, the output is the same.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	j, err := replay.Load(ctx, env.Store, res.Run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := j.Replay(ctx, env.Engine, code, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rep.Output, res.Output) || uint64(rep.Calls) != res.Steps {
		t.Fatalf("replay output %s after %d calls; the run's %s after %d", rep.Output, rep.Calls, res.Output, res.Steps)
	}
	verifyOffline(t, env, res.Run)
}

// fifo makes name.txt in dir a named pipe: a read_note of name blocks
// until the test writes the note (writeNote), which is how the tests hold
// the server inside a tools/call.
func fifo(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name+".txt")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(p, sandbox.DefaultUser.UID, sandbox.DefaultUser.GID); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// reading waits until a process has the named pipe p open for reading
// (the server, inside read_note) and returns its write end, which holds
// the reader until it is closed; or fails the test after a minute.
func reading(t *testing.T, p string) *os.File {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		// Opening a pipe's write end without blocking fails with ENXIO
		// while no one has it open for reading.
		f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			return f
		}
		if !errors.Is(err, syscall.ENXIO) {
			t.Fatal(err)
		}
	}
	t.Fatalf("no one opened %s for reading within a minute: the tools/call never reached the server", p)
	return nil
}

// gone waits until no host process's command line holds s (the sandbox is
// killed asynchronously when its parent dies) and fails the test if one
// is still there after half a minute.
func gone(t *testing.T, s, when string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		pids := hostPIDs(s)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s, the server is still running: processes %v", when, pids)
		}
	}
}

// TestMCPNotesCancelKillsServer cancels a run while its server is inside
// a tools/call: the step completes and is journaled, the run stops
// cancelled, and the server with every process of its sandbox is gone.
func TestMCPNotesCancelKillsServer(t *testing.T) {
	needSandbox(t)
	server := testutil.BuildProgram(t, "./examples/mcp-notes/server")
	dir := notesDir(t)
	slow := fifo(t, dir, "slow")
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	code := testutil.BuildGo(t, "examples/mcp-notes")
	ctx := context.Background()
	in := input(nil, map[string]any{"tool": "read_note", "arguments": map[string]string{"title": "slow"}},
		map[string]any{"tool": "add_note", "arguments": map[string]string{"title": "after", "text": "not reached"}})
	st, err := env.Host.Start(ctx, host.RunSpec{Code: code, Input: in, Grant: parseGrant(t, grantText(t, server, dir))})
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		res *host.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := st.Execute(ctx)
		done <- outcome{res, err}
	}()
	w := reading(t, slow)
	if len(hostPIDs(server)) == 0 {
		t.Fatal("the server is not running while it serves a call")
	}
	cancelled := make(chan error, 1)
	go func() { cancelled <- env.Host.Cancel(ctx, st.Run) }()
	// The step under way completes first: the note arrives.
	if _, err := w.WriteString("held"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := <-cancelled; err != nil {
		t.Fatalf("cancel: %v", err)
	}
	o := <-done
	if !errors.Is(o.err, host.ErrCancelled) && (o.res == nil || o.res.Status == journal.StatusCompleted) {
		t.Fatalf("the run was not stopped by the cancel: %+v %v", o.res, o.err)
	}
	gone(t, server, "after the run was cancelled")
	if _, err := os.Stat(filepath.Join(dir, "after.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a call after the cancel reached the server: %v", err)
	}
	meta, err := env.Store.Meta(ctx, st.Run)
	if err != nil || meta.Status != journal.StatusCancelled {
		t.Fatalf("the run's status: %v %v, want cancelled", meta.Status, err)
	}
}
