//go:build wasmtime && cgo

package host

/*
#include <stdint.h>
#include <stdlib.h>

// wasmtime's C API for an epoch deadline callback, which wasmtime-go does
// not wrap; the library is linked by wasmtime-go.
typedef struct wasmtime_store wasmtime_store_t;
typedef struct wasmtime_context wasmtime_context_t;
typedef struct wasmtime_error wasmtime_error_t;
typedef uint8_t wasmtime_update_deadline_kind_t;
extern void wasmtime_store_epoch_deadline_callback(wasmtime_store_t *store,
	wasmtime_error_t *(*func)(wasmtime_context_t *, void *, uint64_t *, wasmtime_update_deadline_kind_t *),
	void *data, void (*finalizer)(void *));
extern wasmtime_error_t *wasmtime_error_new(const char *message);
extern wasmtime_error_t *agentrtEpochDeadline(wasmtime_context_t *, void *, uint64_t *, wasmtime_update_deadline_kind_t *);
*/
import "C"

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/cgo"
	"strings"
	"time"
	"unsafe"

	"github.com/agentrt/agentrt/abi"
	"github.com/bytecodealliance/wasmtime-go/v39"
)

// wasmtimeRuntime is the wasmtime adapter (build tag wasmtime, cgo):
// Cranelift-compiled code, and a second engine that every recorded run
// must replay on. WASI is not wasmtime's (its clock and randomness are
// real) but preview1, the virtual WASI written out to behave as wazero's
// does under moduleConfig.
//
// One linker serves every instance: its host functions find their
// instance in the store's data.
type wasmtimeRuntime struct {
	engine   *wasmtime.Engine
	linker   *wasmtime.Linker
	cacheDir string
	maxBytes int64
	// stopTicks ends the goroutine that advances the engine's epoch, and
	// ticked is closed when it has; nil when guests are not interrupted
	// (a benchmark of the cost: internal/benchknobs).
	stopTicks, ticked chan struct{}
}

// epochTick is how often the engine's epoch advances: every running guest
// checks then whether it must stop (epochDeadline), so a cancel, a drain
// or a budget stops a guest that computes within about this long.
// wasmtime's epoch check in the compiled code is a load and a compare at
// function entries and loop headers.
const epochTick = 10 * time.Millisecond

// wasmtimeInstance is one instance with its store, and the state its host
// functions share: the session, its virtual WASI, and the panic that
// trapped the guest, kept to be returned from start.
type wasmtimeInstance struct {
	ctx      context.Context
	store    *wasmtime.Store
	inst     *wasmtime.Instance
	s        *session
	wasi     *preview1
	mem      wasmtimeMemory
	panicked any
	// handle is the C memory holding the cgo.Handle of the instance that
	// its epoch callback gets.
	handle unsafe.Pointer
}

// wasmtimeMemory is an instance's memory, read and written through the
// caller of the host function being served (through the store outside
// one).
type wasmtimeMemory struct {
	mem    *wasmtime.Memory
	store  *wasmtime.Store
	caller *wasmtime.Caller
}

func (m *wasmtimeMemory) data() []byte {
	if m.mem == nil {
		panic(errors.New("host: the module exports no memory named \"memory\""))
	}
	if m.caller != nil {
		return m.mem.UnsafeData(m.caller)
	}
	return m.mem.UnsafeData(m.store)
}

// Read returns a view of n bytes at ptr, with wazero's bounds: the whole
// range inside the memory (an empty range may start at its end).
func (m *wasmtimeMemory) Read(ptr, n uint32) ([]byte, bool) {
	d := m.data()
	if uint64(ptr)+uint64(n) > uint64(len(d)) {
		return nil, false
	}
	return d[ptr : ptr+n : ptr+n], true
}

func (m *wasmtimeMemory) Write(ptr uint32, b []byte) bool {
	d := m.data()
	if uint64(ptr)+uint64(len(b)) > uint64(len(d)) {
		return false
	}
	copy(d[ptr:], b)
	return true
}

const wasmtimeBuilt = true

func newWasmtime(_ context.Context, cfg EngineConfig) (wasmRuntime, error) {
	wc := wasmtime.NewConfig()
	wc.SetEpochInterruption(!cfg.uninterruptible)
	// WebAssembly 2.0 and nothing beyond it (abi/SPEC.md §10.8), as
	// wazero accepts: a module wasmtime alone ran could not be replayed on
	// wazero, and threads and relaxed SIMD are nondeterministic by design.
	// wasmtime has no setting for extended constant expressions: the
	// host's module reader (wasmread.go), which every compile goes
	// through, refuses them.
	wc.SetWasmThreads(false)
	wc.SetWasmMultiMemory(false)
	wc.SetWasmMemory64(false)
	wc.SetWasmTailCall(false)
	wc.SetWasmRelaxedSIMD(false)
	wc.SetWasmFunctionReferences(false)
	wc.SetWasmGC(false)
	wc.SetWasmWideArithmetic(false)
	engine := wasmtime.NewEngineWithConfig(wc)
	w := &wasmtimeRuntime{engine: engine, linker: wasmtime.NewLinker(engine),
		maxBytes: int64(cfg.MemoryLimitPages) * 65536}
	if !cfg.uninterruptible {
		w.stopTicks, w.ticked = make(chan struct{}), make(chan struct{})
		go w.tick()
	}
	if cfg.CacheDir != "" {
		w.cacheDir = filepath.Join(cfg.CacheDir, "wasmtime")
		if err := os.MkdirAll(w.cacheDir, 0o755); err != nil {
			return nil, fmt.Errorf("host: compilation cache %s: %w", cfg.CacheDir, err)
		}
	}
	i32, i64 := wasmtime.NewValType(wasmtime.KindI32), wasmtime.NewValType(wasmtime.KindI64)
	for _, f := range preview1Funcs {
		var params []*wasmtime.ValType
		for _, c := range f.params {
			if c == 'I' {
				params = append(params, i64)
			} else {
				params = append(params, i32)
			}
		}
		var results []*wasmtime.ValType
		if f.name != "proc_exit" {
			results = []*wasmtime.ValType{i32}
		}
		fn, kinds := f.fn, f.params
		err := w.linker.FuncNew(wasiModule, f.name, wasmtime.NewFuncType(params, results),
			func(c *wasmtime.Caller, args []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
				in := c.Data().(*wasmtimeInstance)
				var a [9]uint64
				for i, v := range args {
					if kinds[i] == 'I' {
						a[i] = uint64(v.I64())
					} else {
						a[i] = uint64(uint32(v.I32()))
					}
				}
				var errno uint32
				if trap := in.serve(c, func() { errno = fn(in.wasi, a[:len(args)]) }); trap != nil {
					return nil, trap
				}
				if results == nil {
					return nil, nil
				}
				return []wasmtime.Val{wasmtime.ValI32(int32(errno))}, nil
			})
		if err != nil {
			return nil, err
		}
	}
	callType := wasmtime.NewFuncType([]*wasmtime.ValType{i32, i32, i32, i32, i32}, []*wasmtime.ValType{i64})
	takeType := wasmtime.NewFuncType([]*wasmtime.ValType{i32, i32}, []*wasmtime.ValType{i64})
	for _, c := range abi.Capabilities {
		ci := capIndex(c)
		err := w.linker.FuncNew(c.Module(), abi.FuncCall, callType,
			func(c *wasmtime.Caller, a []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
				in := c.Data().(*wasmtimeInstance)
				var r abi.Result
				if trap := in.serve(c, func() {
					r = in.s.call(in.ctx, ci, uint32(a[0].I32()), uint32(a[1].I32()), uint32(a[2].I32()), uint32(a[3].I32()), uint32(a[4].I32()))
				}); trap != nil {
					return nil, trap
				}
				return []wasmtime.Val{wasmtime.ValI64(int64(r))}, nil
			})
		if err != nil {
			return nil, err
		}
		err = w.linker.FuncNew(c.Module(), abi.FuncTake, takeType,
			func(c *wasmtime.Caller, a []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
				in := c.Data().(*wasmtimeInstance)
				var r abi.Result
				if trap := in.serve(c, func() { r = in.s.take(ci, uint32(a[0].I32()), uint32(a[1].I32())) }); trap != nil {
					return nil, trap
				}
				return []wasmtime.Val{wasmtime.ValI64(int64(r))}, nil
			})
		if err != nil {
			return nil, err
		}
	}
	return w, nil
}

// serve runs a host function for the guest, with the caller's memory. A
// panic (the session stopping the guest, a fault, proc_exit) becomes a
// trap that unwinds the guest; start returns the panic value.
func (in *wasmtimeInstance) serve(c *wasmtime.Caller, fn func()) (trap *wasmtime.Trap) {
	in.mem.caller = c
	defer func() {
		in.mem.caller = nil
		if p := recover(); p != nil {
			in.panicked = p
			trap = wasmtime.NewTrap(fmt.Sprint(p))
		}
	}()
	fn()
	return nil
}

// tick advances the engine's epoch every epochTick until close.
func (w *wasmtimeRuntime) tick() {
	defer close(w.ticked)
	t := time.NewTicker(epochTick)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			w.engine.IncrementEpoch()
		case <-w.stopTicks:
			return
		}
	}
}

func (w *wasmtimeRuntime) close(context.Context) error {
	if w.stopTicks != nil {
		// The ticker must be done with the engine before it is freed.
		close(w.stopTicks)
		<-w.ticked
	}
	w.linker.Close()
	w.engine.Close()
	return nil
}

// wasmtime interrupts guest code itself (epochs): modules need no yield
// instrumentation, and a guest in wasm is in a cgo call, which does not
// hold up the Go runtime's collections.
func (w *wasmtimeRuntime) instruments() bool { return false }

// compile cannot be stopped once started (a cgo call): the host's static
// limits bound it (CompileLimits).
func (w *wasmtimeRuntime) compile(_ context.Context, code []byte, m *Module) error {
	mod, err := w.load(code)
	if err != nil {
		return err
	}
	m.compiled = mod
	m.Name = moduleName(code)
	return nil
}

// load compiles code, or loads it from the compilation cache, where each
// module is stored serialized under its hash. wasmtime refuses a cached
// module from another version or configuration; it is then compiled again.
func (w *wasmtimeRuntime) load(code []byte) (*wasmtime.Module, error) {
	var file string
	if w.cacheDir != "" {
		sum := sha256.Sum256(code)
		file = filepath.Join(w.cacheDir, hex.EncodeToString(sum[:])+".cwasm")
		if b, err := os.ReadFile(file); err == nil {
			if mod, err := wasmtime.NewModuleDeserialize(w.engine, b); err == nil {
				return mod, nil
			}
		}
	}
	mod, err := wasmtime.NewModule(w.engine, code)
	if err != nil {
		return nil, err
	}
	if file != "" {
		if b, err := mod.Serialize(); err == nil {
			// A cache that cannot be written costs the next process
			// the compilation, and nothing else.
			_ = replaceFile(file, 0o644, b)
		}
	}
	return mod, nil
}

func (w *wasmtimeRuntime) instantiate(ctx context.Context, m *Module, s *session) (instance, error) {
	v := newVirtualWASI(s)
	for _, a := range v.args {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, errors.New("args invalid: contains NUL character")
		}
	}
	in := &wasmtimeInstance{ctx: ctx, s: s, wasi: &preview1{virtualWASI: v}}
	in.wasi.mem = &in.mem
	in.store = wasmtime.NewStoreWithData(w.engine, in)
	in.mem.store = in.store
	// The module's tables and memory have maxima within the run's limits
	// already (wasmModule.rewrite); the store's limiter holds to them too.
	in.store.Limiter(w.storeLimits(s.limits))
	if w.stopTicks != nil {
		in.watchEpochs()
	}
	s.mem = noMemory{}
	inst, err := w.linker.Instantiate(in.store, m.compiled.(*wasmtime.Module))
	if err != nil {
		in.close(ctx)
		return nil, err
	}
	in.inst = inst
	if ex := inst.GetExport(in.store, "memory"); ex != nil {
		in.mem.mem = ex.Memory()
	}
	if in.mem.mem == nil {
		in.close(ctx)
		return nil, errors.New("the module exports no memory named \"memory\"")
	}
	s.mem = &in.mem
	return in, nil
}

// storeLimits are the arguments of Store.Limiter for a run with limits l;
// a zero limit (a session made without limits, in tests) leaves the
// engine's cap or wasmtime's default.
func (w *wasmtimeRuntime) storeLimits(l Limits) (memory, elements, instances, tables, memories int64) {
	memory, elements, tables = w.maxBytes, -1, -1
	if l.MemoryPages > 0 {
		memory = min(memory, int64(l.MemoryPages)*65536)
	}
	if l.TableElements > 0 {
		elements = int64(l.TableElements)
	}
	if l.Tables > 0 {
		tables = int64(l.Tables)
	}
	return memory, elements, 1, tables, 1
}

// watchEpochs makes the store check, at every epoch tick while its guest
// runs, whether the guest must stop (epochDeadline).
func (in *wasmtimeInstance) watchEpochs() {
	in.handle = C.malloc(C.size_t(unsafe.Sizeof(C.uintptr_t(0))))
	*(*C.uintptr_t)(in.handle) = C.uintptr_t(cgo.NewHandle(in))
	in.store.SetEpochDeadline(1)
	// wasmtime-go keeps the store's C pointer as the first field of
	// wasmtime.Store and exposes no way to set the callback; the test of
	// a stopped guest (TestSpinningGuestIsStopped) proves this holds for
	// the wasmtime-go version in go.mod.
	ptr := *(**C.wasmtime_store_t)(unsafe.Pointer(in.store))
	C.wasmtime_store_epoch_deadline_callback(ptr, (*[0]byte)(C.agentrtEpochDeadline), in.handle, nil)
}

// agentrtEpochDeadline is a store's epoch callback: it traps the guest when
// its run must stop (session.checkStop, the same check as at a call), and
// otherwise lets it run to the next tick.
//
//export agentrtEpochDeadline
func agentrtEpochDeadline(_ *C.wasmtime_context_t, data unsafe.Pointer, delta *C.uint64_t, kind *C.wasmtime_update_deadline_kind_t) *C.wasmtime_error_t {
	in := cgo.Handle(*(*C.uintptr_t)(data)).Value().(*wasmtimeInstance)
	if err := in.s.checkStop(); err != nil {
		in.panicked = err
		msg := C.CString("agentrt: the guest was stopped")
		defer C.free(unsafe.Pointer(msg))
		return C.wasmtime_error_new(msg)
	}
	*delta, *kind = 1, 0
	return nil
}

// start runs _start. A trap that a host function's panic caused returns
// the panic (an *exitError as is, an error wrapped) with the wasm stack
// trace, in the form wazero gives it.
func (in *wasmtimeInstance) start(context.Context) error {
	fn := in.inst.GetFunc(in.store, "_start")
	if fn == nil {
		return errors.New("module exports no _start function")
	}
	_, err := fn.Call(in.store)
	if err == nil {
		return nil
	}
	p := in.panicked
	in.panicked = nil
	if p == nil {
		return err
	}
	if exit, ok := p.(*exitError); ok {
		return exit
	}
	stack := wasmtimeStack(err)
	if perr, ok := p.(error); ok {
		return fmt.Errorf("%w (recovered by agentrt)\nwasm stack trace:\n\t%s", perr, stack)
	}
	return fmt.Errorf("%v (recovered by agentrt)\nwasm stack trace:\n\t%s", p, stack)
}

// wasmtimeStack formats the wasm stack trace of the error a trap ended a
// call with as wazero does, one function a line, innermost first: ".name",
// or ".$index" for a function without a name. A trap a host function
// returned comes back as a *wasmtime.Error whose text holds the trace
// ("wasm backtrace:", then one "N: 0xOFFSET - MODULE!FUNC" line a frame);
// a *wasmtime.Trap has it as frames.
func wasmtimeStack(err error) string {
	var lines []string
	var trap *wasmtime.Trap
	if errors.As(err, &trap) {
		for _, f := range trap.Frames() {
			if n := f.FuncName(); n != nil {
				lines = append(lines, "."+*n)
			} else {
				lines = append(lines, fmt.Sprintf(".$%d", f.FuncIndex()))
			}
		}
		return strings.Join(lines, "\n\t")
	}
	_, trace, ok := strings.Cut(err.Error(), "wasm backtrace:\n")
	if !ok {
		return ""
	}
	for _, l := range strings.Split(trace, "\n") {
		l = strings.TrimSpace(l)
		n, rest, ok := strings.Cut(l, ": ")
		if !ok || strings.Trim(n, "0123456789") != "" {
			if l == "" {
				break
			}
			continue // a source location line ("at file:line")
		}
		_, fn, ok := strings.Cut(rest, " - ")
		if !ok {
			fn = rest
		}
		if idx, ok := strings.CutPrefix(fn, "<wasm function "); ok {
			fn = "$" + strings.TrimSuffix(idx, ">")
		} else if _, name, ok := strings.Cut(fn, "!"); ok {
			fn = name
		}
		lines = append(lines, "."+fn)
	}
	return strings.Join(lines, "\n\t")
}

func (in *wasmtimeInstance) close(context.Context) {
	in.store.Close()
	if in.handle != nil {
		cgo.Handle(*(*C.uintptr_t)(in.handle)).Delete()
		C.free(in.handle)
		in.handle = nil
	}
}

// moduleName returns the module name of code's name section, as wazero's
// CompiledModule.Name does; "" when it has none.
func moduleName(code []byte) string {
	uleb := func(b []byte) (uint64, []byte, bool) {
		var v uint64
		for shift := uint(0); shift < 64 && len(b) > 0; shift += 7 {
			c := b[0]
			b = b[1:]
			v |= uint64(c&0x7f) << shift
			if c&0x80 == 0 {
				return v, b, true
			}
		}
		return 0, nil, false
	}
	b := code[8:]
	for len(b) > 0 {
		id := b[0]
		n, rest, ok := uleb(b[1:])
		if !ok || n > uint64(len(rest)) {
			return ""
		}
		sec, next := rest[:n], rest[n:]
		b = next
		if id != 0 {
			continue
		}
		l, sec, ok := uleb(sec)
		if !ok || l > uint64(len(sec)) || string(sec[:l]) != "name" {
			continue
		}
		sec = sec[l:]
		for len(sec) > 0 {
			sub := sec[0]
			n, rest, ok := uleb(sec[1:])
			if !ok || n > uint64(len(rest)) {
				return ""
			}
			if sub == 0 {
				l, s, ok := uleb(rest[:n])
				if !ok || l > uint64(len(s)) {
					return ""
				}
				return string(s[:l])
			}
			sec = rest[n:]
		}
		return ""
	}
	return ""
}
