package host

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// The host reads every module's binary itself before an engine compiles
// it (wasmmod.go): the engines' own limits are theirs, not the run's, and
// what they cost to compile is not bounded by anything a module declares.
// This file is the reader: the binary format of WebAssembly 2.0 with the
// features wazero enables by default (api.CoreFeaturesV2: multi-value,
// sign extension, non-trapping conversions, bulk memory, reference types,
// SIMD), decoded just far enough to know every instruction's length. An
// instruction outside that set is refused, so that both engines accept
// the same modules and nothing is ever rewritten that was not understood.

// Section ids of the binary format.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
)

// sectionOrder is the order sections must appear in (custom sections may
// appear anywhere); the data count section sits between element and code.
var sectionOrder = map[byte]int{
	secType: 1, secImport: 2, secFunction: 3, secTable: 4, secMemory: 5, secGlobal: 6,
	secExport: 7, secStart: 8, secElement: 9, secDataCount: 10, secCode: 11, secData: 12,
}

// External kinds of imports and exports.
const (
	kindFunc   = 0
	kindTable  = 1
	kindMemory = 2
	kindGlobal = 3
)

var kindNames = [...]string{"function", "table", "memory", "global"}

// errTruncated is the cause of a module that ends inside a construct.
var errTruncated = errors.New("unexpected end")

// reader decodes a part of a module's binary. The first error sticks: every
// later read returns zero values, and err says what went wrong and where.
type reader struct {
	b   []byte
	off int
	// base is the offset of b[0] in the module, for error messages.
	base int
	err  error
	// limit says err is a limit's, not a malformation.
	limit bool
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("at byte %d: %s", r.base+r.off, fmt.Sprintf(format, args...))
	}
}

func (r *reader) done() bool { return r.err != nil || r.off >= len(r.b) }

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.fail("%v", errTruncated)
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *reader) bytes(n uint32) []byte {
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(r.b)-r.off) {
		r.fail("%v (%d bytes declared, %d left)", errTruncated, n, len(r.b)-r.off)
		return nil
	}
	s := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return s
}

// u32 reads an unsigned LEB128 of at most 32 bits.
func (r *reader) u32() uint32 {
	var v uint32
	for shift := uint(0); ; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if shift == 28 && c&0x70 != 0 || shift > 28 {
			r.fail("integer too large for 32 bits")
			return 0
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
}

// sleb reads a signed LEB128 of at most bits bits; 0 when it is
// malformed (r.err says so).
func (r *reader) sleb(bits uint) int64 {
	var v int64
	for n := uint(0); ; n += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if n >= bits {
			r.fail("integer too large for %d bits", bits)
			return 0
		}
		v |= int64(c&0x7f) << n
		if c&0x80 == 0 {
			if n+7 < 64 && c&0x40 != 0 {
				v |= -1 << (n + 7) // sign-extend
			}
			return v
		}
	}
}

func (r *reader) name() string {
	n := r.u32()
	b := r.bytes(n)
	if r.err == nil && !utf8.Valid(b) {
		r.fail("a name is not UTF-8")
	}
	return string(b)
}

// limits reads a table's or a memory's limits. Shared memories (threads)
// and 64-bit indexes (memory64) are features the host does not enable.
func (r *reader) limits() wasmLimits {
	var l wasmLimits
	switch flag := r.byte(); flag {
	case 0x00:
		l.min = r.u32()
	case 0x01:
		l.min, l.max, l.hasMax = r.u32(), r.u32(), true
	default:
		r.fail("limits flag 0x%02x (shared or 64-bit memories are not supported)", flag)
	}
	return l
}

// wasmLimits are the declared limits of a table or a memory.
type wasmLimits struct {
	min, max uint32
	hasMax   bool
}

func isValType(t byte) bool {
	switch t {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f: // i32 i64 f32 f64 v128 funcref externref
		return true
	}
	return false
}

func (r *reader) valType() byte {
	t := r.byte()
	if r.err == nil && !isValType(t) {
		r.fail("value type 0x%02x is not supported", t)
	}
	return t
}

func (r *reader) refType() byte {
	t := r.byte()
	if r.err == nil && t != 0x70 && t != 0x6f {
		r.fail("reference type 0x%02x is not supported", t)
	}
	return t
}

// blockType skips a block type: empty, one value type, or a type index
// (a non-negative signed LEB128 of 33 bits).
func (r *reader) blockType() {
	if r.err != nil || r.off >= len(r.b) {
		r.fail("%v", errTruncated)
		return
	}
	if c := r.b[r.off]; c == 0x40 || isValType(c) {
		r.off++
		return
	}
	if r.b[r.off]&0x40 != 0 && r.b[r.off]&0x80 == 0 {
		r.fail("block type 0x%02x is not supported", r.b[r.off])
		return
	}
	r.sleb(33)
}

// memarg skips a memory instruction's alignment and offset.
func (r *reader) memarg() {
	if align := r.u32(); align >= 64 {
		r.fail("alignment %d (multiple memories are not supported)", align)
	}
	r.u32()
}

// constExpr reads a constant expression (a global's initial value, a
// segment's offset or element) up to its end; onRefFunc is called with the
// offset of the index of every ref.func in it, relative to r.b.
func (r *reader) constExpr(onRefFunc func(at int)) {
	for !r.done() {
		switch op := r.byte(); op {
		case 0x0b: // end
			return
		case 0x41: // i32.const
			r.sleb(32)
		case 0x42: // i64.const
			r.sleb(64)
		case 0x43:
			r.bytes(4)
		case 0x44:
			r.bytes(8)
		case 0x23: // global.get
			r.u32()
		case 0xd0: // ref.null
			r.refType()
		case 0xd2: // ref.func
			if onRefFunc != nil {
				onRefFunc(r.off)
			}
			r.u32()
		case 0xfd: // v128.const
			if sub := r.u32(); sub != 12 {
				r.fail("instruction 0xfd %d in a constant expression", sub)
			}
			r.bytes(16)
		default:
			r.fail("instruction 0x%02x in a constant expression", op)
		}
	}
	r.fail("%v of a constant expression", errTruncated)
}

// funcBody is what walking one function body found.
type funcBody struct {
	// depth is the deepest nesting of blocks, loops and ifs (the body
	// itself counts as one); branches counts the instructions that start
	// or end a basic block of a compiler (block, loop, if, else, br, br_if,
	// br_table and each of its targets, return, unreachable).
	depth, branches int
	// locals is the number of locals the body declares.
	locals uint64
}

// bodyVisitor is told about the parts of a body that a rewrite changes:
// the end of the locals, each loop's start (after its block type), and
// each function index (of a call or ref.func), by their offsets in the
// body.
type bodyVisitor interface {
	code(at int)
	loop(at int)
	funcIndex(at, end int)
}

// body walks a function body (locals, then instructions up to the final
// end), checking the limits of cl as it goes (none when cl is nil).
func (r *reader) body(cl *CompileLimits, v bodyVisitor) funcBody {
	maxLocals, maxDepth, maxBranches := ^uint64(0), int(^uint(0)>>1), int(^uint(0)>>1)
	if cl != nil {
		maxLocals, maxDepth, maxBranches = uint64(cl.Locals), cl.Nesting, cl.Branches
	}
	var fb funcBody
	for n := r.u32(); n > 0 && r.err == nil; n-- {
		fb.locals += uint64(r.u32())
		r.valType()
		if fb.locals > maxLocals {
			r.fail("%d locals or more, over the limit of %d (CompileLimits.Locals)", fb.locals, maxLocals)
			r.limit = true
		}
	}
	if v != nil && r.err == nil {
		v.code(r.off)
	}
	depth := 1
	fb.depth = 1
	for r.err == nil {
		if fb.branches > maxBranches {
			r.fail("%d branches or more, over the limit of %d (CompileLimits.Branches)", fb.branches, maxBranches)
			r.limit = true
			break
		}
		if r.off >= len(r.b) {
			r.fail("%v of a function body (%d blocks open)", errTruncated, depth)
			break
		}
		op := r.byte()
		switch {
		case op == 0x02 || op == 0x03 || op == 0x04: // block loop if
			r.blockType()
			depth++
			fb.branches++
			if depth > fb.depth {
				fb.depth = depth
				if depth > maxDepth {
					r.fail("blocks nest %d deep, over the limit of %d (CompileLimits.Nesting)", depth, maxDepth)
					r.limit = true
				}
			}
			if op == 0x03 && v != nil && r.err == nil {
				v.loop(r.off)
			}
		case op == 0x0b: // end
			depth--
			if depth == 0 {
				if r.off != len(r.b) {
					r.fail("the function body goes on after its end")
				}
				return fb
			}
		case op == 0x00 || op == 0x05 || op == 0x0f: // unreachable else return
			fb.branches++
		case op == 0x01 || op == 0x1a || op == 0x1b || op == 0xd1: // nop drop select ref.is_null
		case op == 0x0c || op == 0x0d: // br br_if
			fb.branches++
			r.u32()
		case op == 0x0e: // br_table
			n := r.u32()
			fb.branches += 1 + int(n)
			for ; n > 0 && r.err == nil; n-- {
				r.u32()
			}
			r.u32()
		case op == 0x10: // call
			at := r.off
			r.u32()
			if v != nil && r.err == nil {
				v.funcIndex(at, r.off)
			}
		case op == 0x11: // call_indirect
			r.u32()
			r.u32()
		case op == 0x1c: // select t*
			for n := r.u32(); n > 0 && r.err == nil; n-- {
				r.valType()
			}
		case op >= 0x20 && op <= 0x26: // local.*, global.*, table.get/set
			r.u32()
		case op >= 0x28 && op <= 0x3e: // loads and stores
			r.memarg()
		case op == 0x3f || op == 0x40: // memory.size memory.grow
			if r.byte() != 0 {
				r.fail("memory index other than 0 (multiple memories are not supported)")
			}
		case op == 0x41:
			r.sleb(32)
		case op == 0x42:
			r.sleb(64)
		case op == 0x43:
			r.bytes(4)
		case op == 0x44:
			r.bytes(8)
		case op >= 0x45 && op <= 0xc4: // numeric, sign extension
		case op == 0xd0: // ref.null
			r.refType()
		case op == 0xd2: // ref.func
			at := r.off
			r.u32()
			if v != nil && r.err == nil {
				v.funcIndex(at, r.off)
			}
		case op == 0xfc:
			r.miscOp()
		case op == 0xfd:
			r.simdOp()
		default:
			r.fail("instruction 0x%02x is not supported", op)
		}
	}
	return fb
}

// miscOp skips the rest of a 0xfc instruction: saturating conversions,
// bulk memory and table instructions.
func (r *reader) miscOp() {
	switch sub := r.u32(); {
	case sub <= 7: // trunc_sat
	case sub == 8: // memory.init
		r.u32()
		r.zeroByte()
	case sub == 9 || sub == 13 || sub == 15 || sub == 16 || sub == 17: // data.drop elem.drop table.grow table.size table.fill
		r.u32()
	case sub == 10: // memory.copy
		r.zeroByte()
		r.zeroByte()
	case sub == 11: // memory.fill
		r.zeroByte()
	case sub == 12 || sub == 14: // table.init table.copy
		r.u32()
		r.u32()
	default:
		r.fail("instruction 0xfc %d is not supported", sub)
	}
}

func (r *reader) zeroByte() {
	if r.byte() != 0 && r.err == nil {
		r.fail("memory index other than 0 (multiple memories are not supported)")
	}
}

// simdOp skips the rest of a 0xfd (SIMD) instruction.
func (r *reader) simdOp() {
	switch sub := r.u32(); {
	case sub <= 11 || sub == 92 || sub == 93: // loads, stores, load_zero
		r.memarg()
	case sub == 12 || sub == 13: // v128.const, i8x16.shuffle
		r.bytes(16)
	case sub >= 21 && sub <= 34: // extract_lane, replace_lane
		r.byte()
	case sub >= 84 && sub <= 91: // load_lane, store_lane
		r.memarg()
		r.byte()
	case sub <= 255 && sub != 154 && sub != 162 && sub != 165 && sub != 166 && sub != 175 && sub != 176 &&
		sub != 178 && sub != 179 && sub != 180 && sub != 187 && sub != 194 && sub != 197 && sub != 198 &&
		sub != 207 && sub != 208 && sub != 210 && sub != 211 && sub != 212 && sub != 226 && sub != 238:
		// the other SIMD instructions of WebAssembly 2.0 take no immediate
	default:
		r.fail("instruction 0xfd %d is not supported", sub)
	}
}
