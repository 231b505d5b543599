package host

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/agentrt/agentrt/internal/benchknobs"
)

// Engine kinds, for EngineConfig.Kind.
const (
	// EngineWazero is the default engine: pure Go, on every platform.
	EngineWazero = "wazero"
	// EngineWasmtime is wasmtime (Cranelift) through wasmtime-go: cgo, in
	// builds with the build tag wasmtime only.
	EngineWasmtime = "wasmtime"
)

// EngineKinds lists the engine kinds NewEngine knows, the default first.
var EngineKinds = []string{EngineWazero, EngineWasmtime}

// EngineConfig configures an Engine. The zero value compiles with wazero's
// optimizing compiler and keeps no on-disk cache.
type EngineConfig struct {
	// Kind is the WebAssembly engine: EngineWazero (default, also when
	// empty) or EngineWasmtime, which needs a build with the tag wasmtime.
	// Every engine serves the same ABI and the same virtual WASI, so a run
	// recorded under one replays under the other.
	Kind string
	// CacheDir holds the engine's compilation cache; a module compiled once
	// is loaded from it in a fraction of the time. Empty: no disk cache.
	CacheDir string
	// MemoryLimitPages caps a guest's linear memory (64 KiB pages), for
	// every run: a run's own limit (Limits.MemoryPages) is lower or
	// equal. Zero: 16384 pages (1 GiB).
	MemoryLimitPages uint32
	// Compile bounds what compiling a module may cost; zero fields take
	// the defaults of DefaultCompileLimits.
	Compile CompileLimits
	// KeepCompiled is the most compiled modules the engine keeps in
	// memory, so that a run of a module compiled before starts without
	// compiling; past it the least recently used is dropped (its memory
	// is freed once no run executes it). Zero: DefaultKeepCompiled. A
	// compiled module is one per module hash and per module limits of
	// the run (a grant's limits section rewrites the module); the
	// engine's own settings are the engine's, so two engines share none.
	KeepCompiled int
	// KeepMemory is the most bytes of guest memory, zeroed, that the
	// engine keeps from ended instances for the next ones (wazero on
	// Linux): a Go agent's instance starts some 7 ms sooner on a
	// memory whose pages are already the process's than on fresh ones.
	// Only the pages an instance touched are counted and zeroed. Zero:
	// DefaultKeepMemory; below zero: none kept, every memory is given
	// back to the system when its instance ends. Engine.MemoryStats
	// shows what is kept.
	KeepMemory int64

	// uninterruptible is internal/benchknobs.NoGuestInterrupt when the
	// engine was made: guests cannot be stopped between calls.
	uninterruptible bool
}

// DefaultKeepCompiled is the number of compiled modules an engine keeps
// in memory when EngineConfig.KeepCompiled is zero.
const DefaultKeepCompiled = 32

// DefaultKeepMemory is the bytes of zeroed guest memory an engine keeps
// for its next instances when EngineConfig.KeepMemory is zero.
const DefaultKeepMemory = 64 << 20

// ErrEngineUnavailable is returned by NewEngine for an engine kind this
// binary was built without (wasmtime without the build tag).
var ErrEngineUnavailable = errors.New("engine not built in")

// Engine compiles and instantiates agent modules. One engine serves many
// runs at once. It is engine-neutral: the WebAssembly runtime behind it
// (wazero, or wasmtime in builds with the tag wasmtime) is a runtime
// adapter, and every adapter serves the same capability modules and the
// same virtual WASI.
type Engine struct {
	kind   string
	rt     wasmRuntime
	limits CompileLimits
	// maxPages is the engine's cap on a memory (EngineConfig.MemoryLimitPages).
	maxPages uint32

	// compiling holds a token for every compilation under way: a few at
	// a time, so that modules submitted together queue instead of taking
	// every core of the host.
	compiling chan struct{}
	// instantiating holds a token for every instantiation under way: at
	// most GOMAXPROCS. Instantiating a large module (a Go agent) takes
	// milliseconds of CPU and allocation; many at once (a burst of
	// submissions) shared the cores between them and with the daemon's
	// API, and every run started late (bench figure 17c: 16 Go agents at
	// once waited 0.8 s for their start to be answered, 0.17 s with the
	// bound, on a loaded 2-core machine).
	instantiating chan struct{}
	// background counts compilations still running after their caller
	// gave up on them (CompileLimits.Timeout); Close waits for them, since
	// a runtime closed under a compilation panics when it finishes.
	background sync.WaitGroup

	mu       sync.Mutex
	compiled map[compileKey]*compiling
	// keep bounds compiled (EngineConfig.KeepCompiled); tick orders its
	// entries by their last use, and stats counts what it did.
	keep  int
	tick  uint64
	stats EngineStats
	// rewrites keeps rewritten modules in the cache directory; its dir
	// is empty without one.
	rewrites rewriteCache
}

// EngineStats counts what an engine's compiled modules did, for a daemon
// to show and a test to read.
type EngineStats struct {
	// Compiles is the number of modules compiled (or loaded from the
	// disk cache, which also takes the module's check and rewrite), and
	// Hits the number of runs that found theirs compiled already.
	Compiles uint64 `json:"compiles"`
	Hits     uint64 `json:"hits"`
	// Kept is the number of compiled modules in memory now, at most
	// Limit (EngineConfig.KeepCompiled); Evicted the number dropped to
	// stay within it.
	Kept    int    `json:"kept"`
	Limit   int    `json:"limit"`
	Evicted uint64 `json:"evicted"`
	// RewritesRead is the number of compiles that read the module's
	// rewrite from the disk cache (EngineConfig.CacheDir) instead of
	// rewriting it.
	RewritesRead uint64 `json:"rewrites_read"`
}

// Stats returns the engine's counts of compiled modules.
func (e *Engine) Stats() EngineStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.stats
	st.Kept, st.Limit = len(e.compiled), e.keep
	return st
}

// MemoryStats describes the zeroed guest memories an engine keeps from
// ended instances for its next ones (EngineConfig.KeepMemory), for a
// daemon to show.
type MemoryStats struct {
	// Kept is the number of memories held now; Resident the bytes of
	// their pages that instances touched (zeroed, and the process's), at
	// most Limit.
	Kept     int    `json:"kept"`
	Resident uint64 `json:"resident_bytes"`
	Limit    uint64 `json:"limit_bytes"`
	// Reused counts the instances given a kept memory, Fresh those given
	// a new one, and Dropped the memories given back to the system when
	// their instance ended (no room left under Limit).
	Reused  uint64 `json:"reused"`
	Fresh   uint64 `json:"fresh"`
	Dropped uint64 `json:"dropped"`
}

// memoryKeeper is a runtime adapter that keeps guest memories.
type memoryKeeper interface {
	memoryStats() (MemoryStats, bool)
}

// MemoryStats returns what e's kept guest memories are. ok is false for
// an engine that keeps none: wasmtime, a platform other than Linux (where
// the host cannot tell which pages an instance touched), or
// EngineConfig.KeepMemory below zero.
func (e *Engine) MemoryStats() (st MemoryStats, ok bool) {
	if k, is := e.rt.(memoryKeeper); is {
		return k.memoryStats()
	}
	return st, false
}

// compileKey names a compiled module: the bytes it was compiled from and
// the limits rewritten into it.
type compileKey struct {
	sum [32]byte
	ml  moduleLimits
}

// compiling is a module being compiled, or compiled: done is closed when
// m or err is set. Every caller that asks for it meanwhile waits for the
// one compilation.
type compiling struct {
	done chan struct{}
	m    *Module
	err  error
	// used is the engine's tick at its last use (Engine.mu).
	used uint64
}

// Module is a compiled agent module.
type Module struct {
	SHA256  []byte
	Name    string
	Imports []Import
	// compiled is the adapter's compiled module.
	compiled any
}

// wasmRuntime is the seam between the host and a WebAssembly engine. The
// adapters are engine_wazero.go and, with the build tag wasmtime,
// engine_wasmtime.go. Nothing here is called per import call: a call goes
// from the adapter's host function straight to session.call, with the
// instance's memory (session.mem) behind the memory interface.
type wasmRuntime interface {
	// compile compiles code (checked and rewritten by the host: see
	// Engine.compile) and fills in m's Name and compiled. It stops when ctx
	// ends if the engine can.
	compile(ctx context.Context, code []byte, m *Module) error
	// instruments says whether the host must rewrite modules with the
	// yield instrumentation (wasmModule.rewrite) for this engine: one
	// that cannot interrupt guest code itself.
	instruments() bool
	// instantiate instantiates m for the current segment of session s: the
	// capability modules call s.call and s.take, WASI is the virtual WASI
	// of s (newVirtualWASI), and s.mem is set to the instance's memory. No
	// guest code runs.
	instantiate(ctx context.Context, m *Module, s *session) (instance, error)
	close(ctx context.Context) error
}

// instance is a module instantiated for one segment of a session.
type instance interface {
	// start runs the guest's _start function. It returns nil when _start
	// returned; an *exitError when the guest called proc_exit; and
	// otherwise an error for the trap that ended it. A host function that
	// panics (the session stopping the guest: s.stop, s.fault, a
	// checkpoint's errSegmentEnd) traps the guest, and start returns an
	// error that wraps the panic value (errors.Is and errors.As find it)
	// followed by the wasm stack trace at the call, after a line
	// "wasm stack trace:" (see stackOf).
	start(ctx context.Context) error
	close(ctx context.Context)
}

// exitError is how an instance reports that its guest called proc_exit.
type exitError struct{ code uint32 }

func (e *exitError) Error() string { return fmt.Sprintf("guest exited with status %d", e.code) }

// NewEngine starts the WebAssembly engine cfg.Kind names with the virtual
// WASI and one host module per capability of the ABI.
func NewEngine(ctx context.Context, cfg EngineConfig) (*Engine, error) {
	if cfg.MemoryLimitPages == 0 {
		cfg.MemoryLimitPages = 16384
	}
	if cfg.MemoryLimitPages > 65536 {
		return nil, fmt.Errorf("host: MemoryLimitPages %d is over 65536 (4 GiB), the most a 32-bit memory has", cfg.MemoryLimitPages)
	}
	cfg.Compile = cfg.Compile.withDefaults()
	switch {
	case cfg.KeepCompiled == 0:
		cfg.KeepCompiled = DefaultKeepCompiled
	case cfg.KeepCompiled < 0:
		return nil, fmt.Errorf("host: KeepCompiled %d is below 0: keep at least one compiled module (0 for the default, %d)", cfg.KeepCompiled, DefaultKeepCompiled)
	}
	if cfg.KeepMemory == 0 {
		cfg.KeepMemory = DefaultKeepMemory
	}
	cfg.uninterruptible = benchknobs.NoGuestInterrupt.Load()
	var rt wasmRuntime
	var err error
	switch cfg.Kind {
	case "", EngineWazero:
		cfg.Kind = EngineWazero
		rt, err = newWazero(ctx, cfg)
	case EngineWasmtime:
		rt, err = newWasmtime(ctx, cfg)
	default:
		return nil, fmt.Errorf("host: unknown engine %q (known: %s, %s)", cfg.Kind, EngineWazero, EngineWasmtime)
	}
	if err != nil {
		return nil, err
	}
	return &Engine{kind: cfg.Kind, rt: rt, limits: cfg.Compile, maxPages: cfg.MemoryLimitPages,
		compiling: make(chan struct{}, max(1, runtime.NumCPU()/2)), instantiating: make(chan struct{}, max(1, runtime.GOMAXPROCS(0))),
		compiled: map[compileKey]*compiling{}, keep: cfg.KeepCompiled, rewrites: rewriteCacheIn(cfg.CacheDir)}, nil
}

func rewriteCacheIn(dir string) rewriteCache {
	if dir == "" {
		return rewriteCache{}
	}
	return rewriteCache{dir: filepath.Join(dir, rewriteCacheDir)}
}

// EngineAvailable reports whether this binary has the engine kind: wazero
// always, wasmtime in builds with the tag wasmtime.
func EngineAvailable(kind string) bool {
	switch kind {
	case "", EngineWazero:
		return true
	case EngineWasmtime:
		return wasmtimeBuilt
	}
	return false
}

// Kind returns the engine's kind (EngineWazero or EngineWasmtime).
func (e *Engine) Kind() string { return e.kind }

// Close releases the runtime and every compiled module.
//
// Close first waits for compilations that outlived their timeout: wazero
// stops one at its next function, wasmtime finishes it, bounded by the
// static compile limits.
func (e *Engine) Close(ctx context.Context) error {
	e.background.Wait()
	return e.rt.close(ctx)
}

// ErrNotWasm is returned by Compile for bytes that are not a WebAssembly
// module. It wraps ErrBadModule.
var ErrNotWasm error = &refusal{msg: "not a WebAssembly module (missing \\0asm magic)"}

// Compile compiles code for a run with the default limits (DefaultLimits),
// or returns the module compiled before from the same bytes. See compile.
func (e *Engine) Compile(ctx context.Context, code []byte) (*Module, error) {
	return e.compile(ctx, code, e.runLimits(DefaultLimits()))
}

// Warm starts compiling code for a run under grant g on a host with the
// default limits (Config.Limits zero), and returns at once: a run of the
// same bytes under the same limits that starts later waits for this one
// compilation instead of starting its own. It is for a caller that holds
// the module before the rest of what the run needs: agentrt run compiles
// while the store opens. Nothing is reported; the run reports what the
// compilation found. Close waits for it.
func (e *Engine) Warm(code []byte, g *Grant) {
	var gl *Limits
	if g != nil {
		gl = g.Limits
	}
	l, err := gl.within(DefaultLimits())
	if err != nil {
		return // the run refuses the grant itself
	}
	e.background.Add(1)
	go func() {
		defer e.background.Done()
		e.compileSum(context.Background(), sha256.Sum256(code), e.runLimits(l), func() ([]byte, error) { return code, nil })
	}()
}

// runLimits returns the module limits of a run with limits l on this
// engine: its memory within the engine's cap.
func (e *Engine) runLimits(l Limits) moduleLimits {
	ml := l.module()
	ml.memoryPages = min(ml.memoryPages, e.maxPages)
	return ml
}

// ErrCompileTimeout is wrapped by the error Compile returns for a module
// whose compilation outlasted the engine's limit (CompileLimits.Timeout).
var ErrCompileTimeout = errors.New("compilation took too long")

// compile checks code against the engine's compile limits and the run's
// module limits ml, rewrites it for them (wasmModule.rewrite) and compiles
// it, or returns the module compiled before from the same bytes for the
// same limits. The check reads the module once, in time linear in its
// size, before an engine sees it. The compilation runs on its own, bounded
// by the engine's timeout and not by ctx: a caller whose ctx ends stops
// waiting, and the compilation goes on (to the timeout at most) for the
// next caller. Every error for a module the host refuses wraps
// ErrBadModule.
func (e *Engine) compile(ctx context.Context, code []byte, ml moduleLimits) (*Module, error) {
	m, _, err := e.compileSum(ctx, sha256.Sum256(code), ml, func() ([]byte, error) { return code, nil })
	return m, err
}

// compileSum is compile for the module whose SHA-256 is sum: when it is
// not compiled for ml already, load gives its bytes, which must hash to
// sum (the store checks what it reads; compile computed sum itself). hit
// says it was compiled, or being compiled, already.
func (e *Engine) compileSum(ctx context.Context, sum [32]byte, ml moduleLimits, load func() ([]byte, error)) (m *Module, hit bool, err error) {
	key := compileKey{sum: sum, ml: ml}
	e.mu.Lock()
	c, hit := e.compiled[key]
	if !hit {
		// The bytes are read without the lock: a store read of a large
		// module takes milliseconds.
		e.mu.Unlock()
		code, err := load()
		if err != nil {
			return nil, false, err
		}
		e.mu.Lock()
		if c, hit = e.compiled[key]; !hit {
			c = &compiling{done: make(chan struct{})}
			e.compiled[key] = c
			e.stats.Compiles++
			go e.build(c, key, code)
			e.evict()
		}
	}
	if hit {
		e.stats.Hits++
	}
	e.tick++
	c.used = e.tick
	e.mu.Unlock()
	select {
	case <-c.done:
		return c.m, hit, c.err
	case <-ctx.Done():
		return nil, hit, fmt.Errorf("compile: %w", context.Cause(ctx))
	}
}

// evict drops the least recently used compiled modules past the engine's
// limit (e.mu held). A module being compiled stays: its callers wait for
// it. A dropped module's compiled code is released when nothing refers to
// it any more (a run executing it keeps it), by the adapter's cleanup.
func (e *Engine) evict() {
	for len(e.compiled) > e.keep {
		var oldest compileKey
		var found *compiling
		for k, c := range e.compiled {
			select {
			case <-c.done:
			default:
				continue
			}
			if found == nil || c.used < found.used {
				oldest, found = k, c
			}
		}
		if found == nil {
			return
		}
		delete(e.compiled, oldest)
		e.stats.Evicted++
	}
}

// build compiles code for c; a failure is not kept, so that a later call
// tries again.
func (e *Engine) build(c *compiling, key compileKey, code []byte) {
	e.compiling <- struct{}{}
	m, err := e.prepare(code, key)
	<-e.compiling
	e.mu.Lock()
	defer e.mu.Unlock()
	c.m, c.err = m, err
	close(c.done)
	if err != nil && e.compiled[key] == c {
		delete(e.compiled, key)
	}
	// Kept past the limit while it compiled, it may be dropped now.
	e.evict()
}

func (e *Engine) prepare(code []byte, key compileKey) (*Module, error) {
	instrument := e.rt.instruments()
	m := &Module{SHA256: key.sum[:]}
	var path string
	var job *compileJob
	if e.rewrites.dir != "" {
		path = e.rewrites.path(key.sum, key.ml, instrument, e.limits)
		if bin, release, ok := e.rewrites.load(path); ok {
			e.mu.Lock()
			e.stats.RewritesRead++
			e.mu.Unlock()
			// The rewrite on disk was made from these very bytes once
			// they passed the checks below under the same limits (its
			// name holds both): the engine starts on it while the checks
			// run again, and nothing it compiles is used unless they
			// pass.
			job = e.startCompile(bin, release, m)
			defer job.cancel()
		}
	}
	wm, err := readModule(code, e.limits)
	if err != nil {
		if errors.Is(err, ErrNotWasm) {
			return nil, err
		}
		return nil, fmt.Errorf("compile: %w", err)
	}
	if err := wm.checkRun(key.ml); err != nil {
		return nil, fmt.Errorf("compile: %w", err)
	}
	if job == nil {
		bin, err := wm.rewrite(key.ml, instrument)
		if err != nil {
			return nil, fmt.Errorf("compile: %w", err)
		}
		if path != "" {
			// A cache that cannot be written costs the next process
			// the rewrite, and nothing else.
			_ = e.rewrites.store(path, bin)
		}
		job = e.startCompile(bin, func() {}, m)
		defer job.cancel()
	}
	if err := job.wait(e.limits.Timeout); err != nil {
		return nil, err
	}
	m.Imports = wm.importsOf()
	return m, nil
}

// compileJob is the engine compiling a module in the background, bounded
// by the compile timeout from its start.
type compileJob struct {
	ctx    context.Context
	cancel context.CancelFunc
	done   chan error
}

// startCompile has the engine compile bin into m; release is called once
// the engine is done with bin (neither engine keeps the bytes it compiled:
// wazero decodes into copies, wasmtime into its own memory).
func (e *Engine) startCompile(bin []byte, release func(), m *Module) *compileJob {
	ctx, cancel := context.WithTimeout(context.Background(), e.limits.Timeout)
	j := &compileJob{ctx: ctx, cancel: cancel, done: make(chan error, 1)}
	e.background.Add(1)
	go func() {
		defer e.background.Done()
		err := e.rt.compile(ctx, bin, m)
		release()
		j.done <- err
	}()
	return j
}

// wait returns the compilation's outcome as prepare reports it: a refusal,
// one over the timeout limit when it outlasted it.
func (j *compileJob) wait(limit time.Duration) error {
	var err error
	select {
	case err = <-j.done:
	case <-j.ctx.Done():
		// wazero stops at its next function; wasmtime cannot be stopped
		// and finishes in the background, bounded by the static limits.
	}
	if j.ctx.Err() != nil {
		return fmt.Errorf("compile: %w", &refusal{msg: fmt.Sprintf("%v: over the limit of %v (CompileLimits.Timeout)", ErrCompileTimeout, limit), limit: true, cause: ErrCompileTimeout})
	}
	if err != nil {
		return fmt.Errorf("compile: %w", &refusal{msg: err.Error()})
	}
	return nil
}

// memory is a guest's linear memory as the host functions see it: Read
// returns a view of n bytes at ptr, Write copies b to ptr; both report
// false, and do nothing, when the range is not entirely inside the memory.
// wazero's api.Memory is one.
type memory interface {
	Read(ptr, n uint32) ([]byte, bool)
	Write(ptr uint32, b []byte) bool
}
