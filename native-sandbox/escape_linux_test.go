package sandbox

// The escape suite: one test per item 1-13 of shared/SECURITY-TESTS.md.
// Each runs the tryescape probe (or a real tool) inside the sandbox and
// asserts the specific outcome: the errno, a refused launch, a killed tree,
// a cut stream, an absent variable, a file unchanged on the host.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	seccomp "github.com/elastic/go-seccomp-bpf"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

var (
	probeOnce sync.Once
	probeBin  string
	probeErr  error
)

// probe builds tryescape once, statically, so the sandbox needs only its
// directory.
func probe(t *testing.T) string {
	t.Helper()
	probeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tryescape-")
		if err != nil {
			probeErr = err
			return
		}
		cleanups = append(cleanups, func() { os.RemoveAll(dir) })
		// As root the tool runs as nobody, which must be able to enter the
		// directory (MkdirTemp makes it 0700).
		if err := os.Chmod(dir, 0o755); err != nil {
			probeErr = err
			return
		}
		probeBin = filepath.Join(dir, "tryescape")
		cmd := exec.Command("go", "build", "-o", probeBin, "./internal/tryescape")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			probeErr = fmt.Errorf("building tryescape: %v\n%s", err, out)
		}
	})
	if probeErr != nil {
		t.Fatal(probeErr)
	}
	return probeBin
}

// box is one test's sandbox: a workspace (read-write), a read-only input
// directory, a host directory outside every root, and the probe.
type box struct {
	t                   *testing.T
	ws, ro, outside, pb string
	spec                *Spec
}

func newBox(t *testing.T) *box {
	t.Helper()
	if _, err := findBwrap(""); err != nil {
		t.Skipf("bubblewrap is not installed here (make deps installs it): %v", err)
	}
	root := t.TempDir()
	b := &box{t: t, ws: filepath.Join(root, "ws"), ro: filepath.Join(root, "ro"), outside: filepath.Join(root, "outside"), pb: probe(t)}
	for _, d := range []string{b.ws, b.ro, b.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The workspace belongs to the user the tool runs as (nobody, when
	// the tests run as root), as a cell's run workspaces do.
	b.own(b.ws)
	b.write(filepath.Join(b.ro, "input.txt"), "read-only input\n")
	b.write(filepath.Join(b.outside, "secret.txt"), "outside\n")
	b.spec = &Spec{
		ReadOnly:  []string{filepath.Dir(b.pb), b.ro},
		ReadWrite: []string{b.ws},
		Limits:    Limits{Wall: 20 * time.Second, Processes: 64, Output: 1 << 20},
	}
	return b
}

// clang builds testdata/NAME.c into a static program in the box's
// read-only directory and returns its path.
func (b *box) clang(name string) string {
	b.t.Helper()
	out := filepath.Join(b.ro, name)
	if msg, err := exec.Command("clang", "-static", "-O2", "-o", out, filepath.Join("testdata", name+".c")).CombinedOutput(); err != nil {
		b.t.Fatalf("building %s with clang: %v\n%s", name, err, msg)
	}
	return out
}

// own gives p to the user tools run as.
func (b *box) own(p string) {
	b.t.Helper()
	u, err := ToolUser()
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.Chown(p, u.UID, u.GID); err != nil {
		b.t.Fatal(err)
	}
}

func (b *box) write(p, s string) {
	b.t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// launch runs the probe with args and fails the test on a launch error.
func (b *box) launch(args ...string) *Result {
	b.t.Helper()
	res, err := Launch(context.Background(), b.spec, append([]string{b.pb}, args...))
	if err != nil {
		b.t.Fatalf("launch %v: %v", args, err)
	}
	return res
}

// try runs the probe and returns its one-line verdict.
func (b *box) try(args ...string) string {
	b.t.Helper()
	res := b.launch(args...)
	return strings.TrimSpace(string(res.Stdout))
}

// expect asserts the probe's verdict for args.
func (b *box) expect(want string, args ...string) {
	b.t.Helper()
	if got := b.try(args...); got != want {
		if len(got) > 200 {
			got = got[:200] + "..."
		}
		b.t.Errorf("tryescape %s: got %q, want %q", strings.Join(args, " "), got, want)
	}
}

// unchanged asserts a host file's content.
func (b *box) unchanged(p, want string) {
	b.t.Helper()
	got, err := os.ReadFile(p)
	if err != nil || string(got) != want {
		b.t.Errorf("%s on the host: %q, %v; want %q", p, got, err, want)
	}
}

func (b *box) absent(p string) {
	b.t.Helper()
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		b.t.Errorf("%s exists on the host after the launch (%v)", p, err)
	}
}

// Item 1: writes outside the allowed roots.
func TestEscape01WriteOutsideRoots(t *testing.T) {
	b := newBox(t)
	secret := filepath.Join(b.outside, "secret.txt")
	t.Run("direct", func(t *testing.T) {
		// The host directory does not exist in the sandbox at all.
		b.expect("errno ENOENT", "write", filepath.Join(b.outside, "new.txt"))
		b.absent(filepath.Join(b.outside, "new.txt"))
		b.expect("errno ENOENT", "write", secret)
		// A read-only root is mounted read-only.
		b.expect("errno EROFS", "write", filepath.Join(b.ro, "input.txt"))
	})
	t.Run("symlink", func(t *testing.T) {
		if err := os.Symlink(secret, filepath.Join(b.ws, "to-outside")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(b.ro, "input.txt"), filepath.Join(b.ws, "to-ro")); err != nil {
			t.Fatal(err)
		}
		b.expect("errno ENOENT", "write", filepath.Join(b.ws, "to-outside"))
		b.expect("errno EROFS", "write", filepath.Join(b.ws, "to-ro"))
	})
	t.Run("hardlink", func(t *testing.T) {
		// Linking a read-only file into the workspace would make it writable
		// through the link; the roots are separate mounts.
		b.expect("errno EXDEV", "link", filepath.Join(b.ro, "input.txt"), filepath.Join(b.ws, "hard"))
		b.expect("errno ENOENT", "link", "/etc/passwd", filepath.Join(b.ws, "passwd"))
		b.absent(filepath.Join(b.ws, "hard"))
	})
	t.Run("dotdot", func(t *testing.T) {
		b.expect("errno ENOENT", "write", b.ws+"/../outside/secret.txt")
	})
	t.Run("rename ancestor", func(t *testing.T) {
		// The root itself is a mount point; its parents exist only in the
		// sandbox's private /tmp, so renaming them changes nothing on the host.
		b.expect("errno EBUSY", "rename", b.ws, b.ws+"-moved")
		b.try("rename", filepath.Dir(b.ws), filepath.Dir(b.ws)+"-moved")
		b.expect("ok", "write", filepath.Join(b.ws, "still-here.txt"))
		b.unchanged(filepath.Join(b.ws, "still-here.txt"), "escaped\n")
		b.absent(filepath.Dir(b.ws) + "-moved")
	})
	t.Run("mknod", func(t *testing.T) {
		b.expect("errno EPERM", "mknod", filepath.Join(b.ws, "mem"))
		b.absent(filepath.Join(b.ws, "mem"))
	})
	b.unchanged(secret, "outside\n")
	b.unchanged(filepath.Join(b.ro, "input.txt"), "read-only input\n")
}

// Item 2: a protected path inside a writable root stays read-only, whether
// it exists or not.
func TestEscape02ProtectedPath(t *testing.T) {
	b := newBox(t)
	git := filepath.Join(b.ws, ".git")
	if err := os.MkdirAll(filepath.Join(git, "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	b.write(filepath.Join(git, "HEAD"), "ref: refs/heads/main\n")
	b.spec.Protected = []string{".git", ".hg"}
	b.expect("errno EROFS", "write", filepath.Join(git, "HEAD"))
	b.expect("errno EROFS", "write", filepath.Join(git, "hooks", "pre-commit"))
	b.expect("errno EBUSY", "rename", git, filepath.Join(b.ws, "git-moved"))
	b.expect("errno EROFS", "write", filepath.Join(b.ws, ".hg", "hgrc"))
	// The rest of the root stays writable.
	b.expect("ok", "write", filepath.Join(b.ws, "out.txt"))
	b.unchanged(filepath.Join(git, "HEAD"), "ref: refs/heads/main\n")
	b.absent(filepath.Join(git, "hooks", "pre-commit"))
	b.absent(filepath.Join(b.ws, ".hg", "hgrc"))
}

// Item 3: paths the spec does not list cannot be read.
func TestEscape03ReadUnlisted(t *testing.T) {
	b := newBox(t)
	other := filepath.Join(filepath.Dir(b.ws), "other-run")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	b.write(filepath.Join(other, "token"), "other run's secret")
	home, _ := os.UserHomeDir()
	for _, p := range []string{"/etc/shadow", "/etc/passwd", filepath.Join(other, "token"), filepath.Join(b.outside, "secret.txt"), home} {
		b.expect("errno ENOENT", "read", p)
	}
	// The positive control: a listed path is readable.
	b.expect("ok read-only input", "read", filepath.Join(b.ro, "input.txt"))
}

// Item 4: with network: none nothing outside is reachable, and an
// allowlist is refused rather than enforced badly.
func TestEscape04Network(t *testing.T) {
	b := newBox(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()

	// The sandbox has its own loopback; Landlock (ABI 4+) refuses TCP
	// connect outright, and without it the empty namespace refuses it.
	want := "errno EACCES"
	if v, _ := landlockABI(); v < 4 {
		want = "errno ECONNREFUSED"
	}
	b.expect(want, "tcp", ln.Addr().String())
	if got := b.try("tcp", "1.1.1.1:443"); got != want && got != "errno ENETUNREACH" {
		t.Errorf("tcp to a public address: %q", got)
	}
	if got := b.try("tcp", "[::1]:"+strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)); !strings.HasPrefix(got, "errno ") {
		t.Errorf("tcp to ::1: %q", got)
	}
	if got := b.try("dns", "example.com"); !strings.HasPrefix(got, "error ") {
		t.Errorf("DNS lookup: %q", got)
	}
	b.try("udp", udp.LocalAddr().String())
	udp.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, _, err := udp.ReadFrom(make([]byte, 16)); err == nil {
		t.Errorf("the host's UDP listener received %d bytes from the sandbox", n)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the host's TCP listener accepted %d connections from the sandbox", n)
	}

	b.spec.Network = Network{Allow: []string{"example.com:443"}}
	_, err = Launch(context.Background(), b.spec, []string{b.pb, "tcp", "example.com:443"})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "not supported yet") {
		t.Errorf("allowlist launch: %v; want a refusal saying allowlists are not supported yet", err)
	}
}

// Item 5: host sockets and the syscalls namespaces leave open.
func TestEscape05Syscalls(t *testing.T) {
	b := newBox(t)
	sock := filepath.Join(b.outside, "host.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var nonce [6]byte
	rand.Read(nonce[:])
	abstract := "@agentrt-test-" + hex.EncodeToString(nonce[:])
	aln, err := net.Listen("unix", abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer aln.Close()
	b.expect("errno ENOENT", "unix", sock)
	// Abstract sockets belong to the network namespace.
	b.expect("errno ECONNREFUSED", "unix", abstract)

	for _, name := range []string{
		"io_uring_setup", "ptrace", "process_vm_writev", "process_vm_readv", "bpf",
		"perf_event_open", "userfaultfd", "keyctl", "add_key", "unshare", "setns",
		"mount", "clone_newuser", "socket_vsock", "socket_packet",
	} {
		b.expect("errno EPERM", "syscall", name)
	}
	// x32 calls are answered ENOSYS by the filter (and by kernels built
	// without x32, where the two cannot be told apart).
	b.expect("errno ENOSYS", "syscall", "x32")
	if runtime.GOARCH == "amd64" {
		// The i386 ABI through int 0x80: getpid would succeed if allowed.
		// A kernel without that ABI faults on it, outside the sandbox
		// as inside: then nothing is there to block.
		out, err := exec.Command(b.pb, "syscall", "i386").Output()
		if outside := strings.TrimSpace(string(out)); err == nil && outside == "fault" {
			t.Log("this kernel has no i386 ABI (int 0x80 faults outside the sandbox too)")
			b.expect("fault", "syscall", "i386")
		} else {
			b.expect("errno EPERM", "syscall", "i386")
		}
	}
	// The filter is selective: an ordinary socket is allowed.
	b.expect("ok", "syscall", "socket_inet")
}

// Item 6: terminal injection.
func TestEscape06Terminal(t *testing.T) {
	b := newBox(t)
	b.expect("errno EPERM", "syscall", "tiocsti")
	b.expect("errno EPERM", "syscall", "tiocsti_high")
	b.expect("errno EPERM", "syscall", "tioclinux")
	// --new-session: no controlling terminal to open.
	b.expect("errno ENXIO", "tty")
}

// Item 7: host processes, /proc/1/mem, /proc, capabilities.
func TestEscape07Proc(t *testing.T) {
	b := newBox(t)
	got := b.try("pids")
	pids := strings.Fields(strings.TrimPrefix(got, "pids "))
	if len(pids) == 0 || pids[0] != "1" {
		t.Fatalf("pids seen in the sandbox: %q", got)
	}
	for _, p := range pids {
		if p == strconv.Itoa(os.Getpid()) || len(pids) > 5 {
			t.Errorf("the sandbox sees host processes: %q", got)
			break
		}
	}
	b.expect("errno EACCES", "procmem")
	b.expect("errno EPERM", "umount", "/proc")
	b.expect("CapEff: 0000000000000000\nNoNewPrivs: 1", "status")
}

// hostHas reports whether a host process has marker in its command line.
func hostHas(marker string) []int {
	ents, _ := os.ReadDir("/proc")
	var found []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cl, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if bytes.Contains(cl, []byte(marker)) && !bytes.Contains(cl, []byte("-test.")) {
			found = append(found, pid)
		}
	}
	return found
}

// Item 8: no grandchild outlives the launch: not after a timeout, not after
// its parent exits, not after cancellation.
func TestEscape08Grandchild(t *testing.T) {
	b := newBox(t)
	marker := func() string {
		var n [6]byte
		rand.Read(n[:])
		return "gc-" + hex.EncodeToString(n[:])
	}
	t.Run("timeout", func(t *testing.T) {
		m := marker()
		b.spec.Limits.Wall = time.Second
		defer func() { b.spec.Limits.Wall = 20 * time.Second }()
		res := b.launch("grandchild", m)
		if !res.TimedOut || !strings.HasPrefix(string(res.Stdout), "started") {
			t.Fatalf("want a timed-out launch whose grandchild started: %+v %q", res, res.Stdout)
		}
		if !hasLimit(res, LimitWall) || res.Signal != int(syscall.SIGKILL) {
			t.Errorf("Exceeded %v, signal %d; want wall and SIGKILL", res.Exceeded, res.Signal)
		}
		if pids := hostHas(m); len(pids) > 0 {
			t.Errorf("grandchild still running on the host: %v", pids)
		}
	})
	t.Run("parent exits", func(t *testing.T) {
		m := marker()
		res := b.launch("grandchild", m, "exit")
		if res.ExitCode != 0 || !strings.HasPrefix(string(res.Stdout), "started") {
			t.Fatalf("%+v %q", res, res.Stdout)
		}
		if pids := hostHas(m); len(pids) > 0 {
			t.Errorf("grandchild still running on the host: %v", pids)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		m := marker()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		res, err := Launch(ctx, b.spec, []string{b.pb, "grandchild", m})
		if !errors.Is(err, context.DeadlineExceeded) || res == nil || !res.Canceled {
			t.Fatalf("want a cancelled result and the context's error: %+v, %v", res, err)
		}
		if pids := hostHas(m); len(pids) > 0 {
			t.Errorf("grandchild still running on the host: %v", pids)
		}
	})
}

func hasLimit(r *Result, l Limit) bool {
	for _, e := range r.Exceeded {
		if e == l {
			return true
		}
	}
	return false
}

// Item 9: output beyond the cap is cut and the cut reported; the tool is
// drained, so it still finishes.
func TestEscape09OutputCap(t *testing.T) {
	b := newBox(t)
	b.spec.Limits.Output = 100 << 10
	res := b.launch("spew", strconv.Itoa(3<<20))
	if len(res.Stdout) != 100<<10 || !res.StdoutTruncated {
		t.Errorf("stdout: %d bytes, truncated %v; want %d, true", len(res.Stdout), res.StdoutTruncated, 100<<10)
	}
	if res.StderrTruncated || len(res.Stderr) != 48*100 {
		t.Errorf("stderr: %d bytes, truncated %v; want 4800, false", len(res.Stderr), res.StderrTruncated)
	}
	if res.ExitCode != 0 || !hasLimit(res, LimitOutput) {
		t.Errorf("exit %d, exceeded %v; want 0 and output", res.ExitCode, res.Exceeded)
	}
}

// Item 10: the host's environment never reaches the tool.
func TestEscape10Environment(t *testing.T) {
	b := newBox(t)
	t.Setenv("AGENTRT_TEST_SECRET", "hunter2")
	b.spec.Env = map[string]string{"LANG": "C.UTF-8", "TOOL_TOKEN": "granted"}
	res := b.launch("env")
	if got, want := string(res.Stdout), "LANG=C.UTF-8\nTOOL_TOKEN=granted\n"; got != want {
		t.Errorf("environment in the sandbox:\n%s\nwant exactly:\n%s", got, want)
	}
}

// Item 11: arguments are passed as they are, never through a shell.
func TestEscape11Argv(t *testing.T) {
	b := newBox(t)
	keep := filepath.Join(b.ws, "keep")
	b.write(keep, "kept\n")
	args := []string{"; rm -rf " + b.ws, "$(touch " + b.ws + "/pwned)", "`touch " + b.ws + "/pwned2`", "a b", "*", "|| true", "\n"}
	res := b.launch(append([]string{"args"}, args...)...)
	var want strings.Builder
	for _, a := range args {
		fmt.Fprintf(&want, "[%s]\n", a)
	}
	if string(res.Stdout) != want.String() {
		t.Errorf("argv seen by the tool:\n%s\nwant:\n%s", res.Stdout, want.String())
	}
	b.unchanged(keep, "kept\n")
	b.absent(filepath.Join(b.ws, "pwned"))
	b.absent(filepath.Join(b.ws, "pwned2"))

	// No shell to fall back to: relative names are refused, bare names need
	// the spec's path.
	for _, argv0 := range []string{"tryescape", "./tryescape", "sh"} {
		if _, err := Launch(context.Background(), b.spec, []string{argv0, "env"}); !errors.Is(err, ErrRefused) {
			t.Errorf("launch %q: %v; want a refusal", argv0, err)
		}
	}
}

// Item 12: CPU, memory and process limits.
func TestEscape12Limits(t *testing.T) {
	b := newBox(t)
	t.Run("cpu", func(t *testing.T) {
		b.spec.Limits.CPU = time.Second
		defer func() { b.spec.Limits.CPU = 0 }()
		res := b.launch("spin")
		// The tool is pid 1 of its namespace, where SIGXCPU at the soft
		// limit is ignored; the kernel's SIGKILL at the hard limit is not.
		if res.Signal != int(syscall.SIGKILL) || !hasLimit(res, LimitCPU) || res.TimedOut || res.CPUTime < time.Second {
			t.Errorf("signal %d, exceeded %v, timed out %v, cpu %v; want SIGKILL, cpu, false, >= 1s", res.Signal, res.Exceeded, res.TimedOut, res.CPUTime)
		}
	})
	t.Run("memory", func(t *testing.T) {
		// 1 GiB of address space: the Go runtime of the probe reserves a
		// good part of it before main runs.
		b.spec.Limits.Memory = 1 << 30
		defer func() { b.spec.Limits.Memory = 0 }()
		if noMemoryCgroup(t, b) {
			return
		}
		got := b.try("alloc")
		var mib int
		if _, err := fmt.Sscanf(got, "allocated %d MiB then ENOMEM", &mib); err != nil || mib >= 1024 {
			t.Errorf("allocation bomb: %q; want ENOMEM below 1024 MiB", got)
		}
	})
	t.Run("processes", func(t *testing.T) {
		b.spec.Limits.Processes = 16
		defer func() { b.spec.Limits.Processes = 64 }()
		res := b.launch("forkbomb")
		var n int
		if _, err := fmt.Sscanf(string(res.Stdout), "forks %d then EAGAIN", &n); err != nil || n >= 16 {
			t.Errorf("fork bomb: %q; want EAGAIN before 16 forks", res.Stdout)
		}
		if os.Geteuid() == 0 && !hasLimit(res, LimitProcesses) {
			t.Errorf("exceeded %v; want processes reported (from the pids cgroup)", res.Exceeded)
		}
	})
}

// Item 13: a missing or degraded backend refuses the launch, and nothing
// runs.
func TestEscape13FailClosed(t *testing.T) {
	b := newBox(t)
	marker := filepath.Join(b.ws, "ran")
	run := func(opts ...Option) error {
		_, err := Launch(context.Background(), b.spec, []string{b.pb, "write", marker}, opts...)
		return err
	}
	t.Run("no bwrap", func(t *testing.T) {
		err := run(WithBwrap(filepath.Join(t.TempDir(), "bwrap")))
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "bwrap not found") {
			t.Errorf("got %v; want a refusal naming bwrap", err)
		}
		b.absent(marker)
	})
	t.Run("bwrap setup fails", func(t *testing.T) {
		// A read-only root that vanished after validation: bwrap cannot
		// bind it, and the launch is refused with bwrap's message.
		gone := filepath.Join(b.outside, "gone")
		b.spec.ReadOnly = append(b.spec.ReadOnly, gone)
		defer func() { b.spec.ReadOnly = b.spec.ReadOnly[:len(b.spec.ReadOnly)-1] }()
		err := run()
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), gone) {
			t.Errorf("got %v; want a refusal quoting bwrap about %s", err, gone)
		}
		b.absent(marker)
	})
	t.Run("no user namespaces", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to map itself into a child user namespace")
		}
		out := runChild(t, "nouserns", &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
		}, b.pb, marker, b.ws)
		if !strings.Contains(out, "refused: user namespaces are disabled") {
			t.Errorf("child: %s", out)
		}
		b.absent(marker)
	})
	t.Run("landlock required but absent", func(t *testing.T) {
		out := runChild(t, "nolandlock", nil, b.pb, marker, b.ws)
		if !strings.Contains(out, "required: refused: ") || !strings.Contains(out, "requires Landlock") {
			t.Errorf("child: %s", out)
		}
		// Not required, the same launch runs (Landlock is depth, not the wall).
		if !strings.Contains(out, "optional: ran") {
			t.Errorf("child: %s", out)
		}
	})
}

// runChild runs a child scenario in a re-executed test binary.
func runChild(t *testing.T, name string, attr *syscall.SysProcAttr, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"="+name)
	cmd.SysProcAttr = attr
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child %s: %v\n%s", name, err, out)
	}
	return string(out)
}

// childSpec is the spec children use: argv is probe, marker, workspace.
func childSpec() (*Spec, []string) {
	pb, marker, ws := os.Args[1], os.Args[2], os.Args[3]
	return &Spec{ReadOnly: []string{filepath.Dir(pb)}, ReadWrite: []string{ws}, Limits: Limits{Wall: 20 * time.Second}},
		[]string{pb, "write", marker}
}

func init() {
	// With user.max_user_namespaces = 0 in its own user namespace (a
	// per-namespace setting), this process can create none.
	childScenarios["nouserns"] = func() int {
		if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0"), 0); err != nil {
			fmt.Println("setup:", err)
			return 1
		}
		spec, argv := childSpec()
		if _, err := Launch(context.Background(), spec, argv); err != nil {
			fmt.Println(strings.TrimPrefix(err.Error(), "sandbox: launch "))
			return 0
		}
		fmt.Println("ran")
		return 0
	}
	// Under a seccomp filter that answers every Landlock call with ENOSYS,
	// as a kernel without Landlock does (inherited by bwrap and the helper).
	childScenarios["nolandlock"] = func() int {
		f := seccomp.Filter{NoNewPrivs: true, Flag: seccomp.FilterFlagTSync, Policy: seccomp.Policy{
			DefaultAction: seccomp.ActionAllow,
			Syscalls: []seccomp.SyscallGroup{{
				Action: seccomp.ActionErrno | 38,
				Names:  []string{"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"},
			}},
		}}
		if err := seccomp.LoadFilter(f); err != nil {
			fmt.Println("setup:", err)
			return 1
		}
		spec, argv := childSpec()
		spec.RequireLandlock = true
		if _, err := Launch(context.Background(), spec, argv); err != nil {
			fmt.Println("required:", strings.TrimPrefix(err.Error(), "sandbox: launch "))
		} else {
			fmt.Println("required: ran")
		}
		spec.RequireLandlock = false
		if res, err := Launch(context.Background(), spec, argv); err != nil {
			fmt.Println("optional:", err)
		} else {
			fmt.Printf("optional: ran %s", res.Stdout)
		}
		return 0
	}
}

func landlockABI() (int, error) { return llsys.LandlockGetABIVersion() }

// The positive side: an allowed tool reads its inputs, writes its outputs
// and returns the right stdout.
func TestAllowedToolWorks(t *testing.T) {
	b := newBox(t)
	b.write(filepath.Join(b.ro, "words.txt"), "pear\napple\nfig\napple\n")
	b.spec.ReadOnly = append(b.spec.ReadOnly, "/usr", "/lib", "/lib64", "/bin")
	b.spec.Path = []string{"/usr/bin", "/bin"}
	b.spec.Env = map[string]string{"LC_ALL": "C"}
	b.spec.Protected = []string{".git"}
	ctx := context.Background()
	res, err := Launch(ctx, b.spec, []string{"sort", "-u", "-o", filepath.Join(b.ws, "sorted.txt"), filepath.Join(b.ro, "words.txt")})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("sort: %v %+v %s", err, res, res.Stderr)
	}
	b.unchanged(filepath.Join(b.ws, "sorted.txt"), "apple\nfig\npear\n")
	res, err = Launch(ctx, b.spec, []string{"grep", "-c", "apple", filepath.Join(b.ro, "words.txt")})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "2\n" {
		t.Fatalf("grep: %v %+v %q", err, res, res.Stdout)
	}
	// A failing tool's status comes back as it is.
	res, err = Launch(ctx, b.spec, []string{"grep", "-c", "banana", filepath.Join(b.ro, "words.txt")})
	if err != nil || res.ExitCode != 1 || string(res.Stdout) != "0\n" {
		t.Fatalf("grep for a missing word: %v %+v %q", err, res, res.Stdout)
	}
}

// Issue 10, item 13: personality, modify_ldt and mbind are refused by the
// seccomp filter. The same probe run outside the sandbox gets through, so
// the EPERM is the filter's and not the kernel's.
func TestEscapeSeccompDepth(t *testing.T) {
	b := newBox(t)
	calls := []string{"personality", "personality_query", "mbind"}
	if runtime.GOARCH == "amd64" {
		calls = append(calls, "modify_ldt")
	}
	for _, name := range calls {
		out, err := exec.Command(b.pb, "syscall", name).Output()
		if got := strings.TrimSpace(string(out)); err != nil || got == "errno EPERM" {
			t.Fatalf("control: %s outside the sandbox: %q %v; want it allowed", name, got, err)
		}
		b.expect("errno EPERM", "syscall", name)
	}
}

// Issue 10, item 13: LD_PRELOAD in the tool's environment must not reach
// the sandbox helper, which runs before Landlock and the rlimits apply. A
// real preload library (built with clang) marks every process it is loaded
// into: the tool, which asked for it, and never the helper.
func TestEscapePreloadSkipsTheHelper(t *testing.T) {
	b := newBox(t)
	helper, err := helperPath("")
	if err != nil {
		t.Fatal(err)
	}
	if libs, err := elfDeps(helper); err != nil || len(libs) == 0 {
		// A static helper ignores LD_PRELOAD whatever the launcher does,
		// and this test would prove nothing.
		t.Fatalf("the helper %s is not dynamically linked (%v, %v): build the test binary with cgo", helper, libs, err)
	}
	lib := filepath.Join(b.ro, "marker.so")
	if out, err := exec.Command("clang", "-shared", "-fPIC", "-O2", "-o", lib, "testdata/marker.c").CombinedOutput(); err != nil {
		t.Fatalf("building the preload library with clang: %v\n%s", err, out)
	}
	marker := filepath.Join(b.ws, "marker.log")
	b.spec.ReadOnly = append(b.spec.ReadOnly, "/usr", "/lib", "/lib64")
	b.spec.Env = map[string]string{"LD_PRELOAD": lib, "AGENTRT_MARKER": marker}
	res, err := Launch(context.Background(), b.spec, []string{"/usr/bin/env"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || !strings.Contains(string(res.Stdout), "LD_PRELOAD="+lib+"\n") {
		t.Fatalf("env: exit %d, stdout %q, stderr %q; want the tool to see its LD_PRELOAD", res.ExitCode, res.Stdout, res.Stderr)
	}
	log, err := os.ReadFile(marker)
	if err != nil {
		t.Fatalf("the library marked nothing, not even the tool (%v): the test proves nothing", err)
	}
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	if len(lines) != 1 || strings.TrimSpace(lines[0]) != "/usr/bin/env" {
		t.Errorf("the preload library ran in %q; want only the tool (/usr/bin/env)", lines)
	}
}

// Issue 10, item 4 (SECURITY-TESTS 33): a tool launched by root is not
// host root to the kernel. It runs as nobody (65534:65534, no supplementary
// groups), dropped before bwrap makes the user namespace, so file
// permission checks hold: /etc/shadow stays unreadable with /etc in the
// read list, root-only /proc files refuse, and a 0600 root-owned unix
// socket refuses the connect. Each refusal has a control that gets
// through: root outside the sandbox, and the world-readable or
// world-writable twin inside it.
func TestEscapeRootIsNotRootInTheSandbox(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the attack is a launch by root; CI runs the suite as root")
	}
	b := newBox(t)
	b.spec.ReadOnly = append(b.spec.ReadOnly, "/etc")
	if _, err := os.ReadFile("/etc/shadow"); err != nil {
		t.Fatalf("control: root cannot read /etc/shadow outside the sandbox: %v", err)
	}
	b.expect("errno EACCES", "read", "/etc/shadow")
	if got := b.try("read", "/etc/passwd"); !strings.HasPrefix(got, "ok root:") {
		t.Errorf("/etc/passwd in the sandbox: %q; want it readable (it is 0644)", got)
	}
	if got := b.try("status"); got != "CapEff: 0000000000000000\nNoNewPrivs: 1" {
		t.Errorf("status: %q", got)
	}
	if got := b.try("ids"); got != "uid 65534 65534 65534 gid 65534 65534 65534 groups []" {
		t.Errorf("ids in the sandbox: %q; want nobody:nogroup everywhere, no groups", got)
	}

	// Root-only /proc files (0400 root): readable by root outside.
	for _, p := range []string{"/proc/vmallocinfo", "/proc/timer_list", "/proc/slabinfo"} {
		if _, err := os.Stat(p); err != nil {
			continue // not built into this kernel
		}
		if _, err := os.ReadFile(p); err != nil {
			t.Fatalf("control: root cannot read %s outside the sandbox: %v", p, err)
		}
		b.expect("errno EACCES", "read", p)
	}

	// A root-owned socket, 0600, in a directory the tool can read and
	// write; its 0666 twin beside it is the control.
	for name, mode := range map[string]os.FileMode{"root.sock": 0o600, "open.sock": 0o666} {
		ln, err := net.Listen("unix", filepath.Join(b.ws, name))
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		if err := os.Chmod(filepath.Join(b.ws, name), mode); err != nil {
			t.Fatal(err)
		}
	}
	b.expect("errno EACCES", "unix", filepath.Join(b.ws, "root.sock"))
	b.expect("ok", "unix", filepath.Join(b.ws, "open.sock"))

	// What the tool writes belongs to nobody on the host.
	b.expect("ok", "write", filepath.Join(b.ws, "made.txt"))
	fi, err := os.Stat(filepath.Join(b.ws, "made.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 || st.Gid != 65534 {
		t.Errorf("the tool's file is owned by %d:%d on the host; want 65534:65534", st.Uid, st.Gid)
	}
	// And it cannot write where nobody may not: a root-owned 0755
	// directory inside its own writable root.
	sub := filepath.Join(b.ws, "root-owned")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	b.expect("errno EACCES", "write", filepath.Join(sub, "x"))
}

// WithUser picks another unprivileged user; root and a user other than
// oneself (when not root) are refused before anything runs.
func TestEscapeWithUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching users needs root")
	}
	b := newBox(t)
	if err := os.Chown(b.ws, 4242, 4343); err != nil {
		t.Fatal(err)
	}
	res, err := Launch(context.Background(), b.spec, []string{b.pb, "ids"}, WithUser(User{UID: 4242, GID: 4343}))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(res.Stdout)); got != "uid 4242 4242 4242 gid 4343 4343 4343 groups []" {
		t.Errorf("ids: %q", got)
	}
	marker := filepath.Join(b.ws, "ran")
	for _, u := range []User{{0, 0}, {4242, 0}, {0, 4343}} {
		_, err := Launch(context.Background(), b.spec, []string{b.pb, "write", marker}, WithUser(u))
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "would give the tool root's file access") {
			t.Errorf("WithUser(%v): %v; want a refusal", u, err)
		}
	}
	b.absent(marker)
}

// noMemoryCgroup reports whether this process may make no memory cgroup,
// after checking that a launch with limits.memory is then refused (a limit
// that cannot be enforced never passes as one).
func noMemoryCgroup(t *testing.T, b *box) bool {
	t.Helper()
	if _, err := cgroupParent("memory"); err == nil {
		return false
	}
	_, err := Launch(context.Background(), b.spec, []string{b.pb, "env"})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "limits.memory cannot be enforced") {
		t.Errorf("no memory cgroup here, and a launch with limits.memory gave %v; want a refusal", err)
	}
	return true
}

// hoarded sums what a hoard run said it held in each place.
func hoarded(out string) map[string]int {
	held := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		var where string
		var n int
		if _, err := fmt.Sscanf(line, "%s %d", &where, &n); err == nil && n > held[where] {
			held[where] = n
		}
	}
	return held
}

// Issue 10, item 5 (SECURITY-TESTS 33): a tool limited to 256 MiB held
// 768 MiB of host memory in /dev/shm, /dev and a memfd, none of which
// RLIMIT_AS counts. The memory cgroup counts them all (tmpfs and shmem
// pages are charged to it), /dev is read-only and /dev/shm a sized tmpfs:
// the hoard stops below the limit and the result says memory.
func TestEscapeMemoryLimitCountsTmpfsAndMemfd(t *testing.T) {
	b := newBox(t)
	hoard := b.clang("hoard")
	const limit = 256
	b.spec.Limits.Memory = limit << 20
	if noMemoryCgroup(t, b) {
		return
	}
	// 192 MiB in each of four places: 768 MiB asked for.
	res, err := Launch(context.Background(), b.spec, []string{hoard, "192", "/dev/shm/a", "/dev/hoard", "memfd", "/tmp/hoard"})
	if err != nil {
		t.Fatal(err)
	}
	held := hoarded(string(res.Stdout))
	total := 0
	for _, n := range held {
		total += n
	}
	t.Logf("held %v MiB (total %d) of 768 asked; exit %d, signal %d, exceeded %v", held, total, res.ExitCode, res.Signal, res.Exceeded)
	if total >= limit {
		t.Errorf("the tool held %d MiB (%v) under a %d MiB limit", total, held, limit)
	}
	if !strings.Contains(string(res.Stdout), "/dev/hoard 0 EROFS") {
		t.Errorf("writing a file in /dev: %q; want EROFS", res.Stdout)
	}
	// /dev/shm is a tmpfs of 64 MiB (the default size, below the limit).
	if !strings.Contains(string(res.Stdout), "/dev/shm/a 64 ENOSPC") {
		t.Errorf("writing /dev/shm: %q; want ENOSPC at 64 MiB", res.Stdout)
	}
	// 64 MiB there and 192 in the memfd pass the limit: the cgroup kills
	// the tool before it says "held", and the result says memory.
	if strings.Contains(string(res.Stdout), "held") || res.Signal != int(syscall.SIGKILL) || !hasLimit(res, LimitMemory) {
		t.Errorf("signal %d, exceeded %v, stdout %q; want SIGKILL from the memory cgroup, reported as memory", res.Signal, res.Exceeded, res.Stdout)
	}
}

// Issue 10, item 5 (SECURITY-TESTS 33): a tool limited to 256 MiB of
// memory wrote 2 GiB to disk. limits.disk bounds what it adds to its
// read-write roots: the watchdog kills it past the limit and the result
// says disk. The overshoot (what it wrote between two samples) is logged.
func TestEscapeDiskLimit(t *testing.T) {
	b := newBox(t)
	fill := b.clang("fill")
	const limit = 64 << 20
	b.spec.Limits.Disk = limit
	b.spec.Limits.FileSize = 16 << 20
	before := scanRoots([]string{b.ws}, 0).used
	start := time.Now()
	res, err := Launch(context.Background(), b.spec, []string{fill, b.ws, "2048", "8"})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	grew := scanRoots([]string{b.ws}, 0).used - before
	t.Logf("disk limit %d MiB: the tool added %.1f MiB (overshoot %.1f MiB) in %v; exit %d, signal %d, exceeded %v, last line %q",
		limit>>20, float64(grew)/(1<<20), float64(grew-limit)/(1<<20), took.Round(time.Millisecond), res.ExitCode, res.Signal, res.Exceeded, lastLine(res.Stdout))
	if strings.Contains(string(res.Stdout), "done") || res.Signal != int(syscall.SIGKILL) || !hasLimit(res, LimitDisk) {
		t.Errorf("signal %d, exceeded %v, last line %q; want the tool killed before it wrote 2 GiB, reported as disk", res.Signal, res.Exceeded, lastLine(res.Stdout))
	}
	if grew < limit || grew > limit+512<<20 {
		t.Errorf("the tool added %d MiB under a %d MiB disk limit; want it stopped past the limit, within 512 MiB", grew>>20, limit>>20)
	}
	// Within the limit nothing is reported.
	res, err = Launch(context.Background(), b.spec, []string{fill, b.ws, "8", "8"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || len(res.Exceeded) != 0 {
		t.Errorf("8 MiB under a 64 MiB limit: exit %d, exceeded %v", res.ExitCode, res.Exceeded)
	}
}

// A file past limits.file_size: the write fails with EFBIG, a hole made
// with ftruncate too, and the result says file_size. Without the limit the
// same hole is made (the control).
func TestEscapeFileSizeLimit(t *testing.T) {
	b := newBox(t)
	fill := b.clang("fill")
	b.spec.Limits.FileSize = 16 << 20
	res, err := Launch(context.Background(), b.spec, []string{fill, b.ws, "64", "64"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(res.Stdout)); got != "wrote 16\nwrote 16 EFBIG" || !hasLimit(res, LimitFileSize) {
		t.Errorf("a 64 MiB file under a 16 MiB limit: %q, exceeded %v; want EFBIG at 16 MiB, reported as file_size", got, res.Exceeded)
	}
	sparse := filepath.Join(b.ws, "sparse")
	res, err = Launch(context.Background(), b.spec, []string{fill, "-sparse", sparse, "8192"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(res.Stdout)); got != "sparse EFBIG" {
		t.Errorf("an 8 GiB hole under a 16 MiB file size limit: %q; want EFBIG", got)
	}
	if fi, err := os.Stat(sparse); err != nil || fi.Size() != 0 {
		t.Errorf("the hole on the host: %v, %v; want an empty file", fi, err)
	}
	b.spec.Limits.FileSize = 0
	if res := b.launchProgram(fill, "-sparse", sparse, "8192"); strings.TrimSpace(string(res.Stdout)) != "sparse ok" || len(res.Exceeded) != 0 {
		t.Errorf("control: the hole without a file size limit: %q, %v", res.Stdout, res.Exceeded)
	}
}

// launchProgram runs another program than the probe.
func (b *box) launchProgram(argv ...string) *Result {
	b.t.Helper()
	res, err := Launch(context.Background(), b.spec, argv)
	if err != nil {
		b.t.Fatalf("launch %v: %v", argv, err)
	}
	return res
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
