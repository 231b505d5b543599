package host

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/internal/abivectors"
	"github.com/agentrt/agentrt/internal/golden"
)

// The module vectors (abi/testdata/modules, abi/SPEC.md §11.3) say which
// modules a host runs and which it refuses before any of their code runs:
// WebAssembly 2.0 is accepted, nothing beyond it, and memories within the
// limits. Every engine must agree, or a run recorded on one could not be
// replayed on the other (invariant 8).

const moduleVectorDir = "../abi/testdata/modules"

// moduleCase is one module vector: its WAT and the wat2wasm flags that
// let wabt encode it.
type moduleCase struct {
	feature, expect, comment, wat string
	flags                         []string
}

const memStart = `(memory (export "memory") 1) (func (export "_start"))`

func moduleCases() []moduleCase {
	return []moduleCase{
		{"mvp", "accept", "a memory, exported as memory, and _start", `(module ` + memStart + `)`, nil},
		{"mutable-global", "accept", "an exported mutable global (WebAssembly 2.0)",
			`(module ` + memStart + ` (global (export "g") (mut i32) (i32.const 0)))`, nil},
		{"sign-extension", "accept", "i32.extend8_s (WebAssembly 2.0)",
			`(module (memory (export "memory") 1) (func (export "_start") (drop (i32.extend8_s (i32.const 255)))))`, nil},
		{"nontrapping-float-to-int", "accept", "i32.trunc_sat_f32_s (WebAssembly 2.0)",
			`(module (memory (export "memory") 1) (func (export "_start") (drop (i32.trunc_sat_f32_s (f32.const 1e30)))))`, nil},
		{"multi-value", "accept", "a function and a block with two results (WebAssembly 2.0)",
			`(module (memory (export "memory") 1) (func $two (result i32 i32) (i32.const 1) (i32.const 2))
			  (func (export "_start") (block (result i32 i32) (call $two)) (drop) (drop)))`, nil},
		{"bulk-memory", "accept", "memory.init, data.drop, memory.copy, memory.fill (WebAssembly 2.0)",
			`(module (memory (export "memory") 1) (data "ab") (func (export "_start")
			  (memory.init 0 (i32.const 0) (i32.const 0) (i32.const 2)) (data.drop 0)
			  (memory.copy (i32.const 8) (i32.const 0) (i32.const 2)) (memory.fill (i32.const 16) (i32.const 7) (i32.const 4))))`, nil},
		{"reference-types", "accept", "two tables, ref.null, ref.is_null, table.grow (WebAssembly 2.0)",
			`(module ` + memStart + ` (table 1 funcref) (table $t 0 externref)
			  (func $f (drop (ref.is_null (ref.null extern))) (drop (table.grow $t (ref.null extern) (i32.const 1)))))`, nil},
		{"simd", "accept", "128-bit SIMD (WebAssembly 2.0)",
			`(module (memory (export "memory") 1) (func (export "_start") (drop (i32x4.add (v128.const i32x4 1 2 3 4) (v128.const i32x4 0 0 0 0)))))`, nil},
		{"const-expressions", "accept", "every constant expression of WebAssembly 2.0, in globals and in element and data segments of every kind",
			`(module (memory (export "memory") 1) (table 2 funcref) (table $t2 2 funcref) (func $f)
			  (global i32 (i32.const -1)) (global i64 (i64.const 1)) (global f32 (f32.const 1.5)) (global f64 (f64.const 2.5))
			  (global v128 (v128.const i32x4 1 2 3 4)) (global funcref (ref.null func)) (global funcref (ref.func $f))
			  (elem (i32.const 0) $f) (elem func $f) (elem (table $t2) (i32.const 0) func $f) (elem declare func $f)
			  (elem (i32.const 1) funcref (ref.null func)) (elem funcref (ref.null func))
			  (elem (table $t2) (i32.const 1) funcref (ref.null func)) (elem declare funcref (ref.null func))
			  (data (i32.const 0) "a") (data "b") (func (export "_start")))`, nil},
		{"memory-max-at-limit", "accept", "a memory whose declared maximum is the limit, 16384 pages (1 GiB)",
			`(module (memory (export "memory") 1 16384) (func (export "_start")))`, nil},
		{"memory-grow-to-max", "accept", "memory.grow stops at the declared maximum: 1 page more succeeds, the next fails with -1",
			`(module (memory (export "memory") 1 2) (func (export "_start")
			  (if (i32.ne (memory.grow (i32.const 1)) (i32.const 1)) (then unreachable))
			  (if (i32.ne (memory.grow (i32.const 1)) (i32.const -1)) (then unreachable))))`, nil},
		{"threads", "refuse", "a shared memory and an atomic load (threads)",
			`(module (memory (export "memory") 1 1 shared) (func (export "_start") (drop (i32.atomic.load (i32.const 0)))))`, []string{"--enable-threads"}},
		{"multi-memory", "refuse", "two memories (multi-memory)",
			`(module ` + memStart + ` (memory 1))`, []string{"--enable-multi-memory"}},
		{"memory64", "refuse", "a 64-bit memory (memory64)",
			`(module (memory (export "memory") i64 1) (func (export "_start")))`, []string{"--enable-memory64"}},
		{"tail-call", "refuse", "return_call (tail calls)",
			`(module (memory (export "memory") 1) (func $f) (func (export "_start") (return_call $f)))`, []string{"--enable-tail-call"}},
		{"extended-const", "refuse", "i32.add in a global's initializer (extended constant expressions)",
			`(module ` + memStart + ` (global i32 (i32.add (i32.const 1) (i32.const 2))))`, []string{"--enable-extended-const"}},
		{"extended-const-data", "refuse", "i32.mul in a data segment's offset (extended constant expressions)",
			`(module ` + memStart + ` (data (i32.mul (i32.const 2) (i32.const 3)) "x"))`, []string{"--enable-extended-const"}},
		{"exceptions", "refuse", "a tag, try and throw (exception handling)",
			`(module (memory (export "memory") 1) (tag $t) (func (export "_start") (try (do (throw $t)) (catch $t))))`, []string{"--enable-exceptions"}},
		{"function-references", "refuse", "call_ref (typed function references)",
			`(module (memory (export "memory") 1) (type $t (func)) (func $f) (elem declare func $f) (func (export "_start") (call_ref (ref.func $f))))`, []string{"--enable-function-references"}},
		{"relaxed-simd", "refuse", "f32x4.relaxed_madd, whose results differ between machines (relaxed SIMD)",
			`(module (memory (export "memory") 1) (func (export "_start") (drop (f32x4.relaxed_madd (v128.const i32x4 0 0 0 0) (v128.const i32x4 0 0 0 0) (v128.const i32x4 0 0 0 0)))))`, []string{"--enable-relaxed-simd"}},
		{"memory-min-over-limit", "refuse", "a memory of at least 16385 pages, one over the limit",
			`(module (memory (export "memory") 16385) (func (export "_start")))`, nil},
		{"memory-max-over-limit", "accept", "a memory that declares a maximum of 65536 pages, over the limit: the limit is its maximum",
			`(module (memory (export "memory") 1 65536) (func (export "_start")))`, nil},
		{"no-start", "refuse", "no _start function: not a command module",
			`(module (memory (export "memory") 1) (func (export "main")))`, nil},
	}
}

// moduleVectors builds the vectors of moduleCases.
func moduleVectors(t *testing.T) []*abivectors.ModuleVector {
	t.Helper()
	if _, err := exec.LookPath("wat2wasm"); err != nil {
		t.Fatal("wat2wasm is not on PATH: run make deps (or apt-get install wabt)")
	}
	var vs []*abivectors.ModuleVector
	for _, c := range moduleCases() {
		dir := t.TempDir()
		in, out := filepath.Join(dir, "m.wat"), filepath.Join(dir, "m.wasm")
		if err := os.WriteFile(in, []byte(c.wat), 0o644); err != nil {
			t.Fatal(err)
		}
		if b, err := exec.Command("wat2wasm", append(c.flags, in, "-o", out)...).CombinedOutput(); err != nil {
			t.Fatalf("%s: wat2wasm: %v\n%s", c.feature, err, b)
		}
		wasm, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, &abivectors.ModuleVector{File: c.feature + ".txt", Feature: c.feature, Expect: c.expect,
			Comment: []string{c.comment, "wat: " + strings.Join(strings.Fields(c.wat), " ")}, Wasm: wasm})
	}
	return vs
}

// TestModuleVectorFiles checks that abi/testdata/modules holds what
// moduleCases gives, or rewrites it with -rewrite.
func TestModuleVectorFiles(t *testing.T) {
	want := map[string][]byte{}
	for _, v := range moduleVectors(t) {
		want[v.File] = v.Format()
	}
	golden.Sync(t, moduleVectorDir, "*.txt", want, *rewriteVectors)
}

// TestModuleVectors runs every module vector on every engine this binary
// has: an accepted module compiles, instantiates and runs _start to its
// end; a refused one fails to compile or to instantiate, so none of its
// code runs.
func TestModuleVectors(t *testing.T) {
	vs, err := abivectors.ReadModules(moduleVectorDir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, kind := range EngineKinds {
		if !EngineAvailable(kind) {
			continue
		}
		for _, v := range vs {
			t.Run(strings.TrimSuffix(v.File, ".txt")+"/"+kind, func(t *testing.T) {
				refusal, ran := runModule(ctx, kind, v.Wasm)
				switch {
				case v.Expect == "accept" && refusal != nil:
					t.Fatalf("refused: %v", refusal)
				case v.Expect == "accept" && ran != nil:
					t.Fatal(ran)
				case v.Expect == "refuse" && refusal == nil:
					t.Fatalf("accepted and run (%v)", ran)
				case v.Expect == "refuse":
					t.Logf("refused: %v", refusal)
				}
			})
		}
	}
}

// runModule compiles code on a fresh engine of kind, instantiates it for
// a session and runs _start. refusal is why Compile or instantiate failed
// (none of the module ran); ran is how _start failed, if it ran.
func runModule(ctx context.Context, kind string, code []byte) (refusal, ran error) {
	e, err := NewEngine(ctx, EngineConfig{Kind: kind})
	if err != nil {
		return fmt.Errorf("engine: %w", err), nil
	}
	defer e.Close(ctx)
	m, err := e.Compile(ctx, code)
	if err != nil {
		return err, nil
	}
	s := wasiSession()
	inst, err := e.rt.instantiate(ctx, m, s)
	if err != nil {
		return fmt.Errorf("instantiate: %w", err), nil
	}
	defer inst.close(ctx)
	if err := inst.start(withSession(ctx, s)); err != nil {
		return nil, fmt.Errorf("_start failed: %w", err)
	}
	return nil, nil
}

// TestReaderRefusesExtendedConstExprs: the host's module reader, which
// every engine's compile goes through, passes every module a host accepts
// and refuses the extended constant expressions that wasmtime alone would
// run.
func TestReaderRefusesExtendedConstExprs(t *testing.T) {
	vs, err := abivectors.ReadModules(moduleVectorDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		_, err := readModule(v.Wasm, DefaultCompileLimits())
		switch {
		case v.Expect == "accept" && err != nil:
			t.Errorf("%s: refused: %v", v.File, err)
		case strings.HasPrefix(v.Feature, "extended-const") && err == nil:
			t.Errorf("%s: passed", v.File)
		}
	}
}
