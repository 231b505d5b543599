package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// A launch by root runs bubblewrap as the tool's unprivileged user, so that
// the user namespace bwrap makes belongs to that user and the kernel's file
// permission checks (DAC) see it, never host root. bwrap resolves its bind
// sources as that user too, and a granted path under a directory it may not
// enter (the cell's data directory, 0700, holds the run workspaces) could
// not be bound. So the launcher starts its own binary first, as root, in a
// private mount namespace (stage 0): it binds every source at
// <stage>/<i> there, drops to the tool's user with no supplementary
// groups, and executes bwrap, which binds <stage>/<i> onto the source's
// path in the sandbox. What a path holds is then decided by DAC for the
// tool's user; which paths exist is decided by the spec, as before.

// stageArg is argv[1] of the binary re-executed as stage 0.
const stageArg = "__agentrt_sandbox_stage__"

// stageConfig is what stage 0 is told, as JSON in argv[2]; argv[3:] is
// bwrap's command line.
type stageConfig struct {
	UID, GID int
	// Parent is the launcher's pid: stage 0 dies with it.
	Parent int `json:"parent"`
	// Dir is the staging directory, created by the launcher.
	Dir string `json:"dir"`
	// Sources are bound at Dir/0, Dir/1, ...
	Sources []string `json:"sources"`
	// Writable are the sources the tool must be able to write (the
	// read_write roots), checked as the tool's user before bwrap starts.
	Writable []string `json:"writable,omitempty"`
	ReportFD int      `json:"report_fd"`
}

// stageMain is stage 0. It returns only on failure, with the reason on the
// report descriptor (read by the launcher as a setup failure).
func stageMain(args []string) int {
	var cfg stageConfig
	if len(args) < 2 || json.Unmarshal([]byte(args[0]), &cfg) != nil {
		fmt.Fprintln(os.Stderr, "agentrt sandbox stage: bad configuration")
		return helperExitSetup
	}
	if err := stage(&cfg, args[1], args[1:]); err != nil {
		if cfg.ReportFD > 2 {
			unix.Write(cfg.ReportFD, append([]byte{helperStarted}, err.Error()...))
		} else {
			fmt.Fprintf(os.Stderr, "agentrt sandbox stage: %v\n", err)
		}
	}
	return helperExitSetup
}

func stage(cfg *stageConfig, bwrap string, argv []string) error {
	// The launcher made this process's mount namespace private
	// (CLONE_NEWNS, with propagation off): nothing mounted here reaches
	// the host's namespace, and it is gone with the sandbox.
	if err := unix.Mount("agentrt-stage", cfg.Dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0711,size=64k"); err != nil {
		return fmt.Errorf("staging the sandbox's paths: tmpfs on %s: %w", cfg.Dir, err)
	}
	for i, src := range cfg.Sources {
		dst := filepath.Join(cfg.Dir, strconv.Itoa(i))
		fi, err := os.Stat(src)
		if err != nil {
			return fmt.Errorf("staging the sandbox's paths: %s: %w", src, unwrapPathErr(err))
		}
		if fi.IsDir() {
			err = os.Mkdir(dst, 0o700)
		} else {
			var f *os.File
			if f, err = os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
				f.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("staging the sandbox's paths: %w", err)
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("staging the sandbox's paths: binding %s: %w", src, err)
		}
	}
	// Supplementary groups first, then the group, then the user: after
	// setuid, root's capabilities are gone and none of it can be undone.
	if err := syscall.Setgroups([]int{}); err != nil {
		return fmt.Errorf("clearing supplementary groups: %w", err)
	}
	if err := syscall.Setgid(cfg.GID); err != nil {
		return fmt.Errorf("switching to gid %d: %w (a gid not mapped in this process's user namespace cannot be used)", cfg.GID, err)
	}
	if err := syscall.Setuid(cfg.UID); err != nil {
		return fmt.Errorf("switching to uid %d: %w (a uid not mapped in this process's user namespace cannot be used)", cfg.UID, err)
	}
	if err := syscall.Setuid(0); err == nil {
		return fmt.Errorf("switching to uid %d did not drop root", cfg.UID)
	}
	// The kernel now checks permissions as the tool's user; a writable
	// root it may not write is a mistake in the setup, said plainly here
	// rather than as bwrap's failure to make a mount point in it.
	for _, w := range cfg.Writable {
		for i, src := range cfg.Sources {
			if src != w {
				continue
			}
			if err := unix.Access(filepath.Join(cfg.Dir, strconv.Itoa(i)), unix.W_OK|unix.X_OK); err != nil {
				return fmt.Errorf("the read-write path %s is not writable by uid %d, gid %d, which the tool runs as (%v): give it to that user (chown %d:%d %s) or let it write there", w, cfg.UID, cfg.GID, err, cfg.UID, cfg.GID, w)
			}
			break
		}
	}
	// The credential change cleared the parent-death signal the launcher
	// set; set it again, and leave if the launcher is already gone.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_PDEATHSIG): %w", err)
	}
	if os.Getppid() != cfg.Parent {
		return fmt.Errorf("the launcher exited")
	}
	err := syscall.Exec(bwrap, argv, []string{})
	return fmt.Errorf("exec %s: %w", bwrap, err)
}
