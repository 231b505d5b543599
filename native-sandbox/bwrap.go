package sandbox

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
)

// Descriptor numbers in bwrap's process (exec.Cmd.ExtraFiles start at 3).
const (
	fdArgs    = 3 // bwrap --args: the options, kept off the host's ps
	fdSeccomp = 4 // bwrap --seccomp: the filter program
	fdStatus  = 5 // bwrap --json-status-fd: child pid, then exit code
	fdBlock   = 6 // bwrap --block-fd: hold the sandbox until the launcher is ready
	fdHelper  = 7 // the helper binary, executed as /proc/self/fd/7
	fdReport  = 8 // the helper's setup-failure report
	fdEnv     = 9 // the tool's environment, read by the helper (envBlock)
)

// bwrapPlan is everything needed to build bwrap's command line, computed
// by the Linux launcher (or with defaults by Explain on any platform).
type bwrapPlan struct {
	// uid and gid the tool sees inside its user namespace.
	uid, gid int
	// helperLibs are the ELF interpreter and libraries the helper needs,
	// bound read-only when no spec path already covers them.
	helperLibs []string
	// rlimits for the helper to apply (including nproc where it counts).
	rlimits []rlimit
	// absent holds the protected paths that do not exist on the host.
	absent map[string]bool
	// stage, when set, is the staging directory of a launch by root
	// (stage_linux.go): bwrap, which runs as the tool's unprivileged user,
	// binds each source from stage/<i>, where the launcher bound it first.
	stage string
}

// tmpDefaultSize bounds each private tmpfs the tool may write (/tmp and
// /dev/shm), and limits.memory when smaller: tmpfs pages are host memory,
// RLIMIT_AS does not count them, and without limits.memory no cgroup does.
const tmpDefaultSize = 64 << 20

// helperEnv is the helper's whole environment: one scheduler thread and no
// GC keep its thread count small under a process limit. The tool's own
// environment never reaches the helper's (a dynamic loader would honour
// LD_PRELOAD from it before Landlock and the limits apply): the helper reads
// it from fdEnv and hands it to execve.
var helperEnv = []string{"GOMAXPROCS=1", "GOGC=off"}

// bwrapArgs returns bwrap's options (sent through --args), the command
// after "--" (the helper, its configuration, the tool) and, when the plan
// stages its binds, the host paths to bind at stage/0, stage/1, ... It is a
// pure function of the spec and the plan, so it is tested on every platform.
//
// Mount order: a private root, /proc, /dev and /tmp first; then every bind
// from the shallowest path to the deepest, so a read-only path inside a
// writable root (or a protected sub-path) lands on top of it.
func bwrapArgs(spec *Spec, p *bwrapPlan, exe string, argv []string) (opts, command, sources []string) {
	opts = []string{
		"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try",
		"--disable-userns",
		"--uid", strconv.Itoa(p.uid), "--gid", strconv.Itoa(p.gid),
		"--hostname", "sandbox",
		// The helper, then the tool, is pid 1 of its namespace, with no
		// reaper of bwrap's in between: bwrap then waits for the tool itself,
		// so its exit status and CPU time reach the launcher, and when the
		// tool exits the kernel kills everything left in the namespace.
		"--as-pid-1",
		"--die-with-parent", "--new-session",
		"--cap-drop", "ALL",
		"--clearenv",
	}
	for _, kv := range helperEnv {
		k, v, _ := strings.Cut(kv, "=")
		opts = append(opts, "--setenv", k, v)
	}
	size := int64(tmpDefaultSize)
	if m := spec.Limits.Memory; m > 0 && m < size {
		size = m
	}
	sz := strconv.FormatInt(size, 10)
	// bwrap's /dev is a tmpfs the tool owns, of unbounded size: it gets
	// a sized tmpfs of its own on /dev/shm (POSIX shared memory), then
	// /dev itself is made read-only (not recursively: the device nodes
	// and /dev/shm keep their mounts).
	opts = append(opts, "--proc", "/proc", "--dev", "/dev", "--size", sz, "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
		"--size", sz, "--tmpfs", "/tmp")

	type mount struct {
		kind string // ro, rw, protect
		path string
	}
	var mounts []mount
	for _, l := range p.helperLibs {
		if !under(l, spec.ReadOnly) && !under(l, spec.ReadWrite) {
			mounts = append(mounts, mount{"ro", l})
		}
	}
	for _, r := range spec.ReadWrite {
		mounts = append(mounts, mount{"rw", r})
	}
	for _, r := range spec.ReadOnly {
		mounts = append(mounts, mount{"ro", r})
	}
	for _, r := range spec.protectedPaths() {
		mounts = append(mounts, mount{"protect", r})
	}
	depth := func(s string) int { return strings.Count(strings.TrimSuffix(s, "/"), "/") }
	sort.SliceStable(mounts, func(i, j int) bool { return depth(mounts[i].path) < depth(mounts[j].path) })
	source := func(host string) string {
		if p.stage == "" {
			return host
		}
		sources = append(sources, host)
		return p.stage + "/" + strconv.Itoa(len(sources)-1)
	}
	for _, m := range mounts {
		switch m.kind {
		case "ro":
			opts = append(opts, "--ro-bind", source(m.path), m.path)
		case "rw":
			opts = append(opts, "--bind", source(m.path), m.path)
		case "protect":
			// An existing protected path is bound read-only onto itself; a
			// missing one gets an empty read-only tmpfs, so that it cannot be
			// created either (bwrap leaves its empty mount point behind).
			if p.absent[m.path] {
				opts = append(opts, "--tmpfs", m.path, "--remount-ro", m.path)
			} else {
				opts = append(opts, "--ro-bind", source(m.path), m.path)
			}
		}
	}
	opts = append(opts,
		"--chdir", spec.workdir(),
		"--seccomp", strconv.Itoa(fdSeccomp),
		"--json-status-fd", strconv.Itoa(fdStatus),
		"--block-fd", strconv.Itoa(fdBlock),
	)

	cfg := helperConfig{ReportFD: fdReport, EnvFD: fdEnv, Rlimits: p.rlimits, Landlock: &landlockRules{
		Require:   spec.RequireLandlock,
		ReadOnly:  spec.ReadOnly,
		ReadWrite: spec.ReadWrite,
	}}
	js, _ := json.Marshal(cfg)
	command = append([]string{"/proc/self/fd/" + strconv.Itoa(fdHelper), helperArg, string(js), exe}, argv...)
	return opts, command, sources
}
