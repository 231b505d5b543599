package abi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"
)

// This file is the guest's CBOR codec: the canonical form of abi/SPEC.md
// §6 for the types of this package, with nothing but the standard library,
// so that the SDK module has no dependencies. It writes exactly the bytes
// the host's codec (fxamacker/cbor in core deterministic mode) writes for
// the same value, and decodes exactly the bodies it accepts: the test
// internal/guestabi holds the two to that on random values and bytes, and
// internal/sdkvectors on every ABI vector.
//
// Only the kinds the ABI types use are supported: bool, unsigned and
// signed integers, strings, byte strings, slices and structs (a map keyed
// by the field's cbor tag, or an array for a struct with a `_ struct{}
// cbor:",toarray"` field). Marshal and Unmarshal return an error for
// anything else.

// Limits every decoder applies to hostile input (SPEC.md §7).
const (
	maxNested = 16
	maxItems  = 1 << 16
)

// ErrNotCanonical is returned by Unmarshal when the bytes decode but are not
// the canonical encoding of the value they hold (unsorted keys, a number or
// length longer than it needs, an omitempty field present with its zero
// value, a required field missing, null where only a byte string or a list
// may be null).
var ErrNotCanonical = errors.New("cbor: not in canonical (core deterministic) form")

// DecodeError is a body that Unmarshal refused before the canonical check.
// Reason is one of the failure classes of SPEC.md §11.1: malformed,
// truncated (also matched by errors.Is(err, io.ErrUnexpectedEOF)),
// indefinite-length, tag, trailing-bytes, invalid-utf8, wrong-type,
// unknown-field, duplicate-key, or too-deep / too-many-items for the limits
// of §7.
type DecodeError struct {
	Reason string
	Offset int
	Msg    string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("cbor: %s at byte %d: %s", e.Reason, e.Offset, e.Msg)
}

// Is makes a truncated body match io.ErrUnexpectedEOF, as the host codec's
// does.
func (e *DecodeError) Is(target error) bool {
	return e.Reason == "truncated" && target == io.ErrUnexpectedEOF
}

// Marshal returns the canonical CBOR encoding of v, a struct of this
// package or a pointer to one.
func Marshal(v any) ([]byte, error) {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return []byte{0xf6}, nil
	}
	// Most bodies fit: one allocation rather than a series of appends.
	e := encoder{buf: make([]byte, 0, 128)}
	if err := e.value(rv, false); err != nil {
		return nil, err
	}
	return e.buf, nil
}

// Unmarshal decodes the canonical CBOR body data into v, a pointer to a
// zero value of a struct of this package. An empty body leaves v the zero
// value (SPEC.md §6.3). Any body that is not the canonical encoding of a
// value of v's type is refused: a *DecodeError for one that is not even a
// value of the type, ErrNotCanonical for one that is but has another
// encoding.
func Unmarshal(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("cbor: Unmarshal needs a non-nil pointer, not %T", v)
	}
	if len(data) == 0 {
		return nil
	}
	d := decoder{data: data}
	if err := d.wellFormed(); err != nil {
		return err
	}
	d.pos = 0
	if err := d.value(rv.Elem(), false); err != nil {
		return err
	}
	again, err := Marshal(rv.Interface())
	if err != nil {
		return fmt.Errorf("cbor: re-encode: %w", err)
	}
	if !bytes.Equal(again, data) {
		return ErrNotCanonical
	}
	return nil
}

// Major types.
const (
	majorUint   = 0
	majorNeg    = 1
	majorBytes  = 2
	majorText   = 3
	majorArray  = 4
	majorMap    = 5
	majorTag    = 6
	majorSimple = 7
)

// The simple values the ABI uses.
const (
	cborFalse     = 0xf4
	cborTrue      = 0xf5
	cborNull      = 0xf6
	cborUndefined = 0xf7
)

// structInfo is how a struct type is encoded.
type structInfo struct {
	toArray bool
	// fields in encoding order: declaration order for an array, the
	// canonical key order for a map.
	fields []fieldInfo
	byKey  map[string]int
}

type fieldInfo struct {
	index     int
	key       string
	encKey    []byte
	omitEmpty bool
	// fileName: a string that is text when it is UTF-8 and a byte string
	// otherwise (ToolFile.Path, SPEC.md §9.13).
	fileName bool
}

var structInfos sync.Map // reflect.Type -> *structInfo or error

// fileNameFields are the string fields encoded as file names.
var fileNameFields = map[reflect.Type]string{reflect.TypeOf(ToolFile{}): "Path"}

func infoOf(t reflect.Type) (*structInfo, error) {
	if v, ok := structInfos.Load(t); ok {
		if err, isErr := v.(error); isErr {
			return nil, err
		}
		return v.(*structInfo), nil
	}
	si, err := buildInfo(t)
	if err != nil {
		structInfos.Store(t, err)
		return nil, err
	}
	structInfos.Store(t, si)
	return si, nil
}

func buildInfo(t reflect.Type) (*structInfo, error) {
	si := &structInfo{byKey: map[string]int{}}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("cbor")
		name, opts, _ := strings.Cut(tag, ",")
		if f.Name == "_" {
			if opts == "toarray" {
				si.toArray = true
			}
			continue
		}
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if err := supported(f.Type); err != nil {
			return nil, fmt.Errorf("cbor: %s.%s: %w", t.Name(), f.Name, err)
		}
		fi := fieldInfo{index: i, key: name, omitEmpty: opts == "omitempty", fileName: fileNameFields[t] == f.Name}
		if fi.omitEmpty && f.Type.Kind() == reflect.Struct {
			return nil, fmt.Errorf("cbor: %s.%s: omitempty on a struct is not supported", t.Name(), f.Name)
		}
		fi.encKey = appendHead(nil, majorText, uint64(len(name)))
		fi.encKey = append(fi.encKey, name...)
		si.fields = append(si.fields, fi)
	}
	if !si.toArray {
		// Core deterministic order: bytewise order of the encoded keys.
		sort.SliceStable(si.fields, func(a, b int) bool {
			return bytes.Compare(si.fields[a].encKey, si.fields[b].encKey) < 0
		})
	}
	for i, f := range si.fields {
		si.byKey[f.key] = i
	}
	return si, nil
}

func supported(t reflect.Type) error {
	switch t.Kind() {
	case reflect.Bool, reflect.String,
		reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil
		}
		return supported(t.Elem())
	case reflect.Struct:
		return nil
	case reflect.Pointer: // an optional value (agentrt:llm's sampling, format, usage)
		if t.Elem().Kind() == reflect.Pointer {
			return fmt.Errorf("unsupported type %s", t)
		}
		return supported(t.Elem())
	}
	return fmt.Errorf("unsupported type %s", t)
}

// appendHead appends the shortest head of major type m with argument n.
func appendHead(b []byte, m byte, n uint64) []byte {
	m <<= 5
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= math.MaxUint8:
		return append(b, m|24, byte(n))
	case n <= math.MaxUint16:
		return append(b, m|25, byte(n>>8), byte(n))
	case n <= math.MaxUint32:
		return append(b, m|26, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, m|27, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32), byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

type encoder struct{ buf []byte }

func (e *encoder) value(v reflect.Value, fileName bool) error {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			e.buf = append(e.buf, cborNull)
			return nil
		}
		return e.value(v.Elem(), false)
	case reflect.Bool:
		if v.Bool() {
			e.buf = append(e.buf, cborTrue)
		} else {
			e.buf = append(e.buf, cborFalse)
		}
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		e.buf = appendHead(e.buf, majorUint, v.Uint())
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n := v.Int(); n >= 0 {
			e.buf = appendHead(e.buf, majorUint, uint64(n))
		} else {
			e.buf = appendHead(e.buf, majorNeg, uint64(-1-n))
		}
	case reflect.String:
		s := v.String()
		// Text is written as it is, valid UTF-8 or not, as the host codec
		// does; a decoder refuses it. Only a file name becomes bytes.
		m := byte(majorText)
		if fileName && !utf8.ValidString(s) {
			m = majorBytes
		}
		e.buf = appendHead(e.buf, m, uint64(len(s)))
		e.buf = append(e.buf, s...)
	case reflect.Slice:
		if v.IsNil() {
			e.buf = append(e.buf, cborNull)
			return nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			e.buf = appendHead(e.buf, majorBytes, uint64(v.Len()))
			e.buf = append(e.buf, v.Bytes()...)
			return nil
		}
		e.buf = appendHead(e.buf, majorArray, uint64(v.Len()))
		for i := 0; i < v.Len(); i++ {
			if err := e.value(v.Index(i), false); err != nil {
				return err
			}
		}
	case reflect.Struct:
		si, err := infoOf(v.Type())
		if err != nil {
			return err
		}
		if si.toArray {
			e.buf = appendHead(e.buf, majorArray, uint64(len(si.fields)))
			for _, f := range si.fields {
				if err := e.value(v.Field(f.index), f.fileName); err != nil {
					return err
				}
			}
			return nil
		}
		n := 0
		for _, f := range si.fields {
			if !f.omitEmpty || !empty(v.Field(f.index)) {
				n++
			}
		}
		e.buf = appendHead(e.buf, majorMap, uint64(n))
		for _, f := range si.fields {
			fv := v.Field(f.index)
			if f.omitEmpty && empty(fv) {
				continue
			}
			e.buf = append(e.buf, f.encKey...)
			if err := e.value(fv, f.fileName); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("cbor: cannot encode %s", v.Type())
	}
	return nil
}

// empty reports whether an omitempty field is left out.
func empty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Bool:
		return !v.Bool()
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint() == 0
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.String, reflect.Slice:
		return v.Len() == 0
	case reflect.Pointer:
		return v.IsNil()
	}
	return false
}

type decoder struct {
	data []byte
	pos  int
}

func (d *decoder) fail(reason, format string, args ...any) error {
	return &DecodeError{Reason: reason, Offset: d.pos, Msg: fmt.Sprintf(format, args...)}
}

// head reads an item's head: its major type, additional information and
// argument. It checks well-formedness of the head only.
func (d *decoder) head() (major, info byte, arg uint64, err error) {
	if d.pos >= len(d.data) {
		return 0, 0, 0, d.fail("truncated", "the body ends before an item")
	}
	b := d.data[d.pos]
	major, info = b>>5, b&0x1f
	d.pos++
	switch {
	case info < 24:
		return major, info, uint64(info), nil
	case info <= 27:
		n := 1 << (info - 24)
		if len(d.data)-d.pos < n {
			return 0, 0, 0, d.fail("truncated", "the body ends inside a head")
		}
		for _, c := range d.data[d.pos : d.pos+n] {
			arg = arg<<8 | uint64(c)
		}
		d.pos += n
		return major, info, arg, nil
	case info == 31:
		if major == majorSimple {
			return 0, 0, 0, d.fail("malformed", "a break (0xff) outside an indefinite-length item")
		}
		if major == majorUint || major == majorNeg || major == majorTag {
			return 0, 0, 0, d.fail("malformed", "additional information 31 on major type %d", major)
		}
		return 0, 0, 0, d.fail("indefinite-length", "an indefinite-length item")
	}
	return 0, 0, 0, d.fail("malformed", "reserved additional information %d", info)
}

// wellFormed checks that the body is one well-formed CBOR item within the
// limits, with no tags, no indefinite lengths, valid UTF-8 in every text
// string and nothing after it: the checks the host codec makes before it
// decodes into a type.
func (d *decoder) wellFormed() error {
	if err := d.skip(0); err != nil {
		return err
	}
	if d.pos != len(d.data) {
		return d.fail("trailing-bytes", "%d bytes after the body", len(d.data)-d.pos)
	}
	return nil
}

func (d *decoder) skip(depth int) error {
	start := d.pos
	major, info, arg, err := d.head()
	if err != nil {
		return err
	}
	switch major {
	case majorBytes, majorText:
		if arg > uint64(len(d.data)-d.pos) {
			return d.fail("truncated", "a string of %d bytes with %d left", arg, len(d.data)-d.pos)
		}
		s := d.data[d.pos : d.pos+int(arg)]
		if major == majorText && !utf8.Valid(s) {
			d.pos = start
			return d.fail("invalid-utf8", "a text string that is not UTF-8")
		}
		d.pos += int(arg)
	case majorArray, majorMap:
		if depth+1 > maxNested {
			return d.fail("too-deep", "items nest more than %d deep", maxNested)
		}
		if arg > maxItems {
			return d.fail("too-many-items", "%d items, at most %d", arg, maxItems)
		}
		n := arg
		if major == majorMap {
			n *= 2
		}
		if n > uint64(len(d.data)-d.pos) {
			return d.fail("truncated", "%d items with %d bytes left", n, len(d.data)-d.pos)
		}
		for i := uint64(0); i < n; i++ {
			if err := d.skip(depth + 1); err != nil {
				return err
			}
		}
	case majorTag:
		d.pos = start
		return d.fail("tag", "a tag (major type 6)")
	case majorSimple:
		if info == 24 && arg < 32 {
			d.pos = start
			return d.fail("malformed", "a simple value below 32 in two bytes")
		}
	}
	return nil
}

// value decodes one item, already known to be well-formed, into v.
func (d *decoder) value(v reflect.Value, fileName bool) error {
	start := d.pos
	major, info, arg, err := d.head()
	if err != nil {
		return err
	}
	if major == majorSimple && (info == cborNull&0x1f || info == cborUndefined&0x1f) {
		// null and undefined decode as the zero value, as in the host
		// codec; the canonical check then refuses them wherever SPEC.md
		// §6.1 rule 6 does not allow null.
		v.Set(reflect.Zero(v.Type()))
		return nil
	}
	wrong := func(want string) error {
		d.pos = start
		return d.fail("wrong-type", "%s where %s belongs", describe(major, info), want)
	}
	switch v.Kind() {
	case reflect.Pointer:
		// A value that is present: decode it, from its head, into a new
		// one (null was handled above: the nil pointer).
		d.pos = start
		p := reflect.New(v.Type().Elem())
		if err := d.value(p.Elem(), fileName); err != nil {
			return err
		}
		v.Set(p)
		return nil
	case reflect.Bool:
		if major != majorSimple || (info != cborFalse&0x1f && info != cborTrue&0x1f) {
			return wrong("a boolean")
		}
		v.SetBool(info == cborTrue&0x1f)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if major != majorUint {
			return wrong("an unsigned integer")
		}
		if v.OverflowUint(arg) {
			return wrong(v.Type().String())
		}
		v.SetUint(arg)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		var n int64
		switch {
		case major == majorUint && arg <= math.MaxInt64:
			n = int64(arg)
		case major == majorNeg && arg <= math.MaxInt64:
			n = -1 - int64(arg)
		default:
			return wrong("a signed 64-bit integer")
		}
		if v.OverflowInt(n) {
			return wrong(v.Type().String())
		}
		v.SetInt(n)
	case reflect.String:
		if major != majorText && !(fileName && major == majorBytes) {
			return wrong("a text string")
		}
		v.SetString(string(d.data[d.pos : d.pos+int(arg)]))
		d.pos += int(arg)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if major != majorBytes {
				return wrong("a byte string")
			}
			b := make([]byte, arg)
			copy(b, d.data[d.pos:])
			d.pos += int(arg)
			v.SetBytes(b)
			return nil
		}
		if major != majorArray {
			return wrong("an array")
		}
		s := reflect.MakeSlice(v.Type(), int(arg), int(arg))
		for i := 0; i < int(arg); i++ {
			if err := d.value(s.Index(i), false); err != nil {
				return err
			}
		}
		v.Set(s)
	case reflect.Struct:
		si, err := infoOf(v.Type())
		if err != nil {
			return err
		}
		if si.toArray {
			if major != majorArray || arg != uint64(len(si.fields)) {
				return wrong(fmt.Sprintf("an array of %d items", len(si.fields)))
			}
			for _, f := range si.fields {
				if err := d.value(v.Field(f.index), f.fileName); err != nil {
					return err
				}
			}
			return nil
		}
		if major != majorMap {
			return wrong("a map")
		}
		seen := make([]bool, len(si.fields))
		for i := uint64(0); i < arg; i++ {
			keyAt := d.pos
			km, ki, kn, err := d.head()
			if err != nil {
				return err
			}
			if km != majorText {
				d.pos = keyAt
				return d.fail("wrong-type", "%s as a map key; keys are text", describe(km, ki))
			}
			key := string(d.data[d.pos : d.pos+int(kn)])
			d.pos += int(kn)
			j, ok := si.byKey[key]
			if !ok {
				d.pos = keyAt
				return d.fail("unknown-field", "%s has no field %q", v.Type().Name(), key)
			}
			if seen[j] {
				d.pos = keyAt
				return d.fail("duplicate-key", "key %q twice", key)
			}
			seen[j] = true
			f := si.fields[j]
			if err := d.value(v.Field(f.index), f.fileName); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("cbor: cannot decode into %s", v.Type())
	}
	return nil
}

// describe names an item by its head, for errors.
func describe(major, info byte) string {
	switch major {
	case majorUint:
		return "an unsigned integer"
	case majorNeg:
		return "a negative integer"
	case majorBytes:
		return "a byte string"
	case majorText:
		return "a text string"
	case majorArray:
		return "an array"
	case majorMap:
		return "a map"
	}
	switch {
	case info == cborFalse&0x1f || info == cborTrue&0x1f:
		return "a boolean"
	case info >= 25 && info <= 27:
		return "a floating-point number"
	}
	return "a simple value"
}
