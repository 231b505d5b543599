package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// helperArg is argv[1] of a binary re-executed as the sandbox helper.
const helperArg = "__agentrt_sandbox_helper__"

// helperProbeArg makes the helper binary print "sandboxed" and exit.
const helperProbeArg = "__agentrt_sandbox_probe__"

// helperExitSetup is the helper's exit status when setup failed before the
// tool was executed; the reason is on the report descriptor.
const helperExitSetup = 125

// helperStarted is the first byte the helper writes on its report
// descriptor.
const helperStarted = 'R'

// helperRegistered records that this binary calls HelperMain, so that it
// can be re-executed as the helper.
var helperRegistered bool

// HelperMain must be called at the start of every program that calls Launch
// (first thing in main, in an init function of package main, or in
// TestMain). In a normal start it returns at once. When Launch re-executed
// the program as the sandbox helper, it applies the last restrictions
// (Landlock, rlimits, closing inherited descriptors) to itself and executes
// the tool in its place; it never returns then.
func HelperMain() {
	helperRegistered = true
	if len(os.Args) == 2 && os.Args[1] == helperProbeArg {
		// Check's trial launch runs the helper binary as the tool.
		fmt.Println("sandboxed")
		os.Exit(0)
	}
	if len(os.Args) >= 4 && os.Args[1] == stageArg {
		// A launch by root: bind the sandbox's paths, drop to the tool's
		// user, execute bwrap (stage_linux.go).
		os.Exit(stageMain(os.Args[2:]))
	}
	if len(os.Args) < 5 || os.Args[1] != helperArg {
		return
	}
	var cfg helperConfig
	if err := json.Unmarshal([]byte(os.Args[2]), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "agentrt sandbox helper: bad configuration: %v\n", err)
		os.Exit(helperExitSetup)
	}
	// The report starts with helperStarted: the launcher then knows the
	// sandbox was set up and the helper ran. Anything after it is a setup
	// failure; a successful exec closes the descriptor with nothing more.
	var report *os.File
	if cfg.ReportFD > 2 {
		report = os.NewFile(uintptr(cfg.ReportFD), "report")
		report.Write([]byte{helperStarted})
	}
	err := runHelper(&cfg, os.Args[3], os.Args[4:])
	// runHelper only returns on failure: the tool never ran.
	if report != nil {
		report.Write([]byte(err.Error()))
	} else {
		fmt.Fprintf(os.Stderr, "agentrt sandbox helper: %v\n", err)
	}
	os.Exit(helperExitSetup)
}

// helperConfig is what the launcher tells the helper, as JSON in argv[2].
// It holds no secrets: argv is visible to the host's ps.
type helperConfig struct {
	// ReportFD is where a setup failure is written; it is close-on-exec,
	// so a successful exec leaves it empty.
	ReportFD int `json:"report_fd"`
	// EnvFD is where the helper reads the tool's environment (envBlock):
	// the helper's own environment holds nothing of it, so a dynamic
	// loader never sees the tool's LD_PRELOAD (or DYLD_INSERT_LIBRARIES)
	// in the helper, and the values stay off the host's ps.
	EnvFD int `json:"env_fd"`
	// Rlimits are applied to the helper and inherited by the tool.
	Rlimits []rlimit `json:"rlimits,omitempty"`
	// Landlock, when present, is applied on Linux.
	Landlock *landlockRules `json:"landlock,omitempty"`
}

// rlimit is one resource limit by portable name: cpu, as, nproc, fsize, core.
type rlimit struct {
	Name string `json:"name"`
	Cur  uint64 `json:"cur"`
	Max  uint64 `json:"max"`
}

// landlockRules are the paths Landlock allows, as seen inside the sandbox.
type landlockRules struct {
	Require   bool     `json:"require,omitempty"`
	ReadOnly  []string `json:"ro,omitempty"`
	ReadWrite []string `json:"rw,omitempty"`
}

// rlimits computes the limits the helper applies from a spec. nproc is
// left to the caller: how processes are counted differs per platform.
func (s *Spec) rlimits() []rlimit {
	var out []rlimit
	l := s.Limits
	if l.CPU > 0 {
		secs := uint64((l.CPU + 999_999_999) / 1_000_000_000)
		// SIGXCPU at the soft limit, SIGKILL one second later.
		out = append(out, rlimit{Name: "cpu", Cur: secs, Max: secs + 1})
	}
	if l.Memory > 0 {
		out = append(out, rlimit{Name: "as", Cur: uint64(l.Memory), Max: uint64(l.Memory)})
	}
	if l.FileSize > 0 {
		out = append(out, rlimit{Name: "fsize", Cur: uint64(l.FileSize), Max: uint64(l.FileSize)})
	}
	// No core dumps: they would land in a writable root.
	out = append(out, rlimit{Name: "core", Cur: 0, Max: 0})
	return out
}

// envBlock encodes an environment for EnvFD: each NAME=value followed by a
// NUL byte (neither may hold one; Validate checks).
func envBlock(env []string) []byte {
	var b []byte
	for _, kv := range env {
		b = append(append(b, kv...), 0)
	}
	return b
}

// maxEnvBlock bounds what the helper reads from EnvFD.
const maxEnvBlock = 16 << 20

// readEnv reads the tool's environment from fd and closes it.
func readEnv(fd int) ([]string, error) {
	f := os.NewFile(uintptr(fd), "env")
	if f == nil {
		return nil, fmt.Errorf("the environment descriptor %d is not open", fd)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxEnvBlock+1))
	if err != nil {
		return nil, fmt.Errorf("reading the tool's environment: %w", err)
	}
	if len(data) > maxEnvBlock {
		return nil, fmt.Errorf("the tool's environment is over %d bytes", maxEnvBlock)
	}
	env := []string{}
	for len(data) > 0 {
		kv, rest, ok := bytes.Cut(data, []byte{0})
		if !ok {
			return nil, fmt.Errorf("the tool's environment is not NUL-terminated")
		}
		env, data = append(env, string(kv)), rest
	}
	return env, nil
}

// helperPath returns the binary to re-execute as the helper.
func helperPath(explicit string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	if !helperRegistered {
		return "", refused("call sandbox.HelperMain() first thing in main (or TestMain), or pass sandbox.WithHelper",
			"this program cannot serve as the sandbox helper")
	}
	p, err := os.Executable()
	if err != nil {
		return "", refused("pass sandbox.WithHelper", "finding this program's executable: %v", err)
	}
	return filepath.EvalSymlinks(p)
}
