package host

import (
	"errors"
	"fmt"
)

// checkConstExprs refuses a module whose constant expressions (global
// initializers, element and data segment offsets, element expressions)
// use the arithmetic of the extended-const proposal, which WebAssembly 2.0
// does not have (abi/SPEC.md §10.8). wazero refuses such a module when it
// compiles it; wasmtime accepts it and has no setting to refuse it, so the
// wasmtime adapter calls this on a module it compiled, and both engines
// accept the same modules (invariant 8).
//
// code has been validated by the engine, so a malformed section cannot
// occur here; should one all the same, it is refused.
func checkConstExprs(code []byte) error {
	r := &wasmReader{b: code[8:]}
	for !r.done() {
		id := r.byte()
		sec := &wasmReader{b: r.bytes(r.u32())}
		if r.err != nil {
			break
		}
		var err error
		switch id {
		case 6:
			err = sec.globals()
		case 9:
			err = sec.elements()
		case 11:
			err = sec.data()
		}
		if err == nil {
			err = sec.err
		}
		if err != nil {
			return fmt.Errorf("section %d: %w", id, err)
		}
	}
	return r.err
}

var errMalformed = errors.New("malformed module")

// wasmReader reads the binary format; the first failure sticks in err.
type wasmReader struct {
	b   []byte
	err error
}

func (r *wasmReader) done() bool { return r.err != nil || len(r.b) == 0 }

func (r *wasmReader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.err = errMalformed
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *wasmReader) bytes(n uint32) []byte {
	if r.err != nil || uint64(n) > uint64(len(r.b)) {
		r.err = errMalformed
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

// u32 reads an unsigned LEB128; leb skips any LEB128.
func (r *wasmReader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.err = errMalformed
	return 0
}

func (r *wasmReader) leb() {
	for i := 0; i < 10; i++ {
		if r.byte()&0x80 == 0 {
			return
		}
	}
	r.err = errMalformed
}

// expr reads a constant expression up to its end, refusing any
// instruction WebAssembly 2.0 does not allow in one.
func (r *wasmReader) expr() error {
	for r.err == nil {
		switch op := r.byte(); op {
		case 0x0b: // end
			return nil
		case 0x41, 0x42, 0x23, 0xd2: // i32.const, i64.const, global.get, ref.func
			r.leb()
		case 0x43: // f32.const
			r.bytes(4)
		case 0x44: // f64.const
			r.bytes(8)
		case 0xd0: // ref.null heaptype
			r.byte()
		case 0xfd: // v128.const is 0xfd 12
			if r.u32() != 12 {
				return errors.New("a SIMD instruction other than v128.const in a constant expression")
			}
			r.bytes(16)
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e:
			return fmt.Errorf("instruction 0x%02x (add, sub or mul) in a constant expression: extended constant expressions are not WebAssembly 2.0", op)
		default:
			return fmt.Errorf("instruction 0x%02x in a constant expression", op)
		}
	}
	return r.err
}

func (r *wasmReader) globals() error {
	for n := r.u32(); n > 0 && r.err == nil; n-- {
		r.byte() // value type
		r.byte() // mutability
		if err := r.expr(); err != nil {
			return err
		}
	}
	return nil
}

func (r *wasmReader) elements() error {
	for n := r.u32(); n > 0 && r.err == nil; n-- {
		flags := r.u32()
		if flags > 7 {
			return errMalformed
		}
		if flags&3 == 2 {
			r.u32() // table index
		}
		if flags&1 == 0 {
			if err := r.expr(); err != nil { // offset
				return err
			}
		}
		if flags&3 != 0 {
			r.byte() // element kind or reference type
		}
		for m := r.u32(); m > 0 && r.err == nil; m-- {
			if flags&4 == 0 {
				r.u32() // function index
			} else if err := r.expr(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *wasmReader) data() error {
	for n := r.u32(); n > 0 && r.err == nil; n-- {
		switch r.u32() {
		case 0:
		case 1:
			r.bytes(r.u32())
			continue
		case 2:
			r.u32() // memory index
		default:
			return errMalformed
		}
		if err := r.expr(); err != nil {
			return err
		}
		r.bytes(r.u32())
	}
	return nil
}
