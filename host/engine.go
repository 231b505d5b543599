package host

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
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
	// MemoryLimitPages caps a guest's linear memory (64 KiB pages).
	// Zero: 16384 pages (1 GiB).
	MemoryLimitPages uint32
}

// ErrEngineUnavailable is returned by NewEngine for an engine kind this
// binary was built without (wasmtime without the build tag).
var ErrEngineUnavailable = errors.New("engine not built in")

// Engine compiles and instantiates agent modules. One engine serves many
// runs at once. It is engine-neutral: the WebAssembly runtime behind it
// (wazero, or wasmtime in builds with the tag wasmtime) is a runtime
// adapter, and every adapter serves the same capability modules and the
// same virtual WASI.
type Engine struct {
	kind string
	rt   wasmRuntime

	mu       sync.Mutex
	compiled map[[32]byte]*Module
}

// Module is a compiled agent module.
type Module struct {
	SHA256  []byte
	Name    string
	Imports []Import
	// start says whether the module exports a _start function.
	start bool
	// compiled is the adapter's compiled module.
	compiled any
}

// wasmRuntime is the seam between the host and a WebAssembly engine. The
// adapters are engine_wazero.go and, with the build tag wasmtime,
// engine_wasmtime.go. Nothing here is called per import call: a call goes
// from the adapter's host function straight to session.call, with the
// instance's memory (session.mem) behind the memory interface.
type wasmRuntime interface {
	// compile compiles code and fills in m's Name, Imports (functions and
	// memories), start and compiled.
	compile(ctx context.Context, code []byte, m *Module) error
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
	return &Engine{kind: cfg.Kind, rt: rt, compiled: map[[32]byte]*Module{}}, nil
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
func (e *Engine) Close(ctx context.Context) error { return e.rt.close(ctx) }

// ErrNotWasm is returned by Compile for bytes that are not a WebAssembly
// module.
var ErrNotWasm = errors.New("not a WebAssembly module (missing \\0asm magic)")

// Compile compiles code, or returns the module compiled before from the same
// bytes.
func (e *Engine) Compile(ctx context.Context, code []byte) (*Module, error) {
	sum := sha256.Sum256(code)
	e.mu.Lock()
	defer e.mu.Unlock()
	if m, ok := e.compiled[sum]; ok {
		return m, nil
	}
	if len(code) < 8 || string(code[:4]) != "\x00asm" {
		return nil, ErrNotWasm
	}
	m := &Module{SHA256: sum[:]}
	if err := e.rt.compile(ctx, code, m); err != nil {
		return nil, fmt.Errorf("compile: %w", err)
	}
	if !m.start {
		return nil, fmt.Errorf("compile: module exports no _start function (build a command module: GOOS=wasip1, or a C main)")
	}
	e.compiled[sum] = m
	return m, nil
}

// memory is a guest's linear memory as the host functions see it: Read
// returns a view of n bytes at ptr, Write copies b to ptr; both report
// false, and do nothing, when the range is not entirely inside the memory.
// wazero's api.Memory is one.
type memory interface {
	Read(ptr, n uint32) ([]byte, bool)
	Write(ptr uint32, b []byte) bool
}
