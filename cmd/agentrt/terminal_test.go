//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	"github.com/creack/pty"
)

// spoofSteps is what a hostile guest does to the operator's terminal: a
// fake approval prompt, a conceal sequence, an OSC 52 clipboard write, a
// screen clear, a C1 CSI, a bidi override, a carriage return that
// overwrites, a window title in a log line that also starts a fake line,
// and an HTTP method carrying ESC, which the approval prompt shows. Then
// two calls the permission modes ask about.
var spoofSteps = []step{
	{Op: "print", Text: "agentrt: step 9 asks for approval (permission mode rule \"ok\"): kv.put h\nallow it? [y/N] "},
	{Op: "print", Text: "\x1b[8myou cannot see this\x1b[0m\n"},
	{Op: "print", Text: "\x1b]52;c;ZWNobyBwd25lZA==\x07\n"},
	{Op: "eprint", Text: "\x1b[2J\x1b[H\u009b31m red \u202eabc\rOK\n"},
	{Op: "log", Text: "\x1b]0;pwned\x07 title\n  [info] a fake line"},
	{Op: "http", Method: "POST\x1b[8m\u202e", URL: "http://127.0.0.1:1/x"},
	{Op: "kvput", Key: "k"},
}

// escapedSpoof is how each sequence of spoofSteps must be shown.
var escapedSpoof = []string{
	`\x1b[8myou cannot see this\x1b[0m`,
	`\x1b]52;c;ZWNobyBwd25lZA==\x07`,
	`\x1b[2J\x1b[H\u009b31m red \u202eabc\x0dOK`,
	`[warn] \x1b]0;pwned\x07 title\n  [info] a fake line`,
}

// rawControl finds what no guest text may put on a terminal: ESC, BEL, a
// CR not ending a line, C1 (as UTF-8), a bidi override.
var rawControl = regexp.MustCompile(`\x1b|\x07|\r[^\n]|\r$|[\x{80}-\x{9f}\x{202a}-\x{202e}\x{2066}-\x{2069}]`)

const spoofGrant = "capabilities:\n  run: {}\n  kv: {namespace: h}\n  http: {hosts: [\"127.0.0.1\"]}\n"

// spoofData returns a data directory whose permission modes ask before
// every HTTP request and kv write, and whose customer policy forbids kv
// writes in unattended runs.
func spoofData(t *testing.T) string {
	t.Helper()
	data := t.TempDir()
	os.MkdirAll(filepath.Join(data, cell.PoliciesDir), 0o700)
	for name, text := range map[string]string{
		cell.ModesFile: "rules:\n  - {name: ask-http, op: http.request, effect: ask}\n  - {name: ask-writes, op: kv.put, effect: ask}\n",
		filepath.Join(cell.PoliciesDir, "ops.cedar"): `@id("allow-all") permit (principal, action, resource);
@id("no-unattended-writes") forbid (principal, action == Action::"kv.put", resource) when { context.mode == "unattended" };
`,
	} {
		if err := os.WriteFile(filepath.Join(data, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return data
}

// gateAnswers returns the approvals the journal of the data directory's
// newest run records, as "op approved approver".
func gateAnswers(t *testing.T, data string) []string {
	t.Helper()
	st, err := badgerstore.Open(cell.StoreDir(data))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	run, err := cell.FindRun(ctx, st, "last")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	journal.ReadEntries(ctx, st, run, func(e *journal.Entry, _ *journal.Record) error {
		var g host.GateRecord
		if len(e.Gate) > 0 && abi.Unmarshal(e.Gate, &g) == nil && g.Mode == "ask" {
			out = append(out, fmt.Sprintf("%s %v %s", e.Op, g.Approved, g.Approver))
		}
		return nil
	})
	return out
}

// TestGuestOutputIsEscapedAndUnattendedRunsAreUnattended: agentrt run with
// stdin from /dev/null (a character device, not a terminal) and its
// output going to pipes, as from cron or systemd. The hostile guest's
// control sequences reach stderr escaped, never raw; the run is
// unattended, so the customer policy for unattended runs denies its kv
// write and its HTTP request, which a mode asks about, is refused for want
// of someone to ask. agentrt logs escapes the same, --raw gives the exact
// bytes; a run's output is exact on a pipe and escaped in --json; a run
// followed from a daemon is shown escaped too.
func TestGuestOutputIsEscapedAndUnattendedRunsAreUnattended(t *testing.T) {
	f, modules := daemonFixture(t)
	data := spoofData(t)
	input, _ := json.Marshal(spoofSteps)
	grant := writeTemp(t, spoofGrant)
	run := func(args ...string) (string, string) {
		t.Helper()
		cmd := f.cmd(data, args...)
		null, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer null.Close()
		var stdout, stderr bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = null, &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("agentrt %v: %v\n%s", args, err, stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	// The first run has a controlling terminal and a terminal for stderr,
	// so that only its stdin (/dev/null, a character device) says it is
	// unattended; were it taken for interactive, its asks would be
	// prompted on that terminal and wait.
	stdout, stderr := runWithTTYs(t, f.cmd(data, "run", modules["hostile"], "--grant", grant, "--input", string(input)))
	for _, want := range escapedSpoof {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if m := rawControl.FindString(stderr); m != "" {
		t.Errorf("stderr carries %q raw:\n%q", m, stderr)
	}
	var results []string
	if err := json.Unmarshal([]byte(stdout), &results); err != nil || len(results) != 2 {
		t.Fatalf("results %q: %v", stdout, err)
	}
	if !strings.Contains(results[0], "no one can answer") {
		t.Errorf("the asked HTTP request in an unattended run: %s, want it refused for want of someone to ask", results[0])
	}
	if !strings.Contains(results[1], "denied by customer:no-unattended-writes") {
		t.Errorf("the kv write in an unattended run: %s, want the customer's unattended policy to deny it", results[1])
	}

	// agentrt logs: escaped; --raw: the bytes as the guest wrote them.
	logs, _ := run("logs", "last")
	for _, want := range escapedSpoof {
		if !strings.Contains(logs, want) {
			t.Errorf("agentrt logs lacks %q:\n%s", want, logs)
		}
	}
	if m := rawControl.FindString(logs); m != "" {
		t.Errorf("agentrt logs carries %q raw", m)
	}
	raw, _ := run("logs", "last", "--raw")
	for _, s := range spoofSteps[:4] {
		if !strings.Contains(raw, s.Text) {
			t.Errorf("agentrt logs --raw lacks %q exactly:\n%q", s.Text, raw)
		}
	}

	// The output: exact on a pipe, escaped as JSON with --json.
	out := `{"op":"output","text":"\u001b[41mred\u001b[0m \u009b \u202e"}`
	if stdout, _ := run("run", modules["hostile"], "--grant", grant, "-q", "--input", "["+out+"]"); stdout != "\x1b[41mred\x1b[0m \u009b \u202e\n" {
		t.Errorf("the output on a pipe: %q, want the exact bytes", stdout)
	}
	stdout, _ = run("run", modules["hostile"], "--grant", grant, "-q", "--json", "--input", "["+out+"]")
	if m := rawControl.FindString(stdout); m != "" || !strings.Contains(stdout, `"output":"\u001b[41mred\u001b[0m \u009b \u202e"`) {
		t.Errorf("--json: %s, want every control as a \\u escape", stdout)
	}

	// Followed from a daemon: the same escapes. Its asks park until the
	// API answers them; this test denies each.
	d := f.serve(t, data)
	cmd := f.cmd(data, "run", "--cell", "unix:"+cell.SocketPath(data), modules["hostile"], "--grant", grant,
		"--input", string(input[:len(input)-1])+`,{"op":"fail","text":"bye \u001b]52;c;eA==\u0007"}]`)
	var errBuf syncWriter
	errBuf.w = &bytes.Buffer{}
	cmd.Stderr = &errBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var exit error
	for wait := true; wait; {
		select {
		case exit = <-done:
			wait = false
		case <-time.After(20 * time.Millisecond):
			if list, err := d.client.Approvals(context.Background()); err == nil && len(list) > 0 {
				d.client.Approve(context.Background(), list[0].RunID, cell.Answer{Step: list[0].Step})
			}
		}
	}
	stderr = errBuf.String()
	if exit == nil {
		t.Errorf("a run that failed, followed from the daemon, exited 0")
	}
	for _, want := range append(escapedSpoof[:3:3], `agentrt: step 3 (http.request "POST\x1b[8M\u202e" "127.0.0.1") waits for approval`, `agentrt: step 4 (kv.put "h") waits`, `[error] bye \x1b]52;c;eA==\x07`) {
		if !strings.Contains(stderr, want) {
			t.Errorf("a run followed from the daemon: stderr lacks %q:\n%s", want, stderr)
		}
	}
	if m := rawControl.FindString(stderr); m != "" {
		t.Errorf("a run followed from the daemon: stderr carries %q raw:\n%q", m, stderr)
	}
	if err := d.term(t); err != nil {
		t.Fatal(err)
	}
}

// runWithTTYs runs cmd with stdin from /dev/null, stdout to a pipe, stderr
// to a pty, and another pty as its controlling terminal, and returns what
// stdout and stderr got. It fails if anything is written to the
// controlling terminal (a prompt) or the command does not end.
func runWithTTYs(t *testing.T, cmd *exec.Cmd) (string, string) {
	t.Helper()
	return runOnTTYs(t, cmd, false)
}

// runOnTerminals is runWithTTYs with stdout on a pty of its own too.
func runOnTerminals(t *testing.T, cmd *exec.Cmd) (string, string) {
	t.Helper()
	return runOnTTYs(t, cmd, true)
}

// runOnTTYs is runWithTTYs, with stdout on a pty when outTTY is set.
func runOnTTYs(t *testing.T, cmd *exec.Cmd, outTTY bool) (string, string) {
	t.Helper()
	ttyMaster, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer ttyMaster.Close()
	errMaster, errTTY, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer errMaster.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	var stdout bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, &stdout, errTTY
	var onStdout ptyBuffer
	outCopied := make(chan struct{})
	if outTTY {
		outMaster, outSlave, err := pty.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer outMaster.Close()
		defer outSlave.Close()
		cmd.Stdout = outSlave
		go func() { io.Copy(&onStdout, outMaster); close(outCopied) }()
	} else {
		close(outCopied)
	}
	cmd.ExtraFiles = []*os.File{tty}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 3}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	errTTY.Close()
	if f, ok := cmd.Stdout.(*os.File); ok {
		f.Close()
	}
	var onTTY, onStderr ptyBuffer
	go io.Copy(&onTTY, ttyMaster)
	copied := make(chan struct{})
	go func() { io.Copy(&onStderr, errMaster); close(copied) }()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("agentrt %v: %v\n%s", cmd.Args, err, onStderr.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("agentrt %v did not end; its terminal shows:\n%q", cmd.Args, onTTY.String())
	}
	<-copied
	if s := onTTY.String(); s != "" {
		t.Errorf("agentrt wrote to the controlling terminal of an unattended run:\n%q", s)
	}
	if outTTY {
		<-outCopied
		return strings.ReplaceAll(onStdout.String(), "\r\n", "\n"), strings.ReplaceAll(onStderr.String(), "\r\n", "\n")
	}
	return stdout.String(), strings.ReplaceAll(onStderr.String(), "\r\n", "\n")
}

// ptyBuffer collects what a pty master reads.
type ptyBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *ptyBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *ptyBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until b holds want n times.
func (b *ptyBuffer) waitFor(t *testing.T, want string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for strings.Count(b.String(), want) < n {
		if time.Now().After(deadline) {
			t.Fatalf("never saw %q %d times in:\n%q", want, n, b.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestApprovalPromptOnTheControllingTerminal drives agentrt run through
// real ptys: its controlling terminal (stdin) is one pty, its stderr
// another, its stdout a pipe. The run is interactive, so the customer's
// unattended policy does not apply; each ask is prompted on the
// controlling terminal only, in reverse video, with the guest's method
// escaped, while the guest's output (a fake prompt, ESC sequences, OSC 52)
// reaches the stderr pty escaped and never mentions the real prompt. A
// "y" typed before the first prompt appeared is dropped, not taken as the
// answer: the first call is denied with "n", the second approved with "y",
// and the journal records both answers, by the terminal's user.
func TestApprovalPromptOnTheControllingTerminal(t *testing.T) {
	f, modules := daemonFixture(t)
	data := spoofData(t)
	input, _ := json.Marshal(spoofSteps)
	ttyMaster, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer ttyMaster.Close()
	errMaster, errTTY, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer errMaster.Close()
	cmd := f.cmd(data, "run", modules["hostile"], "--grant", writeTemp(t, spoofGrant), "--input", string(input))
	cmd.Env = append(os.Environ(), "TERM=xterm")
	var stdout bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, &stdout, errTTY
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	errTTY.Close()
	var onTTY, onStderr ptyBuffer
	go io.Copy(&onTTY, ttyMaster)
	go io.Copy(&onStderr, errMaster)
	// Typed ahead, before any prompt: must not answer it.
	ttyMaster.Write([]byte("y\n"))

	prompt := "\x1b[0;7m agentrt \x1b[0m allow it? [y/N] "
	onTTY.waitFor(t, prompt, 1)
	if want := `http.request "POST\x1b[8M\u202e" "127.0.0.1"`; !strings.Contains(onTTY.String(), want) {
		t.Errorf("the first prompt does not show the method escaped (%q):\n%q", want, onTTY.String())
	}
	ttyMaster.Write([]byte("n\n"))
	onTTY.waitFor(t, prompt, 2)
	if !strings.Contains(onTTY.String(), `kv.put "h"`) {
		t.Errorf("the second prompt does not name kv.put \"h\":\n%q", onTTY.String())
	}
	ttyMaster.Write([]byte("y\n"))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("agentrt run: %v\nstderr:\n%s\ntty:\n%s", err, onStderr.String(), onTTY.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("agentrt run did not end\nstderr:\n%q\ntty:\n%q", onStderr.String(), onTTY.String())
	}

	var results []string
	if err := json.Unmarshal(stdout.Bytes(), &results); err != nil || len(results) != 2 {
		t.Fatalf("results %q: %v", stdout.String(), err)
	}
	if !strings.Contains(results[0], "denied") || results[1] != "kv.put <nil>" {
		t.Errorf("results %q: want the HTTP request denied at the prompt, the kv write approved (the unattended policy does not apply)", results)
	}
	me, _ := user.Current()
	who := "terminal:" + me.Username
	if got, want := gateAnswers(t, data), []string{"http.request false " + who, "kv.put true " + who}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the journal's answers: %q, want %q (the typed-ahead y dropped)", got, want)
	}

	// The guest's text is on stderr, escaped; the prompt is not there.
	errText := onStderr.String()
	for _, want := range append(escapedSpoof[:3], "allow it? [y/N] ") {
		if !strings.Contains(errText, want) {
			t.Errorf("the stderr pty lacks %q:\n%q", want, errText)
		}
	}
	if m := rawControl.FindString(errText); m != "" {
		t.Errorf("the stderr pty shows %q raw:\n%q", m, errText)
	}
	if strings.Contains(errText, "approval needed") {
		t.Errorf("the prompt went to stderr, with the guest's output:\n%q", errText)
	}
	// The controlling terminal has the prompts and nothing of the guest;
	// its only escape sequences are the prompt's own.
	ttyText := strings.ReplaceAll(strings.ReplaceAll(onTTY.String(), "\x1b[0;7m", ""), "\x1b[0m", "")
	if strings.Contains(ttyText, "cannot see") || strings.Contains(ttyText, "ZWNobyBwd25lZA") {
		t.Errorf("the guest's output reached the controlling terminal:\n%q", ttyText)
	}
	if strings.ContainsAny(ttyText, "\x1b\x07") {
		t.Errorf("the controlling terminal shows escape sequences besides the prompt's:\n%q", ttyText)
	}
}
