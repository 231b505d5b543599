package bench

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/benchknobs"
	"github.com/tetratelabs/wazero"
)

// Figures 9 and 10: what stopping a guest between calls costs, and the
// host's memory per run.

var (
	//go:embed testdata/spinloop.wat
	spinloopWAT []byte
	//go:embed testdata/fib.wat
	fibWAT []byte
)

// uninterruptibleEngine returns an engine of kind whose guests cannot be
// stopped between calls (internal/benchknobs): the floor of figure 9.
func uninterruptibleEngine(ctx context.Context, kind string) (*host.Engine, error) {
	benchknobs.NoGuestInterrupt.Store(true)
	defer benchknobs.NoGuestInterrupt.Store(false)
	return host.NewEngine(ctx, host.EngineConfig{Kind: kind})
}

// Figure 9: guest interruption. Each figure runs the same path on an
// engine whose guests can be stopped between calls (as always) and on one
// whose guests cannot (the floor); the ratio is what the interruption
// costs.
func (h *harness) interrupt(ctx context.Context) ([]Figure, error) {
	plain, err := uninterruptibleEngine(ctx, "")
	if err != nil {
		return nil, err
	}
	defer plain.Close(ctx)
	spin, err := wat2wasm(ctx, dir(h.root, "guests"), "spinloop", spinloopWAT)
	if err != nil {
		return nil, err
	}
	fib, err := wat2wasm(ctx, dir(h.root, "guests"), "fib", fibWAT)
	if err != nil {
		return nil, err
	}
	// pair measures a path on both engines, alternating, Reps times.
	pair := func(name string, f func(*host.Engine) (float64, error)) (ours, floor []float64, err error) {
		for _, e := range []*host.Engine{h.engine, plain} { // warm up, compile
			if _, err := f(e); err != nil {
				return nil, nil, err
			}
		}
		for r := range h.cfg.Reps {
			a, err := f(h.engine)
			if err != nil {
				return nil, nil, err
			}
			b, err := f(plain)
			if err != nil {
				return nil, nil, err
			}
			ours, floor = append(ours, a), append(floor, b)
			h.logf("9 %s rep %d: interruptible %.3g, not %.3g", name, r, a, b)
		}
		return ours, floor, nil
	}
	n := h.cfg.RoundTripCalls
	perCall := func(e *host.Engine) (float64, error) {
		return perLoopCall(func(k int) (time.Duration, error) {
			return execute(ctx, e, h.guests.Loop, countInput(k), uint64(k)+1)
		}, n)
	}
	o1, f1, err := pair("round trip", perCall)
	if err != nil {
		return nil, err
	}
	m := h.cfg.PureCalls
	var cells []*cell
	defer func() {
		for _, c := range cells {
			c.close()
		}
	}()
	pure := func(e *host.Engine) (float64, error) {
		c, err := openCell(dir(h.root, fmt.Sprintf("interrupt-%d", len(cells))), e)
		if err != nil {
			return 0, err
		}
		cells = append(cells, c)
		start := time.Now()
		_, err = c.run(ctx, h.guests.Loop, countInput(m), host.DefaultGrant(), uint64(m)+1)
		return float64(time.Since(start).Nanoseconds()) / float64(m+1) / 1000, err
	}
	o2, f2, err := pair("pure calls", pure)
	if err != nil {
		return nil, err
	}
	figs := []Figure{{
		ID: "9a", Name: "guest interruption: import round trip (figure 1)", Unit: "ns/call", Better: "lower",
		Value: median(o1), Samples: o1,
		Measures: fmt.Sprintf("figure 1's path (host.Engine.Execute of testdata/loop.wat, %d run.input calls answered by a fixed host.Source) on the default wazero engine, whose modules yield every 65 536 loop iterations and function entries so that a guest can be stopped between calls (host/wasmmod.go).", n),
		Floor: &Floor{Name: "no interruption", Unit: "ns/call", Value: median(f1), Samples: f1,
			Measures: "the same on an engine made with internal/benchknobs.NoGuestInterrupt: modules run as submitted, and a guest that stops calling the host cannot be stopped."},
	}, {
		ID: "9b", Name: "guest interruption: journaled pure call (figure 2)", Unit: "us/call", Better: "lower",
		Value: median(o2), Samples: o2,
		Measures: fmt.Sprintf("figure 2's path (host.Host.Run of testdata/loop.wat, %d+1 run.input calls, journaled and group-committed on a fresh badgerstore) on the default engine.", m),
		Floor: &Floor{Name: "no interruption", Unit: "us/call", Value: median(f2), Samples: f2,
			Measures: "the same on an engine made with internal/benchknobs.NoGuestInterrupt."},
	}}
	compute := func(id, what string, code []byte, count int, kind string, ours, floor *host.Engine) (Figure, error) {
		run := func(e *host.Engine) (float64, error) {
			d, err := execute(ctx, e, code, countInput(count), 1)
			return ms(d), err
		}
		eng := h.engine
		h.engine = ours
		o, f, err := pair(id, run)
		h.engine = eng
		if err != nil {
			return Figure{}, err
		}
		how := "its modules yield every 65 536 loop iterations and function entries (wazero)"
		if kind == host.EngineWasmtime {
			how = "epoch interruption: the compiled code checks the engine's epoch at function entries and loop headers, the epoch ticks every 10 ms, and a deadline callback decides (wasmtime)"
		}
		return Figure{ID: id, Name: "guest interruption: " + what + ", " + kindName(kind), Unit: "ms", Better: "lower",
			Value: median(o), Samples: o,
			Measures: fmt.Sprintf("host.Engine.Execute of %s, after one run.input call, on the %s engine, where %s.", what, kindName(kind), how),
			Floor: &Floor{Name: "no interruption", Unit: "ms", Value: median(f), Samples: f,
				Measures: "the same on an engine made with internal/benchknobs.NoGuestInterrupt."}}, nil
	}
	loops, fibN := 200_000_000, 32
	if h.cfg.RoundTripCalls < 100_000 { // quick
		loops, fibN = 2_000_000, 20
	}
	loopWhat := fmt.Sprintf("a tight loop of %d iterations (testdata/spinloop.wat: 5 instructions each)", loops)
	fibWhat := fmt.Sprintf("naive recursive fib(%d) (testdata/fib.wat: no loop, 2 calls a call)", fibN)
	for _, c := range []struct {
		id, what string
		code     []byte
		count    int
	}{{"9c", loopWhat, spin, loops}, {"9d", fibWhat, fib, fibN}} {
		fig, err := compute(c.id, c.what, c.code, c.count, host.EngineWazero, h.engine, plain)
		if err != nil {
			return nil, err
		}
		if c.id == "9c" {
			// wazero's own way to stop a guest, for comparison.
			if d, err := closeOnContextDone(ctx, spin, loops); err == nil {
				fig.Extra = map[string]float64{"wazero WithCloseOnContextDone ms": ms(d)}
				fig.Notes = fmt.Sprintf("wazero's own WithCloseOnContextDone (an exit to Go at every loop iteration) takes %.0f ms for the same loop on a bare wazero runtime: %.1fx the floor.", ms(d), ms(d)/fig.Floor.Value)
			}
		}
		figs = append(figs, fig)
	}
	if wt, err := host.NewEngine(ctx, host.EngineConfig{Kind: host.EngineWasmtime}); err == nil {
		defer wt.Close(ctx)
		wplain, err := uninterruptibleEngine(ctx, host.EngineWasmtime)
		if err != nil {
			return nil, err
		}
		defer wplain.Close(ctx)
		for _, c := range []struct {
			id, what string
			code     []byte
			count    int
		}{{"9e", loopWhat, spin, loops}, {"9f", fibWhat, fib, fibN}} {
			fig, err := compute(c.id, c.what, c.code, c.count, host.EngineWasmtime, wt, wplain)
			if err != nil {
				return nil, err
			}
			figs = append(figs, fig)
		}
	} else {
		h.logf("9e, 9f skipped: %v", err)
	}
	return figs, nil
}

func kindName(kind string) string {
	if kind == "" {
		return host.EngineWazero
	}
	return kind
}

// closeOnContextDone runs spinloop on a bare wazero runtime with
// WithCloseOnContextDone and a no-op agentrt:run, and times the guest.
func closeOnContextDone(ctx context.Context, code []byte, loops int) (time.Duration, error) {
	bare, err := newBareRuntimeWith(ctx, wazero.NewRuntimeConfigCompiler().WithCloseOnContextDone(true))
	if err != nil {
		return 0, err
	}
	defer bare.close(ctx)
	cm, err := bare.rt.CompileModule(ctx, code)
	if err != nil {
		return 0, err
	}
	return bare.run(ctx, cm, countInput(loops), 1)
}

// Figure 10: the host's peak memory for a run of 1M pure calls, in a
// process of its own: the agentrt CLI.
func (h *harness) memory(ctx context.Context) ([]Figure, error) {
	if runtime.GOOS != "linux" {
		h.logf("10 skipped: the peak RSS of a process is read from /proc (Linux)")
		return nil, nil
	}
	bin := filepath.Join(dir(h.root, "cli"), "agentrt")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/agentrt")
	build.Dir = filepath.Join(sourceDir(), "..")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("bench: build the CLI: %v\n%s", err, out)
	}
	loop := filepath.Join(h.root, "guests", "loop.wasm")
	calls := 1_000_000
	if h.cfg.PureCalls < 10_000 { // quick
		calls = 20_000
	}
	peak := func(n int) (float64, error) {
		data := dir(h.root, fmt.Sprintf("rss-%d-%d", n, time.Now().UnixNano()))
		in := filepath.Join(data, "input")
		if err := os.WriteFile(in, countInput(n), 0o600); err != nil {
			return 0, err
		}
		cmd := exec.CommandContext(ctx, bin, "--data", data, "--cache", dir(h.root, "cli-cache"), "run", loop, "--input-file", in, "-q")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		// VmHWM, the process's peak RSS since its exec, read until it
		// exits. (getrusage's maxrss of a child counts the parent's
		// memory, which a vfork-style child shares until its exec.)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var hwm float64
		for {
			if v := vmHWM(cmd.Process.Pid); v > hwm {
				hwm = v
			}
			select {
			case err := <-done:
				if err != nil {
					return 0, fmt.Errorf("bench: agentrt run of %d calls: %v\n%s", n, err, out.Bytes())
				}
				return hwm / (1 << 20), nil
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	var big, small []float64
	reps := min(h.cfg.Reps, 3)
	for r := range reps {
		b, err := peak(calls)
		if err != nil {
			return nil, err
		}
		s, err := peak(1)
		if err != nil {
			return nil, err
		}
		big, small = append(big, b), append(small, s)
		h.logf("10 peak RSS rep %d: %d calls %.0f MiB, 1 call %.0f MiB", r, calls, b, s)
	}
	return []Figure{{
		ID: "10", Name: fmt.Sprintf("peak host memory of a run of %d pure calls", calls), Unit: "MiB", Better: "lower",
		Value: median(big), Samples: big,
		Measures: fmt.Sprintf("the peak resident set (VmHWM, read every 5 ms until it exits) of an `agentrt run` process running testdata/loop.wat for %d+1 run.input calls, journaled to a fresh data directory (badger store, group commit 256, compilation cache warm).", calls),
		Floor: &Floor{Name: "a run of 1 call", Unit: "MiB", Value: median(small), Samples: small,
			Measures: "the same process and guest making one call: what the CLI, the engine, the compiled module and badger take before any run grows."},
		Notes: "In a heap profile of such a run the host's own buffers are small (a group of at most 256 entries, at most 1 MiB of events between commits); the growth is badger's memtables and table builders (journal/badgerstore).",
	}}, nil
}

// vmHWM returns the peak resident set of process pid since its exec,
// bytes (0 when unknown).
func vmHWM(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb * 1024
		}
	}
	return 0
}
