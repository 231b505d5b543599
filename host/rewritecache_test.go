package host_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// TestRewriteCacheServesTheNextEngine: an engine with a cache directory
// keeps the module's rewrite there, the next engine on the directory (the
// next agentrt run) compiles it from the file, and a damaged or cut file
// is never compiled: the module is rewritten again, the file made whole,
// and every run ends as the first did.
func TestRewriteCacheServesTheNextEngine(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	code := testutil.BuildWAT(t, "host/testdata/wat/loop.wat")
	run := func(step string, wantRead uint64) {
		t.Helper()
		engine, err := host.NewEngine(ctx, host.EngineConfig{Kind: testutil.EngineKind(), CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer engine.Close(ctx)
		env := testutil.NewEnvOn(t, engine, host.Deps{}, host.Config{})
		res, err := env.Host.Run(ctx, host.RunSpec{Code: code})
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if res.Status != journal.StatusCompleted || string(res.Output) != "ok" {
			t.Fatalf("%s: the run ended %s with %q: %v", step, res.Status, res.Output, res.Err)
		}
		if got := engine.Stats().RewritesRead; got != wantRead {
			t.Fatalf("%s: the engine read %d rewrites from its cache, want %d", step, got, wantRead)
		}
	}
	// What a process killed while it wrote the cache left: an old one
	// goes when the next rewrite is kept, a fresh one (another process
	// writing now) stays.
	tmpDir := filepath.Join(dir, "agentrt-rewrite")
	if err := os.MkdirAll(tmpDir, 0o700); err != nil {
		t.Fatal(err)
	}
	stale, fresh := filepath.Join(tmpDir, ".tmp-1"), filepath.Join(tmpDir, ".tmp-2")
	for _, f := range []string{stale, fresh} {
		if err := os.WriteFile(f, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(stale, time.Now().Add(-2*time.Hour), time.Now().Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	run("first engine", 0)
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a temporary file two hours old is still in the cache: %v", err)
	}
	if err := os.Remove(fresh); err != nil {
		t.Fatalf("the fresh temporary file: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "agentrt-rewrite", "*"))
	if len(files) != 1 {
		t.Fatalf("the cache holds %v, want one rewrite", files)
	}
	file := files[0]
	kept, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	run("second engine", 1)

	// An engine with lower compile limits checks the module against
	// them: the rewrite kept for the default limits is not its.
	small, err := host.NewEngine(ctx, host.EngineConfig{Kind: testutil.EngineKind(), CacheDir: dir, Compile: host.CompileLimits{ModuleBytes: len(code) - 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close(ctx)
	env := testutil.NewEnvOn(t, small, host.Deps{}, host.Config{})
	if _, err := env.Host.Run(ctx, host.RunSpec{Code: code}); !errors.Is(err, host.ErrBadModule) || !strings.Contains(err.Error(), "ModuleBytes") {
		t.Fatalf("a run on an engine whose limit the module is over: %v, want it refused for CompileLimits.ModuleBytes", err)
	}
	if got := small.Stats().RewritesRead; got != 0 {
		t.Fatalf("the engine with lower limits read %d rewrites from the cache, want 0", got)
	}

	for _, damage := range []struct {
		name string
		fn   func([]byte) []byte
	}{
		{"a flipped byte in the module", func(b []byte) []byte { b = bytes.Clone(b); b[len(b)-3] ^= 0x40; return b }},
		{"a flipped byte in the header", func(b []byte) []byte { b = bytes.Clone(b); b[2] ^= 1; return b }},
		{"cut in half", func(b []byte) []byte { return b[:len(b)/2] }},
		{"empty", func([]byte) []byte { return nil }},
	} {
		if err := os.WriteFile(file, damage.fn(kept), 0o600); err != nil {
			t.Fatal(err)
		}
		run(damage.name, 0)
		now, err := os.ReadFile(file)
		if err != nil || !bytes.Equal(now, kept) {
			t.Fatalf("%s: the cache file was not made whole again (%d bytes, %v)", damage.name, len(now), err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "agentrt-rewrite", ".tmp-*")); len(left) > 0 {
		t.Fatalf("temporary files left in the cache: %v", left)
	}
}

// TestWarmCompilesOnceForTheRun: a module warmed for a run's grant is
// compiled once, and the run of it waits for that compilation; a run
// under other limits compiles its own.
func TestWarmCompilesOnceForTheRun(t *testing.T) {
	ctx := context.Background()
	engine, err := host.NewEngine(ctx, host.EngineConfig{Kind: testutil.EngineKind(), CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close(ctx)
	env := testutil.NewEnvOn(t, engine, host.Deps{}, host.Config{})
	code := testutil.BuildWAT(t, "host/testdata/wat/loop.wat")
	small := &host.Grant{Run: &host.RunGrant{}, Limits: &host.Limits{MemoryPages: 8}}
	engine.Warm(code, small)
	for i, c := range []struct {
		grant          *host.Grant
		compiles, hits uint64
	}{{small, 1, 1}, {nil, 2, 1}} {
		res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Grant: c.grant})
		if err != nil || res.Status != journal.StatusCompleted {
			t.Fatalf("run %d: %v %v", i, err, res)
		}
		if st := engine.Stats(); st.Compiles != c.compiles || st.Hits != c.hits {
			t.Fatalf("after run %d the engine compiled %d modules and found %d compiled, want %d and %d", i, st.Compiles, st.Hits, c.compiles, c.hits)
		}
	}
}
