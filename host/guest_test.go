package host_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

// The attacks of a hostile guest on its host (SECURITY.md, "Hostile
// guests"): each test runs a real module on a real host, on the engine of
// AGENTRT_TEST_ENGINE.

// watModule assembles WebAssembly text with wat2wasm.
func watModule(t *testing.T, src string) []byte {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "m.wat"), filepath.Join(dir, "m.wasm")
	if err := os.WriteFile(in, []byte(src), 0o600); err != nil {
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

// startAsync starts a run of code and executes it in the background.
func startAsync(t *testing.T, env *testutil.Env, spec host.RunSpec) (journal.RunID, chan runOutcome) {
	t.Helper()
	st, err := env.Host.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan runOutcome, 1)
	go func() {
		res, err := st.Execute(context.Background())
		done <- runOutcome{res, err}
	}()
	return st.Run, done
}

type runOutcome struct {
	res *host.Result
	err error
}

// logSink counts the guest's log lines as they happen (pure calls are not
// committed at once, so the store is no clock for them).
type logSink chan struct{}

func (l logSink) sink(e host.Event) {
	if e.Kind == host.EventRunLog {
		select {
		case l <- struct{}{}:
		default:
		}
	}
}

func (l logSink) wait(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-l:
		case <-time.After(20 * time.Second):
			t.Fatalf("the guest did not log %d lines", n)
		}
	}
}

func waitOutcome(t *testing.T, done chan runOutcome, within time.Duration) runOutcome {
	t.Helper()
	select {
	case o := <-done:
		return o
	case <-time.After(within):
		t.Fatalf("the run did not stop within %v", within)
		return runOutcome{}
	}
}

// TestSpinningGuestIsStopped: a guest that computes forever after three
// calls is stopped by a cancel, as one between two calls is: its run is
// cancelled with nothing in doubt (the journal ends with its third call's
// outcome), a resume re-executes it, a drain stops it again and leaves it
// running, and so does the end of the run's context (Ctrl-C).
func TestSpinningGuestIsStopped(t *testing.T) {
	logs := make(logSink, 16)
	env := testutil.NewEnv(t, host.Deps{Sink: logs.sink}, host.Config{})
	ctx := context.Background()
	code := testutil.BuildWAT(t, "host/testdata/wat/spin.wat")
	run, done := startAsync(t, env, host.RunSpec{Code: code})
	logs.wait(t, 3)
	time.Sleep(50 * time.Millisecond) // well into the loop
	start := time.Now()
	if err := env.Host.Cancel(ctx, run); err != nil {
		t.Fatal(err)
	}
	o := waitOutcome(t, done, 5*time.Second)
	took := time.Since(start)
	if !errors.Is(o.err, host.ErrInterrupted) || !errors.Is(o.err, host.ErrCancelled) || o.res.Status != journal.StatusCancelled || o.res.Steps != 3 {
		t.Fatalf("cancelled spinning run: %v %+v; want cancelled after 3 calls", o.err, o.res)
	}
	es := entries(t, env, run)
	if last := es[len(es)-1]; last.Phase != journal.PhaseCompleted || last.Step != 3 {
		t.Fatalf("the journal ends with %s of step %d; want the third call's outcome (nothing in doubt)", last.Phase, last.Step)
	}
	t.Logf("cancel stopped the spinning guest in %v (indicative: a shared machine)", took)

	// A resume answers the three calls from the journal and spins again;
	// a drain stops it and leaves it running.
	st, err := env.Host.Reopen(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	resumed := make(chan runOutcome, 1)
	go func() {
		res, err := st.Execute(ctx)
		resumed <- runOutcome{res, err}
	}()
	for !env.Host.Live(run) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if err := env.Host.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	o = waitOutcome(t, resumed, 5*time.Second)
	if !errors.Is(o.err, host.ErrDraining) || o.res.Status != journal.StatusRunning || o.res.Replayed != 3 {
		t.Fatalf("drained resumed run: %v %+v; want running, the three calls replayed", o.err, o.res)
	}
	if meta, _ := env.Store.Meta(ctx, run); meta.Status != journal.StatusRunning {
		t.Fatalf("a drained run's index says %s, want running (to be recovered)", meta.Status)
	}

	// The end of the run's context stops it too, and it stays running.
	st, err = env.Host.Reopen(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	res, err := st.Execute(cctx)
	if !errors.Is(err, host.ErrInterrupted) || res.Status != journal.StatusRunning {
		t.Fatalf("a spinning run whose context ended: %v %+v", err, res)
	}
	if _, err := journal.VerifyStore(ctx, env.Store, run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey))); err != nil {
		t.Fatalf("the journal after three interruptions: %v", err)
	}
}

// TestRecursingGuestIsStopped: a guest that recurses without end and
// without a loop (naive fib(90)) is stopped too: the check runs at
// function entries as well as loop headers.
func TestRecursingGuestIsStopped(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	run, done := startAsync(t, env, host.RunSpec{Code: testutil.BuildWAT(t, "host/testdata/wat/recurse.wat")})
	time.Sleep(100 * time.Millisecond)
	if err := env.Host.Cancel(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	o := waitOutcome(t, done, 5*time.Second)
	if !errors.Is(o.err, host.ErrCancelled) || o.res.Status != journal.StatusCancelled || o.res.Steps != 0 {
		t.Fatalf("cancelled recursing run: %v %+v", o.err, o.res)
	}
}

// TestSpinningGuestDoesNotHoldUpTheCollector: while a guest computes
// without calling the host, a garbage collection of the host completes.
// (wazero's compiled code cannot be preempted: without the yields of the
// rewritten module, a collection waits for the guest to return, and every
// goroutine of the host waits with it.)
func TestSpinningGuestDoesNotHoldUpTheCollector(t *testing.T) {
	logs := make(logSink, 16)
	env := testutil.NewEnv(t, host.Deps{Sink: logs.sink}, host.Config{})
	run, done := startAsync(t, env, host.RunSpec{Code: testutil.BuildWAT(t, "host/testdata/wat/spin.wat")})
	logs.wait(t, 3)
	time.Sleep(50 * time.Millisecond)
	gc := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		runtime.GC()
		gc <- time.Since(start)
	}()
	select {
	case d := <-gc:
		t.Logf("a collection during the spinning guest took %v (indicative)", d)
	case <-time.After(5 * time.Second):
		t.Fatal("a garbage collection did not complete within 5 s while the guest computed")
	}
	if err := env.Host.Cancel(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	waitOutcome(t, done, 5*time.Second)
}

// budgetToken returns a token for the run capability with a wall-time
// budget of secs seconds.
func budgetToken(t *testing.T, env *testutil.Env, secs uint64) []byte {
	t.Helper()
	tok, err := capability.Issue(env.Key, capability.Claims{
		Audience: env.Key.Public().(ed25519.PublicKey), Caps: capability.Caps{Run: &capability.Unit{}},
		Budget:    capability.Budget{WallSeconds: capability.Limit(secs)},
		NotBefore: time.Now().Add(-time.Minute), Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestWallBudgetStopsAComputingGuest: a token's wall-time budget stops a
// guest that computes without calling the host: the run ends failed with a
// reason naming the budget, after its three calls, and replays exactly
// and in bounded time (the re-executed guest is stopped after its last
// recorded call).
func TestWallBudgetStopsAComputingGuest(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	ctx := context.Background()
	code := testutil.BuildWAT(t, "host/testdata/wat/spin.wat")
	start := time.Now()
	res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Token: budgetToken(t, env, 1)})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != journal.StatusFailed || res.Steps != 3 || !strings.Contains(res.Err.Error(), "stopped: budget: the run's wall-time budget of 1s") {
		t.Fatalf("run over its budget: %+v; want failed after 3 calls, naming the budget", res)
	}
	if took < time.Second || took > 10*time.Second {
		t.Fatalf("the budget of 1 s stopped the run after %v", took)
	}
	j, err := replay.Load(ctx, env.Store, res.Run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	if !host.StoppedEnd(j.Summary.End) {
		t.Fatalf("the end records %q; want a stop", j.Summary.End.Error)
	}
	start = time.Now()
	rep, err := j.Replay(ctx, env.Engine, code, replay.Options{})
	if err != nil || rep.Calls != 3 {
		t.Fatalf("replay of a run its budget stopped: %v %+v", err, rep)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the replay took %v; it must stop the guest after its last recorded call", d)
	}
}

// TestTableAndMemoryGrowthStopAtTheRunsLimits: table.grow by 2^31
// elements, then growth one element and one page at a time, fail (-1) at
// the limits of the run's grant, which its header records; the run
// completes and replays. Without limits the one-shot table.grow drove the
// host out of memory (a 200-byte module).
func TestTableAndMemoryGrowthStopAtTheRunsLimits(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	ctx := context.Background()
	code := testutil.BuildWAT(t, "host/testdata/wat/grow.wat")
	g, err := host.ParseGrant([]byte("capabilities: {run: {}}\nlimits: {memory: 4MiB, table_elements: 1000}\n"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Grant: g})
	if err != nil || res.Status != journal.StatusCompleted || len(res.Output) != 12 {
		t.Fatalf("run: %v %+v", err, res)
	}
	oneShot, elems, pages := int32(binary.LittleEndian.Uint32(res.Output)), binary.LittleEndian.Uint32(res.Output[4:]), binary.LittleEndian.Uint32(res.Output[8:])
	if oneShot != -1 || elems != 1000 || pages != 64 {
		t.Fatalf("table.grow(2^31) = %d, the table grew to %d elements, the memory to %d pages; want -1, 1000, 64", oneShot, elems, pages)
	}
	es := entries(t, env, res.Run)
	rg, err := host.DecodeGrant(es[0].Header.Grant)
	if err != nil {
		t.Fatal(err)
	}
	if rg.Limits == nil || rg.Limits.MemoryPages != 64 || rg.Limits.TableElements != 1000 || rg.Limits.Calls != host.DefaultLimits().Calls {
		t.Fatalf("the header records limits %+v", rg.Limits)
	}
	// A replay applies the recorded limits, whatever its own defaults.
	j, err := replay.Load(ctx, env.Store, res.Run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Replay(ctx, env.Engine, code, replay.Options{}); err != nil {
		t.Fatalf("replay: %v", err)
	}
	// With the cell's defaults, the table stops at 2^20 elements.
	res, err = env.Host.Run(ctx, host.RunSpec{Code: code})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run with the defaults: %v %+v", err, res)
	}
	if elems := binary.LittleEndian.Uint32(res.Output[4:]); elems != host.DefaultLimits().TableElements {
		t.Fatalf("the table grew to %d elements under the defaults", elems)
	}
}

// TestGrantLimitsOnlyLowerTheCells: a grant that asks for more than the
// cell's limits is refused before the run starts, naming the limit.
func TestGrantLimitsOnlyLowerTheCells(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{Limits: host.Limits{Calls: 500}})
	g, err := host.ParseGrant([]byte("capabilities: {run: {}}\nlimits: {calls: 1000}\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = env.Host.Run(context.Background(), host.RunSpec{Code: testutil.BuildWAT(t, "host/testdata/wat/loop.wat"), Grant: g})
	if !errors.Is(err, host.ErrLimitRaised) || !strings.Contains(err.Error(), "limits.calls: 1000 is above this cell's limit of 500") {
		t.Fatalf("a grant raising the cell's limit: %v", err)
	}
	for _, bad := range []string{"limits: {memory: 100000}", "limits: {journal: lots}", "limits: {cals: 3}", "limits: {}"} {
		if _, err := host.ParseGrant([]byte("capabilities: {run: {}}\n" + bad + "\n")); err == nil {
			t.Errorf("grant with %s parsed", bad)
		}
	}
}

// TestQuotasEndTheRun: the call past the run's calls quota, and the one
// whose request would take its journal past its quota, end the run failed
// with the quota named; neither is journaled; both runs replay exactly.
func TestQuotasEndTheRun(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	ctx := context.Background()
	code := testutil.BuildWAT(t, "host/testdata/wat/loop.wat") // 300 run.log calls of 14 bytes, then set_output
	for _, c := range []struct {
		limits string
		steps  uint64
		want   string
	}{
		{"calls: 100", 100, "quota: calls: the run has made its 100 calls (limits.calls)"},
		{"journal: 1KiB", 73, "quota: journal"}, // 73 x 14 bytes fit in 1024, the 74th does not
	} {
		g, err := host.ParseGrant([]byte("capabilities: {run: {}}\nlimits: {" + c.limits + "}\n"))
		if err != nil {
			t.Fatal(err)
		}
		res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Grant: g})
		if err != nil || res.Status != journal.StatusFailed || res.Steps != c.steps || !strings.Contains(res.Err.Error(), c.want) {
			t.Fatalf("%s: %v %+v; want failed after %d calls: %s", c.limits, err, res, c.steps, c.want)
		}
		es := entries(t, env, res.Run)
		end := es[len(es)-1]
		if end.Phase != journal.PhaseEnd || end.End.Steps != c.steps || !strings.HasPrefix(end.End.Error, "stopped: quota: ") {
			t.Fatalf("%s: the journal ends with %+v", c.limits, end.End)
		}
		if prev := es[len(es)-2]; prev.Step != c.steps {
			t.Fatalf("%s: the last call journaled is step %d; want %d (the refused call is not)", c.limits, prev.Step, c.steps)
		}
		j, err := replay.Load(ctx, env.Store, res.Run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.Replay(ctx, env.Engine, code, replay.Options{}); err != nil {
			t.Fatalf("%s: replay: %v", c.limits, err)
		}
	}
}

// TestDiskFillingGuestIsStopped: a guest with the default capability that
// logs 60 KB messages forever is stopped by its journal quota, and its
// event log holds no more than its log quota (and the note of the drop).
// Without quotas such a guest wrote 2.7 GB of store in 20 s.
func TestDiskFillingGuestIsStopped(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	ctx := context.Background()
	g, err := host.ParseGrant([]byte("capabilities: {run: {}}\nlimits: {journal: 4MiB, log: 1MiB}\n"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := env.Host.Run(ctx, host.RunSpec{Code: testutil.BuildWAT(t, "host/testdata/wat/biglog.wat"), Grant: g})
	if err != nil || res.Status != journal.StatusFailed || !strings.Contains(res.Err.Error(), "quota: journal") {
		t.Fatalf("run: %v %+v", err, res)
	}
	if want := uint64(4<<20) / 60015; res.Steps != want {
		t.Fatalf("the run made %d calls; %d fit in 4 MiB", res.Steps, want)
	}
	var kept int
	var note bool
	err = host.ReadEvents(ctx, env.Store, res.Run, func(e host.Event) error {
		if e.Kind == host.EventRunLog {
			kept += len(e.Data)
		}
		note = note || strings.Contains(string(e.Data), "log quota of 1048576 bytes is used up")
		return nil
	})
	if err != nil || kept > 1<<20 || kept < 1<<20-60000 || !note {
		t.Fatalf("the event log holds %d bytes of log lines (note of the drop: %v, %v); want at most 1 MiB", kept, note, err)
	}
}

// TestModulesOverTheLimitsAreRefusedAtCompile: modules whose compilation
// or instantiation would cost the host without bound are refused before
// any engine sees them, at once, with the limit named: nested blocks
// (a 3 MB module compiled for minutes), a billion locals (a 30-byte module
// that makes an engine allocate gigabytes), tables and memories that start
// over the run's limits, too many tables, a module over the size limit.
func TestModulesOverTheLimitsAreRefusedAtCompile(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	ctx := context.Background()
	cases := []struct {
		name string
		code []byte
		want string
	}{
		{"3 MB of nested blocks", nestedBlocks(1_000_000), "blocks nest 2001 deep, over the limit of 2000"},
		{"100 000 br_if", moduleWithBodies([][]byte{append(append([]byte{0, 0x02, 0x40}, bytes.Repeat([]byte{0x41, 0x00, 0x0d, 0x00}, 100_000)...), 0x0b, 0x0b)}),
			"10001 branches or more, over the limit of 10000"},
		{"100 000 blocks in a row", moduleWithBodies([][]byte{append(append([]byte{0}, bytes.Repeat([]byte{0x02, 0x40, 0x0b}, 100_000)...), 0x0b)}),
			"10001 branches or more, over the limit of 10000"},
		{"a billion locals", manyLocals(1 << 30), "1073741824 locals or more, over the limit of 50000"},
		{"a table of 2^32-1 elements", watModule(t, `(module (memory (export "memory") 1) (table 0xffffffff funcref) (func (export "_start")))`),
			"table 0 starts at 4294967295 elements, over the run's limit of 1048576"},
		{"memory of 65536 pages", watModule(t, `(module (memory (export "memory") 65536) (func (export "_start")))`),
			"memory 0 starts at 65536 pages (4096 MiB), over the run's limit of 16384 pages"},
		{"five tables", watModule(t, `(module (memory (export "memory") 1) (table 1 funcref) (table 1 funcref) (table 1 funcref) (table 1 funcref) (table 1 funcref) (func (export "_start")))`),
			"the module has 5 tables, over the run's limit of 4"},
		{"65 MiB", append(nestedBlocks(1), make([]byte, 65<<20)...), "over the limit of 67108864"},
	}
	for _, c := range cases {
		start := time.Now()
		_, err := env.Host.Run(ctx, host.RunSpec{Code: c.code})
		if !errors.Is(err, host.ErrModuleLimit) || !errors.Is(err, host.ErrBadModule) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: %v; want a refusal: %s", c.name, err, c.want)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: refused after %v", c.name, d)
		}
	}
	if runs, _ := env.Store.Runs(ctx); len(runs) != 0 {
		t.Fatalf("refused modules left %d runs", len(runs))
	}
}

// TestCompileTimeoutStopsTheCompiler: a module within every static limit
// that takes longer than the compile timeout to compile is refused at the
// timeout, and compiling stops then (wazero: at its next function): the
// process uses no more CPU for it afterwards.
func TestCompileTimeoutStopsTheCompiler(t *testing.T) {
	if testutil.EngineKind() == host.EngineWasmtime {
		t.Skip("wasmtime's compilation cannot be stopped (a cgo call); the static limits bound it")
	}
	ctx := context.Background()
	eng, err := host.NewEngine(ctx, host.EngineConfig{Compile: host.CompileLimits{Timeout: 300 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(ctx)
	code := manyNestedFunctions(400, 1500) // about 6 s of wazero's compiler here
	start := time.Now()
	_, err = eng.Compile(ctx, code)
	took := time.Since(start)
	if !errors.Is(err, host.ErrCompileTimeout) || !errors.Is(err, host.ErrModuleLimit) {
		t.Fatalf("compile: %v after %v; want the timeout", err, took)
	}
	if took > 2*time.Second {
		t.Fatalf("refused after %v; the limit is 300 ms", took)
	}
	// The compiler's goroutines finish the function they are on, then stop.
	time.Sleep(500 * time.Millisecond)
	before := processCPU()
	time.Sleep(time.Second)
	if used := processCPU() - before; used > 300*time.Millisecond {
		t.Fatalf("the process used %v of CPU in the second after the refusal; the compilation goes on", used)
	}
}

// TestModuleWithoutMemoryIsRefused: a guest without memory cannot use the
// ABI; one that called an import tripped a nil-pointer dereference in the
// host, and its signed end carried the host's Go stack trace. It is
// refused at compile time now, with the reason.
func TestModuleWithoutMemoryIsRefused(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	code := watModule(t, `(module
  (import "agentrt:run" "call" (func $call (param i32 i32 i32 i32 i32) (result i64)))
  (func (export "_start") (drop (call $call (i32.const 1) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)))))`)
	_, err := env.Host.Run(context.Background(), host.RunSpec{Code: code})
	if !errors.Is(err, host.ErrBadModule) || !strings.Contains(err.Error(), `exports no memory named "memory"`) {
		t.Fatalf("a module without memory: %v", err)
	}
	code = watModule(t, `(module (memory 1) (func (export "_start")))`)
	if _, err := env.Host.Run(context.Background(), host.RunSpec{Code: code}); err == nil || !strings.Contains(err.Error(), `exports no memory named "memory"`) {
		t.Fatalf("a module with an unexported memory: %v", err)
	}
	code = watModule(t, `(module (memory (export "memory") 1) (func $s) (start $s) (func (export "_start")))`)
	if _, err := env.Host.Run(context.Background(), host.RunSpec{Code: code}); err == nil || !strings.Contains(err.Error(), "start function") {
		t.Fatalf("a module with a start function: %v", err)
	}
	code = watModule(t, `(module (memory (export "memory") 1) (func (export "_start") (param i32)))`)
	if _, err := env.Host.Run(context.Background(), host.RunSpec{Code: code}); err == nil || !strings.Contains(err.Error(), "_start is (i32) -> (): it must take no parameters") {
		t.Fatalf("a _start with a parameter: %v", err)
	}
}

// TestLinkCheckNamesEveryImport: the link check names imported tables,
// memories and globals (the host provides functions only), functions of the
// wrong type and WASI functions the host does not have, before anything
// runs.
func TestLinkCheckNamesEveryImport(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	code := watModule(t, `(module
  (import "env" "tbl" (table 1 funcref))
  (import "env" "g" (global i32))
  (import "wasi_snapshot_preview1" "memory" (memory 1))
  (export "memory" (memory 0))
  (import "agentrt:run" "call" (func (param i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_teleport" (func))
  (import "env" "f" (func))
  (import "wasi_snapshot_preview1" "fd_write" (func (param i32) (result i32)))
  (func (export "_start")))`)
	_, err := env.Host.Run(context.Background(), host.RunSpec{Code: code})
	var le *host.LinkError
	if !errors.As(err, &le) {
		t.Fatalf("got %v, want a *host.LinkError", err)
	}
	for _, want := range []string{"a table (env.tbl)", "a global (env.g)", "a memory (wasi_snapshot_preview1.memory)",
		"agentrt:run.call is (i32) -> (i32), not (i32, i32, i32, i32, i32) -> (i64)",
		"wasi_snapshot_preview1.fd_write is (i32) -> (i32), not (i32, i32, i32, i32) -> (i32)",
		"imports unknown functions: wasi_snapshot_preview1.fd_teleport", "imports unknown modules: env"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\ndoes not say %q", err, want)
		}
	}
}

// TestFaultedCallIsNotAStep: a run whose only call faults (its request
// outside memory) ends with steps 0: the call was never journaled.
func TestFaultedCallIsNotAStep(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: testutil.BuildWAT(t, "host/testdata/wat/badptr.wat")})
	if err != nil || res.Status != journal.StatusFailed || res.Steps != 0 {
		t.Fatalf("run: %v %+v", err, res)
	}
	es := entries(t, env, res.Run)
	end := es[len(es)-1].End
	if end == nil || end.Steps != 0 || !strings.HasPrefix(end.Error, "guest trapped: request buffer [2147483632, +64) is outside guest memory\nwasm stack trace:\n\t") {
		t.Fatalf("the end records %+v", end)
	}
}

// nestedBlocks is a module whose _start nests depth empty blocks: 3 bytes
// a level.
func nestedBlocks(depth int) []byte {
	body := []byte{0}
	for range depth {
		body = append(body, 0x02, 0x40)
	}
	for range depth {
		body = append(body, 0x0b)
	}
	body = append(body, 0x0b)
	return moduleWithBodies([][]byte{body})
}

// manyLocals is a module whose _start declares n i32 locals in 7 bytes.
func manyLocals(n uint32) []byte {
	body := append([]byte{1}, binary.AppendUvarint(nil, uint64(n))...)
	return moduleWithBodies([][]byte{append(body, 0x7f, 0x0b)})
}

// manyNestedFunctions is a module of n functions (the first _start) each
// nesting depth empty blocks.
func manyNestedFunctions(n, depth int) []byte {
	bodies := make([][]byte, n)
	for i := range bodies {
		b := []byte{0}
		for range depth {
			b = append(b, 0x02, 0x40)
		}
		for range depth {
			b = append(b, 0x0b)
		}
		bodies[i] = append(b, 0x0b)
	}
	return moduleWithBodies(bodies)
}

// moduleWithBodies is a module with one memory exported as "memory" and
// functions of type () -> () with the given bodies, the first exported as
// _start.
func moduleWithBodies(bodies [][]byte) []byte {
	sec := func(id byte, b []byte) []byte {
		return append(append([]byte{id}, binary.AppendUvarint(nil, uint64(len(b)))...), b...)
	}
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, sec(1, []byte{1, 0x60, 0, 0})...)
	funcs := binary.AppendUvarint(nil, uint64(len(bodies)))
	for range bodies {
		funcs = append(funcs, 0)
	}
	m = append(m, sec(3, funcs)...)
	m = append(m, sec(5, []byte{1, 0, 1})...)
	exp := []byte{2, 6}
	exp = append(exp, "memory"...)
	exp = append(exp, 2, 0, 6)
	exp = append(exp, "_start"...)
	exp = append(exp, 0, 0)
	m = append(m, sec(7, exp)...)
	code := binary.AppendUvarint(nil, uint64(len(bodies)))
	for _, b := range bodies {
		code = append(code, binary.AppendUvarint(nil, uint64(len(b)))...)
		code = append(code, b...)
	}
	return append(m, sec(10, code)...)
}

// processCPU returns the CPU time this process has used.
func processCPU() time.Duration {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
	var ut, st int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// brokenSource is a Source with a bug: it dereferences a nil pointer, as the
// host did reading the memory of a module that had none.
type brokenSource struct{ p *abi.Status }

func (b brokenSource) Serve(context.Context, *host.Call) (abi.Status, []byte, error) {
	return *b.p, nil, nil
}

// TestHostFaultEndsTheGuestWithItsCause: a host function that panics with a
// runtime error (a bug of the host's) fails the guest with the cause, and
// what the end would record carries no Go stack trace of the host's
// (wazero appends one to a runtime error it recovers).
func TestHostFaultEndsTheGuestWithItsCause(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	ctx := context.Background()
	code := testutil.BuildWAT(t, "host/testdata/wat/loop.wat")
	res, err := env.Host.Run(ctx, host.RunSpec{Code: code})
	if err != nil {
		t.Fatal(err)
	}
	hdr := entries(t, env, res.Run)[0].Header
	out, err := env.Engine.Execute(ctx, host.ExecSpec{Run: res.Run, Header: hdr, Code: code, Source: brokenSource{}})
	if err != nil {
		t.Fatal(err)
	}
	var ge *host.GuestError
	if !errors.As(out.GuestErr, &ge) {
		t.Fatalf("outcome %+v; want a guest error", out)
	}
	msg := ge.Error()
	if !strings.HasPrefix(msg, "guest trapped: fault of the host serving an import call: runtime error: invalid memory address or nil pointer dereference\nwasm stack trace:\n\t") {
		t.Fatalf("the end would record %q", msg)
	}
	for _, internal := range []string{"goroutine", ".go:", "Go runtime stack trace", "recovered by"} {
		if strings.Contains(msg, internal) {
			t.Fatalf("the end would record host internals (%q): %s", internal, msg)
		}
	}
}

// TestJournalQuotaCountsOnAcrossACheckpoint: a run that checkpoints and
// is interrupted after its second checkpoint is resumed from it, without
// re-executing the segments before; its journal quota still counts every
// segment (the checkpoint's response carries the count), so the resumed
// run stops at the same call as one never interrupted, and replays.
func TestJournalQuotaCountsOnAcrossACheckpoint(t *testing.T) {
	code := testutil.BuildGo(t, "host/testdata/agents/segments")
	ctx := context.Background()
	// The bytes an unlimited run journals by step 2200, in its third
	// segment.
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	res, err := env.Host.Run(ctx, segmentsSpec(code, 2500, 1000))
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("unlimited run: %v %+v", err, res)
	}
	var journaled uint64
	for _, e := range entries(t, env, res.Run) {
		if e.Op != "" && (e.Phase == journal.PhaseCompleted || e.Phase == journal.PhaseFailed) && e.Step <= 2200 {
			journaled += uint64(len(e.Request)) + uint64(len(e.Response))
		}
	}
	g, err := host.ParseGrant([]byte(fmt.Sprintf("capabilities: {run: {}}\nlimits: {journal: %d}\n", journaled)))
	if err != nil {
		t.Fatal(err)
	}
	spec := segmentsSpec(code, 2500, 1000)
	spec.Grant = g
	want, err := env.Host.Run(ctx, spec)
	// Call 2201's request is empty, so it still fits; its response does
	// not, and the next call is refused.
	if err != nil || want.Status != journal.StatusFailed || want.Steps != 2201 || !strings.Contains(want.Err.Error(), "quota: journal") {
		t.Fatalf("limited run: %v %+v; want stopped by its journal quota after 2201 calls", err, want)
	}

	// The same run, interrupted after its second checkpoint, and resumed.
	cctx, cancel := context.WithCancel(ctx)
	var nows atomic.Int64
	env = testutil.NewEnv(t, host.Deps{Now: func() time.Time {
		if nows.Add(1) == 2150 { // an entry's time, past the second checkpoint
			cancel()
		}
		return time.Now()
	}}, host.Config{})
	res, err = env.Host.Run(cctx, spec)
	cancel()
	if !errors.Is(err, host.ErrInterrupted) {
		t.Fatalf("interrupted run: %v %+v", err, res)
	}
	meta, err := env.Store.Meta(ctx, res.Run)
	if err != nil || meta.Checkpoint == 0 {
		t.Fatalf("the interrupted run has no checkpoint in its index: %v %+v", err, meta)
	}
	got, err := env.Host.Resume(ctx, res.Run)
	if err != nil || got.Status != journal.StatusFailed || got.Steps != want.Steps || got.Replayed >= 2000 {
		t.Fatalf("resumed run: %v %+v; want stopped after %d calls, resumed from its last checkpoint", err, got, want.Steps)
	}
	j, err := replay.Load(ctx, env.Store, res.Run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Replay(ctx, env.Engine, code, replay.Options{}); err != nil {
		t.Fatalf("replay of the resumed run: %v", err)
	}
}
