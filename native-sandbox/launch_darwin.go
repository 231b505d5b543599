package sandbox

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// launch runs argv under sandbox-exec with the generated Seatbelt profile,
// through the helper, which sets the rlimits first. Untested on a real Mac
// in this repository's CI; the profile and argv are unit-tested everywhere.
//
// Process-tree kill on macOS is by process group: a tool that calls setsid
// in a child escapes it, which Seatbelt cannot prevent. Prefer Linux for
// untrusted tools.
func launch(ctx context.Context, spec *Spec, argv []string, o *options) (*Result, error) {
	if spec.Limits.Processes > 0 {
		return nil, refused("drop limits.processes on macOS", "limits.processes cannot be enforced on macOS: RLIMIT_NPROC counts every process of the user, not the tool's")
	}
	if spec.RequireLandlock {
		return nil, refused("drop require_landlock for macOS specs", "Landlock exists only on Linux")
	}
	if spec.Limits.Memory > 0 {
		return nil, refused("drop limits.memory on macOS", "limits.memory cannot be enforced on macOS: it bounds everything the sandbox holds in memory, shared memory included, and macOS has no memory cgroup (nor an RLIMIT_AS it enforces)")
	}
	if _, err := os.Stat(sandboxExec); err != nil {
		return nil, refused("", "%s is missing: %v", sandboxExec, err)
	}
	user, drop, err := launchUser(o)
	if err != nil {
		return nil, err
	}
	disk, err := measureDisk(spec)
	if err != nil {
		return nil, err
	}
	exe, err := resolveExecutable(spec, argv[0], "darwin", statFile)
	if err != nil {
		return nil, err
	}
	helper, err := helperPath(o.helper)
	if err != nil {
		return nil, err
	}
	reportR, reportW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer reportR.Close()
	// The tool's environment reaches the helper on a pipe, not in its own
	// environment, where dyld would honour DYLD_INSERT_LIBRARIES before the
	// helper sets the limits.
	envR, envW, err := os.Pipe()
	if err != nil {
		reportW.Close()
		return nil, err
	}
	defer envR.Close()
	cfg, _ := json.Marshal(helperConfig{ReportFD: 3, EnvFD: 4, Rlimits: spec.rlimits()})
	args := seatbeltArgs(spec, exe, argv)
	stdout, stderr := o.captures(spec)
	cmd := &exec.Cmd{
		Path:        helper,
		Args:        append([]string{helper, helperArg, string(cfg)}, append([]string{args[0]}, args...)...),
		Env:         []string{},
		Dir:         spec.workdir(),
		Stdin:       o.stdin,
		Stdout:      stdout,
		Stderr:      stderr,
		ExtraFiles:  []*os.File{reportW, envR},
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
		WaitDelay:   5 * time.Second,
	}
	if drop {
		// As root, the helper (and so sandbox-exec and the tool) runs as
		// the tool's user with no supplementary groups: Seatbelt narrows
		// what it reaches, and the file permissions still hold. Unlike on
		// Linux, every directory above a listed path must let it pass.
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(user.UID), Gid: uint32(user.GID), Groups: []uint32{}}
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		reportW.Close()
		envW.Close()
		return nil, refused("", "starting the helper: %v", err)
	}
	reportW.Close()
	envR.Close()
	go func() {
		envW.Write(envBlock(spec.env(":")))
		envW.Close()
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	res := &Result{}
	kill := func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	disk.start(kill)
	select {
	case <-done:
	case <-ctx.Done():
		res.Canceled = true
		kill()
		<-done
	case <-time.After(spec.Limits.Wall):
		res.TimedOut = true
		res.exceeded(LimitWall)
		kill()
		<-done
	}
	// The tool's exit ends the launch: what is left of its group goes.
	kill()
	res.WallTime = time.Since(start)
	disk.finish(res)
	reportR.SetReadDeadline(time.Now().Add(time.Second))
	report, _ := io.ReadAll(reportR)
	if !res.TimedOut && !res.Canceled && len(report) > 1 {
		return nil, refused("", "%s", report[1:])
	}
	if ps := cmd.ProcessState; ps != nil {
		res.CPUTime = ps.UserTime() + ps.SystemTime()
		if st, ok := ps.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			res.Signal, res.ExitCode = int(st.Signal()), 128+int(st.Signal())
		} else {
			res.ExitCode = ps.ExitCode()
		}
	}
	switch syscall.Signal(res.Signal) {
	case syscall.SIGXCPU:
		res.exceeded(LimitCPU)
	case syscall.SIGXFSZ:
		res.exceeded(LimitFileSize)
	}
	res.fill(stdout, stderr)
	if res.Canceled {
		return res, ctx.Err()
	}
	return res, nil
}

// Check reports what this machine supports.
func Check(opts ...Option) (*Report, error) {
	r := &Report{Platform: runtime.GOOS + "/" + runtime.GOARCH, Backend: "Seatbelt (sandbox-exec)"}
	_, err := os.Stat(sandboxExec)
	r.add("sandbox-exec", err == nil, true, errText(err, sandboxExec))
	r.add("process limit", false, false, "not enforceable on macOS (specs with limits.processes are refused)")
	r.add("memory limit", false, false, "not enforceable on macOS (specs with limits.memory are refused)")
	return r, nil
}

func errText(err error, ok string) string {
	if err != nil {
		return err.Error()
	}
	return ok
}
