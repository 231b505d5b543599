package bench

import (
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	"github.com/agentrt/agentrt/replay"
	badger "github.com/dgraph-io/badger/v4"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// This file holds the measured paths, ours and their floors, each timed the
// same way; figures.go decides sizes and repetitions.

// sourceDir returns the directory of the bench package's sources.
func sourceDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// inputResponse is the canonical CBOR of run.input's answer for a run whose
// input is in.
func inputResponse(in []byte) []byte {
	b, err := abi.Marshal(&abi.InputResponse{Input: in})
	if err != nil {
		panic(err)
	}
	return b
}

// fixedSource answers run.input with a fixed response and every other op
// with ok and no body: the host's call path with nothing journaled.
type fixedSource struct{ input []byte }

func (s fixedSource) Serve(_ context.Context, c *host.Call) (abi.Status, []byte, error) {
	if c.Op.Cap == abi.CapRun && c.Op.Code == abi.OpRunInput {
		return abi.StatusOK, s.input, nil
	}
	return abi.StatusOK, nil, nil
}

// execHeader is the run header of a re-execution under the default grant.
func execHeader(code, input []byte) *journal.Header {
	grant, err := host.DefaultGrant().Canonical()
	if err != nil {
		panic(err)
	}
	return &journal.Header{ModuleSHA256: journal.Sum(code), ABI: abi.Version, Input: input,
		Seed: make([]byte, 32), WallBase: 1, Grant: grant, ModuleName: "bench"}
}

// execute runs code on engine with every call answered by a fixedSource
// (host.Engine.Execute: the host's call path, journaling off) and returns
// the wall time of the Execute call.
func execute(ctx context.Context, engine *host.Engine, code, input []byte, wantSteps uint64) (time.Duration, error) {
	spec := host.ExecSpec{Run: journal.RunID{1}, Header: execHeader(code, input), Code: code,
		Source: fixedSource{input: inputResponse(input)}}
	start := time.Now()
	out, err := engine.Execute(ctx, spec)
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if out.GuestErr != nil {
		return 0, fmt.Errorf("bench: guest failed: %w", out.GuestErr)
	}
	if wantSteps > 0 && out.Steps != wantSteps {
		return 0, fmt.Errorf("bench: guest made %d calls, want %d", out.Steps, wantSteps)
	}
	return d, nil
}

// bareRuntime is the floor of the import round trip and of cold start: a
// plain wazero runtime whose agentrt:run module is one Go function with the
// same stack signature, (i32,i32,i32,i32,i32)->i64, that reads the request
// from guest memory and writes a fixed response.
type bareRuntime struct {
	rt    wazero.Runtime
	resp  []byte // the response of every call
	calls uint64
	sink  byte
}

func newBareRuntime(ctx context.Context, cacheDir string) (*bareRuntime, error) {
	rc := wazero.NewRuntimeConfigCompiler()
	if cacheDir != "" {
		cache, err := wazero.NewCompilationCacheWithDir(cacheDir)
		if err != nil {
			return nil, err
		}
		rc = rc.WithCompilationCache(cache)
	}
	return newBareRuntimeWith(ctx, rc)
}

// newBareRuntimeWith is newBareRuntime with the runtime configured by rc.
func newBareRuntimeWith(ctx context.Context, rc wazero.RuntimeConfig) (*bareRuntime, error) {
	b := &bareRuntime{rt: wazero.NewRuntimeWithConfig(ctx, rc)}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, b.rt); err != nil {
		b.rt.Close(ctx)
		return nil, err
	}
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	_, err := b.rt.NewHostModuleBuilder(abi.CapRun.Module()).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, mod api.Module, stack []uint64) {
			mem := mod.Memory()
			reqPtr, reqLen := api.DecodeU32(stack[1]), api.DecodeU32(stack[2])
			respPtr, respCap := api.DecodeU32(stack[3]), api.DecodeU32(stack[4])
			req, ok := mem.Read(reqPtr, reqLen)
			if !ok {
				panic("request outside memory")
			}
			if len(req) > 0 {
				b.sink ^= req[0]
			}
			b.calls++
			n := uint32(len(b.resp))
			if n > respCap {
				stack[0] = uint64(abi.Pack(abi.StatusPending, n))
				return
			}
			if !mem.Write(respPtr, b.resp) {
				panic("response outside memory")
			}
			stack[0] = uint64(abi.Pack(abi.StatusOK, n))
		}), []api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i64}).
		Export(abi.FuncCall).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) {
			stack[0] = uint64(abi.Pack(abi.StatusNoPending, 0))
		}), []api.ValueType{i32, i32}, []api.ValueType{i64}).
		Export(abi.FuncTake).
		Instantiate(ctx)
	if err != nil {
		b.rt.Close(ctx)
		return nil, err
	}
	return b, nil
}

func (b *bareRuntime) close(ctx context.Context) { b.rt.Close(ctx) }

// run instantiates compiled, runs its _start with every call answered by
// the run.input response for input, and returns the wall time of
// instantiation and run.
func (b *bareRuntime) run(ctx context.Context, compiled wazero.CompiledModule, input []byte, wantCalls uint64) (time.Duration, error) {
	b.resp, b.calls = inputResponse(input), 0
	start := time.Now()
	inst, err := b.rt.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return 0, err
	}
	_, err = inst.ExportedFunction("_start").Call(ctx)
	d := time.Since(start)
	inst.Close(ctx)
	if err != nil && !isExit0(err) {
		return 0, fmt.Errorf("bench: bare guest failed: %w", err)
	}
	if wantCalls > 0 && b.calls != wantCalls {
		return 0, fmt.Errorf("bench: bare guest made %d calls, want %d", b.calls, wantCalls)
	}
	return d, nil
}

func isExit0(err error) bool {
	var exit interface{ ExitCode() uint32 }
	return errors.As(err, &exit) && exit.ExitCode() == 0
}

// cell is a host on its own badger store in a temporary directory, as a
// one-machine cell runs it.
type cell struct {
	store *badgerstore.Store
	host  *host.Host
	key   ed25519.PrivateKey
}

func openCell(dir string, engine *host.Engine) (*cell, error) {
	st, err := badgerstore.Open(dir)
	if err != nil {
		return nil, err
	}
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		st.Close()
		return nil, err
	}
	h, err := host.New(engine, host.Deps{Store: st, KV: st, Events: st, Key: key}, host.Config{})
	if err != nil {
		st.Close()
		return nil, err
	}
	return &cell{store: st, host: h, key: key}, nil
}

func (c *cell) close() error { return c.store.Close() }

// run runs code to its end with input and grant, and checks that the guest
// completed after wantSteps calls.
func (c *cell) run(ctx context.Context, code, input []byte, grant *host.Grant, wantSteps uint64) (*host.Result, error) {
	res, err := c.host.Run(ctx, host.RunSpec{Code: code, Name: "bench", Input: input, Grant: grant})
	if err != nil {
		return nil, err
	}
	if res.Status != journal.StatusCompleted {
		return nil, endedErr(ctx, c.store, "run", res)
	}
	if res.Steps != wantSteps {
		return nil, fmt.Errorf("bench: run %s made %d calls, want %d", res.Run, res.Steps, wantSteps)
	}
	return res, nil
}

func kvGrant(ns string) *host.Grant {
	return &host.Grant{Run: &host.RunGrant{}, KV: &host.KVGrant{Namespace: ns}}
}

// effectLatencies returns, for every effect of run, the host time from its
// intent entry to the next entry the guest caused after the effect returned
// (the next call's first entry, or the run's end entry): journaling the
// intent and executing entries, the durable commit with its fsync, the
// dispatch, and the guest's turn to its next call (negligible for the
// WAT guests). The completed entry's own time cannot serve: a kv write's
// completed entry is built before the commit that makes it durable.
func effectLatencies(ctx context.Context, st journal.Store, run journal.RunID) ([]time.Duration, error) {
	var lat []time.Duration
	var open int64 // time of the current effect's intent; 0 when none
	var openStep uint64
	err := journal.ReadEntries(ctx, st, run, func(e *journal.Entry, _ *journal.Record) error {
		if e.Phase == journal.PhaseFailed {
			return fmt.Errorf("bench: step %d (%s) failed with status %d", e.Step, e.Op, e.Status)
		}
		if open != 0 && e.Step != openStep {
			lat = append(lat, time.Duration(e.Time-open))
			open = 0
		}
		if e.Phase == journal.PhaseIntent {
			open, openStep = e.Time, e.Step
		}
		return nil
	})
	return lat, err
}

// openBareBadger opens the floor of the durable path: a plain badger
// database with SyncWrites on (every commit fsynced by badger itself) and
// otherwise the options badgerstore uses.
func openBareBadger(dir string) (*badger.DB, error) { return openBadger(dir, true) }

// openBadger opens a badger database with badgerstore's options and the
// given SyncWrites.
func openBadger(dir string, syncWrites bool) (*badger.DB, error) {
	opts := badger.DefaultOptions(dir).
		WithSyncWrites(syncWrites).
		WithLogger(nil).
		WithMemTableSize(32 << 20).
		WithBlockCacheSize(32 << 20).
		WithIndexCacheSize(16 << 20).
		WithValueLogFileSize(64 << 20).
		WithNumVersionsToKeep(1).
		WithDetectConflicts(false)
	return badger.Open(opts)
}

// floorValue is the value the floor writes: as large as the kv.put value
// of kvput.wat.
var floorValue = make([]byte, 100)

// bareCommits does n transactions of one Set each, every one committed
// durably, and returns each commit's latency.
func bareCommits(db *badger.DB, prefix string, n int) ([]time.Duration, error) {
	lat := make([]time.Duration, 0, n)
	key := make([]byte, 0, len(prefix)+8)
	for i := range n {
		key = binary.BigEndian.AppendUint64(append(key[:0], prefix...), uint64(i))
		start := time.Now()
		txn := db.NewTransaction(true)
		if err := txn.Set(append([]byte(nil), key...), floorValue); err != nil {
			txn.Discard()
			return nil, err
		}
		if err := txn.Commit(); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(start))
	}
	return lat, nil
}

// recordBytes is the size of run's journal as stored: every record's bytes.
func recordBytes(ctx context.Context, st journal.Store, run journal.RunID) (int64, error) {
	var n int64
	err := st.Records(ctx, run, 0, func(_ uint64, rec []byte) error {
		n += int64(len(rec))
		return nil
	})
	return n, err
}

// rawSyncs writes n records of size bytes one after another into a file
// made 16 MiB and sparse, as a segment of the journal's log is, each
// followed by an fdatasync, and returns each one's latency: the disk's
// price of a durable commit, with nothing around it.
func rawSyncs(dir string, n, size int) ([]time.Duration, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, "raw-*.log")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := f.Truncate(16 << 20); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	rec := make([]byte, size)
	lat := make([]time.Duration, 0, n)
	for i := range n {
		if int64(i+1)*int64(size) > 16<<20 {
			return nil, fmt.Errorf("bench: %d records of %d bytes do not fit the raw floor's file", n, size)
		}
		rec[0] = byte(i)
		start := time.Now()
		if _, err := f.WriteAt(rec, int64(i*size)); err != nil {
			return nil, err
		}
		if err := datasync(f); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(start))
	}
	return lat, nil
}

// concurrently runs fn(0..workers-1) on one goroutine each and returns the
// wall time until all are done and the first error.
func concurrently(workers int, fn func(i int) error) (time.Duration, error) {
	var wg sync.WaitGroup
	errs := make([]error, workers)
	start := time.Now()
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}

// decodeAll is the floor of replay: iterate the stored records of run and
// decode each record and entry, checking nothing else.
func decodeAll(ctx context.Context, st journal.Store, run journal.RunID) (uint64, error) {
	var n uint64
	err := st.Records(ctx, run, 0, func(_ uint64, raw []byte) error {
		rec, err := journal.DecodeRecord(raw)
		if err != nil {
			return err
		}
		if _, err := journal.DecodeEntry(rec.Entry); err != nil {
			return err
		}
		n++
		return nil
	})
	return n, err
}

// loadAndReplay verifies run (replay.Load) and re-executes it
// (Journal.Replay), timing each half.
func loadAndReplay(ctx context.Context, st journal.Store, engine *host.Engine, run journal.RunID, code []byte, trust journal.TrustFunc) (load, exec time.Duration, entries uint64, err error) {
	start := time.Now()
	j, err := replay.Load(ctx, st, run, trust)
	load = time.Since(start)
	if err != nil {
		return 0, 0, 0, err
	}
	start = time.Now()
	rep, err := j.Replay(ctx, engine, code, replay.Options{})
	exec = time.Since(start)
	if err != nil {
		return 0, 0, 0, err
	}
	return load, exec, rep.Entries, nil
}

// coldStart is one cold start of code on agentrt: a new engine, the
// module's compilation and its first run (Execute, answered by a
// fixedSource). cacheDir empty: no compilation cache.
type coldStart struct {
	engine, compile, first time.Duration
}

func (c coldStart) total() time.Duration { return c.engine + c.compile + c.first }

func coldStartOurs(ctx context.Context, code []byte, cacheDir string) (coldStart, error) {
	var c coldStart
	t0 := time.Now()
	eng, err := host.NewEngine(ctx, host.EngineConfig{CacheDir: cacheDir})
	if err != nil {
		return c, err
	}
	defer eng.Close(ctx)
	t1 := time.Now()
	if _, err := eng.Compile(ctx, code); err != nil {
		return c, err
	}
	t2 := time.Now()
	c.engine, c.compile = t1.Sub(t0), t2.Sub(t1)
	c.first, err = execute(ctx, eng, code, countInput(0), 0)
	return c, err
}

// coldStartBare is the floor of coldStart: a bare wazero runtime with WASI
// and a one-function agentrt:run module, the module's compilation and its
// first instantiation and run.
func coldStartBare(ctx context.Context, code []byte, cacheDir string) (coldStart, error) {
	var c coldStart
	t0 := time.Now()
	b, err := newBareRuntime(ctx, cacheDir)
	if err != nil {
		return c, err
	}
	defer b.close(ctx)
	t1 := time.Now()
	cm, err := b.rt.CompileModule(ctx, code)
	if err != nil {
		return c, err
	}
	t2 := time.Now()
	c.engine, c.compile = t1.Sub(t0), t2.Sub(t1)
	c.first, err = b.run(ctx, cm, countInput(0), 0)
	return c, err
}

// warmCache compiles code once into cacheDir, as a previous process would
// have.
func warmCache(ctx context.Context, code []byte, cacheDir string, bare bool) error {
	if bare {
		b, err := newBareRuntime(ctx, cacheDir)
		if err != nil {
			return err
		}
		defer b.close(ctx)
		_, err = b.rt.CompileModule(ctx, code)
		return err
	}
	eng, err := host.NewEngine(ctx, host.EngineConfig{CacheDir: cacheDir})
	if err != nil {
		return err
	}
	defer eng.Close(ctx)
	_, err = eng.Compile(ctx, code)
	return err
}

// percentile returns the p-th percentile (0 < p <= 100, nearest rank) of d,
// which it sorts.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	rank := int(p/100*float64(len(d))+0.999999) - 1
	rank = max(0, min(rank, len(d)-1))
	return d[rank]
}

// loadOnly verifies run (replay.Load) and returns its number of entries.
func loadOnly(ctx context.Context, st journal.Store, run journal.RunID, trust journal.TrustFunc) (uint64, error) {
	j, err := replay.Load(ctx, st, run, trust)
	if err != nil {
		return 0, err
	}
	return j.Summary.Entries, nil
}

// endedErr is the error of a run that ended res.Status where want was
// expected, with what the guest wrote to its standard error (its own
// account of the failure, which a Go agent's exit status does not carry),
// read from log. what names the run in the message ("run", "warm-up run").
func endedErr(ctx context.Context, log host.EventLog, what string, res *host.Result) error {
	msg, err := host.Stderr(ctx, log, res.Run, 4096)
	msg = strings.TrimSpace(msg)
	switch {
	case err != nil:
		msg = fmt.Sprintf("(its events could not be read: %v)", err)
	case msg == "":
		msg = "(nothing on its stderr)"
	}
	return fmt.Errorf("bench: %s %s ended %s: %v; its stderr: %s", what, res.Run, res.Status, res.Err, msg)
}
