package host

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/internal/abivectors"
	"github.com/agentrt/agentrt/internal/golden"
	"github.com/agentrt/agentrt/journal"
	"github.com/tetratelabs/wazero/sys"
)

// The WASI vectors (abi/testdata/wasi, abi/SPEC.md §11.2) state what the
// virtual WASI answers, call by call, independently of any engine. This
// file runs them against every implementation this binary has: wazero's
// own wasi_snapshot_preview1 as the wazero adapter configures it, preview1
// on wazero, specWASI (the specification's text transcribed,
// wasi_spec_test.go) on wazero, and (build tag wasmtime) the wasmtime
// adapter, which serves preview1. It also generates the calls.*.txt vectors (-rewrite) from the
// cases in wasiCases, with the outcomes the reference, wazero's WASI,
// gives; wasi_trace_test.go records the trace.*.txt vectors from real
// guests.

const wasiVectorDir = "../abi/testdata/wasi"

var rewriteVectors = flag.Bool("rewrite", false, "rewrite the generated vectors of ../abi/testdata/wasi and ../abi/testdata/modules instead of checking them")

// wasiTarget is one implementation of the virtual WASI: open instantiates
// code for session s (setting s.mem, s.clock), and call runs an export
// of the instance, returning its errno, or how it ended the instance
// ("exit N", "trap").
type wasiTarget struct {
	name string
	open func(t *testing.T, code []byte, s *session) wasiInstance
}

type wasiInstance interface {
	call(name string) (errno uint32, end string)
	close()
}

// wasiTargets lists every implementation in this binary; the wasmtime
// adapter adds itself (wasi_vectors_wasmtime_test.go).
var wasiTargets = []wasiTarget{
	{"wazero", openOnWazero},
	{"preview1-on-wazero", openOnPreview1},
	{"spec-on-wazero", openOnSpec},
}

// wasiReference is the implementation the vectors are generated from.
var wasiReference = wasiTargets[0]

type wazeroWASIInstance struct {
	rt  *wazeroRuntime
	mod wazeroInstance
}

func openOnWazero(t *testing.T, code []byte, s *session) wasiInstance {
	t.Helper()
	ctx := context.Background()
	rt, err := newWazero(ctx, EngineConfig{MemoryLimitPages: 16384})
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
	return &wazeroWASIInstance{rt, inst.(wazeroInstance)}
}

func (w *wazeroWASIInstance) call(name string) (uint32, string) {
	res, err := w.mod.ExportedFunction(name).Call(context.Background())
	return wazeroOutcome(res, err)
}

func (w *wazeroWASIInstance) close() { w.rt.close(context.Background()) }

// wazeroOutcome reads what a call of a generated export returned.
// preview1's proc_exit panics with an *exitError, which wazero wraps.
func wazeroOutcome(res []uint64, err error) (uint32, string) {
	var exit *sys.ExitError
	var ours *exitError
	switch {
	case errors.As(err, &exit):
		return 0, fmt.Sprintf("exit %d", exit.ExitCode())
	case errors.As(err, &ours):
		return 0, fmt.Sprintf("exit %d", ours.code)
	case err != nil:
		return 0, "trap"
	case len(res) == 0:
		return 0, ""
	}
	return uint32(res[0]), ""
}

// funcWASIInstance is an instance whose calls and close are closures.
type funcWASIInstance struct {
	callFn  func(string) (uint32, string)
	closeFn func()
}

func (p *funcWASIInstance) call(name string) (uint32, string) { return p.callFn(name) }
func (p *funcWASIInstance) close()                            { p.closeFn() }

func openOnPreview1(t *testing.T, code []byte, s *session) wasiInstance {
	t.Helper()
	ctx := context.Background()
	rt, mod := instantiatePreview1(t, ctx, code, s)
	return &funcWASIInstance{
		closeFn: func() { rt.Close(ctx) },
		callFn: func(name string) (uint32, string) {
			res, err := mod.ExportedFunction(name).Call(ctx)
			return wazeroOutcome(res, err)
		},
	}
}

// wasiVectorSession is a session holding the state a vector starts from,
// and nothing else: the virtual WASI reads no more of it.
func wasiVectorSession(v *abivectors.WASIVector) *session {
	hdr := &journal.Header{Seed: v.Seed, WallBase: v.WallBase, ModuleName: v.ModuleName}
	return &session{header: hdr, events: &eventBuffer{keep: true, now: time.Now}, seg: segment{number: v.Segment, clock: v.Clock}}
}

// wasiVectorModule is the module a runner makes of a vector: its memory
// of v.Pages pages, exported, and one exported function "cK" per call K
// that makes the call with the vector's arguments and returns its errno.
func wasiVectorModule(t *testing.T, v *abivectors.WASIVector) []byte {
	t.Helper()
	var b strings.Builder
	b.WriteString("(module\n")
	var imported []string
	for _, c := range v.Calls {
		if slices.Contains(imported, c.Func) {
			continue
		}
		imported = append(imported, c.Func)
		f, _ := abivectors.LookupWASIFunc(c.Func)
		fmt.Fprintf(&b, "  (import %q %q (func $%s", wasiModule, f.Name, f.Name)
		if f.Params != "" {
			b.WriteString(" (param")
			for _, p := range f.Params {
				b.WriteString(map[rune]string{'i': " i32", 'I': " i64"}[p])
			}
			b.WriteString(")")
		}
		if f.Name != "proc_exit" {
			b.WriteString(" (result i32)")
		}
		b.WriteString("))\n")
	}
	fmt.Fprintf(&b, "  (memory (export \"memory\") %d)\n  (func (export \"_start\"))\n", v.Pages)
	for k, c := range v.Calls {
		f, _ := abivectors.LookupWASIFunc(c.Func)
		result := " (result i32)"
		if f.Name == "proc_exit" {
			result = ""
		}
		fmt.Fprintf(&b, "  (func (export \"c%d\")%s (call $%s", k, result, f.Name)
		for i, p := range f.Params {
			if p == 'I' {
				fmt.Fprintf(&b, " (i64.const %d)", c.Args[i])
			} else {
				fmt.Fprintf(&b, " (i32.const %d)", int32(uint32(c.Args[i])))
			}
		}
		b.WriteString("))\n")
	}
	b.WriteString(")\n")
	return wat2wasm(t, b.String())
}

// wasiObserved is what a call did, as a runner sees it.
type wasiObserved struct {
	errno          uint32
	end            string
	before, after  []byte
	stdout, stderr []byte
	clock          int64
}

// wasiRun runs the calls of v on an instance of target, calling check
// with what each call did. check returns false to stop.
func wasiRun(t *testing.T, target wasiTarget, v *abivectors.WASIVector, check func(k int, o *wasiObserved) bool) {
	t.Helper()
	s := wasiVectorSession(v)
	inst := target.open(t, wasiVectorModule(t, v), s)
	defer inst.close()
	size := v.Pages * 65536
	stream := func(kind EventKind) []byte {
		var out []byte
		for _, e := range s.events.buf {
			if e.Kind == kind {
				out = append(out, e.Data...)
			}
		}
		return out
	}
	for k, c := range v.Calls {
		for _, m := range c.Mem {
			if !s.mem.Write(m.Addr, m.Data) {
				t.Fatalf("%s: call %d (%s): mem at %d, %d bytes, is outside the %d pages of memory", v.File, k, c.Func, m.Addr, len(m.Data), v.Pages)
			}
		}
		mem, _ := s.mem.Read(0, size)
		o := &wasiObserved{before: bytes.Clone(mem)}
		out, errs := len(stream(EventStdout)), len(stream(EventStderr))
		o.errno, o.end = inst.call(fmt.Sprintf("c%d", k))
		if o.end == "" {
			mem, _ = s.mem.Read(0, size)
			o.after = bytes.Clone(mem)
			o.stdout, o.stderr = stream(EventStdout)[out:], stream(EventStderr)[errs:]
			o.clock = s.clock.now
		}
		if !check(k, o) || o.end != "" {
			return
		}
	}
}

// TestWASIVectors runs every WASI vector on every implementation of the
// virtual WASI in this binary, and requires the outcome the vector states:
// the errno (or the exit or trap), every byte of memory afterwards, the
// bytes sent to stdout and stderr, and the virtual clock.
func TestWASIVectors(t *testing.T) {
	vs, err := abivectors.ReadWASI(wasiVectorDir)
	if err != nil {
		t.Fatal(err)
	}
	called := map[string]bool{}
	for _, v := range vs {
		for _, c := range v.Calls {
			called[c.Func] = true
		}
		for _, target := range wasiTargets {
			t.Run(strings.TrimSuffix(v.File, ".txt")+"/"+target.name, func(t *testing.T) {
				wasiRun(t, target, v, func(k int, o *wasiObserved) bool {
					if d := wasiDiff(v, k, o); d != "" {
						t.Errorf("call %d (%s %v): %s", k, v.Calls[k].Func, v.Calls[k].Args, d)
						return false
					}
					return true
				})
			})
		}
	}
	for _, f := range abivectors.WASIFuncs {
		if !called[f.Name] {
			t.Errorf("no vector calls %s", f.Name)
		}
	}
}

// wasiDiff says how what call k did differs from what v states, or "".
func wasiDiff(v *abivectors.WASIVector, k int, o *wasiObserved) string {
	c := &v.Calls[k]
	switch {
	case o.end != c.End:
		return fmt.Sprintf("ended %q, want %q", o.end, c.End)
	case o.end != "":
		return ""
	case o.errno != c.Errno:
		return fmt.Sprintf("errno %d, want %d", o.errno, c.Errno)
	}
	want := bytes.Clone(o.before)
	for _, w := range c.Writes {
		if uint64(w.Addr)+uint64(len(w.Data)) > uint64(len(want)) {
			return fmt.Sprintf("write at %d, %d bytes, is outside memory", w.Addr, len(w.Data))
		}
		copy(want[w.Addr:], w.Data)
	}
	if i := firstDiff(o.after, want); i >= 0 {
		return fmt.Sprintf("memory at %d is %x, want %x", i, o.after[i:min(i+16, len(o.after))], want[i:min(i+16, len(want))])
	}
	if !bytes.Equal(o.stdout, c.Stdout) || !bytes.Equal(o.stderr, c.Stderr) {
		return fmt.Sprintf("stdout %q stderr %q, want %q and %q", o.stdout, o.stderr, c.Stdout, c.Stderr)
	}
	now := v.Clock
	for _, p := range v.Calls[:k+1] {
		if p.HasNow {
			now = p.Now
		}
	}
	if o.clock != now {
		return fmt.Sprintf("virtual clock %d, want %d", o.clock, now)
	}
	return ""
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// TestWASIFuncsMatchPreview1 checks that the function table the vectors
// are read with (abi/SPEC.md §10.5) is the one the host serves.
func TestWASIFuncsMatchPreview1(t *testing.T) {
	if len(abivectors.WASIFuncs) != len(preview1Funcs) {
		t.Fatalf("abivectors lists %d functions, preview1 serves %d", len(abivectors.WASIFuncs), len(preview1Funcs))
	}
	for i, f := range preview1Funcs {
		if g := abivectors.WASIFuncs[i]; g.Name != f.name || g.Params != f.params {
			t.Errorf("function %d: abivectors has %s(%s), preview1 %s(%s)", i, g.Name, g.Params, f.name, f.params)
		}
	}
}

// fillOutcomes runs the calls of v on the reference implementation and
// writes down what each did: a generated vector states the reference's
// behaviour, which every other implementation must then match.
func fillOutcomes(t *testing.T, v *abivectors.WASIVector) {
	t.Helper()
	n := 0
	wasiRun(t, wasiReference, v, func(k int, o *wasiObserved) bool {
		c := &v.Calls[k]
		n = k + 1
		c.End, c.Errno = o.end, o.errno
		if o.end != "" {
			return false
		}
		c.Writes = writesBetween(o.before, o.after)
		c.Stdout, c.Stderr = o.stdout, o.stderr
		prev := v.Clock
		for _, p := range v.Calls[:k] {
			if p.HasNow {
				prev = p.Now
			}
		}
		c.Now, c.HasNow = o.clock, o.clock != prev
		return true
	})
	if n != len(v.Calls) {
		t.Fatalf("%s: call %d (%s) ends the instance (%s), but %d calls follow it", v.File, n-1, v.Calls[n-1].Func, v.Calls[n-1].End, len(v.Calls)-n)
	}
}

// writesBetween lists the bytes that differ between before and after as
// spans; runs of changed bytes closer than 8 bytes are one span (the
// unchanged bytes between them are listed with their value), so that a
// struct written with some zero fields reads as one write.
func writesBetween(before, after []byte) []abivectors.Span {
	var out []abivectors.Span
	for i := 0; i < len(after); i++ {
		if before[i] == after[i] {
			continue
		}
		end := i + 1
		for j := end; j < len(after) && j < end+8; j++ {
			if before[j] != after[j] {
				end = j + 1
			}
		}
		out = append(out, abivectors.Span{Addr: uint32(i), Data: bytes.Clone(after[i:end])})
		i = end - 1
	}
	return out
}

// TestWASIVectorFiles checks that the calls.*.txt vectors are what
// wasiCases gives with the reference's outcomes, or rewrites them with
// -rewrite. A difference after a wazero upgrade is a change of the ABI.
func TestWASIVectorFiles(t *testing.T) {
	want := map[string][]byte{}
	for _, v := range wasiCases() {
		fillOutcomes(t, v)
		want[v.File] = v.Format()
	}
	golden.Sync(t, wasiVectorDir, "calls.*.txt", want, *rewriteVectors)
}

// TestWASIModuleNameWithNUL: a module name holding a NUL byte cannot be
// argv[0], so every engine refuses to instantiate the module for it, and
// none of it runs (abi/SPEC.md §10.4).
func TestWASIModuleNameWithNUL(t *testing.T) {
	ctx := context.Background()
	code := wat2wasm(t, `(module (memory (export "memory") 1) (func (export "_start") unreachable))`)
	for _, kind := range EngineKinds {
		if !EngineAvailable(kind) {
			continue
		}
		e, err := NewEngine(ctx, EngineConfig{Kind: kind})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close(ctx)
		m, err := e.Compile(ctx, code)
		if err != nil {
			t.Fatal(err)
		}
		s := wasiSession()
		s.header.ModuleName = "agent\x00name"
		inst, err := e.rt.instantiate(ctx, m, s)
		if err == nil {
			inst.close(ctx)
			t.Fatalf("%s: instantiated with a NUL byte in argv[0]", kind)
		}
		t.Logf("%s: %v", kind, err)
	}
}
