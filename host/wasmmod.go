package host

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrBadModule is matched (errors.Is) by every error Compile returns for a
// module it refuses: bytes that are not a module, a malformed or
// unsupported module, one over a limit, one without the exports a guest
// needs. The submitter can fix it; the host is not at fault.
var ErrBadModule = errors.New("module refused")

// ErrModuleLimit is matched by the error Compile returns for a module over
// a limit of the host or of its run: its size, a function's size, nesting
// or locals (CompileLimits), the time its compilation takes, or a table or
// memory larger than the run may have (Limits).
var ErrModuleLimit = errors.New("module over a limit")

// refusal is the error of a module refused: it matches ErrBadModule, and
// ErrModuleLimit when a limit refused it.
type refusal struct {
	msg   string
	limit bool
	cause error
}

func (r *refusal) Error() string { return r.msg }

func (r *refusal) Unwrap() error { return r.cause }

func (r *refusal) Is(target error) bool {
	return target == ErrBadModule || r.limit && target == ErrModuleLimit
}

// refuse returns a refusal; limit says a limit refused the module.
func refuse(limit bool, format string, args ...any) error {
	return &refusal{msg: fmt.Sprintf(format, args...), limit: limit}
}

// wasmModule is a module's binary as the host read it.
type wasmModule struct {
	code     []byte
	sections []wasmSection
	imports  []Import
	// Counts of the index spaces: imported and defined functions, tables,
	// memories and globals; types.
	importFuncs, importTables, importMemories, importGlobals uint32
	types, funcs, globals                                    uint32
	// tables and memories are the defined ones, in order.
	tables   []wasmLimits
	memories []wasmLimits
	exports  map[string]byte
	// startFunc says the module has a start section; entry is the index
	// of the function exported as _start.
	startFunc bool
	entry     uint32
	// sigs are the function types, as signature strings (sigLetter);
	// funcSigs the type of each defined function.
	sigs     []string
	funcSigs []uint32
	// deepest, largest and mostLocals describe the function bodies: the
	// deepest nesting, the largest body in bytes, the most locals.
	deepest, largest, mostBlocks int
	mostLocals                   uint64
}

// wasmSection is one section: its id, and where its header and payload
// lie in the module.
type wasmSection struct {
	id         byte
	name       string // of a custom section
	start, pay int    // the section's first byte, its payload's first byte
	end        int
}

func (s *wasmSection) payload(code []byte) []byte { return code[s.pay:s.end] }

// readModule reads and checks a module's binary against the host's
// compile limits: its size, every function's size, nesting and locals.
// It walks every instruction once, so its cost is linear in the size.
func readModule(code []byte, cl CompileLimits) (*wasmModule, error) {
	if len(code) < 8 || string(code[:4]) != "\x00asm" {
		return nil, ErrNotWasm
	}
	if len(code) > cl.ModuleBytes {
		return nil, refuse(true, "the module is %d bytes, over the limit of %d (CompileLimits.ModuleBytes)", len(code), cl.ModuleBytes)
	}
	if v := binary.LittleEndian.Uint32(code[4:8]); v != 1 {
		return nil, refuse(false, "binary format version %d (this host reads version 1)", v)
	}
	m := &wasmModule{code: code, exports: map[string]byte{}}
	r := &reader{b: code, off: 8}
	last := 0
	var funcTypes uint32
	sawFunc, sawCode := false, false
	for !r.done() {
		s := wasmSection{start: r.off}
		s.id = r.byte()
		n := r.u32()
		s.pay = r.off
		r.bytes(n)
		s.end = r.off
		if r.err != nil {
			break
		}
		sr := &reader{b: code[s.pay:s.end], base: s.pay}
		if s.id == secCustom {
			s.name = sr.name()
		} else {
			order, ok := sectionOrder[s.id]
			if !ok {
				return nil, refuse(false, "malformed module: section id %d is not supported", s.id)
			}
			if order <= last {
				return nil, refuse(false, "malformed module: section %d is out of order or repeated", s.id)
			}
			last = order
		}
		switch s.id {
		case secType:
			m.types = sr.u32()
			for i := uint32(0); i < m.types && sr.err == nil; i++ {
				if form := sr.byte(); form != 0x60 && sr.err == nil {
					sr.fail("type form 0x%02x is not supported", form)
				}
				var sig []byte
				for j := range 2 { // params, results
					if j == 1 {
						sig = append(sig, '>')
					}
					for k := sr.u32(); k > 0 && sr.err == nil; k-- {
						sig = append(sig, sigLetter(sr.valType()))
					}
				}
				m.sigs = append(m.sigs, string(sig))
			}
		case secImport:
			for k := sr.u32(); k > 0 && sr.err == nil; k-- {
				im := Import{Module: sr.name(), Name: sr.name()}
				im.Kind = sr.byte()
				switch im.Kind {
				case kindFunc:
					if t := sr.u32(); int(t) < len(m.sigs) {
						im.sig = m.sigs[t]
					} else if sr.err == nil {
						sr.fail("import %s.%s has type %d of %d", im.Module, im.Name, t, len(m.sigs))
					}
					m.importFuncs++
				case kindTable:
					sr.refType()
					sr.limits()
					m.importTables++
				case kindMemory:
					sr.limits()
					m.importMemories++
				case kindGlobal:
					sr.valType()
					sr.byte()
					m.importGlobals++
				default:
					sr.fail("import kind 0x%02x is not supported", im.Kind)
				}
				m.imports = append(m.imports, im)
			}
		case secFunction:
			sawFunc = true
			funcTypes = sr.u32()
			for i := uint32(0); i < funcTypes && sr.err == nil; i++ {
				if t := sr.u32(); int(t) < len(m.sigs) {
					m.funcSigs = append(m.funcSigs, t)
				} else if sr.err == nil {
					sr.fail("function %d has type %d of %d", i, t, len(m.sigs))
				}
			}
		case secTable:
			for k := sr.u32(); k > 0 && sr.err == nil; k-- {
				sr.refType()
				m.tables = append(m.tables, sr.limits())
			}
		case secMemory:
			for k := sr.u32(); k > 0 && sr.err == nil; k-- {
				m.memories = append(m.memories, sr.limits())
			}
		case secGlobal:
			m.globals = sr.u32()
			for i := uint32(0); i < m.globals && sr.err == nil; i++ {
				sr.valType()
				sr.byte()
				sr.constExpr(nil)
			}
		case secExport:
			for k := sr.u32(); k > 0 && sr.err == nil; k-- {
				name := sr.name()
				kind := sr.byte()
				idx := sr.u32()
				if name == "_start" {
					m.entry = idx
				}
				if _, dup := m.exports[name]; dup && sr.err == nil {
					sr.fail("export %q is repeated", name)
				}
				m.exports[name] = kind
			}
		case secStart:
			sr.u32()
			m.startFunc = true
		case secElement:
			sr.elements(nil)
		case secCode:
			sawCode = true
			m.funcs = sr.u32()
			if m.funcs != funcTypes {
				sr.fail("%d function bodies for %d functions", m.funcs, funcTypes)
			}
			for i := uint32(0); i < m.funcs && sr.err == nil; i++ {
				size := sr.u32()
				at := sr.off
				b := sr.bytes(size)
				if sr.err != nil {
					break
				}
				if int(size) > cl.FunctionBytes {
					return nil, refuse(true, "function %d is %d bytes, over the limit of %d (CompileLimits.FunctionBytes)", m.importFuncs+i, size, cl.FunctionBytes)
				}
				br := &reader{b: b, base: s.pay + at}
				fb := br.body(&cl, nil)
				if br.err != nil {
					if br.limit {
						return nil, refuse(true, "function %d: %v", m.importFuncs+i, br.err)
					}
					return nil, refuse(false, "malformed module: function %d: %v", m.importFuncs+i, br.err)
				}
				m.deepest, m.largest, m.mostLocals = max(m.deepest, fb.depth), max(m.largest, int(size)), max(m.mostLocals, fb.locals)
				m.mostBlocks = max(m.mostBlocks, fb.branches)
			}
		case secData:
			for k := sr.u32(); k > 0 && sr.err == nil; k-- {
				switch flags := sr.u32(); flags {
				case 0:
					sr.constExpr(nil)
				case 1:
				case 2:
					if sr.u32() != 0 && sr.err == nil {
						sr.fail("memory index other than 0 (multiple memories are not supported)")
					}
					sr.constExpr(nil)
				default:
					sr.fail("data segment flags %d", flags)
				}
				sr.bytes(sr.u32())
			}
		case secDataCount:
			sr.u32()
		}
		if sr.err == nil && s.id != secCustom && !sr.done() {
			sr.fail("section %d has %d bytes after its contents", s.id, len(sr.b)-sr.off)
		}
		if sr.err != nil {
			return nil, refuse(false, "malformed module: section %d: %v", s.id, sr.err)
		}
		m.sections = append(m.sections, s)
	}
	if r.err != nil {
		return nil, refuse(false, "malformed module: %v", r.err)
	}
	if sawFunc != sawCode && funcTypes > 0 {
		return nil, refuse(false, "malformed module: %d functions declared without their code", funcTypes)
	}
	return m, nil
}

// sigLetter is a value type's letter in a signature string: the params,
// '>', the results, e.g. "iiiii>I" for (i32 x5) -> i64.
func sigLetter(t byte) byte {
	switch t {
	case 0x7f:
		return 'i'
	case 0x7e:
		return 'I'
	case 0x7d:
		return 'f'
	case 0x7c:
		return 'F'
	case 0x7b:
		return 'v'
	case 0x70:
		return 'r'
	}
	return 'x'
}

// elements walks an element section; onFunc is called with the offsets
// (start, end) of every function index in it.
func (r *reader) elements(onFunc func(at, end int)) {
	ref := func(at int) {
		if onFunc != nil {
			save := r.off
			r.off = at
			r.u32()
			onFunc(at, r.off)
			r.off = save
		}
	}
	for k := r.u32(); k > 0 && r.err == nil; k-- {
		flags := r.u32()
		if flags > 7 {
			r.fail("element segment flags %d", flags)
			return
		}
		if flags&2 != 0 && flags&1 == 0 { // an explicit table index
			r.u32()
		}
		if flags&1 == 0 { // active: an offset
			r.constExpr(nil)
		}
		if flags&4 == 0 { // function indexes
			if flags&3 != 0 {
				if kind := r.byte(); kind != 0 && r.err == nil {
					r.fail("element kind 0x%02x", kind)
				}
			}
			for n := r.u32(); n > 0 && r.err == nil; n-- {
				at := r.off
				r.u32()
				if onFunc != nil && r.err == nil {
					onFunc(at, r.off)
				}
			}
		} else { // expressions
			if flags&3 != 0 {
				r.refType()
			}
			for n := r.u32(); n > 0 && r.err == nil; n-- {
				r.constExpr(ref)
			}
		}
	}
}

// checkRun checks what a module declares against what its run may have,
// and that it has what the host needs of a guest.
func (m *wasmModule) checkRun(l moduleLimits) error {
	if n := len(m.memories) + int(m.importMemories); n > 1 {
		return refuse(false, "the module has %d memories (multiple memories are not supported)", n)
	}
	for i, mem := range m.memories {
		if mem.min > l.memoryPages {
			return refuse(true, "memory %d starts at %d pages (%d MiB), over the run's limit of %d pages (%d MiB; limits.memory)",
				i, mem.min, mem.min/16, l.memoryPages, l.memoryPages/16)
		}
	}
	if n := len(m.tables) + int(m.importTables); uint32(n) > l.tables {
		return refuse(true, "the module has %d tables, over the run's limit of %d (limits.tables)", n, l.tables)
	}
	for i, t := range m.tables {
		if t.min > l.tableElements {
			return refuse(true, "table %d starts at %d elements, over the run's limit of %d (limits.table_elements)",
				int(m.importTables)+i, t.min, l.tableElements)
		}
	}
	if kind, ok := m.exports["memory"]; !ok || kind != kindMemory {
		return refuse(false, "the module exports no memory named \"memory\" (a guest without memory cannot use the ABI: build a command module with GOOS=wasip1, or a C main with wasi-libc)")
	}
	if m.startFunc {
		return refuse(false, "the module has a start function (a start section), which would run while it is instantiated: agentrt runs a guest from its _start export only")
	}
	if kind, ok := m.exports["_start"]; !ok || kind != kindFunc {
		return refuse(false, "the module exports no _start function (build a command module: GOOS=wasip1, or a C main)")
	}
	if sig := m.funcSig(m.entry); !strings.HasPrefix(sig, ">") {
		return refuse(false, "the module's _start is %s: it must take no parameters (a command module's entry point)", readableSig(sig))
	}
	return nil
}

// funcSig returns the type of function idx (imported or defined).
func (m *wasmModule) funcSig(idx uint32) string {
	if idx < m.importFuncs {
		n := uint32(0)
		for _, im := range m.imports {
			if im.Kind == kindFunc {
				if n == idx {
					return im.sig
				}
				n++
			}
		}
	}
	if i := idx - m.importFuncs; int(i) < len(m.funcSigs) {
		return m.sigs[m.funcSigs[i]]
	}
	return ""
}

// moduleLimits are the bounds of a run that a module's binary carries
// once rewritten: every table and memory gets a maximum within them, so
// that table.grow and memory.grow fail (return -1) beyond, on any engine.
type moduleLimits struct {
	memoryPages   uint32
	tableElements uint32
	tables        uint32
}

// The yield import that rewrite adds for an engine that cannot interrupt
// guest code on its own: the guest calls it every yieldInterval loop
// iterations or function entries. Its module name is no capability's, so
// no module can import it itself (the link check refuses it first).
const (
	yieldModule   = "agentrt-host"
	yieldFunc     = "yield"
	yieldInterval = 1 << 16
)

// rewrite returns the module's binary with the maximum of every table and
// memory lowered to l. With instrument it also adds a countdown global, a
// countdown local to every function and the yield import, counts down at
// every function entry and loop header and calls yield when a countdown
// reaches zero (see entryCheck): a guest that never calls an import still
// reaches the host
// regularly, where it can be stopped, and where the Go runtime can stop
// it for a collection (wazero's compiled code cannot be preempted). The
// rewrite does not change what the guest computes: the global and the
// import are not in any index space the guest's code refers to, and every
// function index after the new import is renumbered. Debug sections
// (DWARF), whose code offsets would be wrong, are dropped.
func (m *wasmModule) rewrite(l moduleLimits, instrument bool) ([]byte, error) {
	code := m.code
	// Room for what the instrumentation adds and what filling the gaps
	// between data segments adds (mergeData): some 25 % for a Go agent,
	// so the buffer is not grown and copied; what is not written of a
	// fresh allocation is not touched.
	out := make([]byte, 0, 2*len(code)+64)
	out = append(out, code[:8]...)
	var yieldType, yieldIdx, counter uint32
	if instrument {
		yieldType, yieldIdx, counter = m.types, m.importFuncs, m.importGlobals+m.globals
	}
	shift := func(idx uint32) uint32 {
		if instrument && idx >= yieldIdx {
			return idx + 1
		}
		return idx
	}
	// renumber rewrites the function indexes at the given spans of b.
	renumber := func(b []byte, spans [][2]int) []byte {
		o := make([]byte, 0, len(b)+len(spans))
		prev := 0
		for _, sp := range spans {
			o = append(o, b[prev:sp[0]]...)
			idx := (&reader{b: b[sp[0]:sp[1]]}).u32()
			o = binary.AppendUvarint(o, uint64(shift(idx)))
			prev = sp[1]
		}
		return append(o, b[prev:]...)
	}
	emit := func(id byte, payload []byte) {
		out = append(out, id)
		out = binary.AppendUvarint(out, uint64(len(payload)))
		out = append(out, payload...)
	}
	// emitBuilt emits a section whose payload build appends to out in
	// place, its size then written in the 5 bytes kept for it (a padded
	// LEB128, which the binary format allows): the large sections are
	// not built aside and copied.
	emitBuilt := func(id byte, build func(o []byte) []byte) {
		out = append(out, id, 0x80, 0x80, 0x80, 0x80, 0x00)
		start := len(out)
		out = build(out)
		size := uint32(len(out) - start)
		for i := range 5 {
			b := byte(size>>(7*i)) & 0x7f
			if i < 4 {
				b |= 0x80
			}
			out[start-5+i] = b
		}
	}
	// grow prepends a new count to a vector section's items plus extra.
	grow := func(payload []byte, extra []byte) []byte {
		r := &reader{b: payload}
		n := r.u32()
		o := binary.AppendUvarint(nil, uint64(n+1))
		o = append(o, payload[r.off:]...)
		return append(o, extra...)
	}
	present := map[byte]bool{}
	for _, s := range m.sections {
		present[s.id] = true
	}
	// Sections the instrumentation needs that the module lacks are made,
	// in their place in the order.
	added := func(before byte) {
		if !instrument {
			return
		}
		for _, id := range []byte{secType, secImport, secGlobal} {
			if present[id] || sectionOrder[id] >= orderOf(before) {
				continue
			}
			present[id] = true
			switch id {
			case secType:
				emit(secType, yieldTypeEntry(1))
			case secImport:
				emit(secImport, yieldImportEntry(1, yieldType))
			case secGlobal:
				emit(secGlobal, counterGlobalEntry(1))
			}
		}
	}
	for _, s := range m.sections {
		p := s.payload(code)
		if s.id != secCustom {
			added(s.id)
		}
		switch s.id {
		case secCustom:
			if strings.HasPrefix(s.name, ".debug") {
				continue
			}
			if s.name == "name" && instrument {
				np, err := renameFuncs(code, &s, shift)
				if err != nil {
					return nil, err
				}
				emit(secCustom, np)
				continue
			}
			out = append(out, code[s.start:s.end]...)
		case secType:
			if instrument {
				p = grow(p, yieldTypeEntry(0))
			}
			emit(s.id, p)
		case secImport:
			if instrument {
				p = grow(p, yieldImportEntry(0, yieldType))
			}
			emit(s.id, p)
		case secTable:
			r := &reader{b: p}
			o := binary.AppendUvarint(nil, uint64(r.u32()))
			for range m.tables {
				o = append(o, r.refType())
				o = appendLimits(o, r.limits(), l.tableElements)
			}
			emit(s.id, o)
		case secMemory:
			r := &reader{b: p}
			o := binary.AppendUvarint(nil, uint64(r.u32()))
			for range m.memories {
				o = appendLimits(o, r.limits(), l.memoryPages)
			}
			emit(s.id, o)
		case secGlobal:
			if instrument {
				var spans [][2]int
				r := &reader{b: p}
				for n := r.u32(); n > 0; n-- {
					r.valType()
					r.byte()
					r.constExpr(func(at int) {
						rr := &reader{b: p, off: at}
						rr.u32()
						spans = append(spans, [2]int{at, rr.off})
					})
				}
				p = grow(renumber(p, spans), counterGlobalEntry(0))
			}
			emit(s.id, p)
		case secExport:
			if instrument {
				var spans [][2]int
				r := &reader{b: p}
				for n := r.u32(); n > 0; n-- {
					r.name()
					kind := r.byte()
					at := r.off
					r.u32()
					if kind == kindFunc {
						spans = append(spans, [2]int{at, r.off})
					}
				}
				p = renumber(p, spans)
			}
			emit(s.id, p)
		case secStart:
			if instrument {
				p = renumber(p, [][2]int{{0, len(p)}})
			}
			emit(s.id, p)
		case secElement:
			if instrument {
				var spans [][2]int
				(&reader{b: p}).elements(func(at, end int) { spans = append(spans, [2]int{at, end}) })
				p = renumber(p, spans)
			}
			emit(s.id, p)
		case secCode:
			if !instrument {
				emit(s.id, p)
				continue
			}
			emitBuilt(s.id, func(o []byte) []byte { return m.instrumentCode(o, p, counter, yieldIdx, shift) })
		case secData:
			if present[secDataCount] {
				emit(s.id, p)
				continue
			}
			emitBuilt(s.id, func(o []byte) []byte { return appendMergedData(o, p) })
		default:
			emit(s.id, p)
		}
	}
	added(0xff)
	return out, nil
}

// orderOf is a section's place in the order; 100 for none (the end).
func orderOf(id byte) int {
	if o, ok := sectionOrder[id]; ok {
		return o
	}
	return 100
}

// appendLimits appends limits l with the maximum lowered to limit.
func appendLimits(o []byte, l wasmLimits, limit uint32) []byte {
	if !l.hasMax || l.max > limit {
		l.max = limit
	}
	o = append(o, 0x01)
	o = binary.AppendUvarint(o, uint64(l.min))
	return binary.AppendUvarint(o, uint64(l.max))
}

// yieldTypeEntry is the type () -> i32 of the yield import, after a count
// of n types when n > 0 (a new section).
func yieldTypeEntry(n uint64) []byte {
	var o []byte
	if n > 0 {
		o = binary.AppendUvarint(o, n)
	}
	return append(o, 0x60, 0x00, 0x01, 0x7f)
}

func yieldImportEntry(n uint64, typ uint32) []byte {
	var o []byte
	if n > 0 {
		o = binary.AppendUvarint(o, n)
	}
	o = binary.AppendUvarint(o, uint64(len(yieldModule)))
	o = append(o, yieldModule...)
	o = binary.AppendUvarint(o, uint64(len(yieldFunc)))
	o = append(o, yieldFunc...)
	o = append(o, kindFunc)
	return binary.AppendUvarint(o, uint64(typ))
}

// counterGlobalEntry is the countdown global: (mut i32) = yieldInterval.
func counterGlobalEntry(n uint64) []byte {
	var o []byte
	if n > 0 {
		o = binary.AppendUvarint(o, n)
	}
	o = append(o, 0x7f, 0x01, 0x41)
	o = appendSLEB(o, yieldInterval)
	return append(o, 0x0b)
}

// appendSLEB appends v as a signed LEB128.
func appendSLEB(o []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(o, c)
		}
		o = append(o, c|0x80)
	}
}

// The checks the rewrite inserts. At every function entry the global
// countdown goes down by one, and the function's own countdown, a local
// it gains, starts full:
//
//	global.get $counter; i32.const 1; i32.sub; global.set $counter
//	global.get $counter; i32.eqz
//	if; call $yield; global.set $counter; end
//	i32.const yieldInterval; local.set $count
//
// and at every loop header the local goes down by one, a register rather
// than memory in compiled code:
//
//	local.get $count; i32.const 1; i32.sub; local.tee $count; i32.eqz
//	if; call $yield; local.set $count; end
//
// So every call and every loop iteration brings some countdown nearer to a
// yield: no code runs for long without one.
func entryCheck(counter, yield, local uint32) []byte {
	g := binary.AppendUvarint(nil, uint64(counter))
	var o []byte
	o = append(append(append(o, 0x23), g...), 0x41, 0x01, 0x6b)
	o = append(append(o, 0x24), g...)
	o = append(append(o, 0x23), g...)
	o = append(o, 0x45, 0x04, 0x40, 0x10)
	o = binary.AppendUvarint(o, uint64(yield))
	o = append(append(o, 0x24), g...)
	o = append(o, 0x0b, 0x41)
	o = appendSLEB(o, yieldInterval)
	o = append(o, 0x21)
	return binary.AppendUvarint(o, uint64(local))
}

func loopCheck(yield, local uint32) []byte {
	l := binary.AppendUvarint(nil, uint64(local))
	var o []byte
	o = append(append(append(o, 0x20), l...), 0x41, 0x01, 0x6b, 0x22)
	o = append(append(o, l...), 0x45, 0x04, 0x40, 0x10)
	o = binary.AppendUvarint(o, uint64(yield))
	o = append(append(o, 0x21), l...)
	return append(o, 0x0b)
}

// bodyEdits collects where a body is changed: the end of its locals, the
// checks inserted at each loop, function indexes renumbered.
type bodyEdits struct {
	start int
	loops []int
	spans [][2]int
}

func (e *bodyEdits) code(at int)           { e.start = at }
func (e *bodyEdits) loop(at int)           { e.loops = append(e.loops, at) }
func (e *bodyEdits) funcIndex(at, end int) { e.spans = append(e.spans, [2]int{at, end}) }

// instrumentCode appends to o the payload of code section p (already
// checked by readModule), rewritten.
func (m *wasmModule) instrumentCode(o, p []byte, counter, yield uint32, shift func(uint32) uint32) []byte {
	r := &reader{b: p}
	n := r.u32()
	o = binary.AppendUvarint(o, uint64(n))
	var body []byte
	for i := range n {
		size := r.u32()
		b := r.bytes(size)
		var e bodyEdits
		fb := (&reader{b: b}).body(nil, &e)
		params, _, _ := strings.Cut(m.sigs[m.funcSigs[i]], ">")
		local := uint32(len(params)) + uint32(fb.locals)
		// The locals gain one i32 at the end, so no index of the body's
		// changes.
		lr := &reader{b: b}
		groups := lr.u32()
		body = binary.AppendUvarint(body[:0], uint64(groups+1))
		body = append(append(body, b[lr.off:e.start]...), 0x01, 0x7f)
		body = append(body, entryCheck(counter, yield, local)...)
		check := loopCheck(yield, local)
		prev, si := e.start, 0
		for _, at := range e.loops {
			for si < len(e.spans) && e.spans[si][0] < at {
				body, prev = appendRenumbered(body, b, prev, e.spans[si], shift), e.spans[si][1]
				si++
			}
			body = append(append(body, b[prev:at]...), check...)
			prev = at
		}
		for ; si < len(e.spans); si++ {
			body, prev = appendRenumbered(body, b, prev, e.spans[si], shift), e.spans[si][1]
		}
		body = append(body, b[prev:]...)
		o = binary.AppendUvarint(o, uint64(len(body)))
		o = append(o, body...)
	}
	return o
}

func appendRenumbered(o, b []byte, prev int, sp [2]int, shift func(uint32) uint32) []byte {
	o = append(o, b[prev:sp[0]]...)
	idx := (&reader{b: b[sp[0]:sp[1]]}).u32()
	return binary.AppendUvarint(o, uint64(shift(idx)))
}

// renameFuncs renumbers the function indexes of a name section: those of
// function names (subsection 1), local names (2) and label names (3). The
// other subsections are copied.
func renameFuncs(code []byte, s *wasmSection, shift func(uint32) uint32) ([]byte, error) {
	p := s.payload(code)
	r := &reader{b: p}
	r.name()
	o := append([]byte(nil), p[:r.off]...)
	for !r.done() {
		id := r.byte()
		size := r.u32()
		sub := r.bytes(size)
		if r.err != nil {
			break
		}
		if id >= 1 && id <= 3 {
			sr := &reader{b: sub}
			so := binary.AppendUvarint(nil, uint64(sr.u32()))
			for n := len(sub); !sr.done() && n > 0; n-- {
				idx := sr.u32()
				at := sr.off
				if id == 1 {
					sr.name()
				} else {
					for k := sr.u32(); k > 0 && sr.err == nil; k-- {
						sr.u32()
						sr.name()
					}
				}
				so = binary.AppendUvarint(so, uint64(shift(idx)))
				so = append(so, sub[at:sr.off]...)
			}
			if sr.err != nil {
				return nil, refuse(false, "malformed name section: %v", sr.err)
			}
			sub = so
		}
		o = append(o, id)
		o = binary.AppendUvarint(o, uint64(len(sub)))
		o = append(o, sub...)
	}
	if r.err != nil {
		return nil, refuse(false, "malformed name section: %v", r.err)
	}
	return o, nil
}

// importsOf returns the imports of a module, for the link check.
func (m *wasmModule) importsOf() []Import { return slices.Clone(m.imports) }
