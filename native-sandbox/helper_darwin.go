package sandbox

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

var rlimitResources = map[string]int{
	"cpu":   unix.RLIMIT_CPU,
	"as":    unix.RLIMIT_AS,
	"fsize": unix.RLIMIT_FSIZE,
	"core":  unix.RLIMIT_CORE,
}

// runHelper runs before sandbox-exec on macOS: it applies the rlimits the
// tool inherits, closes inherited descriptors and executes sandbox-exec.
// It returns only on failure.
func runHelper(cfg *helperConfig, exe string, argv []string) error {
	env, err := readEnv(cfg.EnvFD)
	if err != nil {
		return err
	}
	for fd := 3; fd < 1024; fd++ {
		unix.CloseOnExec(fd)
	}
	for _, l := range cfg.Rlimits {
		res, ok := rlimitResources[l.Name]
		if !ok {
			return fmt.Errorf("rlimit %q is not available on macOS", l.Name)
		}
		if err := unix.Setrlimit(res, &unix.Rlimit{Cur: l.Cur, Max: l.Max}); err != nil {
			return fmt.Errorf("setrlimit %s: %w", l.Name, err)
		}
	}
	err = syscall.Exec(exe, argv, env)
	return fmt.Errorf("exec %s: %w", exe, err)
}
