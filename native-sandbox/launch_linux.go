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
	user, drop, err := launchUser(o)
	if err != nil {
		return nil, err
	}
	// bwrap always runs unprivileged now (as root, the launcher drops to the
	// tool's user first), so the kernel must let unprivileged users make
	// user namespaces, unless bwrap is setuid root and makes them itself.
	if err := userNamespaces(!setuidRoot(bwrap)); err != nil {
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
	plan := &bwrapPlan{uid: user.UID, gid: user.GID, helperLibs: libs, rlimits: spec.rlimits(), absent: map[string]bool{}}
	for _, p := range spec.protectedPaths() {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			plan.absent[p] = true
		}
	}
	var st *staging
	if drop {
		// bwrap executes the helper as the tool's user.
		if fi, err := os.Stat(helper); err != nil || fi.Mode()&0o001 == 0 {
			return nil, refused("make it executable by everyone (chmod o+x), as installed programs are",
				"the helper %s is not executable by uid %d, which runs the sandbox", helper, user.UID)
		}
		if st, err = newStaging(); err != nil {
			return nil, err
		}
		defer st.remove()
		plan.stage = st.dir
	}
	// RLIMIT_NPROC counts the tool's own user in its own user namespace
	// (since Linux 5.14; before, every process of that user on the host).
	// The pids cgroup, where this process may make one, is exact and says
	// when it refused a fork. The memory limit needs its cgroup: RLIMIT_AS
	// alone leaves tmpfs, shm and memfd pages uncounted, so without one the
	// launch is refused.
	pidsMax := 0
	if n := spec.Limits.Processes; n > 0 {
		pidsMax = n + 1 // + bwrap itself
	}
	cg, pidsErr, memErr := newLaunchCgroups(pidsMax, spec.Limits.Memory)
	defer cg.remove()
	if memErr != nil {
		return nil, refused("run agentrt where it may create a memory cgroup (as root with cgroup v1's memory controller, or in a cgroup v2 subtree that delegates memory), or drop limits.memory",
			"limits.memory cannot be enforced: %v", memErr)
	}
	if n := spec.Limits.Processes; n > 0 && (pidsErr != nil || !drop) {
		plan.rlimits = append(plan.rlimits, rlimit{Name: "nproc", Cur: uint64(n), Max: uint64(n)})
	}
	filter, _, err := seccompFilter()
	if err != nil {
		return nil, refused("", "building the seccomp filter: %v", err)
	}
	disk, err := measureDisk(spec)
	if err != nil {
		return nil, err
	}
	opts, command, sources := bwrapArgs(spec, plan, exe, argv)
	run := &bwrapRun{bwrap: bwrap, opts: opts, command: command, filter: filter, helper: helper, cg: cg, disk: disk}
	if drop {
		run.stage = &stageConfig{UID: user.UID, GID: user.GID, Parent: os.Getpid(), Dir: st.dir, Sources: sources, Writable: spec.ReadWrite, ReportFD: fdReport}
	}
	return runBwrap(ctx, spec, run, o)
}

// bwrapRun is one launch's command lines and resources.
type bwrapRun struct {
	bwrap         string
	opts, command []string
	filter        []byte
	helper        string
	cg            *launchCgroups
	disk          *diskLimits
	// stage, for a launch by root, makes the launcher start stage 0
	// (stage_linux.go), which executes bwrap as the tool's user.
	stage *stageConfig
}

// staging is the directory stage 0 mounts its tmpfs of bind sources on.
// On the host it stays an empty directory; the mounts exist only in stage
// 0's private mount namespace.
type staging struct{ dir string }

func newStaging() (*staging, error) {
	// /tmp, not $TMPDIR: bwrap reaches the directory as the tool's user,
	// so every directory above it must let that user pass, and /tmp
	// (1777) does where a private $TMPDIR would not.
	if fi, err := os.Stat("/tmp"); err != nil || !fi.IsDir() || fi.Mode().Perm()&0o001 == 0 {
		return nil, refused("make /tmp a directory everyone may enter (mode 1777)", "/tmp is not a directory every user may enter, and the sandbox stages its paths there")
	}
	dir, err := os.MkdirTemp("/tmp", "agentrt-stage-")
	if err != nil {
		return nil, refused("", "creating the staging directory: %v", err)
	}
	// The tool's user must pass through it to reach the sources (bwrap
	// resolves them as that user); it cannot list it.
	if err := os.Chmod(dir, 0o711); err != nil {
		os.Remove(dir)
		return nil, refused("", "creating the staging directory: %v", err)
	}
	return &staging{dir: dir}, nil
}

func (s *staging) remove() { os.Remove(s.dir) }

// setuidRoot reports whether the bwrap binary is setuid root.
func setuidRoot(bwrap string) bool {
	fi, err := os.Stat(bwrap)
	if err != nil || fi.Mode()&os.ModeSetuid == 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == 0
}

// runBwrap starts bwrap, holds the sandbox until it is in its cgroup, waits
// for the end or kills the whole tree, and collects the result.
func runBwrap(ctx context.Context, spec *Spec, r *bwrapRun, o *options) (*Result, error) {
	bwrap, cg := r.bwrap, r.cg
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	keep := func(f *os.File) *os.File { files = append(files, f); return f }
	argsFile, err := memfd("bwrap-args", []byte(strings.Join(r.opts, "\x00")+"\x00"))
	if err != nil {
		return nil, err
	}
	keep(argsFile)
	secFile, err := memfd("bwrap-seccomp", r.filter)
	if err != nil {
		return nil, err
	}
	keep(secFile)
	envFile, err := memfd("sandbox-env", envBlock(spec.env(":")))
	if err != nil {
		return nil, err
	}
	keep(envFile)
	helperFile, err := os.Open(r.helper)
	if err != nil {
		return nil, refused("", "opening the helper %s: %v", r.helper, err)
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

	stdout, stderr := o.captures(spec)
	cmd := &exec.Cmd{
		Path:       bwrap,
		Args:       append([]string{bwrap, "--args", strconv.Itoa(fdArgs), "--"}, r.command...),
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
	if r.stage != nil {
		// Stage 0 (this binary, as root, in a private mount namespace)
		// binds the sources, drops to the tool's user and becomes bwrap:
		// the same process, with the same descriptors.
		cfg, _ := json.Marshal(r.stage)
		cmd.Args = append([]string{r.helper, stageArg, string(cfg)}, cmd.Args...)
		cmd.Path = r.helper
		cmd.SysProcAttr.Unshareflags = syscall.CLONE_NEWNS
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		hint := ""
		if r.stage != nil {
			hint = "as root, the launcher needs CAP_SYS_ADMIN for a private mount namespace; or run agentrt as an unprivileged user"
		}
		return nil, refused(hint, "starting %s: %v", cmd.Path, err)
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
			if len(cg.dirs) > 0 {
				if err := cg.add(cmd.Process.Pid, pid); err != nil {
					// Usually bwrap failed and exited first; say why.
					kill()
					<-done
					if msg := strings.TrimSpace(stderr.buf.String()); msg != "" {
						return nil, refused("run: agentrt sandbox check", "bwrap could not set up the sandbox: %s", msg)
					}
					return nil, refused("", "placing the sandbox in its cgroups: %v", err)
				}
			}
			// Release the sandbox: the helper starts now.
			blockW.Write([]byte{1})
			r.disk.start(kill)
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
	r.disk.finish(res)
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
	if cg.pidsHitMax() {
		res.exceeded(LimitProcesses)
	}
	if cg.oomKilled() {
		res.exceeded(LimitMemory)
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

// userNamespaces refuses when the kernel forbids user namespaces, or (when
// bwrap makes them unprivileged) unprivileged ones, with the setting that
// does it.
func userNamespaces(unprivileged bool) error {
	if v := readSysctl("/proc/sys/user/max_user_namespaces"); v == "0" {
		return refused("allow them: sysctl -w user.max_user_namespaces=15000", "user namespaces are disabled (user.max_user_namespaces = 0)")
	}
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		return refused("use a kernel built with CONFIG_USER_NS", "this kernel has no user namespaces")
	}
	if unprivileged {
		// Debian's and Ubuntu's switches. bwrap runs as the tool's
		// unprivileged user even when agentrt is root, so they apply to
		// every launch: with them off, nothing runs.
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
