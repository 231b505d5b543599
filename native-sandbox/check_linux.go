package sandbox

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Check reports what this machine supports, ending with a real trial
// launch of the helper under the full sandbox.
func Check(opts ...Option) (*Report, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	r := &Report{Platform: runtime.GOOS + "/" + runtime.GOARCH, Backend: "bubblewrap + seccomp + Landlock"}
	bwrap, err := findBwrap(o.bwrap)
	if err != nil {
		r.add("bubblewrap", false, true, err.(*RefusedError).What)
	} else {
		out, _ := exec.Command(bwrap, "--version").Output()
		r.add("bubblewrap", true, true, bwrap+" ("+strings.TrimSpace(string(out))+")")
	}
	if err := userNamespaces(bwrap == "" || !setuidRoot(bwrap)); err != nil {
		r.add("user namespaces", false, true, err.(*RefusedError).What)
	} else {
		r.add("user namespaces", true, true, "max_user_namespaces = "+readSysctl("/proc/sys/user/max_user_namespaces")+"; unprivileged ones allowed (bwrap makes them as the tool's user)")
	}
	if err := seccompAvailable(); err != nil {
		r.add("seccomp", false, true, err.(*RefusedError).What)
	} else if _, names, err := seccompFilter(); err != nil {
		r.add("seccomp", false, true, err.Error())
	} else {
		r.add("seccomp", true, true, fmt.Sprintf("filter mode; %d syscalls blocked, foreign ABIs refused", len(names)))
	}
	if abi, err := llsys.LandlockGetABIVersion(); err != nil || abi < 1 {
		r.add("landlock", false, false, "not enforced by this kernel (specs with require_landlock are refused)")
	} else {
		r.add("landlock", true, false, fmt.Sprintf("ABI version %d", abi))
	}
	if u, drop, err := launchUser(&o); err != nil {
		r.add("tool user", false, true, err.Error())
	} else if drop {
		r.add("tool user", true, true, fmt.Sprintf("uid %d, gid %d, no supplementary groups (this process is root: it switches before bwrap makes the user namespace)", u.UID, u.GID))
	} else {
		r.add("tool user", true, true, fmt.Sprintf("uid %d, gid %d (this process's own)", u.UID, u.GID))
	}
	if place, err := cgroupParent("pids"); err != nil {
		r.add("pids cgroup", false, false, err.Error()+" (limits.processes uses RLIMIT_NPROC)")
	} else {
		r.add("pids cgroup", true, false, place.dir)
	}
	if place, err := cgroupParent("memory"); err != nil {
		r.add("memory cgroup", false, false, err.Error()+" (specs with limits.memory are refused)")
	} else {
		kind := "v1, memory.limit_in_bytes"
		if place.v2 {
			kind = "v2, memory.max"
		}
		r.add("memory cgroup", true, false, place.dir+" ("+kind+"; tmpfs, shm and memfd pages count)")
	}
	if !r.Ready() {
		return r, nil
	}
	helper, err := helperPath(o.helper)
	if err != nil {
		r.add("trial launch", false, true, err.Error())
		return r, nil
	}
	r.add("trial launch", true, true, trial(helper, &o))
	if f := &r.Features[len(r.Features)-1]; strings.HasPrefix(f.Detail, "failed") {
		f.OK = false
	}
	return r, nil
}

// trial launches the helper binary itself as the tool, in probe mode.
func trial(helper string, o *options) string {
	libs, err := elfDeps(helper)
	if err != nil {
		return "failed: " + err.Error()
	}
	spec := &Spec{ReadOnly: append([]string{helper}, libs...), Limits: Limits{Wall: 10 * time.Second}}
	res, err := Launch(context.Background(), spec, []string{helper, helperProbeArg}, WithBwrap(o.bwrap), WithHelper(helper))
	switch {
	case err != nil:
		return "failed: " + err.Error()
	case strings.TrimSpace(string(res.Stdout)) != "sandboxed":
		return fmt.Sprintf("failed: the probe said %q (exit %d) %s", res.Stdout, res.ExitCode, res.Stderr)
	}
	return fmt.Sprintf("ran %s under the sandbox in %v", filepath.Base(helper), res.WallTime.Round(time.Millisecond))
}
