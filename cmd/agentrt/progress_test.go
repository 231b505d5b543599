//go:build unix

package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/internal/testutil"
)

// TestReplayProgressOnlyOnATerminal: agentrt replay draws its progress
// bar, counting the calls replayed, on a stderr that is a terminal, and
// clears it; with --quiet, or when stderr is a pipe, nothing is drawn.
// The result on stdout is the same each time. agentrt audit verify draws
// one too, and none with --json.
func TestReplayProgressOnlyOnATerminal(t *testing.T) {
	f, modules := daemonFixture(t)
	data := t.TempDir()
	grant := writeTemp(t, smokeGrantYAML)
	if out, err := f.cmd(data, "run", modules["smoke"], "--grant", grant, "-q").CombinedOutput(); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	stdout, stderr := runOnTerminals(t, f.cmd(data, "replay", "last"))
	if !strings.HasPrefix(stdout, "verified ") || !strings.Contains(stderr, "replay") || !strings.Contains(stderr, "/11") {
		t.Fatalf("replay on a terminal: stdout %q, stderr %q, want the bar counting 11 calls", stdout, stderr)
	}
	// stdout to a pipe, stderr on a terminal: no bar.
	if pipedOut, ttyErr := runWithTTYs(t, f.cmd(data, "replay", "last")); pipedOut != stdout || ttyErr != "" {
		t.Fatalf("replay with stdout to a pipe: stdout %q, stderr %q", pipedOut, ttyErr)
	}
	quietOut, quietErr := runOnTerminals(t, f.cmd(data, "replay", "last", "--quiet"))
	if quietOut != stdout || quietErr != "" {
		t.Fatalf("replay --quiet on a terminal: stdout %q, stderr %q", quietOut, quietErr)
	}
	cmd := f.cmd(data, "replay", "last")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil || out.String() != stdout || errOut.Len() != 0 {
		t.Fatalf("replay to pipes: %v, stdout %q, stderr %q", err, out.String(), errOut.String())
	}
	bundle := filepath.Join(t.TempDir(), "run.bundle")
	keys := filepath.Join(t.TempDir(), "cell.keys")
	if out, err := f.cmd(data, "audit", "export", "last", "-o", bundle).CombinedOutput(); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	out.Reset()
	kc := f.cmd(data, "keys")
	kc.Stdout = &out
	if err := kc.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keys, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	vOut, vErr := runOnTerminals(t, f.cmd(data, "audit", "verify", bundle, "--trust", keys))
	if !strings.Contains(vOut, "OK") || !strings.Contains(vErr, "verify") || !strings.Contains(vErr, "/11") {
		t.Fatalf("audit verify on a terminal: stdout %q, stderr %q", vOut, vErr)
	}
	jOut, jErr := runOnTerminals(t, f.cmd(data, "audit", "verify", bundle, "--trust", keys, "--json"))
	if !strings.HasPrefix(jOut, "{") || jErr != "" {
		t.Fatalf("audit verify --json on a terminal: stdout %q, stderr %q", jOut, jErr)
	}
}

// piped runs cmd with stdout and stderr to pipes.
func piped(t *testing.T, cmd *exec.Cmd) (string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("agentrt %v: %v\n%s", cmd.Args, err, errOut.String())
	}
	return out.String(), errOut.String()
}

// drawn reports whether a progress bar or spinner was drawn in s: it
// redraws its line with carriage returns, which no plain output has.
func drawn(s string) bool { return strings.Contains(s, "\r") }

// TestLongWorkProgress: agentrt build draws a spinner, audit export, purge
// and resume a bar counting their work, on stderr, when stdout and stderr
// are terminals; with either one a pipe (or resume --json) nothing is
// drawn, and what the command prints is the same.
func TestLongWorkProgress(t *testing.T) {
	f, modules := daemonFixture(t)
	data := t.TempDir()

	// build
	src := filepath.Join(testutil.RepoRoot(), "host/testdata/agents/smoke")
	wasm := filepath.Join(t.TempDir(), "smoke.wasm")
	out, errOut := runOnTerminals(t, f.cmd(data, "build", src, "-o", wasm))
	if !drawn(errOut) || !strings.Contains(errOut, "build smoke") || !strings.Contains(errOut, "built "+wasm) {
		t.Fatalf("build on terminals: stdout %q, stderr %q, want the spinner, then built", out, errOut)
	}
	if out, errOut := piped(t, f.cmd(data, "build", src, "-o", wasm)); drawn(errOut) || strings.Contains(errOut, "build smoke") || !strings.Contains(errOut, "built "+wasm) {
		t.Fatalf("build to pipes: stdout %q, stderr %q, want no spinner", out, errOut)
	}

	// resume: a run interrupted in its http request, 13 calls in: 14 to
	// answer from the journal, the last in doubt.
	hung := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hung <- struct{}{}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	grant := writeTemp(t, "capabilities:\n  run: {}\n  kv: {namespace: p}\n  http: {hosts: [\"127.0.0.1\"]}\n")
	var steps []string
	for i := range 12 {
		steps = append(steps, fmt.Sprintf(`{"op":"kvput","key":"k%d"}`, i))
	}
	steps = append(steps, `{"op":"http","method":"GET","url":"`+srv.URL+`/hang"}`)
	interrupted := func() {
		t.Helper()
		cmd := f.cmd(data, "run", modules["hostile"], "--grant", grant, "-q", "--input", "["+strings.Join(steps, ",")+"]")
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-hung:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("the run never reached its http request: %s", errOut.String())
		}
		cmd.Process.Signal(os.Interrupt)
		if err := cmd.Wait(); err == nil {
			t.Fatalf("an interrupted run exited 0: %s", errOut.String())
		}
	}
	interrupted()
	rOut, rErr := runOnTerminals(t, f.cmd(data, "resume", "last"))
	if !drawn(rErr) || !strings.Contains(rErr, "resume") || !strings.Contains(rErr, "/14") || !strings.Contains(rOut, "in_doubt") {
		t.Fatalf("resume on terminals: stdout %q, stderr %q, want the bar counting the 14 recorded calls", rOut, rErr)
	}
	interrupted()
	if jOut, jErr := runOnTerminals(t, f.cmd(data, "resume", "last", "--json")); drawn(jErr) || !strings.HasPrefix(jOut, "{") {
		t.Fatalf("resume --json on terminals: stdout %q, stderr %q, want no bar", jOut, jErr)
	}
	interrupted()
	if pOut, pErr := runWithTTYs(t, f.cmd(data, "resume", "last")); drawn(pErr) || !strings.Contains(pOut, "in_doubt") {
		t.Fatalf("resume with stdout to a pipe: stdout %q, stderr %q, want no bar", pOut, pErr)
	}

	// audit export
	bundle := filepath.Join(t.TempDir(), "run.bundle")
	_, eErr := runOnTerminals(t, f.cmd(data, "audit", "export", "last", "-o", bundle))
	if !drawn(eErr) || !strings.Contains(eErr, "export") || !strings.Contains(eErr, "exported run") {
		t.Fatalf("audit export on terminals: stderr %q, want the bar counting records", eErr)
	}
	if _, pErr := piped(t, f.cmd(data, "audit", "export", "last", "-o", bundle)); drawn(pErr) || !strings.HasPrefix(pErr, "exported run") {
		t.Fatalf("audit export to pipes: stderr %q", pErr)
	}

	// purge: the three runs, finished.
	pOut, pErr := runOnTerminals(t, f.cmd(data, "purge", "--finished-before", "1ns"))
	if !drawn(pErr) || !strings.Contains(pErr, "/3") || strings.Count(pOut, "purged ") != 3 || !strings.Contains(pErr, "purged 3 of 3 runs") {
		t.Fatalf("purge on terminals: stdout %q, stderr %q, want the bar counting 3 runs", pOut, pErr)
	}
	// Nothing left to purge; a pipe: no bar either way.
	if _, pErr := piped(t, f.cmd(data, "purge", "--finished-before", "1ns")); drawn(pErr) || !strings.Contains(pErr, "purged 0 of 0 runs") {
		t.Fatalf("purge to pipes: stderr %q", pErr)
	}
}
