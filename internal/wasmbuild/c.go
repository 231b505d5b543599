package wasmbuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/mod/modfile"
)

// C agents are compiled by clang for wasm32-wasi against wasi-libc, with
// the header-only SDK guest-sdk/c (agentrt.h, and agentrt_loop.h) on the
// include path.
//
// The header is found, in this order: next to the sources (an agent that
// carries its own copy of agentrt.h); in guest-sdk/c of the agentrt
// checkout the sources lie in (examples/ and the tests: an agent of the
// repository is built against the header the repository tests); else the
// header this binary carries, the one of its own version. A guest-sdk
// directory above the sources that is not in an agentrt checkout is not
// used: an agent's folder does not pick a header by accident.

// Errors returned by C and CFiles when the toolchain is incomplete; each
// comes wrapped in a *ToolchainError that says how to fix it.
var (
	// ErrNoClang: no clang on PATH (or at $AGENTRT_CLANG).
	ErrNoClang = errors.New("clang is not on PATH")
	// ErrNoWASISysroot: clang cannot find wasi-libc for wasm32-wasi.
	ErrNoWASISysroot = errors.New("no WASI sysroot (wasi-libc for wasm32-wasi) found")
	// ErrNoWASIBuiltins: clang's compiler-rt builtins for wasm32 are missing.
	ErrNoWASIBuiltins = errors.New("clang's wasm32 builtins (libclang_rt.builtins-wasm32.a) are missing")
)

// ToolchainError is a missing part of the toolchain or of the agent's
// folder, with the fix. Error returns the problem alone; a command line
// prints Hint on a line of its own ("hint: ...").
type ToolchainError struct {
	Err  error
	Hint string
}

func (e *ToolchainError) Error() string { return e.Err.Error() }

func (e *ToolchainError) Unwrap() error { return e.Err }

const installHint = "run make deps, or: apt-get install clang lld wasi-libc libclang-rt-dev-wasm32"

// sysrootCandidates are where wasi-libc lives when clang's default
// sysroot lacks it: wasi-sdk's layout and common package locations.
// Debian's clang needs none of them (its sysroot is /usr).
var sysrootCandidates = []string{
	"/usr/share/wasi-sysroot",
	"/usr/local/share/wasi-sysroot",
	"/opt/wasi-sdk/share/wasi-sysroot",
}

// C builds the C agent in srcDir, every *.c file there, to out as a
// wasm32-wasi command module. The same sources, header and toolchain give
// the same bytes wherever the sources lie.
func C(ctx context.Context, srcDir, out string) error {
	files, err := filepath.Glob(filepath.Join(srcDir, "*.c"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no .c files in %s", srcDir)
	}
	return CFiles(ctx, out, files)
}

// CFiles builds the given C files, which form one program, to out. flags
// are extra clang flags, appended after the defaults (a test's -D).
func CFiles(ctx context.Context, out string, files []string, flags ...string) error {
	if len(files) == 0 {
		return errors.New("no C files to build")
	}
	clang, sysroot, err := findC(ctx)
	if err != nil {
		return err
	}
	var abs []string
	for _, f := range files {
		a, err := filepath.Abs(f)
		if err != nil {
			return err
		}
		abs = append(abs, a)
	}
	slices.Sort(abs)
	srcDir := filepath.Dir(abs[0])
	include, cleanup, err := findCSDK(srcDir)
	if err != nil {
		return err
	}
	defer cleanup()
	outAbs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	args := []string{"--target=wasm32-wasi"}
	if sysroot != "" {
		args = append(args, "--sysroot="+sysroot)
	}
	args = append(args, "-O2", "-std=c11", "-Wall")
	if include != "" {
		args = append(args, "-I", include, "-ffile-prefix-map="+include+"=agentrt-sdk")
	}
	// Paths never reach the module: __FILE__ names files relative to the
	// sources, and libc's debug sections (the only DWARF in a build without
	// -g) are dropped. The name section stays, for stack traces in
	// divergence reports.
	args = append(args, "-ffile-prefix-map="+srcDir+"=.", "-Wl,--strip-debug")
	args = append(args, flags...)
	args = append(args, "-o", outAbs)
	args = append(args, abs...)
	cmd := exec.CommandContext(ctx, clang, args...)
	cmd.Dir = srcDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("clang %s: %v\n%s", srcDir, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// found remembers the toolchain findC found last, and under which
// environment: looking costs two clang runs, and a test binary builds many
// modules.
var found struct {
	sync.Mutex
	env, clang, sysroot string
}

// findC returns the clang to run and the sysroot to pass ("" when clang
// finds wasi-libc on its own), or a *ToolchainError.
func findC(ctx context.Context) (clang, sysroot string, err error) {
	env := strings.Join([]string{os.Getenv("AGENTRT_CLANG"), os.Getenv("WASI_SYSROOT"), os.Getenv("PATH")}, "\x00")
	found.Lock()
	defer found.Unlock()
	if found.env == env && found.clang != "" {
		return found.clang, found.sysroot, nil
	}
	clang, sysroot, err = lookC(ctx)
	if err == nil {
		found.env, found.clang, found.sysroot = env, clang, sysroot
	}
	return clang, sysroot, err
}

func lookC(ctx context.Context) (clang, sysroot string, err error) {
	clang = os.Getenv("AGENTRT_CLANG")
	if clang == "" {
		if clang, err = exec.LookPath("clang"); err != nil {
			return "", "", &ToolchainError{ErrNoClang, installHint + " (or set AGENTRT_CLANG)"}
		}
	}
	hasLibc := func(root string) bool {
		_, err := os.Stat(filepath.Join(root, "lib", "wasm32-wasi", "libc.a"))
		return err == nil
	}
	switch s := os.Getenv("WASI_SYSROOT"); {
	case s != "":
		if !hasLibc(s) {
			return "", "", &ToolchainError{ErrNoWASISysroot, fmt.Sprintf("WASI_SYSROOT=%s has no lib/wasm32-wasi/libc.a", s)}
		}
		sysroot = s
	case clangFinds(ctx, clang, "", "-print-file-name=libc.a"):
	default:
		i := slices.IndexFunc(sysrootCandidates, hasLibc)
		if i < 0 {
			return "", "", &ToolchainError{ErrNoWASISysroot, installHint + " (or set WASI_SYSROOT to a wasi-sdk sysroot)"}
		}
		sysroot = sysrootCandidates[i]
	}
	if !clangFinds(ctx, clang, sysroot, "-print-libgcc-file-name") {
		return "", "", &ToolchainError{ErrNoWASIBuiltins, "apt-get install libclang-rt-dev-wasm32 (or use wasi-sdk, which ships them)"}
	}
	return clang, sysroot, nil
}

// clangFinds reports whether clang, asked to -print-file-name or
// -print-libgcc-file-name for wasm32-wasi, names a file that exists: it
// echoes a bare name back when it finds none.
func clangFinds(ctx context.Context, clang, sysroot, query string) bool {
	args := []string{"--target=wasm32-wasi", query}
	if sysroot != "" {
		args = append(args, "--sysroot="+sysroot)
	}
	out, err := exec.CommandContext(ctx, clang, args...).Output()
	if err != nil {
		return false
	}
	p := strings.TrimSpace(string(out))
	if !filepath.IsAbs(p) {
		return false
	}
	_, err = os.Stat(p)
	return err == nil
}

// findCSDK returns the directory to put on the include path for
// agentrt.h, "" when it lies beside the sources (clang finds it there), and
// a function that removes what it wrote.
func findCSDK(srcDir string) (include string, cleanup func(), err error) {
	none := func() {}
	if _, err := os.Stat(filepath.Join(srcDir, "agentrt.h")); err == nil {
		return "", none, nil
	}
	for dir := srcDir; ; dir = filepath.Dir(dir) {
		inc := filepath.Join(dir, "guest-sdk", "c")
		if _, err := os.Stat(filepath.Join(inc, "agentrt.h")); err == nil && isCheckout(dir) {
			return inc, none, nil
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	tmp, err := os.MkdirTemp("", "agentrt-csdk-")
	if err != nil {
		return "", none, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	if _, err := extract(tmp, func(p string) bool { return path.Dir(p) == "c" && path.Ext(p) == ".h" }); err != nil {
		cleanup()
		return "", none, err
	}
	return filepath.Join(tmp, "c"), cleanup, nil
}

// isCheckout reports whether dir is the root of an agentrt checkout: its
// go.mod is the module github.com/agentrt/agentrt.
func isCheckout(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	return err == nil && modfile.ModulePath(b) == "github.com/agentrt/agentrt"
}

// Detect says which language the agent in dir is written in: "go" for a
// directory with Go sources, "c" for one with C sources, "rust" for a Cargo
// package (a Cargo.toml; its C sources, if any, are the package's own).
// Test files do not count (a C example may carry a Go test), and a
// directory with two is an error rather than a guess.
func Detect(dir string) (lang string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var hasGo, hasC, hasCargo bool
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		switch {
		case strings.HasSuffix(name, "_test.go"):
		case strings.HasSuffix(name, ".go"):
			hasGo = true
		case strings.HasSuffix(name, ".c"):
			hasC = true
		case name == "Cargo.toml":
			hasCargo = true
		}
	}
	switch {
	case hasGo && (hasC || hasCargo):
		return "", fmt.Errorf("%s holds both .go sources and a C or Rust agent; an agent is one or the other", dir)
	case hasGo:
		return "go", nil
	case hasCargo:
		return "rust", nil
	case hasC:
		return "c", nil
	}
	return "", fmt.Errorf("%s holds no .go or .c sources and no Cargo.toml", dir)
}
