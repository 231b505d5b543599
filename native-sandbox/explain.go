package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"runtime"
	"strings"
	"time"
)

// Explain returns, as text for people, what a launch of argv under spec
// would set up on goos ("linux", "darwin" or "windows"): bwrap's command
// line, seccomp and Landlock rules; the Seatbelt profile and sandbox-exec
// command; or the Job Object and AppContainer settings. For another
// platform than this one, the program is resolved against the spec alone
// (nothing is looked up on this machine). An empty argv shows "TOOL".
func Explain(spec *Spec, goos string, argv []string) (string, error) {
	if err := spec.Validate(); err != nil {
		return "", err
	}
	if !spec.Network.None() {
		return "", errNetworkAllowlist
	}
	local := goos == runtime.GOOS
	exe := "TOOL"
	if len(argv) == 0 {
		argv = []string{exe}
	} else {
		stat := statFile
		if !local {
			stat = func(string) (fs.FileInfo, error) { return fakeExecutable{}, nil }
		}
		var err error
		if exe, err = resolveExecutable(spec, argv[0], goos, stat); err != nil {
			return "", err
		}
	}
	var b strings.Builder
	switch goos {
	case "linux":
		plan := &bwrapPlan{uid: 1000, gid: 1000, rlimits: spec.rlimits(), absent: map[string]bool{}}
		root := false
		if local {
			plan.uid, plan.gid = os.Getuid(), os.Getgid()
			if root = os.Geteuid() == 0; root {
				plan.uid, plan.gid = DefaultUser.UID, DefaultUser.GID
			}
			if h, err := helperPath(""); err == nil {
				plan.helperLibs, _ = elfDeps(h)
			}
			for _, p := range spec.protectedPaths() {
				if _, err := os.Lstat(p); err != nil {
					plan.absent[p] = true
				}
			}
		}
		opts, command, _ := bwrapArgs(spec, plan, exe, argv)
		if root {
			fmt.Fprintf(&b, "# this process is root: bwrap runs as uid %d, gid %d, no supplementary groups (WithUser sets another);\n"+
				"# each bind source below is first bound, as root, at /tmp/agentrt-stage-*/N in a private mount namespace\n", plan.uid, plan.gid)
		}
		b.WriteString("# bwrap options, passed on descriptor 3 (--args) so they stay off the host's ps\n")
		for i, o := range opts {
			switch {
			case i == 0:
			case strings.HasPrefix(o, "--"):
				b.WriteString("\n")
			default:
				b.WriteString(" ")
			}
			b.WriteString(displayQuote(o))
		}
		b.WriteString("\n# command\nbwrap --args 3 --")
		for _, c := range command {
			b.WriteString(" " + displayQuote(c))
		}
		b.WriteString("\n# seccomp (bwrap --seccomp 4)\n")
		if _, names, err := seccompFilter(); err == nil {
			fmt.Fprintf(&b, "EPERM: %s\n", strings.Join(names, " "))
		}
		b.WriteString("EPERM: ioctl TIOCSTI, TIOCLINUX; socket families other than unix, inet, inet6, netlink; clone with namespace flags; any non-native ABI\n")
		b.WriteString("ENOSYS: clone3 (libc falls back to clone); x32 system calls\n")
		b.WriteString("# tool environment (descriptor 9: the helper reads it and gives it to execve; bwrap and the helper never run with it)\n")
		for _, kv := range spec.env(":") {
			b.WriteString(displayQuote(kv) + "\n")
		}
		b.WriteString("# landlock (applied by the helper, best effort unless require_landlock)\n")
		fmt.Fprintf(&b, "read, execute: %s /proc\nread, write: %s /dev /tmp\nrequired: %v\n",
			strings.Join(spec.ReadOnly, " "), strings.Join(spec.ReadWrite, " "), spec.RequireLandlock)
		b.WriteString("# limits (rlimits set by the helper)\n")
		for _, l := range plan.rlimits {
			fmt.Fprintf(&b, "%s: %d (hard %d)\n", l.Name, l.Cur, l.Max)
		}
		if n := spec.Limits.Processes; n > 0 {
			fmt.Fprintf(&b, "processes: %d (pids cgroup where one can be made, else RLIMIT_NPROC)\n", n)
		}
		if m := spec.Limits.Memory; m > 0 {
			fmt.Fprintf(&b, "memory: %d bytes for the whole sandbox (memory cgroup: tmpfs, shm and memfd pages count; refused without one)\n", m)
		}
		if d := spec.Limits.Disk; d > 0 {
			fmt.Fprintf(&b, "disk: %d bytes added to the read_write paths (a watchdog samples them every %v and kills the sandbox past it)\n", d, diskInterval)
		}
		fmt.Fprintf(&b, "wall: %v (the whole pid namespace is killed)\noutput: %d bytes per stream\n", spec.Limits.Wall, spec.outputCap())
	case "darwin":
		if spec.Limits.Processes > 0 || spec.Limits.Memory > 0 || spec.RequireLandlock {
			b.WriteString("# refused on macOS: limits.processes, limits.memory and require_landlock cannot be enforced there\n")
		}
		profile, _ := seatbeltProfile(spec)
		b.WriteString("# Seatbelt profile (sandbox-exec -p)\n")
		b.WriteString(profile)
		b.WriteString("# command\n")
		for i, a := range seatbeltArgs(spec, exe, argv) {
			if i == 2 {
				a = "PROFILE"
			}
			if i > 0 {
				b.WriteString(" ")
			}
			b.WriteString(displayQuote(a))
		}
		fmt.Fprintf(&b, "\n# limits\nrlimits: %v\nwall: %v (the process group is killed)\n", spec.rlimits(), spec.Limits.Wall)
		if d := spec.Limits.Disk; d > 0 {
			fmt.Fprintf(&b, "disk: %d bytes added to the read_write paths (watchdog)\n", d)
		}
	case "windows":
		set, err := windowsPlan(spec, exe, argv)
		if err != nil {
			return "", err
		}
		if spec.Limits.FileSize > 0 {
			b.WriteString("# refused on Windows: limits.file_size cannot be enforced there\n")
		}
		b.WriteString(set.String())
		fmt.Fprintf(&b, "wall: %v (the job is terminated)\n", spec.Limits.Wall)
		if d := spec.Limits.Disk; d > 0 {
			fmt.Fprintf(&b, "disk: %d bytes added to the read_write paths (watchdog)\n", d)
		}
	default:
		return "", fmt.Errorf("%w (%s); explain linux, darwin or windows", ErrUnsupported, goos)
	}
	return b.String(), nil
}

var plainArg = regexp.MustCompile(`^[A-Za-z0-9_/.:=,@%+-]+$`)

// displayQuote quotes an argument for reading (the launchers never use a
// shell; this is only how explain prints argv).
func displayQuote(s string) string {
	if plainArg.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// fakeExecutable stands for a program on another platform's file system.
type fakeExecutable struct{}

func (fakeExecutable) Name() string       { return "" }
func (fakeExecutable) Size() int64        { return 0 }
func (fakeExecutable) Mode() fs.FileMode  { return 0o755 }
func (fakeExecutable) ModTime() time.Time { return time.Time{} }
func (fakeExecutable) IsDir() bool        { return false }
func (fakeExecutable) Sys() any           { return nil }
