package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// launch runs argv under bubblewrap. See bwrapArgs for the command line and
// doc.go for the chain bwrap → helper → tool.
func launch(ctx context.Context, spec *Spec, argv []string, o *options) (*Result, error) {
	bwrap, err := findBwrap(o.bwrap)
	if err != nil {
		return nil, err
	}
	if err := userNamespaces(); err != nil {
		return nil, err
	}
	if err := seccompAvailable(); err != nil {
		return nil, err
	}
	if spec.RequireLandlock {
		if abi, err := llsys.LandlockGetABIVersion(); err != nil || abi < 1 {
			return nil, refused("run on a kernel with Landlock enabled (lsm=landlock), or drop require_landlock", "the spec requires Landlock and this kernel does not enforce it")
		}
	}
	exe, err := resolveExecutable(spec, argv[0], "linux", statFile)
	if err != nil {
		return nil, err
	}
	helper, err := helperPath(o.helper)
	if err != nil {
		return nil, err
	}
	libs, err := elfDeps(helper)
	if err != nil {
		return nil, err
	}
	plan := &bwrapPlan{uid: os.Getuid(), gid: os.Getgid(), helperLibs: libs, rlimits: spec.rlimits(), absent: map[string]bool{}}
	if plan.uid == 0 {
		// The tool never believes it is root; host root's files appear as
		// its own.
		plan.uid, plan.gid = 65534, 65534
	}
	for _, p := range spec.protectedPaths() {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			plan.absent[p] = true
		}
	}
	var cg *pidsCgroup
	if n := spec.Limits.Processes; n > 0 {
		// The kernel does not apply RLIMIT_NPROC to host root's processes,
		// so as root the limit needs a pids cgroup; otherwise the rlimit
		// counts the sandbox's own user (per user namespace since 5.14)
		// and the cgroup, when there is one, adds a second fence.
		cg, err = newPidsCgroup(n + 1) // + bwrap itself
		if err != nil && os.Geteuid() == 0 {
			return nil, refused("run agentrt where it can create a pids cgroup, or as a user other than root, or drop limits.processes",
				"limits.processes cannot be enforced: running as root, where RLIMIT_NPROC does not apply, and %v", err)
		}
		if os.Geteuid() != 0 {
			plan.rlimits = append(plan.rlimits, rlimit{Name: "nproc", Cur: uint64(n), Max: uint64(n)})
		}
	}
	if cg != nil {
		defer cg.remove()
	}
	filter, _, err := seccompFilter()
	if err != nil {
		return nil, refused("", "building the seccomp filter: %v", err)
	}
	opts, command := bwrapArgs(spec, plan, exe, argv)
	return runBwrap(ctx, spec, bwrap, opts, command, filter, helper, cg, o)
}

// runBwrap starts bwrap, holds the sandbox until it is in its cgroup, waits
// for the end or kills the whole tree, and collects the result.
func runBwrap(ctx context.Context, spec *Spec, bwrap string, opts, command []string, filter []byte, helper string, cg *pidsCgroup, o *options) (*Result, error) {
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	keep := func(f *os.File) *os.File { files = append(files, f); return f }
	argsFile, err := memfd("bwrap-args", []byte(strings.Join(opts, "\x00")+"\x00"))
	if err != nil {
		return nil, err
	}
	keep(argsFile)
	secFile, err := memfd("bwrap-seccomp", filter)
	if err != nil {
		return nil, err
	}
	keep(secFile)
	envFile, err := memfd("sandbox-env", envBlock(spec.env(":")))
	if err != nil {
		return nil, err
	}
	keep(envFile)
	helperFile, err := os.Open(helper)
	if err != nil {
		return nil, refused("", "opening the helper %s: %v", helper, err)
	}
	keep(helperFile)
	var pipes [6]*os.File // status r/w, block r/w, report r/w
	for i := 0; i < 6; i += 2 {
		if pipes[i], pipes[i+1], err = os.Pipe(); err != nil {
			return nil, err
		}
		keep(pipes[i])
		keep(pipes[i+1])
	}
	statusR, statusW, blockR, blockW, reportR, reportW := pipes[0], pipes[1], pipes[2], pipes[3], pipes[4], pipes[5]

	stdout, stderr := &capture{max: spec.outputCap()}, &capture{max: spec.outputCap()}
	cmd := &exec.Cmd{
		Path:       bwrap,
		Args:       append([]string{bwrap, "--args", strconv.Itoa(fdArgs), "--"}, command...),
		Env:        []string{},
		Stdin:      o.stdin,
		Stdout:     stdout,
		Stderr:     stderr,
		ExtraFiles: []*os.File{argsFile, secFile, statusW, blockR, helperFile, reportW, envFile},
		// If this process dies, bwrap dies, and --die-with-parent takes the
		// sandbox with it.
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
		WaitDelay:   5 * time.Second,
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, refused("", "starting %s: %v", bwrap, err)
	}
	statusW.Close()
	blockR.Close()
	reportW.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// bwrap reports the sandbox's first process (pid 1 inside: the helper,
	// then the tool) as soon as it exists.
	initPID := make(chan int, 1)
	go func() {
		dec := json.NewDecoder(bufio.NewReader(statusR))
		sent := false
		for {
			var m map[string]any
			if dec.Decode(&m) != nil {
				break
			}
			if pid, ok := m["child-pid"].(float64); ok && !sent {
				initPID <- int(pid)
				sent = true
			}
		}
		if !sent {
			close(initPID)
		}
	}()

	res := &Result{}
	deadline := time.NewTimer(spec.Limits.Wall)
	defer deadline.Stop()
	pidfd := -1
	defer func() {
		if pidfd >= 0 {
			unix.Close(pidfd)
		}
	}()
	kill := func() {
		if pidfd >= 0 {
			unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
		}
		cmd.Process.Kill()
	}

	select {
	case pid, ok := <-initPID:
		if ok {
			if pidfd, err = unix.PidfdOpen(pid, 0); err != nil {
				pidfd = -1
			}
			if cg != nil {
				if err := cg.add(cmd.Process.Pid, pid); err != nil {
					// Usually bwrap failed and exited first; say why.
					kill()
					<-done
					if msg := strings.TrimSpace(stderr.buf.String()); msg != "" {
						return nil, refused("run: agentrt sandbox check", "bwrap could not set up the sandbox: %s", msg)
					}
					return nil, refused("", "placing the sandbox in its pids cgroup: %v", err)
				}
			}
			// Release the sandbox: the helper starts now.
			blockW.Write([]byte{1})
		}
		blockW.Close()
	case <-ctx.Done():
		res.Canceled = true
		kill()
	case <-deadline.C:
		res.TimedOut = true
		kill()
	}

	var werr error
	if res.Canceled || res.TimedOut {
		werr = <-done
	} else {
		select {
		case werr = <-done:
		case <-ctx.Done():
			res.Canceled = true
			kill()
			werr = <-done
		case <-deadline.C:
			res.TimedOut = true
			kill()
			werr = <-done
		}
	}
	// bwrap is gone; make sure its init, and so the whole pid namespace, is
	// gone too before returning.
	if pidfd >= 0 && !waitPidfd(pidfd, 2*time.Second) {
		unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
		waitPidfd(pidfd, 5*time.Second)
	}
	res.WallTime = time.Since(start)
	reportR.SetReadDeadline(time.Now().Add(time.Second))
	report, _ := io.ReadAll(reportR)

	res.fill(stdout, stderr)
	if ps := cmd.ProcessState; ps != nil {
		res.CPUTime = ps.UserTime() + ps.SystemTime()
		if st, ok := ps.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			res.Signal, res.ExitCode = int(st.Signal()), 128+int(st.Signal())
		} else {
			res.ExitCode = ps.ExitCode()
			if c := res.ExitCode; c > 128 && c < 128+65 {
				res.Signal = c - 128
			}
		}
	} else if werr != nil {
		return nil, fmt.Errorf("sandbox: waiting for bwrap: %w", werr)
	}

	if !res.TimedOut && !res.Canceled {
		switch {
		case len(report) == 0:
			// The helper never ran: bwrap failed to set up the sandbox, and
			// its message is all there is on stderr.
			return nil, refused("run: agentrt sandbox check", "bwrap could not set up the sandbox: %s", strings.TrimSpace(string(res.Stderr)))
		case len(report) > 1:
			return nil, refused("", "%s", report[1:])
		}
	}
	switch syscall.Signal(res.Signal) {
	case syscall.SIGXCPU:
		res.exceeded(LimitCPU)
	case syscall.SIGXFSZ:
		res.exceeded(LimitFileSize)
	case syscall.SIGKILL:
		if l := spec.Limits.CPU; l > 0 && res.CPUTime >= l {
			res.exceeded(LimitCPU)
		}
	}
	if res.TimedOut {
		res.exceeded(LimitWall)
	}
	if cg != nil && cg.hitMax() {
		res.exceeded(LimitProcesses)
	}
	if res.Canceled {
		return res, ctx.Err()
	}
	return res, nil
}

// waitPidfd waits until the process behind pidfd has exited.
func waitPidfd(fd int, d time.Duration) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(d.Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}

// memfd returns an in-memory file holding data, positioned at its start.
func memfd(name string, data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// findBwrap returns the bubblewrap binary to use.
func findBwrap(explicit string) (string, error) {
	hint := "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; make deps does it as root)"
	if explicit != "" {
		if fi, err := os.Stat(explicit); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", refused(hint, "bwrap not found at %s", explicit)
		}
		return explicit, nil
	}
	for _, p := range []string{"/usr/bin/bwrap", "/usr/local/bin/bwrap"} {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath("bwrap"); err == nil {
		return p, nil
	}
	return "", refused(hint, "bwrap (bubblewrap) is not installed")
}

// userNamespaces refuses when the kernel forbids unprivileged user
// namespaces, with the setting that does it.
func userNamespaces() error {
	if v := readSysctl("/proc/sys/user/max_user_namespaces"); v == "0" {
		return refused("allow them: sysctl -w user.max_user_namespaces=15000", "user namespaces are disabled (user.max_user_namespaces = 0)")
	}
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		return refused("use a kernel built with CONFIG_USER_NS", "this kernel has no user namespaces")
	}
	if os.Geteuid() != 0 {
		if v := readSysctl("/proc/sys/kernel/unprivileged_userns_clone"); v == "0" {
			return refused("allow them: sysctl -w kernel.unprivileged_userns_clone=1", "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0)")
		}
		if v := readSysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); v == "1" {
			return refused("give bwrap an AppArmor profile that allows userns, or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0",
				"AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)")
		}
	}
	return nil
}

func readSysctl(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// seccompAvailable refuses when the kernel cannot load seccomp filters that
// return an errno.
func seccompAvailable() error {
	action := uint32(0x00050000) // SECCOMP_RET_ERRNO
	_, _, e := unix.Syscall(unix.SYS_SECCOMP, 2 /* SECCOMP_GET_ACTION_AVAIL */, 0, uintptr(unsafe.Pointer(&action)))
	if e != 0 {
		return refused("use a kernel built with CONFIG_SECCOMP_FILTER", "seccomp filters are not available: %v", e)
	}
	return nil
}
