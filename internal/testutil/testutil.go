// Package testutil builds the wasm agents that tests run, once per test
// binary, and opens throwaway stores and hosts.
package testutil

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/wasmbuild"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
)

var (
	mu    sync.Mutex
	built = map[string][]byte{}
)

// RepoRoot returns the repository root.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// BuildGo builds the Go agent in dir (relative to the repository root) and
// returns its bytes. Builds are memoized per test binary.
func BuildGo(t testing.TB, dir string) []byte {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if b, ok := built[dir]; ok {
		return b
	}
	out := filepath.Join(t.TempDir(), filepath.Base(dir)+".wasm")
	if err := wasmbuild.Go(context.Background(), filepath.Join(RepoRoot(), dir), out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	built[dir] = b
	return b
}

// BuildC builds the C agent in dir (relative to the repository root), with
// clang and wasi-libc, and returns its bytes. Builds are memoized per test
// binary, with BuildGo's.
func BuildC(t testing.TB, dir string) []byte {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if b, ok := built["c:"+dir]; ok {
		return b
	}
	out := filepath.Join(t.TempDir(), filepath.Base(dir)+".wasm")
	if err := wasmbuild.C(context.Background(), filepath.Join(RepoRoot(), dir), out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	built["c:"+dir] = b
	return b
}

// Env is a host on a fresh store in a temporary directory.
type Env struct {
	Dir    string
	Store  *badgerstore.Store
	Engine *host.Engine
	Host   *host.Host
	Key    ed25519.PrivateKey
}

// Stderr is what run wrote to its standard error, as its event log holds
// it: the guest's own account of a failure, for a test's message.
func (e *Env) Stderr(t testing.TB, run journal.RunID) string {
	t.Helper()
	out, err := host.Stderr(context.Background(), e.Store, run, 0)
	if err != nil {
		return fmt.Sprintf("(reading the events of run %s: %v)", run, err)
	}
	return out
}

// testCompile are the compile limits of the tests' engines: the default
// ones but for the time, since a Go guest compiled under the race detector
// on a loaded 2-core machine took over the 30 s a host allows, and these
// tests are not about that limit (host's compile-limit tests make engines
// of their own).
var testCompile = host.CompileLimits{Timeout: 10 * time.Minute}

var (
	engineOnce sync.Once
	engine     *host.Engine
)

// EngineKind is the engine tests run on: $AGENTRT_TEST_ENGINE, or the
// default (wazero). AGENTRT_TEST_ENGINE=wasmtime needs the build tag
// wasmtime.
func EngineKind() string { return os.Getenv("AGENTRT_TEST_ENGINE") }

// CompileCache is the tests' compilation cache, which the engines of
// NewEngine and SharedEngine use and a test's cells may share: a module
// is compiled once (its key holds the module's hash and wazero's version),
// not by every engine that runs it.
func CompileCache() string { return filepath.Join(os.TempDir(), "agentrt-test-cache") }

// NewEngine starts an engine of kind with the tests' compilation cache;
// it closes when t ends.
func NewEngine(t testing.TB, kind string) *host.Engine {
	t.Helper()
	e, err := host.NewEngine(context.Background(), host.EngineConfig{Kind: kind, CacheDir: CompileCache(), Compile: testCompile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

// SharedEngine returns one engine (of EngineKind) for the whole test
// binary, compiling each module once.
func SharedEngine(t testing.TB) *host.Engine {
	engineOnce.Do(func() {
		var err error
		engine, err = host.NewEngine(context.Background(), host.EngineConfig{Kind: EngineKind(), CacheDir: CompileCache(), Compile: testCompile})
		if err != nil {
			t.Fatal(err)
		}
	})
	return engine
}

// NewEnv opens a fresh store and host. They close when t ends.
func NewEnv(t testing.TB, deps host.Deps, cfg host.Config) *Env {
	t.Helper()
	return NewEnvOn(t, SharedEngine(t), deps, cfg)
}

// NewEnvOn is NewEnv with a host on engine.
func NewEnvOn(t testing.TB, engine *host.Engine, deps host.Deps, cfg host.Config) *Env {
	t.Helper()
	dir := t.TempDir()
	st, err := badgerstore.Open(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	deps.Store, deps.KV, deps.Events, deps.Key = st, st, st, key
	h, err := host.New(engine, deps, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Dir: dir, Store: st, Engine: engine, Host: h, Key: key}
}

// BuildVariant builds the Go agent in dir (relative to the repository root)
// with the first occurrence of old in its main.go replaced by new: the same
// agent rebuilt with one changed line.
func BuildVariant(t testing.TB, dir, old, new string) []byte {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(RepoRoot(), dir, "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(src), old, new, 1)
	if changed == string(src) {
		t.Fatalf("%s/main.go does not contain %q any more", dir, old)
	}
	// The copy must live inside the module to import the guest SDK; a
	// leading dot keeps it out of ./... patterns.
	tmp, err := os.MkdirTemp(RepoRoot(), ".variant-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	if err := os.WriteFile(filepath.Join(tmp, "main.go"), []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "variant.wasm")
	if err := wasmbuild.Go(context.Background(), tmp, out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// BuildWAT assembles a WebAssembly text file (relative to the repository
// root) with wat2wasm, from the wabt package that make deps installs.
func BuildWAT(t testing.TB, file string) []byte {
	t.Helper()
	if _, err := exec.LookPath("wat2wasm"); err != nil {
		t.Fatal("wat2wasm is not on PATH: run make deps (or apt-get install wabt)")
	}
	out := filepath.Join(t.TempDir(), filepath.Base(file)+".wasm")
	cmd := exec.Command("wat2wasm", filepath.Join(RepoRoot(), file), "-o", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm %s: %v\n%s", file, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
