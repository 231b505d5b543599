package host

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/internal/wasmbuild"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// repoRoot is the repository's root (internal tests cannot import
// internal/testutil, which imports this package).
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..")
}

// assemble builds a WAT file of the repository with wat2wasm.
func assemble(t *testing.T, rel string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "m.wasm")
	if b, err := exec.Command("wat2wasm", filepath.Join(repoRoot(), rel), "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm %s: %v\n%s", rel, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// modulesForRewrite are real modules of every kind the host runs: the WAT
// fixtures, Go agents of the tests and examples, and the C example.
func modulesForRewrite(t *testing.T) map[string][]byte {
	t.Helper()
	mods := map[string][]byte{}
	files, _ := filepath.Glob(filepath.Join(repoRoot(), "host/testdata/wat/*.wat"))
	for _, f := range files {
		rel, _ := filepath.Rel(repoRoot(), f)
		mods[rel] = assemble(t, rel)
	}
	for dir, build := range map[string]func(context.Context, string, string) error{
		"host/testdata/agents/smoke": wasmbuild.Go, "host/testdata/agents/segments": wasmbuild.Go,
		"examples/crawler": wasmbuild.Go, "examples/wordfreq-c": wasmbuild.C,
	} {
		out := filepath.Join(t.TempDir(), "m.wasm")
		if err := build(context.Background(), filepath.Join(repoRoot(), dir), out); err != nil {
			t.Fatalf("build %s: %v", dir, err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		mods[dir] = b
	}
	return mods
}

// functionNames returns the names wazero gives a module's functions, by
// index.
func functionNames(t *testing.T, rt wazero.Runtime, code []byte) (map[uint32]string, wazero.CompiledModule) {
	t.Helper()
	cm, err := rt.CompileModule(context.Background(), code)
	if err != nil {
		t.Fatal(err)
	}
	names := map[uint32]string{}
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		names[f.Index()] = mod + "." + name
	}
	for _, f := range cm.ExportedFunctions() {
		names[f.Index()] = f.DebugName()
	}
	return names, cm
}

// TestRewriteKeepsModulesValid: every real module the host runs, read and
// rewritten with the yield instrumentation and the run's limits, is a
// valid module to wazero (and to wabt's validator, when it is installed),
// whose exports name the same functions as before, one index further on,
// and whose table and memory have the limits' maxima.
func TestRewriteKeepsModulesValid(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	validate, _ := exec.LookPath("wasm-validate")
	l := moduleLimits{memoryPages: 300, tableElements: 70000, tables: 4}
	for name, code := range modulesForRewrite(t) {
		m, err := readModule(code, DefaultCompileLimits())
		if err != nil {
			if strings.Contains(name, "unknown_import") || strings.Contains(name, "no_start") {
				continue
			}
			t.Fatalf("%s: %v", name, err)
		}
		out, err := m.rewrite(l, true)
		if err != nil {
			t.Fatalf("%s: rewrite: %v", name, err)
		}
		if validate != "" {
			f := filepath.Join(t.TempDir(), "m.wasm")
			os.WriteFile(f, out, 0o600)
			if b, err := exec.Command(validate, f).CombinedOutput(); err != nil {
				t.Fatalf("%s: wasm-validate: %v\n%s", name, err, b)
			}
		}
		before, _ := functionNames(t, rt, code)
		after, cm := functionNames(t, rt, out)
		for idx, n := range before {
			if strings.HasPrefix(n, ".$") {
				continue // a name by index: no name to keep
			}
			if idx >= m.importFuncs {
				idx++
			}
			if after[idx] != n {
				t.Fatalf("%s: function %d is %q after the rewrite, %q before", name, idx, after[idx], n)
			}
		}
		if n, ok := after[m.importFuncs]; !ok || n != yieldModule+"."+yieldFunc {
			t.Fatalf("%s: function %d is %q, want the yield import", name, m.importFuncs, n)
		}
		for _, mem := range cm.ExportedMemories() {
			if max, ok := mem.Max(); !ok || max > l.memoryPages {
				t.Fatalf("%s: the memory's maximum is %d (%v), want at most %d", name, max, ok, l.memoryPages)
			}
		}
	}
}

// TestRewriteDoesNotChangeWhatAGuestComputes: a module that calls
// functions directly, through a table and by reference (call, call_indirect
// through an element segment, ref.func in a global and a segment, an
// exported function used as the start), computes the same after the
// rewrite, on wazero, with the yield import answered.
func TestRewriteDoesNotChangeWhatAGuestComputes(t *testing.T) {
	ctx := context.Background()
	code := assemble(t, "host/testdata/wat/rewrite.wat")
	m, err := readModule(code, DefaultCompileLimits())
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.rewrite(moduleLimits{memoryPages: 10, tableElements: 10, tables: 2}, true)
	if err != nil {
		t.Fatal(err)
	}
	run := func(code []byte) (uint64, int) {
		rt := wazero.NewRuntime(ctx)
		defer rt.Close(ctx)
		yields := 0
		_, err := rt.NewHostModuleBuilder(yieldModule).NewFunctionBuilder().
			WithGoFunction(api.GoFunc(func(_ context.Context, stack []uint64) {
				yields++
				stack[0] = 3 // yield often
			}), nil, []api.ValueType{api.ValueTypeI32}).Export(yieldFunc).Instantiate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mod, err := rt.Instantiate(ctx, code)
		if err != nil {
			t.Fatal(err)
		}
		r, err := mod.ExportedFunction("compute").Call(ctx, 200_000)
		if err != nil {
			t.Fatal(err)
		}
		return r[0], yields
	}
	a, _ := run(code)
	b, yields := run(out)
	if a != b {
		t.Fatalf("compute(200000) = %d before the rewrite, %d after", a, b)
	}
	// 200 000 loop iterations and as many calls of each function: the
	// first yield after yieldInterval checks, then every third.
	if yields < 100_000 {
		t.Fatalf("the rewritten module yielded %d times", yields)
	}
}

// TestReaderRefusesWhatItDoesNotRead: instructions and encodings outside
// the features the host enables are refused by the reader, so nothing it
// does not understand is ever rewritten.
func TestReaderRefusesWhatItDoesNotRead(t *testing.T) {
	head := "\x00asm\x01\x00\x00\x00" + "\x01\x04\x01\x60\x00\x00" + "\x03\x02\x01\x00" + "\x05\x03\x01\x00\x01" +
		"\x07\x13\x02\x06memory\x02\x00\x06_start\x00\x00"
	body := func(instr string) []byte {
		b := "\x00" + instr + "\x0b"
		return []byte(head + "\x0a" + string(rune(len(b)+2)) + "\x01" + string(rune(len(b))) + b)
	}
	for name, instr := range map[string]string{
		"return_call (tail calls)": "\x12\x00",
		"atomic (threads)":         "\xfe\x00\x02\x00\x41\x00\x1a",
		"try (exceptions)":         "\x06\x40\x0b",
		"unassigned SIMD 154":      "\xfd\x9a\x01",
		"misc 18":                  "\xfc\x12",
		"memory index 1":           "\x3f\x01\x1a",
	} {
		if _, err := readModule(body(instr), DefaultCompileLimits()); err == nil || !strings.Contains(err.Error(), "not supported") {
			t.Errorf("%s: %v; want not supported", name, err)
		}
	}
	if _, err := readModule(body("\x01"), DefaultCompileLimits()); err != nil {
		t.Fatalf("the frame of the cases is wrong: %v", err)
	}
}
