package wasmbuild

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Rust agents are Cargo packages built by cargo for wasm32-wasi (or
// wasm32-wasip1, its name from Rust 1.78 on), offline, against the crate
// guest-sdk/rust.
//
// An agent names the SDK in its Cargo.toml as a registry dependency,
// `agentrt = "0.1"`, and the build serves it from a copy of the crate:
// cargo is told (--config) to replace crates.io with a directory source
// holding the crate, staged in the target directory. That is what makes
// the build offline and independent of where the SDK lies: cargo hashes
// the absolute location of a path dependency outside the package into
// every symbol name, so with `agentrt = { path = "../../guest-sdk/rust" }`
// (which also works) the same sources give other bytes in another
// checkout, while a registry package is hashed by name and version. The crate is the one of the checkout the agent lies
// in (a guest-sdk/rust above it, as for examples/), else RustSDK (the copy
// built into the agentrt binary), else the one of a checkout above the
// working directory. Since crates.io is replaced, an agent has no other
// registry dependencies.
//
// The toolchain is a rustc whose sysroot holds the standard library for
// that target: $AGENTRT_RUSTC or $RUSTC when set, else the rustc on PATH
// and then /usr/bin/rustc, the first that has it. The order matters: a
// rustup toolchain first on PATH often has no wasm target (and rustup may
// not be able to download one), while Debian's rustc with
// libstd-rust-dev-wasm32 has it. cargo is taken from the directory of the
// chosen rustc (the two belong together), else from PATH, and is told to
// use that rustc.
//
// The build owns the flags that make it reproducible: one codegen unit,
// debug info stripped (the name section stays, for stack traces in
// divergence reports), and every absolute source path remapped (the
// package's own directory to ".", each dependency outside it to
// NAME-VERSION, CARGO_HOME to "cargo-home"), since paths reach the module
// through panic locations. It sets them through the environment
// (CARGO_ENCODED_RUSTFLAGS and CARGO_PROFILE_RELEASE_*), which cargo ranks
// above Cargo.toml's release profile and Cargo config files: RUSTFLAGS or
// CARGO_ENCODED_RUSTFLAGS from the environment are added after them, and
// rustflags set in a Cargo config file are not read.

// Errors returned by Rust when the toolchain is incomplete; each comes
// wrapped in a *ToolchainError that says how to fix it.
var (
	// ErrNoRustc: no rustc on PATH or at /usr/bin/rustc (or at
	// $AGENTRT_RUSTC or $RUSTC, when set).
	ErrNoRustc = errors.New("rustc is not on PATH")
	// ErrNoRustWASI: no rustc found has the standard library for
	// wasm32-wasi (or wasm32-wasip1).
	ErrNoRustWASI = errors.New("no Rust toolchain with the wasm32-wasi standard library found")
	// ErrNoCargo: no cargo beside the chosen rustc, on PATH or at
	// $AGENTRT_CARGO.
	ErrNoCargo = errors.New("cargo is not on PATH")
	// ErrNoRustLinker: the chosen toolchain's linker for wasm, rust-lld,
	// is missing (Debian's is a link to lld).
	ErrNoRustLinker = errors.New("rust-lld, the Rust toolchain's wasm linker, is missing")
	// ErrNoRustSDK: the agent's build failed and no copy of the SDK crate
	// was found to serve `agentrt = "0.1"` from.
	ErrNoRustSDK = errors.New("the Rust SDK crate (guest-sdk/rust) was not found")
	// ErrRustRegistry: the agent depends on a crate of the registry other
	// than agentrt, which an offline build cannot fetch.
	ErrRustRegistry = errors.New("a dependency needs the crate registry, which the offline build does not reach")
)

const rustInstallHint = "run make deps, or: apt-get install rustc cargo libstd-rust-dev-wasm32 lld (Debian's Rust 1.63 has wasm32-wasi); with rustup: rustup target add wasm32-wasip1"

// RustSDK, when not nil, is the SDK crate (its Cargo.toml and src/) that
// Rust serves to an agent outside a checkout of this repository. The
// agentrt binary sets it to the copy it embeds.
var RustSDK fs.FS

// The name of the directory source that stands in for crates.io.
const rustSDKSource = "agentrt-sdk"

// Rust builds the Cargo package in srcDir (a directory with a Cargo.toml
// that builds one binary) to out as a wasm32-wasi command module, with
// cargo build --offline --release. The same sources and toolchain give the
// same bytes wherever they lie, as long as every path dependency lies
// inside srcDir (cargo hashes the absolute location of one outside it into
// symbol names). The target directory is cargo's: srcDir/target unless
// CARGO_TARGET_DIR or a Cargo config says otherwise.
func Rust(ctx context.Context, srcDir, out string) error {
	dir, err := filepath.Abs(srcDir)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "Cargo.toml")); err != nil {
		return fmt.Errorf("no Cargo.toml in %s: a Rust agent is a Cargo package", srcDir)
	}
	outAbs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	tc, err := findRust(ctx, dir)
	if err != nil {
		return err
	}
	env := tc.env()
	// The workspace alone first: its targets, and where to stage the SDK.
	ws, err := cargoMetadata(ctx, tc, dir, env, "--no-deps")
	if err != nil {
		return err
	}
	if err := ws.oneBinary(dir); err != nil {
		return fmt.Errorf("%s: %w", srcDir, err)
	}
	var config []string
	sdk, err := findRustSDK(dir)
	if err != nil {
		return err
	}
	if sdk != nil {
		vendor, err := stageRustSDK(sdk, filepath.Join(ws.TargetDirectory, rustSDKSource))
		if err != nil {
			return fmt.Errorf("staging the Rust SDK: %w", err)
		}
		config = []string{
			"--config", "source.crates-io.replace-with=" + tomlString(rustSDKSource),
			"--config", "source." + rustSDKSource + ".directory=" + tomlString(vendor),
		}
	}
	fail := func(what string, err error, stderr string) error {
		err = fmt.Errorf("%s %s: %v\n%s", what, srcDir, err, strings.TrimSpace(stderr))
		switch {
		case sdk == nil && strings.Contains(stderr, "agentrt"):
			return &ToolchainError{fmt.Errorf("%w: %w", ErrNoRustSDK, err),
				"build in a checkout of agentrt, or name the crate by its path: agentrt = { path = \".../guest-sdk/rust\" }"}
		case strings.Contains(stderr, "no matching package named"):
			return &ToolchainError{fmt.Errorf("%w: %w", ErrRustRegistry, err),
				"an agent's one registry dependency is agentrt, served from guest-sdk/rust; copy other crates into the package and name them by path"}
		}
		return err
	}
	meta, stderr, err := cargoMetadataWith(ctx, tc, dir, env, append(config, "--filter-platform", tc.target)...)
	if err != nil {
		return fail("cargo metadata", err, stderr)
	}
	env = append(env, "CARGO_ENCODED_RUSTFLAGS="+strings.Join(append(meta.remaps(), userRustflags()...), "\x1f"),
		// Release profile settings that make the bytes depend on the
		// sources alone; the environment outranks Cargo.toml.
		"CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1",
		"CARGO_PROFILE_RELEASE_DEBUG=0",
		"CARGO_PROFILE_RELEASE_STRIP=debuginfo",
		"CARGO_PROFILE_RELEASE_INCREMENTAL=false",
	)
	args := append([]string{"build", "--offline", "--release", "--target", tc.target, "--message-format=json-render-diagnostics"}, config...)
	cmd := exec.CommandContext(ctx, tc.cargo, args...)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &errOut
	if err := cmd.Run(); err != nil {
		return fail("cargo build", err, errOut.String())
	}
	wasm, err := ws.binary(dir, stdout.Bytes())
	if err != nil {
		return fmt.Errorf("cargo build %s: %w", srcDir, err)
	}
	code, err := os.ReadFile(wasm)
	if err != nil {
		return err
	}
	return os.WriteFile(outAbs, code, 0o644)
}

// findRustSDK returns the SDK crate to serve: the checkout's above dir,
// else RustSDK, else the checkout's above the working directory; nil when
// there is none.
func findRustSDK(dir string) (fs.FS, error) {
	above := func(start string) string {
		for d := start; ; d = filepath.Dir(d) {
			sdk := filepath.Join(d, "guest-sdk", "rust")
			if isFile(filepath.Join(sdk, "Cargo.toml")) {
				return sdk
			}
			if filepath.Dir(d) == d {
				return ""
			}
		}
	}
	if sdk := above(dir); sdk != "" {
		return os.DirFS(sdk), nil
	}
	if RustSDK != nil {
		return RustSDK, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	if sdk := above(wd); sdk != "" {
		return os.DirFS(sdk), nil
	}
	return nil, nil
}

// stageRustSDK copies the crate in sdk (Cargo.toml and src/) to
// root/NAME-VERSION as a package of a cargo directory source, and returns
// root. A file is written only when its content changed, so that cargo
// does not rebuild the crate on every build.
func stageRustSDK(sdk fs.FS, root string) (string, error) {
	manifest, err := fs.ReadFile(sdk, "Cargo.toml")
	if err != nil {
		return "", err
	}
	name, version := manifestPackage(manifest)
	if name == "" || version == "" {
		return "", errors.New("its Cargo.toml names no package name and version")
	}
	pkg := filepath.Join(root, name+"-"+version)
	want := map[string][]byte{
		"Cargo.toml": manifest,
		// A directory source lists each package's files with their
		// checksums; none are listed, so none are checked, and the
		// package has no checksum for Cargo.lock to record.
		".cargo-checksum.json": []byte(`{"files":{},"package":null}` + "\n"),
	}
	err = fs.WalkDir(sdk, "src", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sdk, p)
		want[p] = b
		return err
	})
	if err != nil {
		return "", err
	}
	for p, b := range want {
		dst := filepath.Join(pkg, filepath.FromSlash(p))
		if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, b) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", err
		}
		tmp := dst + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return "", err
		}
		if err := os.Rename(tmp, dst); err != nil {
			return "", err
		}
	}
	// A file the crate no longer has goes too.
	err = filepath.WalkDir(pkg, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(pkg, p)
		if err != nil {
			return err
		}
		if _, ok := want[filepath.ToSlash(rel)]; !ok {
			return os.Remove(p)
		}
		return nil
	})
	return root, err
}

// manifestPackage returns the name and version of a Cargo.toml's
// [package], as the SDK's own manifest writes them (key = "value").
func manifestPackage(manifest []byte) (name, version string) {
	section := ""
	for _, line := range strings.Split(string(manifest), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section != "[package]" {
			continue
		}
		v = strings.Trim(strings.TrimSpace(v), `"`)
		switch strings.TrimSpace(k) {
		case "name":
			name = v
		case "version":
			version = v
		}
	}
	return name, version
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// rustToolchain is a rustc that has the wasm standard library, and the
// cargo to drive it.
type rustToolchain struct {
	rustc, rustdoc, cargo string
	sysroot               string
	target                string // wasm32-wasip1 or wasm32-wasi
	version               string // rustc -V
}

// env is the environment of cargo: this rustc (and its rustdoc), no
// colours. Later entries win over the process's own.
func (tc *rustToolchain) env() []string {
	env := append(os.Environ(), "RUSTC="+tc.rustc, "CARGO_TERM_COLOR=never")
	if tc.rustdoc != "" {
		env = append(env, "RUSTDOC="+tc.rustdoc)
	}
	return env
}

// userRustflags are the flags the environment asks for, which follow the
// build's own.
func userRustflags() []string {
	if f := os.Getenv("CARGO_ENCODED_RUSTFLAGS"); f != "" {
		return strings.Split(f, "\x1f")
	}
	return strings.Fields(os.Getenv("RUSTFLAGS"))
}

// rustFound remembers the toolchain findRust found, per environment and
// directory (a rustup proxy picks the toolchain a directory's
// rust-toolchain file names): looking costs a few rustc runs, and a test
// binary builds many modules.
var rustFound struct {
	sync.Mutex
	key string
	tc  *rustToolchain
}

// RustTools is the toolchain Rust builds with: the rustc that has the
// wasm standard library, its rustdoc (empty when there is none beside
// it), the cargo that drives it, the wasm target's name and rustc's
// version line.
type RustTools struct {
	Rustc, Rustdoc, Cargo string
	Target, Version       string
}

// FindRust returns the toolchain Rust uses for the package in dir (a
// rustup proxy picks one by the directory's rust-toolchain file), or a
// *ToolchainError when there is none.
func FindRust(ctx context.Context, dir string) (*RustTools, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	tc, err := findRust(ctx, abs)
	if err != nil {
		return nil, err
	}
	return &RustTools{Rustc: tc.rustc, Rustdoc: tc.rustdoc, Cargo: tc.cargo, Target: tc.target, Version: tc.version}, nil
}

func findRust(ctx context.Context, dir string) (*rustToolchain, error) {
	key := strings.Join([]string{os.Getenv("AGENTRT_RUSTC"), os.Getenv("RUSTC"), os.Getenv("AGENTRT_CARGO"), os.Getenv("PATH"), fallbackRustc, dir}, "\x00")
	rustFound.Lock()
	defer rustFound.Unlock()
	if rustFound.key == key && rustFound.tc != nil {
		return rustFound.tc, nil
	}
	tc, err := lookRust(ctx, dir)
	if err == nil {
		rustFound.key, rustFound.tc = key, tc
	}
	return tc, err
}

// wasmTargets are the names of the WASI preview 1 target, newest first.
var wasmTargets = []string{"wasm32-wasip1", "wasm32-wasi"}

// fallbackRustc is where Debian's rustc lives, tried after the one on
// PATH; a variable so that tests can point it at a fake toolchain.
var fallbackRustc = "/usr/bin/rustc"

func lookRust(ctx context.Context, dir string) (*rustToolchain, error) {
	var candidates []string
	if r := cmp.Or(os.Getenv("AGENTRT_RUSTC"), os.Getenv("RUSTC")); r != "" {
		p, err := exec.LookPath(r)
		if err != nil {
			return nil, &ToolchainError{fmt.Errorf("%w: %v", ErrNoRustc, err), "set AGENTRT_RUSTC (or RUSTC) to a rustc that exists, or unset it"}
		}
		candidates = []string{p}
	} else {
		if r, err := exec.LookPath("rustc"); err == nil {
			candidates = append(candidates, r)
		}
		if isFile(fallbackRustc) && !slices.Contains(candidates, fallbackRustc) {
			candidates = append(candidates, fallbackRustc)
		}
	}
	if len(candidates) == 0 {
		return nil, &ToolchainError{ErrNoRustc, rustInstallHint + " (or set AGENTRT_RUSTC)"}
	}
	var tried []string
	for _, rustc := range candidates {
		tc, why := probeRustc(ctx, dir, rustc)
		if tc == nil {
			tried = append(tried, rustc+": "+why)
			continue
		}
		if err := findRustLinker(tc); err != nil {
			return nil, err
		}
		cargo, err := findCargo(rustc)
		if err != nil {
			return nil, err
		}
		tc.cargo = cargo
		return tc, nil
	}
	return nil, &ToolchainError{fmt.Errorf("%w (%s)", ErrNoRustWASI, strings.Join(tried, "; ")), rustInstallHint}
}

// probeRustc returns the toolchain of rustc if its sysroot has a wasm
// standard library, or why not.
func probeRustc(ctx context.Context, dir, rustc string) (*rustToolchain, string) {
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, rustc, args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	version, err := run("-V")
	if err != nil {
		return nil, fmt.Sprintf("does not run (%v)", err)
	}
	sysroot, err := run("--print", "sysroot")
	if err != nil {
		return nil, fmt.Sprintf("%s cannot print its sysroot (%v)", version, err)
	}
	for _, target := range wasmTargets {
		libs, _ := filepath.Glob(filepath.Join(sysroot, "lib", "rustlib", target, "lib", "libstd-*.rlib"))
		if len(libs) > 0 {
			tc := &rustToolchain{rustc: rustc, sysroot: sysroot, target: target, version: version}
			if rd := filepath.Join(filepath.Dir(rustc), "rustdoc"); isFile(rd) {
				tc.rustdoc = rd
			}
			return tc, ""
		}
	}
	return nil, fmt.Sprintf("%s has no standard library for wasm32-wasi in %s", version, filepath.Join(sysroot, "lib", "rustlib"))
}

// findRustLinker checks that rust-lld, which rustc runs to link wasm, is
// there: in the toolchain's own bin directory (rustup) or on PATH (Debian,
// where it is a link to lld that is dangling without the lld package).
func findRustLinker(tc *rustToolchain) error {
	if found, _ := filepath.Glob(filepath.Join(tc.sysroot, "lib", "rustlib", "*", "bin", "rust-lld")); slices.ContainsFunc(found, isFile) {
		return nil
	}
	if p, err := exec.LookPath("rust-lld"); err == nil && isFile(p) {
		return nil
	}
	return &ToolchainError{fmt.Errorf("%w (for %s: neither in %s nor on PATH)", ErrNoRustLinker, tc.version,
		filepath.Join(tc.sysroot, "lib", "rustlib", "*", "bin")), "apt-get install lld (or run make deps); Debian's rust-lld is /usr/bin/rust-lld, which must be on PATH"}
}

// findCargo returns the cargo beside rustc, else $AGENTRT_CARGO or the one
// on PATH.
func findCargo(rustc string) (string, error) {
	if c := os.Getenv("AGENTRT_CARGO"); c != "" {
		return c, nil
	}
	if c := filepath.Join(filepath.Dir(rustc), "cargo"); isFile(c) {
		return c, nil
	}
	if c, err := exec.LookPath("cargo"); err == nil {
		return c, nil
	}
	return "", &ToolchainError{ErrNoCargo, rustInstallHint + " (or set AGENTRT_CARGO)"}
}

// isFile reports whether p names an existing file, links followed.
func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// cargoMeta is what the build needs of cargo metadata.
type cargoMeta struct {
	Packages []struct {
		ID           string `json:"id"`
		Name         string `json:"name"`
		Version      string `json:"version"`
		ManifestPath string `json:"manifest_path"`
		Targets      []struct {
			Name string   `json:"name"`
			Kind []string `json:"kind"`
		} `json:"targets"`
	} `json:"packages"`
	WorkspaceMembers []string `json:"workspace_members"`
	WorkspaceRoot    string   `json:"workspace_root"`
	TargetDirectory  string   `json:"target_directory"`
}

func cargoMetadata(ctx context.Context, tc *rustToolchain, dir string, env []string, args ...string) (*cargoMeta, error) {
	m, stderr, err := cargoMetadataWith(ctx, tc, dir, env, args...)
	if err != nil {
		return nil, fmt.Errorf("cargo metadata %s: %v\n%s", dir, err, strings.TrimSpace(stderr))
	}
	return m, nil
}

// cargoMetadataWith runs cargo metadata with args, returning its stderr
// for the caller's error.
func cargoMetadataWith(ctx context.Context, tc *rustToolchain, dir string, env []string, args ...string) (*cargoMeta, string, error) {
	cmd := exec.CommandContext(ctx, tc.cargo, append([]string{"metadata", "--offline", "--format-version", "1"}, args...)...)
	cmd.Dir = dir
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, stderr.String(), err
	}
	var m cargoMeta
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, "", fmt.Errorf("cargo metadata: %v", err)
	}
	return &m, "", nil
}

// remaps are the --remap-path-prefix flags that keep absolute paths out of
// the module: the workspace is ".", a package that is not one of its
// members (the staged SDK, a path dependency) NAME-VERSION, CARGO_HOME "cargo-home". rustc applies
// the last mapping that matches, so longer prefixes come last. cargo
// leaves these flags out of the hash it gives rustc (-C metadata).
func (m *cargoMeta) remaps() []string {
	type remap struct{ from, to string }
	maps := []remap{{m.WorkspaceRoot, "."}}
	if home := cargoHome(); home != "" {
		maps = append(maps, remap{home, "cargo-home"})
	}
	for _, p := range m.Packages {
		if !slices.Contains(m.WorkspaceMembers, p.ID) {
			maps = append(maps, remap{filepath.Dir(p.ManifestPath), p.Name + "-" + p.Version})
		}
	}
	slices.SortStableFunc(maps, func(a, b remap) int { return len(a.from) - len(b.from) })
	var flags []string
	for _, r := range maps {
		flags = append(flags, "--remap-path-prefix="+r.from+"="+r.to)
	}
	return flags
}

func cargoHome() string {
	if h := os.Getenv("CARGO_HOME"); h != "" {
		return h
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".cargo")
	}
	return ""
}

// built returns the ids of the packages cargo build in dir builds: the
// package whose manifest is dir/Cargo.toml when it is a member of the
// workspace (cargo run in a member builds that member), else every member
// (a virtual workspace's root).
func (m *cargoMeta) built(dir string) []string {
	want := canonical(filepath.Join(dir, "Cargo.toml"))
	for _, p := range m.Packages {
		if slices.Contains(m.WorkspaceMembers, p.ID) && canonical(p.ManifestPath) == want {
			return []string{p.ID}
		}
	}
	return m.WorkspaceMembers
}

// canonical is p with links resolved, or p when that fails.
func canonical(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// oneBinary checks, before anything is built, that what cargo builds in
// dir has exactly one binary target: an agent is one program.
func (m *cargoMeta) oneBinary(dir string) error {
	built := m.built(dir)
	var names []string
	for _, p := range m.Packages {
		if !slices.Contains(built, p.ID) {
			continue
		}
		for _, t := range p.Targets {
			if slices.Contains(t.Kind, "bin") {
				names = append(names, t.Name)
			}
		}
	}
	switch len(names) {
	case 0:
		return errors.New("the package has no binary target: an agent is a program (src/main.rs, or a [[bin]])")
	case 1:
		return nil
	}
	return fmt.Errorf("the package has %d binary targets (%s): an agent is one program; build a package with a single [[bin]]", len(names), strings.Join(names, ", "))
}

// binary returns the executable that cargo's JSON messages say the binary
// target built in dir became.
func (m *cargoMeta) binary(dir string, messages []byte) (string, error) {
	built := m.built(dir)
	var bins []string
	sc := bufio.NewScanner(bytes.NewReader(messages))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var msg struct {
			Reason     string  `json:"reason"`
			PackageID  string  `json:"package_id"`
			Executable *string `json:"executable"`
			Target     struct {
				Kind []string `json:"kind"`
			} `json:"target"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) != nil || msg.Reason != "compiler-artifact" || msg.Executable == nil {
			continue
		}
		if slices.Contains(built, msg.PackageID) && slices.Contains(msg.Target.Kind, "bin") {
			bins = append(bins, *msg.Executable)
		}
	}
	if len(bins) != 1 {
		return "", fmt.Errorf("cargo reported %d executables, want the package's one binary", len(bins))
	}
	return bins[0], nil
}
