//go:build unix

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrt/agentrt/host/cell"
)

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
		{big, []string{"agentrt: error: " + big + ": 68719476736 bytes, more than the 33554432 bytes a module may have (module over the cell's limit of 32 MiB)", "hint: a cell takes modules of up to 32 MiB"}},
		{fifo, []string{"a module must be a regular file, and this is a FIFO", "hint: name a regular file"}},
		{zero, []string{"a module must be a regular file, and this is a character device"}},
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

// TestUnixSocketRefusesAnotherUID: a client running as uid 65534 cannot
// open the daemon's socket (mode 0600 in a 0700 directory); with the mode
// and the directories loosened, as a careless operator might, the daemon
// refuses it by its peer credentials (SO_PEERCRED), for a submission and
// for an approval, and creates nothing.
func TestUnixSocketRefusesAnotherUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run a client as another uid")
	}
	f, modules := daemonFixture(t)
	data := t.TempDir()
	d := f.serve(t, data)
	// The client: this CLI, where uid 65534 can run it.
	pub, err := os.MkdirTemp("", "agentrt-peer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pub) })
	os.Chmod(pub, 0o755)
	bin := filepath.Join(pub, "agentrt")
	module := filepath.Join(pub, "smoke.wasm")
	for src, dst := range map[string]string{f.bin: bin, modules["smoke"]: module} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sock := cell.SocketPath(data)
	asNobody := func(args ...string) string {
		cmd := exec.Command(bin, args...)
		cmd.Dir = pub
		cmd.Env = []string{"HOME=" + pub, "PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("agentrt %v as uid 65534 succeeded:\n%s", args, out)
		}
		return string(out)
	}
	submit := []string{"run", "--cell", "unix:" + sock, module, "-q"}
	approve := []string{"approve", "--list", "--cell", "unix:" + sock}
	for _, args := range [][]string{submit, approve} {
		if out := asNobody(args...); !strings.Contains(out, "permission denied") {
			t.Errorf("agentrt %v as uid 65534 through the 0600 socket:\n%s\nwant permission denied", args, out)
		}
	}
	// Loosen the socket and every directory above it.
	os.Chmod(sock, 0o666)
	for dir := data; dir != filepath.Dir(os.TempDir()) && dir != "/"; dir = filepath.Dir(dir) {
		if info, err := os.Stat(dir); err == nil && info.Mode().Perm()&0o011 != 0o011 {
			os.Chmod(dir, info.Mode().Perm()|0o011)
		}
	}
	for _, args := range [][]string{submit, approve} {
		out := asNobody(args...)
		if !strings.Contains(out, "agentrt: error: the unix socket peer runs as uid 65534, neither the daemon's (0) nor root's") || !strings.Contains(out, "hint: connect as the user the daemon runs as") {
			t.Errorf("agentrt %v as uid 65534 through a loosened socket:\n%s\nwant the peer refused", args, out)
		}
	}
	if runs, err := d.client.Runs(context.Background()); err != nil || len(runs) != 0 {
		t.Fatalf("the refused peer created runs: %+v %v", runs, err)
	}
}
