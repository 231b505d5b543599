//go:build linux

package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentrt/agentrt/internal/testutil"
)

// cliRun runs the CLI in process and fails the test unless it exits 0.
func cliRun(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(args, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("agentrt %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
	}
	return out.String()
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil {
			names = append(names, p+" "+info.Mode().String())
		}
		return nil
	})
	return names
}

// TestAuditVerifyWithNoWritableDirectory runs agentrt audit verify as a
// user who may write nowhere: a read-only bundle and trust file in a
// read-only directory, a read-only empty HOME, no data directory. As root
// (where permission bits do not bind) it runs the CLI as the nobody user.
// Verification succeeds and leaves every directory as it was.
func TestAuditVerifyWithNoWritableDirectory(t *testing.T) {
	work := t.TempDir()
	data := filepath.Join(work, "data")
	module := filepath.Join(work, "smoke.wasm")
	if err := os.WriteFile(module, testutil.BuildGo(t, "host/testdata/agents/smoke"), 0o644); err != nil {
		t.Fatal(err)
	}
	grant := filepath.Join(work, "grant.yaml")
	if err := os.WriteFile(grant, []byte("capabilities:\n  run: {}\n  kv: {namespace: smoke}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cliRun(t, "--data", data, "run", module, "--grant", grant, "--input", "hi", "-q")
	keys := cliRun(t, "--data", data, "keys")
	bundle := filepath.Join(work, "run.bundle")
	cliRun(t, "--data", data, "audit", "export", "last", "-o", bundle)

	// The read-only world. Its parent is world-searchable so that nobody
	// can reach it.
	ro, err := os.MkdirTemp("", "agentrt-audit-ro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		filepath.Walk(ro, func(p string, info os.FileInfo, err error) error {
			if err == nil && info.IsDir() {
				os.Chmod(p, 0o755)
			}
			return nil
		})
		os.RemoveAll(ro)
	})
	home := filepath.Join(ro, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyFile(t, exe, filepath.Join(ro, "agentrt"), 0o555)
	copyFile(t, bundle, filepath.Join(ro, "run.bundle"), 0o444)
	if err := os.WriteFile(filepath.Join(ro, "cell.keys"), []byte(keys), 0o444); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{home, ro} {
		if err := os.Chmod(d, 0o555); err != nil {
			t.Fatal(err)
		}
	}
	before := listTree(t, ro)

	// testscript.Main runs the CLI when the binary is called "agentrt".
	cmd := exec.Command(filepath.Join(ro, "agentrt"), "audit", "verify", "run.bundle", "--trust", "cell.keys")
	cmd.Args[0] = "agentrt"
	cmd.Dir = ro
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "TMPDIR=" + home}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("audit verify as a user who can write nowhere: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("verified:   OK")) || !bytes.Contains(out, []byte("replay:     identical")) {
		t.Fatalf("audit verify:\n%s", out)
	}
	if after := listTree(t, ro); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("verification changed the read-only tree:\nbefore %v\nafter  %v", before, after)
	}
	// The same check, in a writable directory with the trust file of
	// another cell: it fails, so the read-only run above proved something.
	other := cliRun(t, "--data", filepath.Join(work, "other"), "keys")
	if err := os.WriteFile(filepath.Join(work, "other.keys"), []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	var o, e bytes.Buffer
	if code := run([]string{"audit", "verify", bundle, "--trust", filepath.Join(work, "other.keys")}, strings.NewReader(""), &o, &e); code != 1 ||
		!strings.Contains(e.String(), "untrusted") {
		t.Fatalf("verify with another cell's key: exit %d, %s", code, e.String())
	}
}
