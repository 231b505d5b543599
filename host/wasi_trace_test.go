package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/internal/abivectors"
	"github.com/agentrt/agentrt/internal/wasmbuild"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// The trace vectors (trace.*.txt) are the WASI calls real guests make: the
// reference guests in abi/testdata/wasi/guest-go and guest-c are built,
// run on preview1 with every call recorded (its arguments and every byte
// of memory it reads or writes, as that memory was before the call), and
// each recorded call becomes a vector call whose memory is that footprint.
// The outcomes are then the reference's (fillOutcomes), and must be what
// the guest saw when it ran: a call's result depends on nothing but its
// footprint, the descriptors and the clock and random streams, all of
// which the vector carries.

// referenceGuest is a guest the trace vectors are recorded from.
type referenceGuest struct {
	name string
	// build builds it to out and names the toolchain; a missing toolchain
	// is errMissingToolchain.
	build func(ctx context.Context, out string) (toolchain string, err error)
}

var errMissingToolchain = errors.New("toolchain missing")

var referenceGuests = []referenceGuest{
	{"guest-go", func(ctx context.Context, out string) (string, error) {
		// The go command on PATH builds it (wasmbuild.Go), which need not
		// be the one that built this test.
		version, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
		if err != nil {
			return "", fmt.Errorf("%w: go env GOVERSION: %v", errMissingToolchain, err)
		}
		return strings.TrimSpace(string(version)), wasmbuild.Go(ctx, filepath.Join(wasiVectorDir, "guest-go"), out)
	}},
	{"guest-c", func(ctx context.Context, out string) (string, error) {
		err := wasmbuild.C(ctx, filepath.Join(wasiVectorDir, "guest-c"), out)
		var te *wasmbuild.ToolchainError
		if errors.As(err, &te) {
			return "", fmt.Errorf("%w: %v", errMissingToolchain, err)
		}
		version, verr := exec.CommandContext(ctx, "clang", "--version").Output()
		if verr != nil {
			return "", fmt.Errorf("%w: clang --version: %v", errMissingToolchain, verr)
		}
		first, _, _ := strings.Cut(string(version), "\n")
		return strings.TrimSpace(first) + ", wasi-libc", err
	}},
}

// footprint is a guest memory that remembers what the host function being
// served reads or writes, with the bytes as they were before it did.
type footprint struct {
	mem    api.Memory
	before map[uint32]byte
}

func (f *footprint) note(ptr, n uint32) {
	if b, ok := f.mem.Read(ptr, n); ok {
		for i, c := range b {
			if _, seen := f.before[ptr+uint32(i)]; !seen {
				f.before[ptr+uint32(i)] = c
			}
		}
	}
}

func (f *footprint) Read(ptr, n uint32) ([]byte, bool) {
	f.note(ptr, n)
	return f.mem.Read(ptr, n)
}

func (f *footprint) Write(ptr uint32, b []byte) bool {
	f.note(ptr, uint32(len(b)))
	return f.mem.Write(ptr, b)
}

// spans returns the footprint's addresses, with the bytes there now, as
// sorted runs of consecutive addresses.
func (f *footprint) spans(now func(addr uint32) byte) []abivectors.Span {
	addrs := make([]uint32, 0, len(f.before))
	for a := range f.before {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	var out []abivectors.Span
	for _, a := range addrs {
		if n := len(out); n > 0 && out[n-1].Addr+uint32(len(out[n-1].Data)) == a {
			out[n-1].Data = append(out[n-1].Data, now(a))
			continue
		}
		out = append(out, abivectors.Span{Addr: a, Data: []byte{now(a)}})
	}
	return out
}

// liveCall is what a recorded call did as the guest ran: its footprint
// afterwards, output and clock.
type liveCall struct {
	errno          uint32
	end            string
	after          []abivectors.Span
	stdout, stderr []byte
	clock          int64
}

// recordGuest runs code on preview1 and returns the vector of its calls,
// without outcomes, and what each call did.
func recordGuest(t *testing.T, name string, code []byte) (*abivectors.WASIVector, []liveCall) {
	t.Helper()
	ctx := context.Background()
	v := &abivectors.WASIVector{File: "trace." + name + ".txt", Guest: name,
		Seed: bytes.Repeat([]byte{7}, 32), WallBase: 1_767_323_045_000_000_000, ModuleName: name}
	s := wasiVectorSession(v)
	var stdout, stderr bytes.Buffer
	p := &preview1{virtualWASI: newVirtualWASI(s)}
	p.stdout, p.stderr = &stdout, &stderr
	var live []liveCall
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
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
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
			fp := &footprint{mem: mod.Memory(), before: map[uint32]byte{}}
			p.mem = fp
			c := abivectors.WASICall{Func: f.name}
			for i, k := range f.params {
				if k == 'I' {
					c.Args = append(c.Args, int64(stack[i]))
				} else {
					c.Args = append(c.Args, int64(int32(uint32(stack[i]))))
				}
			}
			out, errs := stdout.Len(), stderr.Len()
			record := func(errno uint32, end string) {
				c.Mem = fp.spans(func(a uint32) byte { return fp.before[a] })
				lc := liveCall{errno: errno, end: end, clock: p.clock.now,
					stdout: bytes.Clone(stdout.Bytes()[out:]), stderr: bytes.Clone(stderr.Bytes()[errs:])}
				lc.after = fp.spans(func(a uint32) byte { b, _ := fp.mem.Read(a, 1); return b[0] })
				v.Calls = append(v.Calls, c)
				live = append(live, lc)
			}
			defer func() {
				if r := recover(); r != nil {
					var exit *exitError
					if e, ok := r.(error); ok && errors.As(e, &exit) {
						record(0, fmt.Sprintf("exit %d", exit.code))
					} else {
						record(0, "trap")
					}
					panic(r)
				}
			}()
			errno := f.fn(p, stack[:len(f.params)])
			record(errno, "")
			if len(results) > 0 {
				stack[0] = uint64(errno)
			}
		}), params, results).Export(f.name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	mod, err := rt.InstantiateWithConfig(ctx, code, wazero.NewModuleConfig().WithStartFunctions())
	if err != nil {
		t.Fatal(err)
	}
	var exit *exitError
	if _, err := mod.ExportedFunction("_start").Call(ctx); err != nil && !errors.As(err, &exit) {
		t.Fatalf("%s: %v", name, err)
	}
	v.Pages = mod.Memory().Size() / 65536
	return v, live
}

// checkLive requires the outcomes fillOutcomes wrote into v to be what the
// guest saw when it ran (live).
func checkLive(t *testing.T, v *abivectors.WASIVector, live []liveCall) {
	t.Helper()
	clock := v.Clock
	for k, c := range v.Calls {
		lc := live[k]
		if c.HasNow {
			clock = c.Now
		}
		if c.End != lc.end || c.Errno != lc.errno || !bytes.Equal(c.Stdout, lc.stdout) || !bytes.Equal(c.Stderr, lc.stderr) || (lc.end == "" && clock != lc.clock) {
			t.Fatalf("%s call %d (%s %v): the reference answers errno %d end %q stdout %q clock %d; the guest saw errno %d end %q stdout %q clock %d",
				v.File, k, c.Func, c.Args, c.Errno, c.End, c.Stdout, clock, lc.errno, lc.end, lc.stdout, lc.clock)
		}
		if c.End != "" {
			continue
		}
		// The reference's writes, applied to the footprint, must give the
		// footprint the guest's call left, and stay inside it.
		want := map[uint32]byte{}
		for _, m := range c.Mem {
			for i, b := range m.Data {
				want[m.Addr+uint32(i)] = b
			}
		}
		for _, w := range c.Writes {
			for i, b := range w.Data {
				a := w.Addr + uint32(i)
				if old, in := want[a]; !in && b != old {
					t.Fatalf("%s call %d (%s): the reference writes at %d, outside what the call read or wrote live", v.File, k, c.Func, a)
				}
				want[a] = b
			}
		}
		for _, s := range lc.after {
			for i, b := range s.Data {
				if a := s.Addr + uint32(i); want[a] != b {
					t.Fatalf("%s call %d (%s): byte %d is %#x after the reference's call, %#x after the guest's", v.File, k, c.Func, a, want[a], b)
				}
			}
		}
	}
}

// TestWASITraceFiles records the trace vectors from the reference guests
// and checks that replaying each recorded call on the reference gives what
// the guest saw. With -rewrite it writes them; otherwise it compares the
// recording with the file when the file was recorded with this toolchain
// (another toolchain's runtime makes other calls, which is no error).
func TestWASITraceFiles(t *testing.T) {
	for _, g := range referenceGuests {
		t.Run(g.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), g.name+".wasm")
			toolchain, err := g.build(context.Background(), out)
			if errors.Is(err, errMissingToolchain) {
				t.Skipf("cannot build the reference guest: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			code, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			v, live := recordGuest(t, g.name, code)
			v.Toolchain = toolchain
			v.Comment = []string{
				fmt.Sprintf("the WASI calls of %s (abi/testdata/wasi/%s) as it runs, recorded by host/wasi_trace_test.go;", g.name, g.name),
				"each call's mem lines are every byte it reads or writes, as they were before it"}
			fillOutcomes(t, v)
			checkLive(t, v, live)
			file := filepath.Join(wasiVectorDir, v.File)
			if *rewriteVectors {
				if err := os.WriteFile(file, v.Format(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			have, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (rerun with -rewrite)", err)
			}
			old, err := abivectors.ParseWASI(v.File, have)
			if err != nil {
				t.Fatal(err)
			}
			if old.Toolchain != toolchain {
				t.Logf("%s was recorded with %s; this is %s, whose guest makes other calls: not compared", v.File, old.Toolchain, toolchain)
				return
			}
			if !bytes.Equal(have, v.Format()) {
				t.Errorf("%s differs from a recording with the same toolchain (rerun with -rewrite after a deliberate change)", file)
			}
		})
	}
}
