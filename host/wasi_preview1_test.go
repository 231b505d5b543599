package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/journal"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// wasiOutcome is everything a guest can observe of the WASI calls of a
// wasiProgram, and what it leaves behind: how _start ended, the whole
// memory (the programs end by drawing random bytes into it), the output,
// and the clock afterwards.
type wasiOutcome struct {
	end    string
	mem    []byte
	events []Event
	clock  int64
}

func (o *wasiOutcome) diff(p *wasiOutcome) string {
	switch {
	case o.end != p.end:
		return fmt.Sprintf("ended %q, want %q", o.end, p.end)
	case !bytes.Equal(o.mem, p.mem):
		for i := range o.mem {
			if o.mem[i] != p.mem[i] {
				return fmt.Sprintf("memory differs first at %d: %x, want %x", i, o.mem[i:min(i+16, len(o.mem))], p.mem[i:min(i+16, len(p.mem))])
			}
		}
		return "memory sizes differ"
	case len(o.events) != len(p.events):
		return fmt.Sprintf("%d events, want %d", len(o.events), len(p.events))
	case o.clock != p.clock:
		return fmt.Sprintf("clock %d, want %d", o.clock, p.clock)
	}
	for i := range o.events {
		if o.events[i].Kind != p.events[i].Kind || !bytes.Equal(o.events[i].Data, p.events[i].Data) {
			return fmt.Sprintf("event %d: %s %q, want %s %q", i, o.events[i].Kind, o.events[i].Data, p.events[i].Kind, p.events[i].Data)
		}
	}
	return ""
}

// wasiSession is a session with nothing but what the virtual WASI reads.
func wasiSession() *session {
	hdr := &journal.Header{Seed: bytes.Repeat([]byte{3}, 32), WallBase: 1_700_000_000_123_456_789, ModuleName: "wasi-probe"}
	return &session{header: hdr, events: &eventBuffer{keep: true, now: time.Now}, seg: segment{number: 1, clock: 5000}}
}

func endOf(err error) string {
	var exit *exitError
	switch {
	case err == nil:
		return "returned"
	case errors.As(err, &exit):
		return fmt.Sprintf("exit %d", exit.code)
	default:
		return "trap"
	}
}

// runWASIOn runs code on an engine adapter, as a run's segment runs.
func runWASIOn(t *testing.T, rt wasmRuntime, code []byte) *wasiOutcome {
	t.Helper()
	ctx := context.Background()
	m := &Module{}
	if err := rt.compile(ctx, code, m); err != nil {
		t.Fatal(err)
	}
	s := wasiSession()
	inst, err := rt.instantiate(ctx, m, s)
	if err != nil {
		t.Fatal(err)
	}
	defer inst.close(ctx)
	err = inst.start(withSession(ctx, s))
	mem, _ := s.mem.Read(0, 65536)
	return &wasiOutcome{end: endOf(err), mem: bytes.Clone(mem), events: s.events.buf, clock: s.clock.now}
}

// runWASIOnPreview1 runs code on wazero with preview1 in place of wazero's
// own WASI.
func runWASIOnPreview1(t *testing.T, code []byte) *wasiOutcome {
	t.Helper()
	ctx := context.Background()
	s := wasiSession()
	rt, mod := instantiatePreview1(t, ctx, code, s)
	defer rt.Close(ctx)
	_, err := mod.ExportedFunction("_start").Call(ctx)
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		err = &exitError{code: exit.ExitCode()}
	}
	mem, _ := mod.Memory().Read(0, 65536)
	return &wasiOutcome{end: endOf(err), mem: bytes.Clone(mem), events: s.events.buf, clock: s.clock.now}
}

// instantiatePreview1 instantiates code on a wazero runtime of its own
// that serves wasi_snapshot_preview1 from preview1, the virtual WASI of
// session s (newVirtualWASI), and sets s.mem. No guest code runs.
func instantiatePreview1(t *testing.T, ctx context.Context, code []byte, s *session) (wazero.Runtime, api.Module) {
	t.Helper()
	rt := wazero.NewRuntime(ctx)
	p := &preview1{virtualWASI: newVirtualWASI(s)}
	b := rt.NewHostModuleBuilder(wasiModule)
	for _, f := range preview1Funcs {
		var params, results []api.ValueType
		for _, c := range f.params {
			if c == 'I' {
				params = append(params, api.ValueTypeI64)
			} else {
				params = append(params, api.ValueTypeI32)
			}
		}
		if f.name != "proc_exit" {
			results = []api.ValueType{api.ValueTypeI32}
		}
		fn, n := f.fn, len(f.params)
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
			p.mem = mod.Memory()
			errno := fn(p, stack[:n])
			if len(results) > 0 {
				stack[0] = uint64(errno)
			}
		}), params, results).Export(f.name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		rt.Close(ctx)
		t.Fatal(err)
	}
	mod, err := rt.InstantiateWithConfig(ctx, code, wazero.NewModuleConfig().WithStartFunctions())
	if err != nil {
		rt.Close(ctx)
		t.Fatal(err)
	}
	s.mem = mod.Memory()
	return rt, mod
}

// wasiProgram generates a module that calls WASI functions with arguments
// drawn from values that reach every branch: the standard descriptors, a
// closed and a negative one; pointers inside memory, at its end and past
// it; iovecs and poll subscriptions laid out at fixed addresses.
type wasiProgram struct {
	r     *rand.Rand
	calls []string
}

// Fixed data: text at 5000, iovecs at 4096, subscriptions at 4200.
var (
	wasiI32 = []int64{0, 1, 2, 3, -1, 7, 16, 100, 4096, 4104, 4112, 4200, 4248, 4296, 4344, 4392, 4440, 4488, 5000, 8000,
		65528, 65532, 65535, 65536, 65537, 0xfffffff0, 24, 64, 5, 8, 12, 0xffff, 256, 0x1000000}
	wasiI64 = []int64{0, 1, 1000, -1, 1 << 62, 100, 5}
)

func (g *wasiProgram) call(f wasiFunc, args []int64) {
	var b strings.Builder
	for i, c := range f.params {
		if c == 'I' {
			fmt.Fprintf(&b, " (i64.const %d)", args[i])
		} else {
			fmt.Fprintf(&b, " (i32.const %d)", int32(args[i]))
		}
	}
	res := fmt.Sprintf("(i32.const %d)", 60000+4*len(g.calls))
	g.calls = append(g.calls, fmt.Sprintf("(i32.store %s (call $%s%s))", res, f.name, b.String()))
}

var wasiFds = []int64{0, 1, 2, 1, 2, 3, -1}

func (g *wasiProgram) random(f wasiFunc) {
	args := make([]int64, len(f.params))
	for i, c := range f.params {
		switch {
		case c == 'I':
			args[i] = wasiI64[g.r.IntN(len(wasiI64))]
		case i == 0 && (strings.HasPrefix(f.name, "fd_") || strings.HasPrefix(f.name, "sock_")),
			i == 2 && f.name == "path_symlink":
			args[i] = wasiFds[g.r.IntN(len(wasiFds))]
		default:
			args[i] = wasiI32[g.r.IntN(len(wasiI32))]
		}
	}
	g.call(f, args)
}

func (g *wasiProgram) wat(exit bool) string {
	var b strings.Builder
	b.WriteString("(module\n")
	for _, f := range preview1Funcs {
		fmt.Fprintf(&b, "  (import %q %q (func $%s (param", wasiModule, f.name, f.name)
		for _, c := range f.params {
			if c == 'I' {
				b.WriteString(" i64")
			} else {
				b.WriteString(" i32")
			}
		}
		b.WriteString(")")
		if f.name != "proc_exit" {
			b.WriteString(" (result i32)")
		}
		b.WriteString("))\n")
	}
	b.WriteString("  (memory (export \"memory\") 1)\n")
	// Random bytes everywhere the calls may point, then the fixed data.
	var noise strings.Builder
	for range 4096 {
		fmt.Fprintf(&noise, "\\%02x", g.r.IntN(256))
	}
	fmt.Fprintf(&b, "  (data (i32.const 0) \"%s\")\n", noise.String())
	iov := func(ptr, n uint32) string {
		return fmt.Sprintf("\\%02x\\%02x\\%02x\\%02x\\%02x\\%02x\\%02x\\%02x", byte(ptr), byte(ptr>>8), byte(ptr>>16), byte(ptr>>24), byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	}
	fmt.Fprintf(&b, "  (data (i32.const 4096) \"%s%s%s%s\")\n", iov(5000, 6), iov(5006, 0), iov(5006, 5), iov(70000, 3))
	sub := func(userdata uint64, typ byte, arg []uint64) string {
		var s strings.Builder
		for i := range 8 {
			fmt.Fprintf(&s, "\\%02x", byte(userdata>>(8*i)))
		}
		fmt.Fprintf(&s, "\\%02x\\00\\00\\00\\00\\00\\00\\00", typ)
		for _, v := range arg {
			for i := range 8 {
				fmt.Fprintf(&s, "\\%02x", byte(v>>(8*i)))
			}
		}
		return s.String()
	}
	fmt.Fprintf(&b, "  (data (i32.const 4200) \"%s%s%s%s%s%s%s\")\n",
		sub(0x1111, 0, []uint64{1, 1500, 0, 0}),
		sub(0x2222, 1, []uint64{0, 0, 0, 0}),
		sub(0x3333, 2, []uint64{1, 0, 0, 0}),
		sub(0x4444, 1, []uint64{2, 0, 0, 0}),
		sub(0x5555, 0, []uint64{0, 700, 0, 1}),
		sub(0x6666, 2, []uint64{0xffffffff, 0, 0, 0}),
		sub(0x7777, 1, []uint64{0xffffffff, 0, 0, 0}))
	b.WriteString("  (data (i32.const 5000) \"hello world\")\n")
	b.WriteString("  (func (export \"_start\")\n")
	for _, c := range g.calls {
		b.WriteString("    " + c + "\n")
	}
	b.WriteString("    (drop (call $random_get (i32.const 61000) (i32.const 24)))\n")
	if exit {
		b.WriteString("    (call $proc_exit (i32.const 3))\n")
	}
	b.WriteString("  )\n)\n")
	return b.String()
}

func wat2wasm(t *testing.T, src string) []byte {
	t.Helper()
	if _, err := exec.LookPath("wat2wasm"); err != nil {
		t.Fatal("wat2wasm is not on PATH: run make deps (or apt-get install wabt)")
	}
	dir := t.TempDir()
	in, out := filepath.Join(dir, "p.wat"), filepath.Join(dir, "p.wasm")
	if err := os.WriteFile(in, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("wat2wasm", in, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func funcNamed(name string) wasiFunc {
	for _, f := range preview1Funcs {
		if f.name == name {
			return f
		}
	}
	panic(name)
}

// wasiPrograms returns the modules the WASI comparisons run: one that
// makes the calls our guests make in the ways they make them, then
// programs of random calls to every function (fd_close and
// fd_filestat_set_times, which change what follows or may end the
// program, only near the end), and one that exits.
func wasiPrograms(t *testing.T, n int) [][]byte {
	t.Helper()
	var out [][]byte
	g := &wasiProgram{r: rand.New(rand.NewPCG(1, 2))}
	for _, c := range []struct {
		f    string
		args []int64
	}{
		{"args_sizes_get", []int64{16, 20}}, {"args_get", []int64{100, 200}},
		{"environ_sizes_get", []int64{24, 28}}, {"environ_get", []int64{100, 200}},
		{"clock_time_get", []int64{0, 1, 32}}, {"clock_time_get", []int64{1, 1, 40}}, {"clock_res_get", []int64{1, 48}},
		{"random_get", []int64{300, 32}}, {"random_get", []int64{340, 5}}, {"random_get", []int64{350, 11}},
		{"fd_write", []int64{1, 4096, 3, 56}}, {"fd_write", []int64{2, 4096, 1, 56}}, {"fd_write", []int64{1, 4096, 4, 56}},
		{"fd_read", []int64{0, 4096, 3, 60}}, {"fd_fdstat_get", []int64{1, 400}}, {"fd_fdstat_get", []int64{0, 424}},
		{"fd_filestat_get", []int64{2, 448}}, {"fd_prestat_get", []int64{3, 520}}, {"fd_prestat_get", []int64{0, 520}},
		{"fd_prestat_dir_name", []int64{0, 530, 0}}, {"fd_seek", []int64{1, 0, 1, 540}}, {"fd_fdstat_set_flags", []int64{1, 4}},
		{"poll_oneoff", []int64{4200, 600, 1, 64}}, {"poll_oneoff", []int64{4200, 600, 3, 64}}, {"poll_oneoff", []int64{4200, 600, 4, 64}},
		{"poll_oneoff", []int64{4200, 600, 5, 64}}, {"poll_oneoff", []int64{4248, 700, 2, 64}}, {"sched_yield", nil},
		{"path_open", []int64{3, 0, 5000, 5, 0, 0, 0, 0, 68}}, {"sock_send", []int64{1, 0, 0, 1, 0}},
		{"fd_close", []int64{0}}, {"poll_oneoff", []int64{4248, 800, 1, 64}}, {"poll_oneoff", []int64{4344, 800, 1, 64}},
		{"poll_oneoff", []int64{4440, 800, 1, 64}}, {"poll_oneoff", []int64{4488, 800, 1, 64}}, {"fd_close", []int64{1}}, {"fd_write", []int64{1, 4096, 3, 56}},
	} {
		g.call(funcNamed(c.f), c.args)
	}
	out = append(out, wat2wasm(t, g.wat(false)))
	var common, last []wasiFunc
	for _, f := range preview1Funcs {
		switch f.name {
		case "proc_exit":
		case "fd_close", "fd_filestat_set_times", "fd_renumber":
			last = append(last, f)
		default:
			common = append(common, f)
		}
	}
	for i := range n {
		g := &wasiProgram{r: rand.New(rand.NewPCG(uint64(i), 7))}
		for range 150 {
			g.random(common[g.r.IntN(len(common))])
		}
		for range 6 {
			g.random(last[g.r.IntN(len(last))])
			g.random(common[g.r.IntN(len(common))])
		}
		out = append(out, wat2wasm(t, g.wat(i%4 == 3)))
	}
	return out
}

// TestPreview1MatchesWazero runs generated calls to every WASI function
// under wazero's own WASI (as moduleConfig configures it) and under
// preview1, the virtual WASI of the other engine adapters, and requires
// the guest to see the same: results, every byte of memory, output,
// clock and random stream.
func TestPreview1MatchesWazero(t *testing.T) {
	rt, err := newWazero(context.Background(), EngineConfig{MemoryLimitPages: 16384})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.close(context.Background())
	for i, code := range wasiPrograms(t, 24) {
		want := runWASIOn(t, rt, code)
		got := runWASIOnPreview1(t, code)
		if d := got.diff(want); d != "" {
			t.Errorf("program %d: preview1 %s", i, d)
		}
		if d := runWASIOnSpec(t, code).diff(want); d != "" {
			t.Errorf("program %d: abi/SPEC.md §10 (specWASI) %s", i, d)
		}
	}
}

// runWASIOnSpec runs code on wazero with specWASI, the text of abi/SPEC.md
// §10 transcribed, as its WASI.
func runWASIOnSpec(t *testing.T, code []byte) *wasiOutcome {
	t.Helper()
	s := wasiSession()
	inst := openOnSpec(t, code, s)
	defer inst.close()
	var err error
	if _, end := inst.call("_start"); end == "trap" {
		err = errors.New("trap")
	} else if code, ok := strings.CutPrefix(end, "exit "); ok {
		var n uint32
		fmt.Sscan(code, &n)
		err = &exitError{code: n}
	}
	mem, _ := s.mem.Read(0, 65536)
	return &wasiOutcome{end: endOf(err), mem: bytes.Clone(mem), events: s.events.buf, clock: s.clock.now}
}
