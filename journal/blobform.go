package journal

import (
	"errors"
	"fmt"
)

// FormBuilder assembles a blob form (SPEC.md 15.1) part by part: literal
// bytes, which it joins, and references to blobs, which it collects once
// each. The zero value is ready to use.
type FormBuilder struct {
	parts [][]byte
	lit   []byte
	blobs []Blob
	seen  map[string]bool
	n     uint64
	refs  int
}

// Literal appends bytes the payload holds as they are.
func (f *FormBuilder) Literal(b []byte) {
	f.lit = append(f.lit, b...)
	f.n += uint64(len(b))
}

func (f *FormBuilder) flush() {
	if len(f.lit) > 0 {
		f.parts = append(f.parts, appendBytes(nil, f.lit))
		f.lit = nil
	}
}

func (f *FormBuilder) keep(b Blob) {
	if f.seen == nil {
		f.seen = map[string]bool{}
	}
	if !f.seen[string(b.Sum)] {
		f.seen[string(b.Sum)] = true
		f.blobs = append(f.blobs, b)
	}
}

// Blob appends a reference to the blob of data, which the payload holds at
// this point.
func (f *FormBuilder) Blob(data []byte) {
	f.flush()
	b := NewBlob(data)
	part := appendHead(nil, majorArray, 2)
	part = appendBytes(part, b.Sum)
	part = appendHead(part, majorUint, uint64(len(data)))
	f.parts = append(f.parts, part)
	f.keep(b)
	f.n += uint64(len(data))
	f.refs++
}

// Nested appends a reference to the blob holding form, itself a blob form
// that resolves to length bytes, which the payload holds at this point.
func (f *FormBuilder) Nested(form []byte, length uint64) {
	f.flush()
	b := NewBlob(form)
	part := appendHead(nil, majorArray, 3)
	part = appendBytes(part, b.Sum)
	part = appendHead(part, majorUint, uint64(len(form)))
	part = appendHead(part, majorUint, length)
	f.parts = append(f.parts, part)
	f.keep(b)
	f.n += length
	f.refs++
}

// Len is the length of the payload built so far; Refs the number of
// references.
func (f *FormBuilder) Len() uint64 { return f.n }
func (f *FormBuilder) Refs() int   { return f.refs }

// Blobs returns the blobs referenced, each once, in the order first
// referenced.
func (f *FormBuilder) Blobs() []Blob { return f.blobs }

// ErrFormTooLarge is returned by FormBuilder.Form for a payload of more
// parts than a blob form holds.
var ErrFormTooLarge = errors.New("journal: a blob form holds at most 65536 parts")

// Form returns the blob form.
func (f *FormBuilder) Form() ([]byte, error) {
	f.flush()
	if len(f.parts) == 0 || len(f.parts) > maxFormParts {
		return nil, fmt.Errorf("%w (this one %d)", ErrFormTooLarge, len(f.parts))
	}
	size := len(blobFormPrefix) + headSize(uint64(len(f.parts)))
	for _, p := range f.parts {
		size += len(p)
	}
	out := append(make([]byte, 0, size), blobFormPrefix...)
	out = appendHead(out, majorArray, uint64(len(f.parts)))
	for _, p := range f.parts {
		out = append(out, p...)
	}
	return out, nil
}

// Payload is a payload as an entry stores it: Stored is the entry's
// request or response field, the payload itself or its blob form, and
// Blobs are the blobs the form references (commit them with the entry:
// Batch.Blobs). The entry's hash is always that of the payload itself.
type Payload struct {
	Stored []byte
	Blobs  []Blob
}

// maxWalkDepth bounds the nesting the externalizers walk (the ABI allows
// 16 levels).
const maxWalkDepth = 64

// errNotCBOR says a payload is not well-formed definite-length CBOR.
var errNotCBOR = errors.New("not well-formed definite-length CBOR")

// itemHead reads the head at off: major type, argument, head length.
func itemHead(b []byte, off int) (major byte, arg uint64, n int, err error) {
	if off >= len(b) {
		return 0, 0, 0, errNotCBOR
	}
	major, ai := b[off]>>5, b[off]&0x1f
	switch {
	case ai < 24:
		return major, uint64(ai), 1, nil
	case ai <= 27:
		size := 1 << (ai - 24)
		if off+1+size > len(b) {
			return 0, 0, 0, errNotCBOR
		}
		for _, c := range b[off+1 : off+1+size] {
			arg = arg<<8 | uint64(c)
		}
		return major, arg, 1 + size, nil
	}
	return 0, 0, 0, errNotCBOR // indefinite lengths and reserved heads
}

// externalizer replaces the large strings of a CBOR payload by blob
// references as it walks it.
type externalizer struct {
	b         []byte
	threshold int
	fb        *FormBuilder
	lit       int // start of the bytes not yet given to fb
}

// cut gives fb the literal bytes before start, then the blob of b[start:end].
func (x *externalizer) cut(start, end int) {
	x.fb.Literal(x.b[x.lit:start])
	x.fb.Blob(x.b[start:end])
	x.lit = end
}

// item walks the item at off and returns the offset after it.
func (x *externalizer) item(off, depth int) (int, error) {
	if depth > maxWalkDepth {
		return 0, errNotCBOR
	}
	major, arg, n, err := itemHead(x.b, off)
	if err != nil {
		return 0, err
	}
	end := off + n
	switch major {
	case 0, 1:
	case 2, 3:
		if arg > uint64(len(x.b)-end) {
			return 0, errNotCBOR
		}
		end += int(arg)
		if end-off >= x.threshold {
			x.cut(off, end)
		}
	case 4, 5:
		items := arg
		if major == 5 {
			items *= 2
		}
		if items > uint64(len(x.b)-end) {
			return 0, errNotCBOR
		}
		for range items {
			if end, err = x.item(end, depth+1); err != nil {
				return 0, err
			}
		}
	case 6:
		return x.item(end, depth+1)
	}
	return end, nil
}

// finish gives fb the bytes after the last cut.
func (x *externalizer) finish() { x.fb.Literal(x.b[x.lit:]) }

// Externalize returns payload as an entry stores it when every byte or text
// string of at least threshold bytes (head included) is a blob of its own
// (SPEC.md 15.2): the blob form, or payload itself when nothing is that
// large or payload is not well-formed CBOR. Strings are cut whole, head
// included, so the same string in two payloads (a tool's output, and the
// request that quotes it back) is one blob.
func Externalize(payload []byte, threshold int) Payload {
	if threshold < 1 || len(payload) < threshold {
		return Payload{Stored: payload}
	}
	x := &externalizer{b: payload, threshold: threshold, fb: &FormBuilder{}}
	end, err := x.item(0, 0)
	if err != nil || end != len(payload) || x.fb.Refs() == 0 {
		return Payload{Stored: payload}
	}
	x.finish()
	form, err := x.fb.Form()
	if err != nil {
		return Payload{Stored: payload}
	}
	return Payload{Stored: form, Blobs: x.fb.Blobs()}
}

// ErrNoMessages is returned by EncodeConversation for a request that is
// not a CBOR map holding an array under the key it names.
var ErrNoMessages = errors.New("journal: the request has no message array under that key")

// EncodeConversation returns request, a canonical CBOR map that holds a
// conversation's message list as an array under key (e.g. "messages"), as
// an entry stores it (SPEC.md 15.4): the list is a chain of blobs, one per
// message, each naming the chain of the messages before it and holding its
// message (with strings of threshold bytes or more as blobs of their own,
// as Externalize cuts them); the stored request names the chain's last
// blob. The chain of a list is a function of the list alone, so a request
// whose list extends an earlier one's (the same conversation, one call
// later, or a fork of it) shares every blob of the earlier list, and a
// store that keeps each blob once grows with the new messages only. The
// rest of the request is cut as Externalize cuts it.
func EncodeConversation(request []byte, key string, threshold int) (Payload, error) {
	if threshold < 1 {
		threshold = 1
	}
	x := &externalizer{b: request, threshold: threshold, fb: &FormBuilder{}}
	major, pairs, n, err := itemHead(request, 0)
	if err != nil || major != 5 {
		return Payload{}, fmt.Errorf("%w %q: it is not a CBOR map", ErrNoMessages, key)
	}
	off, found := n, false
	for range pairs {
		km, klen, kn, err := itemHead(request, off)
		if err != nil {
			return Payload{}, fmt.Errorf("%w %q: %v", ErrNoMessages, key, err)
		}
		keyEnd, err := x.item(off, 1)
		if err != nil {
			return Payload{}, fmt.Errorf("%w %q: %v", ErrNoMessages, key, err)
		}
		vm, items, vn, err := itemHead(request, keyEnd)
		if err != nil {
			return Payload{}, fmt.Errorf("%w %q: %v", ErrNoMessages, key, err)
		}
		if found || km != 3 || klen != uint64(len(key)) || string(request[off+kn:keyEnd]) != key || vm != 4 {
			if off, err = x.item(keyEnd, 1); err != nil {
				return Payload{}, fmt.Errorf("%w %q: %v", ErrNoMessages, key, err)
			}
			continue
		}
		found = true
		// The literal runs to the array's head; the items are the chain.
		pos := keyEnd + vn
		x.fb.Literal(request[x.lit:pos])
		var prev []byte
		var prevLen uint64
		for range items {
			node := &externalizer{b: request, threshold: threshold, fb: &FormBuilder{}, lit: pos}
			if prev != nil {
				node.fb.Nested(prev, prevLen)
			}
			end, err := node.item(pos, 2)
			if err != nil {
				return Payload{}, fmt.Errorf("%w %q: message: %v", ErrNoMessages, key, err)
			}
			node.fb.Literal(request[node.lit:end])
			form, err := node.fb.Form()
			if err != nil {
				return Payload{}, err
			}
			for _, b := range node.fb.Blobs() {
				x.fb.keep(b)
			}
			prev, prevLen, pos = form, prevLen+uint64(end-pos), end
		}
		if prev != nil {
			x.fb.Nested(prev, prevLen)
		}
		x.lit, off = pos, pos
	}
	if !found {
		return Payload{}, fmt.Errorf("%w %q", ErrNoMessages, key)
	}
	if off != len(request) {
		return Payload{}, fmt.Errorf("%w %q: %d bytes after the map", ErrNoMessages, key, len(request)-off)
	}
	x.finish()
	form, err := x.fb.Form()
	if err != nil {
		return Payload{}, err
	}
	return Payload{Stored: form, Blobs: x.fb.Blobs()}, nil
}
