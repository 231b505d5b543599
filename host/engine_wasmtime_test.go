//go:build wasmtime && cgo

package host

import (
	"context"
	"testing"
	"time"
)

// TestWasmtimeWASIMatchesWazero runs the generated WASI programs of
// TestPreview1MatchesWazero on the wasmtime adapter: every call, byte of
// memory, output and clock reading must be wazero's.
func TestWasmtimeWASIMatchesWazero(t *testing.T) {
	ctx := context.Background()
	wz, err := newWazero(ctx, EngineConfig{MemoryLimitPages: 16384})
	if err != nil {
		t.Fatal(err)
	}
	defer wz.close(ctx)
	wt, err := newWasmtime(ctx, EngineConfig{MemoryLimitPages: 16384})
	if err != nil {
		t.Fatal(err)
	}
	defer wt.close(ctx)
	for i, code := range wasiPrograms(t, 24) {
		want := runWASIOn(t, wz, code)
		got := runWASIOn(t, wt, code)
		if d := got.diff(want); d != "" {
			t.Errorf("program %d: wasmtime %s", i, d)
		}
		m1, m2 := &Module{}, &Module{}
		if err := wz.compile(ctx, code, m1); err != nil {
			t.Fatal(err)
		}
		if err := wt.compile(ctx, code, m2); err != nil {
			t.Fatal(err)
		}
		if m1.Name != m2.Name {
			t.Fatalf("program %d: wasmtime names the module %q, wazero %q", i, m2.Name, m1.Name)
		}
	}
}

// TestWasmtimeEngineClosesWhileItsEpochTicks closes engines at every phase
// of their epoch ticker's period: the ticker must be done with an engine
// before it is freed (a tick on a freed engine faulted the process).
func TestWasmtimeEngineClosesWhileItsEpochTicks(t *testing.T) {
	ctx := context.Background()
	for i := range 200 {
		w, err := newWasmtime(ctx, EngineConfig{MemoryLimitPages: 16})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(i%20) * epochTick / 10)
		if err := w.close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
