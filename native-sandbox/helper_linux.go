package sandbox

import (
	"fmt"
	"os"
	"runtime"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

var rlimitResources = map[string]int{
	"cpu":   unix.RLIMIT_CPU,
	"as":    unix.RLIMIT_AS,
	"nproc": unix.RLIMIT_NPROC,
	"fsize": unix.RLIMIT_FSIZE,
	"core":  unix.RLIMIT_CORE,
}

// runHelper runs inside bwrap: the mounts, namespaces and seccomp filter are
// in place. It applies the rest and executes the tool from the same OS
// thread that Landlock restricted; it returns only on failure.
func runHelper(cfg *helperConfig, exe string, argv []string) error {
	// Landlock restricts the calling thread; execve from that thread carries
	// the restriction into the tool. The thread is never unlocked.
	runtime.LockOSThread()

	env, err := readEnv(cfg.EnvFD)
	if err != nil {
		return err
	}
	// Nothing but stdin, stdout and stderr reaches the tool.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("close_range: %w", err)
	}
	for _, l := range cfg.Rlimits {
		res, ok := rlimitResources[l.Name]
		if !ok {
			return fmt.Errorf("unknown rlimit %q", l.Name)
		}
		if err := unix.Setrlimit(res, &unix.Rlimit{Cur: l.Cur, Max: l.Max}); err != nil {
			return fmt.Errorf("setrlimit %s: %w", l.Name, err)
		}
	}
	if cfg.Landlock != nil {
		if err := applyLandlock(cfg.Landlock); err != nil {
			return err
		}
	}
	err = syscall.Exec(exe, argv, env)
	return fmt.Errorf("exec %s: %w", exe, err)
}

// applyLandlock restricts this thread to the spec's paths with the newest
// Landlock ABI the kernel has. Without Landlock it does nothing, unless the
// spec requires it.
func applyLandlock(r *landlockRules) error {
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		if r.Require {
			return fmt.Errorf("Landlock is required by the spec but this kernel does not enforce it (%v)", err)
		}
		return nil
	}
	var rules []landlock.Rule
	ro, rw := splitFiles(r.ReadOnly), splitFiles(r.ReadWrite)
	rules = append(rules,
		landlock.RODirs(ro.dirs...),
		landlock.ROFiles(ro.files...),
		landlock.RWDirs(rw.dirs...).WithRefer().WithResolveUnix(),
		landlock.RWFiles(rw.files...),
		// /dev is bwrap's private minimal set (null, zero, urandom, tty, ...).
		landlock.RWDirs("/dev").WithIoctlDev(),
		landlock.RODirs("/proc"),
		// /tmp is a private tmpfs.
		landlock.RWDirs("/tmp").WithRefer().WithResolveUnix(),
	)
	fd, flags, err := landlock.V7.BestEffort().NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if fd < 0 {
		if r.Require {
			return fmt.Errorf("Landlock is required by the spec but could not be enforced")
		}
		return nil
	}
	defer unix.Close(fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if err := llsys.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}

type fileSplit struct{ dirs, files []string }

// splitFiles sorts paths into directories and other files: Landlock refuses
// directory rights on a file. Paths that are missing are left out.
func splitFiles(paths []string) fileSplit {
	var s fileSplit
	for _, p := range paths {
		fi, err := os.Stat(p)
		switch {
		case err != nil:
		case fi.IsDir():
			s.dirs = append(s.dirs, p)
		default:
			s.files = append(s.files, p)
		}
	}
	return s
}
