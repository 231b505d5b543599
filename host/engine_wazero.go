package host

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/agentrt/agentrt/abi"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// wazeroRuntime is the default engine adapter: pure Go, and the reference
// the virtual WASI of the other adapters is tested against (wazero's own
// wasi_snapshot_preview1, configured by moduleConfig).
type wazeroRuntime struct {
	rt wazero.Runtime
	// instrument says modules are rewritten with yields (always, but in a
	// benchmark of their cost: internal/benchknobs).
	instrument bool
	// memories keeps the memories of ended instances for the next
	// (EngineConfig.KeepMemory).
	memories *memoryPool
}

func newWazero(ctx context.Context, cfg EngineConfig) (*wazeroRuntime, error) {
	rc := wazero.NewRuntimeConfigCompiler()
	if !platformCompiles() {
		rc = wazero.NewRuntimeConfigInterpreter()
	}
	rc = rc.WithMemoryLimitPages(cfg.MemoryLimitPages)
	if cfg.CacheDir != "" {
		cache, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("host: compilation cache %s: %w", cfg.CacheDir, err)
		}
		rc = rc.WithCompilationCache(cache)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, err
	}
	for _, c := range abi.Capabilities {
		if err := instantiateCapability(ctx, rt, c); err != nil {
			rt.Close(ctx)
			return nil, err
		}
	}
	if err := instantiateYield(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, err
	}
	return &wazeroRuntime{rt: rt, instrument: !cfg.uninterruptible, memories: newMemoryPool(cfg.KeepMemory)}, nil
}

// memoryStats implements memoryKeeper.
func (w *wazeroRuntime) memoryStats() (MemoryStats, bool) { return w.memories.stats() }

func (w *wazeroRuntime) close(ctx context.Context) error {
	err := w.rt.Close(ctx)
	w.memories.close()
	return err
}

// wazero cannot interrupt compiled code from outside but by exiting to Go
// at every loop iteration (WithCloseOnContextDone: 23 times slower on a
// tight loop here), and its compiled code cannot be preempted by the Go
// runtime, so a guest that never calls the host would also hold up every
// garbage collection of the process. The host's rewrite makes every guest
// call yield regularly instead (wasmModule.rewrite).
func (w *wazeroRuntime) instruments() bool { return w.instrument }

// compileWorkers is how many goroutines compile a module: with more than
// one, wazero checks its context between functions, so a compilation past
// its time limit stops.
const compileWorkers = 2

func (w *wazeroRuntime) compile(ctx context.Context, code []byte, m *Module) error {
	cm, err := w.rt.CompileModule(experimental.WithCompilationWorkers(ctx, compileWorkers), code)
	if err != nil {
		return err
	}
	m.Name, m.compiled = cm.Name(), cm
	// The engine drops a module it keeps no more (Engine.evict) while
	// runs may still execute it: its code is released once none refers
	// to m.
	runtime.AddCleanup(m, func(cm wazero.CompiledModule) { cm.Close(context.Background()) }, cm)
	return nil
}

func (w *wazeroRuntime) instantiate(ctx context.Context, m *Module, s *session) (instance, error) {
	// No guest code runs during instantiation (a module with a start
	// function is refused), so no call can come before s.mem is set; a
	// call that did would fault.
	s.mem = noMemory{}
	actx, giveBack := withMemoryAllocator(ctx, w.memories)
	release := func() {
		// The memory may serve another instance from here on.
		s.mem = noMemory{}
		giveBack()
	}
	inst, err := w.rt.InstantiateModule(actx, m.compiled.(wazero.CompiledModule), moduleConfig(s))
	if err != nil {
		release()
		return nil, err
	}
	// The capability modules are called by this instance only, so its
	// memory is the one every call of the segment reads and writes.
	// (Memory() would return a non-nil interface holding a nil pointer
	// for a module without memory; ExportedMemory returns nil.)
	mem := inst.ExportedMemory("memory")
	if mem == nil {
		inst.Close(ctx)
		release()
		return nil, errors.New("the module exports no memory named \"memory\"")
	}
	s.mem = mem
	return wazeroInstance{inst, release}, nil
}

type wazeroInstance struct {
	api.Module
	// release unmaps the instance's memory, after it is closed.
	release func()
}

// start runs _start; wazero turns a host function's panic into an error
// that wraps it and ends with the wasm stack trace.
func (i wazeroInstance) start(ctx context.Context) error {
	_, err := i.ExportedFunction("_start").Call(ctx)
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		return &exitError{code: exit.ExitCode()}
	}
	return err
}

func (i wazeroInstance) close(ctx context.Context) {
	i.Close(ctx)
	i.release()
}

// moduleConfig is the virtual WASI (see newVirtualWASI) as wazero's
// wasi_snapshot_preview1 serves it: the same clock, random stream and
// standard streams, no filesystem, environment or network.
func moduleConfig(s *session) wazero.ModuleConfig {
	v := newVirtualWASI(s)
	return wazero.NewModuleConfig().
		WithName("").
		WithArgs(v.args...).
		WithStdout(v.stdout).
		WithStderr(v.stderr).
		WithRandSource(v.rand).
		WithNanotime(v.clock.nanotime, 1).
		WithWalltime(v.clock.walltime, 1).
		WithNanosleep(v.clock.sleep).
		WithOsyield(func() {}).
		WithStartFunctions()
}

// instantiateYield registers the host module that instrumented guests
// call to yield (wasmModule.rewrite): a guest is stopped there, between two
// calls, as at a call; otherwise yield returns the next countdown.
func instantiateYield(ctx context.Context, rt wazero.Runtime) error {
	_, err := rt.NewHostModuleBuilder(yieldModule).
		NewFunctionBuilder().
		WithGoFunction(api.GoFunc(func(ctx context.Context, stack []uint64) {
			if err := sessionFrom(ctx).checkStop(); err != nil {
				panic(err)
			}
			stack[0] = yieldInterval
		}), nil, []api.ValueType{api.ValueTypeI32}).
		Export(yieldFunc).
		Instantiate(ctx)
	return err
}

// instantiateCapability registers the host module of capability c. Its call
// and take functions serve every run; each finds its session in the context
// the guest was started with, and the memory in the session.
func instantiateCapability(ctx context.Context, rt wazero.Runtime, c abi.Capability) error {
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	ci := capIndex(c)
	_, err := rt.NewHostModuleBuilder(c.Module()).
		NewFunctionBuilder().
		WithGoFunction(api.GoFunc(func(ctx context.Context, stack []uint64) {
			s := sessionFrom(ctx)
			stack[0] = uint64(s.call(ctx, ci,
				api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), api.DecodeU32(stack[2]),
				api.DecodeU32(stack[3]), api.DecodeU32(stack[4])))
		}), []api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i64}).
		WithParameterNames("op", "req_ptr", "req_len", "resp_ptr", "resp_cap").
		Export(abi.FuncCall).
		NewFunctionBuilder().
		WithGoFunction(api.GoFunc(func(ctx context.Context, stack []uint64) {
			s := sessionFrom(ctx)
			stack[0] = uint64(s.take(ci, api.DecodeU32(stack[0]), api.DecodeU32(stack[1])))
		}), []api.ValueType{i32, i32}, []api.ValueType{i64}).
		WithParameterNames("resp_ptr", "resp_cap").
		Export(abi.FuncTake).
		Instantiate(ctx)
	return err
}
