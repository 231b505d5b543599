package host_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"runtime"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

func newKeepEngine(t *testing.T, cfg host.EngineConfig) *host.Engine {
	t.Helper()
	cfg.Kind = testutil.EngineKind()
	e, err := host.NewEngine(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

func wantStats(t *testing.T, what string, e *host.Engine, compiles, hits uint64) {
	t.Helper()
	st := e.Stats()
	if st.Compiles != compiles || st.Hits != hits {
		t.Fatalf("%s: %d compiles and %d hits, want %d and %d (%+v)", what, st.Compiles, st.Hits, compiles, hits, st)
	}
}

// A module compiled for one run is not compiled again for the next, named
// by its bytes or by its hash; a run under other module limits, or on an
// engine with other settings, gets a compilation of its own.
func TestCompiledModulesKept(t *testing.T) {
	ctx := context.Background()
	code := testutil.BuildWAT(t, "host/testdata/wat/loop.wat")
	sum := sha256.Sum256(code)
	e := newKeepEngine(t, host.EngineConfig{})
	env := testutil.NewEnvOn(t, e, host.Deps{}, host.Config{})
	run := func(spec host.RunSpec) {
		t.Helper()
		res, err := env.Host.Run(ctx, spec)
		if err != nil || res.Status != journal.StatusCompleted {
			t.Fatalf("run: %v %+v", err, res)
		}
		m, err := env.Store.Meta(ctx, res.Run)
		if err != nil || [32]byte(m.ModuleSHA256) != sum {
			t.Fatalf("run %s records module %x, want %x (%v)", res.Run, m.ModuleSHA256, sum, err)
		}
	}
	run(host.RunSpec{Code: code})
	wantStats(t, "first run", e, 1, 0)
	run(host.RunSpec{Code: code})
	wantStats(t, "second run by bytes", e, 1, 1)
	run(host.RunSpec{ModuleSHA256: sum[:]})
	wantStats(t, "third run by hash", e, 1, 2)

	g, err := host.ParseGrant([]byte("capabilities: {run: {}}\nlimits: {memory: 4MiB}\n"))
	if err != nil {
		t.Fatal(err)
	}
	run(host.RunSpec{ModuleSHA256: sum[:], Grant: g})
	wantStats(t, "a run under a lower memory limit", e, 2, 2)

	other := newKeepEngine(t, host.EngineConfig{MemoryLimitPages: 1024})
	oenv := testutil.NewEnvOn(t, other, host.Deps{}, host.Config{Limits: host.Limits{MemoryPages: 1024}})
	if res, err := oenv.Host.Run(ctx, host.RunSpec{Code: code}); err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run on the other engine: %v %+v", err, res)
	}
	wantStats(t, "the other engine", other, 1, 0)
	wantStats(t, "the first engine after the other ran", e, 2, 2)
}

// A run named by a hash the store lacks is refused, with ErrUnknownModule
// (a not-found error), also when the engine has the module compiled (from
// bytes the host never stored); bytes and a hash that disagree are refused.
func TestStartByHashRefused(t *testing.T) {
	ctx := context.Background()
	code := testutil.BuildWAT(t, "host/testdata/wat/loop.wat")
	sum := sha256.Sum256(code)
	e := newKeepEngine(t, host.EngineConfig{})
	env := testutil.NewEnvOn(t, e, host.Deps{}, host.Config{})

	_, err := env.Host.Start(ctx, host.RunSpec{ModuleSHA256: sum[:]})
	if !errors.Is(err, host.ErrUnknownModule) || !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("start by a hash never stored: %v, want ErrUnknownModule", err)
	}
	if _, err := e.Compile(ctx, code); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Host.Start(ctx, host.RunSpec{ModuleSHA256: sum[:]}); !errors.Is(err, host.ErrUnknownModule) {
		t.Fatalf("start by the hash of a module compiled and not stored: %v, want ErrUnknownModule", err)
	}
	wrong := sha256.Sum256([]byte("another module"))
	if _, err := env.Host.Start(ctx, host.RunSpec{Code: code, ModuleSHA256: wrong[:]}); !errors.Is(err, host.ErrModuleMismatch) {
		t.Fatalf("start with bytes and another hash: %v, want ErrModuleMismatch", err)
	}
	if _, err := env.Host.Start(ctx, host.RunSpec{ModuleSHA256: sum[:4]}); err == nil {
		t.Fatal("start by a 4-byte hash: no error")
	}
	runs, err := env.Store.Runs(ctx)
	if err != nil || len(runs) != 0 {
		t.Fatalf("refused starts left %d runs (%v)", len(runs), err)
	}
	if ok, err := env.Host.HasModule(ctx, sum[:]); ok || err != nil {
		t.Fatalf("HasModule after refusals: %v %v, want false", ok, err)
	}
	got, err := env.Host.PutModule(ctx, code)
	if err != nil || [32]byte(got) != sum {
		t.Fatalf("PutModule: %x %v", got, err)
	}
	if ok, err := env.Host.HasModule(ctx, sum[:]); !ok || err != nil {
		t.Fatalf("HasModule after PutModule: %v %v, want true", ok, err)
	}
	if _, err := env.Host.PutModule(ctx, []byte("not wasm")); !errors.Is(err, host.ErrNotWasm) {
		t.Fatalf("PutModule of text: %v, want ErrNotWasm", err)
	}
}

// The engine keeps at most KeepCompiled modules, dropping the least
// recently used; a run started before its module was dropped still
// executes.
func TestCompiledModulesBounded(t *testing.T) {
	ctx := context.Background()
	if _, err := host.NewEngine(ctx, host.EngineConfig{KeepCompiled: -1}); err == nil {
		t.Fatal("KeepCompiled -1: no error")
	}
	loop := testutil.BuildWAT(t, "host/testdata/wat/loop.wat")
	grow := testutil.BuildWAT(t, "host/testdata/wat/grow.wat")
	spin := testutil.BuildWAT(t, "host/testdata/wat/spin.wat")
	e := newKeepEngine(t, host.EngineConfig{KeepCompiled: 2})
	env := testutil.NewEnvOn(t, e, host.Deps{}, host.Config{})
	st, err := env.Host.Start(ctx, host.RunSpec{Code: loop})
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range [][]byte{grow, spin} {
		if _, err := e.Compile(ctx, code); err != nil {
			t.Fatal(err)
		}
	}
	if s := e.Stats(); s.Kept != 2 || s.Evicted != 1 || s.Limit != 2 {
		t.Fatalf("after three modules on an engine keeping two: %+v, want 2 kept, 1 evicted", s)
	}
	runtime.GC()
	runtime.GC()
	res, err := st.Execute(ctx)
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("the run whose module was dropped: %v %+v", err, res)
	}
	if _, err := e.Compile(ctx, spin); err != nil {
		t.Fatal(err)
	}
	wantStats(t, "spin again (kept)", e, 3, 1)
	if _, err := env.Host.Run(ctx, host.RunSpec{Code: loop}); err != nil {
		t.Fatal(err)
	}
	wantStats(t, "loop again (dropped)", e, 4, 1)
	if s := e.Stats(); s.Kept != 2 || s.Evicted != 2 {
		t.Fatalf("after loop again: %+v, want 2 kept, 2 evicted", s)
	}
}
