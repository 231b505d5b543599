package host

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"

	"github.com/agentrt/agentrt/abi"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// EngineConfig configures an Engine. The zero value compiles with wazero's
// optimizing compiler and keeps no on-disk cache.
type EngineConfig struct {
	// CacheDir holds wazero's compilation cache; a module compiled once is
	// loaded from it in a fraction of the time. Empty: no disk cache.
	CacheDir string
	// MemoryLimitPages caps a guest's linear memory (64 KiB pages).
	// Zero: 16384 pages (1 GiB).
	MemoryLimitPages uint32
}

// Engine compiles and instantiates agent modules on wazero. One engine
// serves many runs at once: the capability host modules are shared and find
// the calling run through the context.
type Engine struct {
	rt wazero.Runtime

	mu       sync.Mutex
	compiled map[[32]byte]*Module
}

// Module is a compiled agent module.
type Module struct {
	SHA256   []byte
	Name     string
	Imports  []Import
	compiled wazero.CompiledModule
}

// NewEngine starts a wazero runtime with the virtual WASI and one host
// module per capability of the ABI.
func NewEngine(ctx context.Context, cfg EngineConfig) (*Engine, error) {
	rc := wazero.NewRuntimeConfigCompiler()
	if !platformCompiles() {
		rc = wazero.NewRuntimeConfigInterpreter()
	}
	pages := cfg.MemoryLimitPages
	if pages == 0 {
		pages = 16384
	}
	rc = rc.WithMemoryLimitPages(pages)
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
	return &Engine{rt: rt, compiled: map[[32]byte]*Module{}}, nil
}

// Close releases the runtime and every compiled module.
func (e *Engine) Close(ctx context.Context) error { return e.rt.Close(ctx) }

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
	cm, err := e.rt.CompileModule(ctx, code)
	if err != nil {
		return nil, fmt.Errorf("compile: %w", err)
	}
	m := &Module{SHA256: sum[:], Name: cm.Name(), compiled: cm}
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		m.Imports = append(m.Imports, Import{Module: mod, Name: name})
	}
	for _, mem := range cm.ImportedMemories() {
		mod, name, _ := mem.Import()
		m.Imports = append(m.Imports, Import{Module: mod, Name: name})
	}
	if _, ok := cm.ExportedFunctions()["_start"]; !ok {
		return nil, fmt.Errorf("compile: module exports no _start function (build a command module: GOOS=wasip1, or a C main)")
	}
	e.compiled[sum] = m
	return m, nil
}

// instantiateCapability registers the host module of capability c. Its call
// and take functions serve every run; each finds its session in the context
// the guest was started with.
func instantiateCapability(ctx context.Context, rt wazero.Runtime, c abi.Capability) error {
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	ci := capIndex(c)
	_, err := rt.NewHostModuleBuilder(c.Module()).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
			s := sessionFrom(ctx)
			stack[0] = uint64(s.call(ctx, mod.Memory(), ci,
				api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), api.DecodeU32(stack[2]),
				api.DecodeU32(stack[3]), api.DecodeU32(stack[4])))
		}), []api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i64}).
		WithParameterNames("op", "req_ptr", "req_len", "resp_ptr", "resp_cap").
		Export(abi.FuncCall).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
			s := sessionFrom(ctx)
			stack[0] = uint64(s.take(mod.Memory(), ci, api.DecodeU32(stack[0]), api.DecodeU32(stack[1])))
		}), []api.ValueType{i32, i32}, []api.ValueType{i64}).
		WithParameterNames("resp_ptr", "resp_cap").
		Export(abi.FuncTake).
		Instantiate(ctx)
	return err
}
