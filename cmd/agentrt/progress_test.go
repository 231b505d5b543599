//go:build unix

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	stdout, stderr := runWithTTYs(t, f.cmd(data, "replay", "last"))
	if !strings.HasPrefix(stdout, "verified ") || !strings.Contains(stderr, "replay") || !strings.Contains(stderr, "/11") {
		t.Fatalf("replay on a terminal: stdout %q, stderr %q, want the bar counting 11 calls", stdout, stderr)
	}
	quietOut, quietErr := runWithTTYs(t, f.cmd(data, "replay", "last", "--quiet"))
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
	vOut, vErr := runWithTTYs(t, f.cmd(data, "audit", "verify", bundle, "--trust", keys))
	if !strings.Contains(vOut, "OK") || !strings.Contains(vErr, "verify") || !strings.Contains(vErr, "/11") {
		t.Fatalf("audit verify on a terminal: stdout %q, stderr %q", vOut, vErr)
	}
	jOut, jErr := runWithTTYs(t, f.cmd(data, "audit", "verify", bundle, "--trust", keys, "--json"))
	if !strings.HasPrefix(jOut, "{") || jErr != "" {
		t.Fatalf("audit verify --json on a terminal: stdout %q, stderr %q", jOut, jErr)
	}
}
