// Package wasmbuild compiles agents to wasip1 modules, reproducibly: the
// same source and toolchain give the same bytes, and so the same module hash
// in every run header. Go agents are built with the go command, C agents
// with clang against wasi-libc.
//
// An agent builds in any folder, offline: the guest SDK's source is part of
// this binary (guest-sdk's Source), and a build that needs it points the
// toolchain at a copy of it, never at the network and never by changing the
// agent's own files.
package wasmbuild

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	guestsdk "github.com/agentrt/agentrt/guest-sdk"
	"golang.org/x/mod/modfile"
)

// The Rust build serves an agent outside a checkout the crate this binary
// carries (rust.go, RustSDK).
func init() {
	if sub, err := fs.Sub(guestsdk.Source(), "rust"); err == nil {
		RustSDK = sub
	}
}

// ErrNoGo is returned when the go command is not on PATH.
var ErrNoGo = errors.New("the go command is not on PATH (agentrt build compiles Go agents with it)")

// ErrNoGoModule is returned, in a *ToolchainError, when a Go agent's folder
// is in no module: there is no go.mod in it or above it.
var ErrNoGoModule = errors.New("no go.mod in the agent's folder or above it")

// Options are the settings of one build.
type Options struct {
	// Progress receives a line when the build does long work: compiling
	// the Go runtime for wasip1 (5-10 s, the first time only), a module
	// the go command downloads. Nil: nothing is said.
	Progress io.Writer
}

// Build builds the agent in dir, whose language Detect finds, to out, and
// returns the language.
func Build(ctx context.Context, dir, out string, opts Options) (lang string, err error) {
	lang, err = Detect(dir)
	if err != nil {
		return "", err
	}
	switch lang {
	case "go":
		return lang, GoWith(ctx, dir, out, opts)
	case "c":
		return lang, C(ctx, dir, out)
	case "rust":
		return lang, Rust(ctx, dir, out)
	}
	return "", fmt.Errorf("cannot build %s agents", lang)
}

// Go builds the main package in dir to out as a wasip1 module.
func Go(ctx context.Context, dir, out string) error { return GoWith(ctx, dir, out, Options{}) }

// GoWith is Go with options.
//
// The agent's module (the go.mod in dir or above it) is built as it is when
// it says where the SDK comes from: when it is the agentrt repository, when
// it replaces the SDK's module, or when a go.work applies. Otherwise, the
// usual case for an agent in its own folder, the build uses a copy of its
// go.mod (the go command's -modfile) that requires the SDK and replaces it
// with ./.agentrt-guest-sdk, a folder that exists only in an overlay
// (-overlay) holding this binary's copy of the SDK's source. The agent's
// go.mod and go.sum are read, never written, nothing is fetched for the
// SDK, and the module records the same replacement wherever it is built,
// so the same source gives the same bytes.
func GoWith(ctx context.Context, dir, out string, opts Options) error {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return ErrNoGo
	}
	absOut, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	root, err := moduleRoot(absDir)
	if err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return err
	}
	mf, err := modfile.Parse(filepath.Join(root, "go.mod"), gomod, nil)
	if err != nil {
		return err
	}
	env := append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	args := []string{"build", "-v", "-trimpath", "-buildvcs=false"}
	if !providesSDK(mf) && workspace(root) == "" {
		tmp, err := os.MkdirTemp("", "agentrt-build-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		flags, err := sdkOverlay(tmp, mf, root)
		if err != nil {
			return err
		}
		// -modfile is refused in workspace mode, and no go.work applies.
		env = append(env, "GOWORK=off")
		args = append(args, flags...)
	}
	args = append(args, "-o", absOut, ".")
	cmd := exec.CommandContext(ctx, gobin, args...)
	cmd.Dir = absDir
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	modPath := ""
	if mf.Module != nil {
		modPath = mf.Module.Mod.Path
	}
	msgs := watch(stderr, opts.Progress, modPath)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", dir, err, strings.TrimSpace(msgs))
	}
	return nil
}

// moduleRoot returns the directory of the go.mod that dir belongs to.
func moduleRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if st, err := os.Stat(filepath.Join(d, "go.mod")); err == nil && !st.IsDir() {
			return d, nil
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return "", &ToolchainError{ErrNoGoModule, fmt.Sprintf("agentrt new DIR writes an agent with its go.mod; or run in %s: go mod init NAME", dir)}
}

// providesSDK reports whether a go.mod decides where the SDK comes from
// itself: it is the agentrt repository (whose go.mod replaces the SDK with
// ./guest-sdk), the SDK, or replaces the SDK.
func providesSDK(mf *modfile.File) bool {
	if mf.Module != nil {
		switch p := mf.Module.Mod.Path; p {
		case "github.com/agentrt/agentrt", guestsdk.ModulePath:
			return true
		}
	}
	for _, r := range mf.Replace {
		if r.Old.Path == guestsdk.ModulePath {
			return true
		}
	}
	return false
}

// workspace returns the go.work that applies to a module at root, as the go
// command finds it ($GOWORK, else a go.work in root or above), or "".
func workspace(root string) string {
	switch w := os.Getenv("GOWORK"); w {
	case "off":
		return ""
	case "":
	default:
		return w
	}
	for d := root; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return filepath.Join(d, "go.work")
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// sdkDir is where the SDK appears, in the overlay, beside the agent's
// go.mod: a relative replacement, so that the path the module records is
// the same on every machine.
const sdkDir = ".agentrt-guest-sdk"

// sdkOverlay writes into tmp the SDK's Go source, an overlay that shows it
// as root/.agentrt-guest-sdk, and a go.mod (with the module's go.sum beside
// it) that is mf requiring the SDK and replacing it with that folder, and
// returns the go command's flags that use them.
func sdkOverlay(tmp string, mf *modfile.File, root string) ([]string, error) {
	virtual := filepath.Join(root, sdkDir)
	if _, err := os.Lstat(virtual); err == nil {
		return nil, fmt.Errorf("%s exists: agentrt build shows the guest SDK there; remove or rename it", virtual)
	}
	sdk := filepath.Join(tmp, "guest-sdk")
	files, err := extract(sdk, func(p string) bool {
		return p == "go.mod" || strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") && path.Dir(p) != "."
	})
	if err != nil {
		return nil, err
	}
	overlay := map[string]string{}
	for _, p := range files {
		overlay[filepath.Join(virtual, filepath.FromSlash(p))] = filepath.Join(sdk, filepath.FromSlash(p))
	}
	ov, err := json.Marshal(map[string]any{"Replace": overlay})
	if err != nil {
		return nil, err
	}
	ovFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ovFile, ov, 0o644); err != nil {
		return nil, err
	}
	required := false
	for _, r := range mf.Require {
		required = required || r.Mod.Path == guestsdk.ModulePath
	}
	if !required {
		if err := mf.AddRequire(guestsdk.ModulePath, guestsdk.Version); err != nil {
			return nil, err
		}
	}
	if err := mf.AddReplace(guestsdk.ModulePath, "", "./"+sdkDir, ""); err != nil {
		return nil, err
	}
	b, err := mf.Format()
	if err != nil {
		return nil, err
	}
	modFile := filepath.Join(tmp, "go.mod")
	if err := os.WriteFile(modFile, b, 0o644); err != nil {
		return nil, err
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := os.WriteFile(filepath.Join(tmp, "go.sum"), sum, 0o644); err != nil {
			return nil, err
		}
	}
	return []string{"-modfile=" + modFile, "-overlay=" + ovFile}, nil
}

// extract writes the SDK files that keep selects into dir and returns
// their paths (slash-separated, relative to guest-sdk/).
func extract(dir string, keep func(path string) bool) ([]string, error) {
	src := guestsdk.Source()
	var files []string
	err := fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !keep(p) {
			return err
		}
		b, err := fs.ReadFile(src, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		files = append(files, p)
		return os.WriteFile(dst, b, 0o644)
	})
	return files, err
}

// packageLine is a line of go build -v: the import path of a package it
// compiles.
var packageLine = regexp.MustCompile(`^[A-Za-z0-9_.~+-]+(/[A-Za-z0-9_.~+-]+)*$`)

// watch reads the go command's stderr: package names (-v) become progress
// lines on progress, "go: downloading" lines are passed on, and the rest
// (compile errors) is returned.
func watch(r io.Reader, progress io.Writer, modPath string) string {
	var rest bytes.Buffer
	said := false
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "go: downloading "):
			if progress != nil {
				fmt.Fprintln(progress, line)
			}
		case packageLine.MatchString(line):
			if said || progress == nil || !isStd(line, modPath) {
				continue
			}
			said = true
			// The go command compiles in dependency order: a runtime that
			// is not in the build cache comes first.
			if strings.HasPrefix(line, "internal/") || strings.HasPrefix(line, "runtime") {
				fmt.Fprintln(progress, "compiling the Go runtime for wasip1, about 5-10 s the first time (the go build cache keeps it)")
			} else {
				fmt.Fprintln(progress, "compiling standard library packages for wasip1 (the go build cache keeps them)")
			}
		default:
			rest.WriteString(line)
			rest.WriteByte('\n')
		}
	}
	return rest.String()
}

// isStd reports whether a package path is of the standard library: its
// first element has no dot and it is not the agent's own module.
func isStd(pkg, modPath string) bool {
	if pkg == modPath || strings.HasPrefix(pkg, modPath+"/") {
		return false
	}
	first, _, _ := strings.Cut(pkg, "/")
	return !strings.Contains(first, ".")
}
