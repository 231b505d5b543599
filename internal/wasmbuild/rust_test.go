package wasmbuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// writeTree writes files (slash-separated names) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// ownTargetDir makes cargo use each package's own target directory, as
// agentrt build does when the user sets none.
func ownTargetDir(t *testing.T) {
	t.Setenv("CARGO_TARGET_DIR", "")
	os.Unsetenv("CARGO_TARGET_DIR")
}

func toolchainError(t *testing.T, err error) {
	t.Helper()
	var te *ToolchainError
	if errors.As(err, &te) {
		t.Fatalf("%v\nhint: %s", err, te.Hint)
	}
	t.Fatal(err)
}

// An agent using the SDK and a path dependency of its own. Indexing can
// panic, so source paths are in the module (panic locations) unless the
// build remaps them.
var rustTree = map[string]string{
	"agent/lib/Cargo.toml": "[package]\nname = \"lib\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
	"agent/lib/src/lib.rs": "pub fn at(v: &[u8], i: usize) -> u8 {\n    v[i]\n}\n",
	"agent/Cargo.toml": "[package]\nname = \"agent\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n" +
		"[dependencies]\nagentrt = \"0.1\"\nlib = { path = \"lib\" }\n",
	"agent/src/main.rs": "fn main() {\n    let n = std::env::args().count();\n    let _ = agentrt::log(agentrt::Level::INFO, \"hi\");\n" +
		"    std::process::exit(lib::at(&[1, 2, 3], n) as i32);\n}\n",
}

// sdkFS is the SDK crate of this checkout, as the agentrt binary would
// embed it.
func sdkFS(t *testing.T) fs.FS {
	t.Helper()
	old := RustSDK
	t.Cleanup(func() { RustSDK = old })
	return os.DirFS(filepath.Join("..", "..", "guest-sdk", "rust"))
}

// TestRustReproducible builds the same sources in two directories, one
// with cargo's target directory inside the package and one outside it, the
// SDK served from RustSDK (as to an agent outside a checkout): the module
// bytes must not depend on where they lie, or the module hash in a run
// header would.
func TestRustReproducible(t *testing.T) {
	RustSDK = sdkFS(t)
	var builds [][]byte
	var roots []string
	for i := range 2 {
		root := t.TempDir()
		if i == 0 {
			ownTargetDir(t)
		} else {
			t.Setenv("CARGO_TARGET_DIR", filepath.Join(t.TempDir(), "elsewhere"))
		}
		writeTree(t, root, rustTree)
		out := filepath.Join(root, "agent.wasm")
		if err := Rust(context.Background(), filepath.Join(root, "agent"), out); err != nil {
			toolchainError(t, err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		builds, roots = append(builds, b), append(roots, root)
	}
	if !bytes.Equal(builds[0], builds[1]) {
		t.Fatalf("two builds of the same sources differ (%d and %d bytes)", len(builds[0]), len(builds[1]))
	}
	for _, r := range roots {
		if bytes.Contains(builds[0], []byte(r)) {
			t.Fatalf("the module holds its source path %s", r)
		}
	}
	if home := cargoHome(); home != "" && bytes.Contains(builds[0], []byte(home)) {
		t.Fatalf("the module holds CARGO_HOME %s", home)
	}
	for _, loc := range []string{"lib/src/lib.rs", "agentrt-0.1.0/src/cbor.rs"} {
		if !bytes.Contains(builds[0], []byte(loc)) {
			t.Fatalf("the module lacks a panic location as %s; did the remapping change?", loc)
		}
	}
	// Debug info is stripped; the name section stays, for stack traces.
	if bytes.Contains(builds[0], []byte(".debug_info")) || !bytes.Contains(builds[0], []byte("name")) {
		t.Fatalf("want no DWARF and a name section")
	}
}

func TestRustPackageShape(t *testing.T) {
	lib := "[package]\nname = \"x\"\nversion = \"0.1.0\"\nedition = \"2021\"\n"
	tests := []struct {
		name    string
		files   map[string]string
		wantErr string
	}{
		{"no Cargo.toml", map[string]string{"src/main.rs": "fn main() {}\n"}, "no Cargo.toml in"},
		{"a library", map[string]string{"Cargo.toml": lib, "src/lib.rs": ""}, "has no binary target"},
		{"two binaries", map[string]string{"Cargo.toml": lib, "src/bin/a.rs": "fn main() {}\n", "src/bin/b.rs": "fn main() {}\n"},
			"has 2 binary targets (a, b)"},
		{"a workspace of two agents", map[string]string{"Cargo.toml": "[workspace]\nmembers = [\"a\", \"b\"]\n",
			"a/Cargo.toml": strings.Replace(lib, "\"x\"", "\"a\"", 1), "a/src/main.rs": "fn main() {}\n",
			"b/Cargo.toml": strings.Replace(lib, "\"x\"", "\"b\"", 1), "b/src/main.rs": "fn main() {}\n"},
			"has 2 binary targets (a, b)"},
		{"a compile error", map[string]string{"Cargo.toml": lib, "src/main.rs": "fn main() {\n    let x: u8 = \"no\";\n}\n"},
			"src/main.rs:2"},
		{"a dependency the registry would serve", map[string]string{"Cargo.toml": lib + "\n[dependencies]\nserde = \"1\"\n", "src/main.rs": "fn main() {}\n"},
			"no matching package named `serde`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv("CARGO_TARGET_DIR", filepath.Join(dir, "target"))
			writeTree(t, dir, tt.files)
			err := Rust(context.Background(), dir, filepath.Join(dir, "x.wasm"))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
			}
			if strings.Contains(tt.wantErr, "serde") && !errors.Is(err, ErrRustRegistry) {
				t.Fatalf("got %v, want ErrRustRegistry", err)
			}
			if _, err := os.Stat(filepath.Join(dir, "x.wasm")); err == nil {
				t.Fatal("a failed build wrote its output")
			}
		})
	}
}

// fakeRustc writes a rustc at dir/bin that reports version and a sysroot
// at dir/sysroot holding the standard library of targets, with rust-lld
// in the toolchain's bin directory when lld is true, and a cargo beside it.
func fakeRustc(t *testing.T, dir, version string, lld bool, targets ...string) string {
	t.Helper()
	sysroot := filepath.Join(dir, "sysroot")
	files := map[string]string{
		"bin/rustc": fmt.Sprintf("#!/bin/sh\ncase \"$1\" in\n-V) echo %q ;;\n--print) echo %q ;;\nesac\n", version, sysroot),
		"bin/cargo": "#!/bin/sh\nexit 1\n",
	}
	for _, target := range targets {
		files["sysroot/lib/rustlib/"+target+"/lib/libstd-0123.rlib"] = ""
	}
	if lld {
		files["sysroot/lib/rustlib/x86_64-unknown-linux-gnu/bin/rust-lld"] = ""
	}
	writeTree(t, dir, files)
	for _, f := range []string{"bin/rustc", "bin/cargo"} {
		if err := os.Chmod(filepath.Join(dir, f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "bin", "rustc")
}

// TestRustToolchainChoice: the rustc on PATH comes first, but only if it
// has a wasm standard library; then the fallback (/usr/bin/rustc, where
// Debian's is); a missing piece is a ToolchainError naming what to install.
func TestRustToolchainChoice(t *testing.T) {
	for _, k := range []string{"AGENTRT_RUSTC", "RUSTC", "AGENTRT_CARGO"} {
		t.Setenv(k, "")
	}
	old := fallbackRustc
	t.Cleanup(func() { fallbackRustc = old })
	ctx := context.Background()

	noWasm := fakeRustc(t, t.TempDir(), "rustc 1.95.0 (rustup)", true, "x86_64-unknown-linux-gnu")
	debian := fakeRustc(t, t.TempDir(), "rustc 1.63.0", true, "wasm32-wasi")
	both := fakeRustc(t, t.TempDir(), "rustc 1.80.0", true, "wasm32-wasi", "wasm32-wasip1")
	noLinker := fakeRustc(t, t.TempDir(), "rustc 1.63.0", false, "wasm32-wasi")
	dir := t.TempDir()

	t.Run("PATH without wasm, fallback with it", func(t *testing.T) {
		t.Setenv("PATH", filepath.Dir(noWasm))
		fallbackRustc = debian
		tc, err := FindRust(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		if tc.Rustc != debian || tc.Cargo != filepath.Join(filepath.Dir(debian), "cargo") || tc.Target != "wasm32-wasi" || tc.Version != "rustc 1.63.0" {
			t.Fatalf("chose %+v, want the fallback's rustc and cargo for wasm32-wasi", tc)
		}
	})
	t.Run("the newer target name first", func(t *testing.T) {
		t.Setenv("PATH", filepath.Dir(both))
		fallbackRustc = debian
		tc, err := FindRust(ctx, dir)
		if err != nil || tc.Rustc != both || tc.Target != "wasm32-wasip1" {
			t.Fatalf("chose %+v, %v; want the PATH's rustc for wasm32-wasip1", tc, err)
		}
	})
	t.Run("none with wasm", func(t *testing.T) {
		t.Setenv("PATH", filepath.Dir(noWasm))
		fallbackRustc = noWasm
		_, err := FindRust(ctx, dir)
		var te *ToolchainError
		if !errors.Is(err, ErrNoRustWASI) || !errors.As(err, &te) || !strings.Contains(te.Hint, "libstd-rust-dev-wasm32") ||
			!strings.Contains(err.Error(), noWasm+": rustc 1.95.0 (rustup) has no standard library for wasm32-wasi") {
			t.Fatalf("got %v (hint %v), want ErrNoRustWASI naming what was tried and a hint naming libstd-rust-dev-wasm32", err, te)
		}
	})
	t.Run("no rustc", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		fallbackRustc = filepath.Join(t.TempDir(), "rustc")
		_, err := FindRust(ctx, dir)
		if !errors.Is(err, ErrNoRustc) {
			t.Fatalf("got %v, want ErrNoRustc", err)
		}
	})
	t.Run("AGENTRT_RUSTC names nothing", func(t *testing.T) {
		t.Setenv("AGENTRT_RUSTC", filepath.Join(t.TempDir(), "rustc"))
		fallbackRustc = debian
		_, err := FindRust(ctx, dir)
		if !errors.Is(err, ErrNoRustc) {
			t.Fatalf("got %v, want ErrNoRustc", err)
		}
	})
	t.Run("AGENTRT_RUSTC without wasm is not passed over", func(t *testing.T) {
		t.Setenv("AGENTRT_RUSTC", noWasm)
		fallbackRustc = debian
		_, err := FindRust(ctx, dir)
		if !errors.Is(err, ErrNoRustWASI) {
			t.Fatalf("got %v, want ErrNoRustWASI", err)
		}
	})
	t.Run("no linker", func(t *testing.T) {
		t.Setenv("PATH", filepath.Dir(noLinker))
		fallbackRustc = noLinker
		_, err := FindRust(ctx, dir)
		var te *ToolchainError
		if !errors.Is(err, ErrNoRustLinker) || !errors.As(err, &te) || !strings.Contains(te.Hint, "apt-get install lld") {
			t.Fatalf("got %v, want ErrNoRustLinker with a hint naming lld", err)
		}
	})
}

// TestRustWithoutSDK: an agent that names agentrt as a registry crate,
// built outside a checkout by a binary that embeds no SDK, is told where
// the crate comes from.
func TestRustWithoutSDK(t *testing.T) {
	old := RustSDK
	RustSDK = nil
	t.Cleanup(func() { RustSDK = old })
	t.Chdir(t.TempDir())
	dir := t.TempDir()
	t.Setenv("CARGO_TARGET_DIR", filepath.Join(dir, "target"))
	writeTree(t, dir, map[string]string{
		"Cargo.toml":  "[package]\nname = \"x\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nagentrt = \"0.1\"\n",
		"src/main.rs": "fn main() {}\n",
	})
	err := Rust(context.Background(), dir, filepath.Join(dir, "x.wasm"))
	var te *ToolchainError
	if !errors.Is(err, ErrNoRustSDK) || !errors.As(err, &te) || !strings.Contains(te.Hint, "path = ") {
		t.Fatalf("got %v, want ErrNoRustSDK with a hint naming the path form", err)
	}
}

// TestStageRustSDK: the staged copy follows the crate, file for file, and
// a file that did not change is not written again (cargo would rebuild the
// crate on every build).
func TestStageRustSDK(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{
		"Cargo.toml":      "[package]\nname = \"agentrt\"\nversion = \"0.1.0\"\n\n[lib]\npath = \"src/lib.rs\"\n",
		"src/lib.rs":      "mod a;\n",
		"src/a.rs":        "",
		"vectors_test.go": "package x\n",
	})
	root := filepath.Join(t.TempDir(), "vendor")
	if _, err := stageRustSDK(os.DirFS(src), root); err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(root, "agentrt-0.1.0")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(pkg, "src", "lib.rs"), old, old); err != nil {
		t.Fatal(err)
	}
	writeTree(t, src, map[string]string{"src/lib.rs": "mod b;\n", "src/b.rs": ""})
	if err := os.Remove(filepath.Join(src, "src", "a.rs")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(pkg, "Cargo.toml"), old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := stageRustSDK(os.DirFS(src), root); err != nil {
		t.Fatal(err)
	}
	var files []string
	err := filepath.WalkDir(pkg, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(pkg, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".cargo-checksum.json", "Cargo.toml", "src/b.rs", "src/lib.rs"}
	if !slices.Equal(files, want) {
		t.Fatalf("staged %v, want %v", files, want)
	}
	if b, _ := os.ReadFile(filepath.Join(pkg, "src", "lib.rs")); string(b) != "mod b;\n" {
		t.Fatalf("staged lib.rs %q, want the new one", b)
	}
	if fi, err := os.Stat(filepath.Join(pkg, "Cargo.toml")); err != nil || !fi.ModTime().Equal(old) {
		t.Fatalf("the unchanged Cargo.toml was written again (%v)", err)
	}
}

// TestRustWorkspaceMember builds one member of a workspace of two agents:
// the member's binary, not a complaint about the other's.
func TestRustWorkspaceMember(t *testing.T) {
	lib := "[package]\nname = \"NAME\"\nversion = \"0.1.0\"\nedition = \"2021\"\n"
	dir := t.TempDir()
	t.Setenv("CARGO_TARGET_DIR", filepath.Join(dir, "target"))
	writeTree(t, dir, map[string]string{
		"Cargo.toml":    "[workspace]\nmembers = [\"a\", \"b\"]\n",
		"a/Cargo.toml":  strings.Replace(lib, "NAME", "a", 1),
		"a/src/main.rs": "fn main() {\n    std::process::exit(3);\n}\n",
		"b/Cargo.toml":  strings.Replace(lib, "NAME", "b", 1),
		"b/src/main.rs": "fn main() {}\n",
	})
	out := filepath.Join(dir, "a.wasm")
	if err := Rust(context.Background(), filepath.Join(dir, "a"), out); err != nil {
		toolchainError(t, err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("_ZN1a4main")) {
		t.Fatalf("the module built is not a's (no a::main in its name section)")
	}
}
