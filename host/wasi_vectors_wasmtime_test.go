//go:build wasmtime && cgo

package host

import (
	"context"
	"fmt"
	"testing"
)

// The wasmtime adapter serves preview1: it runs the WASI vectors too.
func init() {
	wasiTargets = append(wasiTargets, wasiTarget{"wasmtime", openOnWasmtime})
}

type wasmtimeWASIInstance struct {
	rt wasmRuntime
	in *wasmtimeInstance
}

func openOnWasmtime(t *testing.T, code []byte, s *session) wasiInstance {
	t.Helper()
	ctx := context.Background()
	rt, err := newWasmtime(ctx, EngineConfig{MemoryLimitPages: 16384})
	if err != nil {
		t.Fatal(err)
	}
	m := &Module{}
	if err := rt.compile(ctx, code, m); err != nil {
		rt.close(ctx)
		t.Fatal(err)
	}
	inst, err := rt.instantiate(ctx, m, s)
	if err != nil {
		rt.close(ctx)
		t.Fatal(err)
	}
	return &wasmtimeWASIInstance{rt, inst.(*wasmtimeInstance)}
}

// call runs an export as start runs _start: a host function's panic
// (proc_exit's *exitError, or a trap of preview1) is kept in panicked.
func (w *wasmtimeWASIInstance) call(name string) (uint32, string) {
	in := w.in
	res, err := in.inst.GetFunc(in.store, name).Call(in.store)
	p := in.panicked
	in.panicked = nil
	if exit, ok := p.(*exitError); ok {
		return 0, fmt.Sprintf("exit %d", exit.code)
	}
	if err != nil {
		return 0, "trap"
	}
	if res == nil {
		return 0, ""
	}
	return uint32(res.(int32)), ""
}

func (w *wasmtimeWASIInstance) close() {
	w.in.close(context.Background())
	w.rt.close(context.Background())
}
