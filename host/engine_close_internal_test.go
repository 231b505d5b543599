package host

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// lateCompiler is a runtime whose compilation outlives its context, the
// way wazero's does between its last function and its cache (and
// wasmtime's always): it notes whether close came before it finished.
type lateCompiler struct {
	wasmRuntime
	finished, closedEarly atomic.Bool
}

func (l *lateCompiler) compile(ctx context.Context, code []byte, m *Module) error {
	<-ctx.Done()
	time.Sleep(300 * time.Millisecond)
	l.finished.Store(true)
	return nil
}

func (l *lateCompiler) close(ctx context.Context) error {
	if !l.finished.Load() {
		l.closedEarly.Store(true)
	}
	return l.wasmRuntime.close(ctx)
}

// TestCloseWaitsForACompilationPastItsTimeout: a compilation refused at
// its timeout may still be running; closing the engine then must wait for
// it. wazero's engine, closed under one, panicked in a background
// goroutine when it finished ("assignment to entry in nil map" in its
// module cache) and took the process down; the race-enabled cell tests
// hit it on a loaded machine.
func TestCloseWaitsForACompilationPastItsTimeout(t *testing.T) {
	ctx := context.Background()
	eng, err := NewEngine(ctx, EngineConfig{Kind: EngineWazero, Compile: CompileLimits{Timeout: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	late := &lateCompiler{wasmRuntime: eng.rt}
	eng.rt = late
	code := assemble(t, "host/testdata/wat/loop.wat")
	if _, err := eng.Compile(ctx, code); !errors.Is(err, ErrCompileTimeout) {
		t.Fatalf("compile: %v; want the timeout", err)
	}
	if late.finished.Load() {
		t.Fatal("the compilation finished before the refusal; the test proves nothing")
	}
	if err := eng.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if late.closedEarly.Load() || !late.finished.Load() {
		t.Fatal("the engine closed its runtime under a compilation still running")
	}
}
