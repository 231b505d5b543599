package journal

import (
	"bytes"
	"encoding/binary"
	"math"
	"unicode/utf8"

	"github.com/agentrt/agentrt/abi"
)

// Hand-written encoders and a parser for the journal's structures. They
// are on the path of every journaled call (EncodeEntry) and of every
// verified or replayed entry (DecodeRecord and DecodeEntry), where the
// reflective encoder and decoder of abi.Marshal and abi.Unmarshal cost
// several times more.
//
// The encoders MUST produce exactly the bytes abi.Marshal produces for the
// same value, for every value, since those bytes are what is hashed and
// signed and what the strict decoders' canonical check compares against;
// TestEncodeEntryMatchesMarshal and TestEncodeRecordMatchesMarshal hold
// them to that. The rules they follow are fxamacker/cbor's under
// cbor.CoreDetEncOptions:
//
//   - every head is the shortest form;
//   - map keys are the integers 1..18, each a one-byte head, so the core
//     deterministic order is numeric order;
//   - an omitempty field is left out when it is 0, "", a nil pointer or a
//     slice of length 0 (nil or not), and the map head counts the fields
//     written;
//   - a slice that is not omitempty encodes nil as null and an empty one
//     as an empty byte string, a nil pointer that is not omitempty as null;
//   - a RunID encodes through MarshalBinary, as a 16-byte byte string;
//   - text is written as it is, valid UTF-8 or not.
//
// A change to a struct of entry.go or record.go must be made here too, in
// the encoders and in the parser.

// Initial bytes of CBOR major types (RFC 8949 section 3.1) and of null.
const (
	majorUint  = 0 << 5
	majorNeg   = 1 << 5
	majorBytes = 2 << 5
	majorText  = 3 << 5
	majorArray = 4 << 5
	majorMap   = 5 << 5
	cborNull   = 0xf6
)

// headSize is the length of the shortest head that carries n.
func headSize(n uint64) int {
	switch {
	case n < 24:
		return 1
	case n <= 0xff:
		return 2
	case n <= 0xffff:
		return 3
	case n <= 0xffffffff:
		return 5
	}
	return 9
}

// appendHead appends the shortest head of major type major carrying n.
func appendHead(dst []byte, major byte, n uint64) []byte {
	switch {
	case n < 24:
		return append(dst, major|byte(n))
	case n <= 0xff:
		return append(dst, major|24, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(dst, major|25), uint16(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(dst, major|26), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(dst, major|27), n)
}

// intArg returns the major type and argument of a CBOR integer holding i:
// a negative i is major type 1 with argument -1-i, which ^i computes
// without overflow at math.MinInt64.
func intArg(i int64) (byte, uint64) {
	if i < 0 {
		return majorNeg, uint64(^i)
	}
	return majorUint, uint64(i)
}

func appendInt(dst []byte, i int64) []byte {
	major, n := intArg(i)
	return appendHead(dst, major, n)
}

func intSize(i int64) int {
	_, n := intArg(i)
	return headSize(n)
}

// appendBytes appends b as a byte string, or null for a nil b.
func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return append(dst, cborNull)
	}
	return append(appendHead(dst, majorBytes, uint64(len(b))), b...)
}

func bytesSize(b []byte) int {
	if b == nil {
		return 1
	}
	return headSize(uint64(len(b))) + len(b)
}

func appendText(dst []byte, s string) []byte {
	return append(appendHead(dst, majorText, uint64(len(s))), s...)
}

func textSize(s string) int { return headSize(uint64(len(s))) + len(s) }

// b2u turns a field's presence into a count.
func b2u(present bool) uint64 {
	if present {
		return 1
	}
	return 0
}

// appendEntry appends the canonical CBOR of e, as abi.Marshal(e) writes it.
func appendEntry(dst []byte, e *Entry) []byte {
	if e == nil {
		return append(dst, cborNull)
	}
	// Version, run, seq, prev, phase, cell and time are always present.
	n := 7 + b2u(e.Step != 0) + b2u(e.Op != "") + b2u(len(e.InputHash) > 0) +
		b2u(len(e.Request) > 0) + b2u(len(e.OutputHash) > 0) + b2u(len(e.Response) > 0) +
		b2u(e.Status != 0) + b2u(e.Epoch != 0) + b2u(e.Key != "") + b2u(e.Header != nil) + b2u(e.End != nil) +
		b2u(len(e.Gate) > 0) + b2u(len(e.Budget) > 0) + b2u(len(e.Approval) > 0)
	dst = appendHead(dst, majorMap, n)
	dst = appendHead(append(dst, 1), majorUint, uint64(e.Version))
	dst = appendHead(append(dst, 2), majorBytes, uint64(len(e.Run)))
	dst = append(dst, e.Run[:]...)
	dst = appendHead(append(dst, 3), majorUint, e.Seq)
	dst = appendBytes(append(dst, 4), e.Prev)
	dst = appendHead(append(dst, 5), majorUint, uint64(e.Phase))
	if e.Step != 0 {
		dst = appendHead(append(dst, 6), majorUint, e.Step)
	}
	if e.Op != "" {
		dst = appendText(append(dst, 7), e.Op)
	}
	if len(e.InputHash) > 0 {
		dst = appendBytes(append(dst, 8), e.InputHash)
	}
	if len(e.Request) > 0 {
		dst = appendBytes(append(dst, 9), e.Request)
	}
	if len(e.OutputHash) > 0 {
		dst = appendBytes(append(dst, 10), e.OutputHash)
	}
	if len(e.Response) > 0 {
		dst = appendBytes(append(dst, 11), e.Response)
	}
	if e.Status != 0 {
		dst = appendHead(append(dst, 12), majorUint, uint64(e.Status))
	}
	dst = appendBytes(append(dst, 13), e.Cell)
	dst = appendInt(append(dst, 14), e.Time)
	if e.Epoch != 0 {
		dst = appendHead(append(dst, 15), majorUint, e.Epoch)
	}
	if e.Key != "" {
		dst = appendText(append(dst, 16), e.Key)
	}
	if e.Header != nil {
		dst = appendHeader(append(dst, 17), e.Header)
	}
	if e.End != nil {
		dst = appendEnd(append(dst, 18), e.End)
	}
	if len(e.Gate) > 0 {
		dst = appendBytes(append(dst, 19), e.Gate)
	}
	if len(e.Budget) > 0 {
		dst = appendBytes(append(dst, 20), e.Budget)
	}
	if len(e.Approval) > 0 {
		dst = appendBytes(append(dst, 21), e.Approval)
	}
	return dst
}

// entrySize is the exact length of appendEntry's output, so that
// EncodeEntry allocates once and the slice it returns, which a Record and a
// Store's batch keep, carries no spare capacity.
func entrySize(e *Entry) int {
	if e == nil {
		return 1
	}
	// The map head (at most 21 pairs) and the seven keys always present
	// are one byte each.
	n := 1 + 7 +
		headSize(uint64(e.Version)) +
		headSize(uint64(len(e.Run))) + len(e.Run) +
		headSize(e.Seq) +
		bytesSize(e.Prev) +
		headSize(uint64(e.Phase)) +
		bytesSize(e.Cell) +
		intSize(e.Time)
	if e.Step != 0 {
		n += 1 + headSize(e.Step)
	}
	if e.Op != "" {
		n += 1 + textSize(e.Op)
	}
	for _, b := range [...][]byte{e.InputHash, e.Request, e.OutputHash, e.Response, e.Gate, e.Budget, e.Approval} {
		if len(b) > 0 {
			n += 1 + bytesSize(b)
		}
	}
	if e.Status != 0 {
		n += 1 + headSize(uint64(e.Status))
	}
	if e.Epoch != 0 {
		n += 1 + headSize(e.Epoch)
	}
	if e.Key != "" {
		n += 1 + textSize(e.Key)
	}
	if e.Header != nil {
		n += 1 + headerSize(e.Header)
	}
	if e.End != nil {
		n += 1 + endSize(e.End)
	}
	return n
}

func appendHeader(dst []byte, h *Header) []byte {
	n := 6 + b2u(len(h.Parent) > 0) + b2u(h.ModuleName != "") + b2u(len(h.Token) > 0) + b2u(h.Fork != nil) + b2u(h.Origin != nil) + b2u(h.Trace != nil)
	dst = appendHead(dst, majorMap, n)
	dst = appendBytes(append(dst, 1), h.ModuleSHA256)
	dst = appendHead(append(dst, 2), majorUint, uint64(h.ABI))
	dst = appendBytes(append(dst, 3), h.Input)
	dst = appendBytes(append(dst, 4), h.Seed)
	dst = appendInt(append(dst, 5), h.WallBase)
	dst = appendBytes(append(dst, 6), h.Grant)
	if len(h.Parent) > 0 {
		dst = appendBytes(append(dst, 7), h.Parent)
	}
	if h.ModuleName != "" {
		dst = appendText(append(dst, 8), h.ModuleName)
	}
	if len(h.Token) > 0 {
		dst = appendBytes(append(dst, 9), h.Token)
	}
	if f := h.Fork; f != nil {
		dst = appendHead(append(dst, 10), majorMap, 4+b2u(f.Provider != "")+b2u(f.Model != ""))
		dst = appendBytes(append(dst, 1), f.Parent[:])
		dst = appendHead(append(dst, 2), majorUint, f.Seq)
		dst = appendBytes(append(dst, 3), f.Entry)
		dst = appendHead(append(dst, 4), majorUint, f.Step)
		if f.Provider != "" {
			dst = appendText(append(dst, 5), f.Provider)
		}
		if f.Model != "" {
			dst = appendText(append(dst, 6), f.Model)
		}
	}
	if o := h.Origin; o != nil {
		dst = appendHead(append(dst, 11), majorMap, 2+b2u(o.Seq != 0))
		dst = appendText(append(dst, 1), o.Kind)
		dst = appendText(append(dst, 2), o.ID)
		if o.Seq != 0 {
			dst = appendHead(append(dst, 3), majorUint, o.Seq)
		}
	}
	if t := h.Trace; t != nil {
		dst = appendHead(append(dst, 12), majorMap, 2)
		dst = appendBytes(append(dst, 1), t.ID)
		dst = appendBytes(append(dst, 2), t.Span)
	}
	return dst
}

func headerSize(h *Header) int {
	n := 1 + 6 +
		bytesSize(h.ModuleSHA256) +
		headSize(uint64(h.ABI)) +
		bytesSize(h.Input) +
		bytesSize(h.Seed) +
		intSize(h.WallBase) +
		bytesSize(h.Grant)
	if len(h.Parent) > 0 {
		n += 1 + bytesSize(h.Parent)
	}
	if h.ModuleName != "" {
		n += 1 + textSize(h.ModuleName)
	}
	if len(h.Token) > 0 {
		n += 1 + bytesSize(h.Token)
	}
	if f := h.Fork; f != nil {
		n += 1 + 1 + 4 + bytesSize(f.Parent[:]) + headSize(f.Seq) + bytesSize(f.Entry) + headSize(f.Step)
		if f.Provider != "" {
			n += 1 + textSize(f.Provider)
		}
		if f.Model != "" {
			n += 1 + textSize(f.Model)
		}
	}
	if o := h.Origin; o != nil {
		n += 1 + 1 + 1 + textSize(o.Kind) + 1 + textSize(o.ID)
		if o.Seq != 0 {
			n += 1 + headSize(o.Seq)
		}
	}
	if t := h.Trace; t != nil {
		n += 1 + 1 + 1 + bytesSize(t.ID) + 1 + bytesSize(t.Span)
	}
	return n
}

func appendEnd(dst []byte, end *End) []byte {
	n := 2 + b2u(len(end.Output) > 0) + b2u(end.Error != "")
	dst = appendHead(dst, majorMap, n)
	dst = appendText(append(dst, 1), string(end.Status))
	if len(end.Output) > 0 {
		dst = appendBytes(append(dst, 2), end.Output)
	}
	if end.Error != "" {
		dst = appendText(append(dst, 3), end.Error)
	}
	return appendHead(append(dst, 4), majorUint, end.Steps)
}

func endSize(end *End) int {
	n := 1 + 2 + textSize(string(end.Status)) + headSize(end.Steps)
	if len(end.Output) > 0 {
		n += 1 + bytesSize(end.Output)
	}
	if end.Error != "" {
		n += 1 + textSize(end.Error)
	}
	return n
}

// appendSeal appends the canonical CBOR of s, as abi.Marshal(s) writes it.
func appendSeal(dst []byte, s *Seal) []byte {
	if s == nil {
		return append(dst, cborNull)
	}
	n := 2 + b2u(s.Index != 0) + b2u(s.Size != 0) + b2u(len(s.Path) > 0)
	dst = append(dst, majorMap|byte(n), 1)
	dst = appendBytes(dst, s.Cell)
	dst = appendBytes(append(dst, 2), s.Sig)
	if s.Index != 0 {
		dst = appendHead(append(dst, 3), majorUint, s.Index)
	}
	if s.Size != 0 {
		dst = appendHead(append(dst, 4), majorUint, s.Size)
	}
	if len(s.Path) > 0 {
		dst = appendHead(append(dst, 5), majorArray, uint64(len(s.Path)))
		for _, h := range s.Path {
			dst = appendBytes(dst, h)
		}
	}
	return dst
}

func sealSize(s *Seal) int {
	if s == nil {
		return 1
	}
	n := 3 + bytesSize(s.Cell) + bytesSize(s.Sig)
	if s.Index != 0 {
		n += 1 + headSize(s.Index)
	}
	if s.Size != 0 {
		n += 1 + headSize(s.Size)
	}
	if len(s.Path) > 0 {
		n += 1 + headSize(uint64(len(s.Path)))
		for _, h := range s.Path {
			n += bytesSize(h)
		}
	}
	return n
}

// appendRecord appends the canonical CBOR of r, as abi.Marshal(r) writes
// it: the two-element array [entry, seal].
func appendRecord(dst []byte, r *Record) []byte {
	if r == nil {
		return append(dst, cborNull)
	}
	dst = appendBytes(append(dst, majorArray|2), r.Entry)
	return appendSeal(dst, r.Seal)
}

func recordSize(r *Record) int {
	if r == nil {
		return 1
	}
	return 1 + bytesSize(r.Entry) + sealSize(r.Seal)
}

// canonBuf is the size of the stack buffer decodeStrict re-encodes into:
// most entries and records fit, larger ones allocate.
const canonBuf = 512

// decodeStrict decodes b into v, a new *Entry or *Record, as abi.Unmarshal
// does and with the same errors: the strict decoder does every check but
// canonicity, and canonicity is checked by re-encoding with the encoders
// above, which write what abi.Marshal writes, in place of abi.Marshal.
func decodeStrict(b []byte, v any) error {
	if err := abi.DecodeStrict(b, v); err != nil {
		return err
	}
	var buf [canonBuf]byte
	var again []byte
	switch v := v.(type) {
	case *Entry:
		again = appendEntry(buf[:0], v)
	case *Record:
		again = appendRecord(buf[:0], v)
	default:
		panic("journal: decodeStrict of a type it has no encoder for")
	}
	if !bytes.Equal(again, b) {
		return abi.ErrNotCanonical
	}
	return nil
}

// parser reads the canonical encoding of the journal's structures and
// nothing else. DecodeEntry and DecodeRecord try it first: it accepts
// exactly the inputs that the strict decoder decodes and that re-encode to
// themselves, which is what the canonical check demands, and gives the same
// values; TestDecodeMatchesReference and TestDecodeSingleDefects hold it to
// that. What it refuses goes to decodeStrict, whose error then says what is
// wrong.
//
// The grammar is the encoders' above: shortest heads, map keys in strictly
// ascending order (so no key twice), every key known, every field that is
// not omitempty present, no omitempty field present with its zero value,
// null only for a nil slice or pointer that is not omitempty, integers in
// the range of their Go type, text valid UTF-8, no trailing bytes. Tags,
// indefinite lengths, floats and other simple values never occur in it.
//
// p.b is a copy of the input: decoded byte fields are slices of it, capped
// so that an append to one never writes into the next, and none of them
// aliases the caller's buffer, which a Store may reuse.
type parser struct {
	b   []byte
	off int
	bad bool
}

// peek reports whether the next byte is c.
func (p *parser) peek(c byte) bool { return p.off < len(p.b) && p.b[p.off] == c }

// head reads a head of major type major and returns its argument; a head
// that is not the shortest form of its argument is refused.
func (p *parser) head(major byte) uint64 {
	if p.bad || p.off >= len(p.b) || p.b[p.off]&0xe0 != major {
		p.bad = true
		return 0
	}
	ai := p.b[p.off] & 0x1f
	p.off++
	// least is the smallest argument that needs the size: a smaller
	// one has a shorter head.
	var size int
	var least uint64
	switch ai {
	case 24:
		size, least = 1, 24
	case 25:
		size, least = 2, 0x100
	case 26:
		size, least = 4, 0x10000
	case 27:
		size, least = 8, 0x100000000
	default:
		if ai > 27 { // reserved, or an indefinite length
			p.bad = true
			return 0
		}
		return uint64(ai)
	}
	if len(p.b)-p.off < size {
		p.bad = true
		return 0
	}
	var n uint64
	for _, c := range p.b[p.off : p.off+size] {
		n = n<<8 | uint64(c)
	}
	p.off += size
	if n < least {
		p.bad = true
	}
	return n
}

// uint reads an unsigned integer no larger than limit, the largest value
// of the field's Go type.
func (p *parser) uint(limit uint64) uint64 {
	n := p.head(majorUint)
	if n > limit {
		p.bad = true
	}
	return n
}

// nonzero reads an unsigned integer of an omitempty field: present, so not 0.
func (p *parser) nonzero(limit uint64) uint64 {
	n := p.uint(limit)
	if n == 0 {
		p.bad = true
	}
	return n
}

// int reads an integer that fits an int64.
func (p *parser) int() int64 {
	if p.off < len(p.b) && p.b[p.off]&0xe0 == majorNeg {
		n := p.head(majorNeg)
		if n > math.MaxInt64 {
			p.bad = true
		}
		return ^int64(n)
	}
	n := p.head(majorUint)
	if n > math.MaxInt64 {
		p.bad = true
	}
	return int64(n)
}

// span reads the head of a string of major type major and returns the
// bounds of its content.
func (p *parser) span(major byte) (int, int) {
	n := p.head(major)
	if p.bad || n > uint64(len(p.b)-p.off) {
		p.bad = true
		return p.off, p.off
	}
	start := p.off
	p.off += int(n)
	return start, p.off
}

// bytes reads a byte string; an empty one is a non-nil empty slice, as the
// strict decoder gives it.
func (p *parser) bytes() []byte {
	i, j := p.span(majorBytes)
	return p.b[i:j:j]
}

// nullable reads a byte string or null, the encoding of a nil slice.
func (p *parser) nullable() []byte {
	if p.peek(cborNull) {
		p.off++
		return nil
	}
	return p.bytes()
}

// nonempty reads the byte string of an omitempty field: present, so not
// empty.
func (p *parser) nonempty() []byte {
	b := p.bytes()
	if len(b) == 0 {
		p.bad = true
	}
	return b
}

// text reads a text string that is valid UTF-8.
func (p *parser) text() string {
	i, j := p.span(majorText)
	if !utf8.Valid(p.b[i:j]) {
		p.bad = true
	}
	return string(p.b[i:j])
}

// nonemptyText reads the text of an omitempty field: present, so not "".
func (p *parser) nonemptyText() string {
	s := p.text()
	if s == "" {
		p.bad = true
	}
	return s
}

// key reads the next map key, which must be greater than the last one and
// at most limit.
func (p *parser) key(last, limit uint64) uint64 {
	k := p.head(majorUint)
	if k <= last || k > limit {
		p.bad = true
	}
	return k
}

// Bit sets of the keys that are not omitempty, and so always present.
const (
	entryRequired  = 1<<1 | 1<<2 | 1<<3 | 1<<4 | 1<<5 | 1<<13 | 1<<14
	headerRequired = 1<<1 | 1<<2 | 1<<3 | 1<<4 | 1<<5 | 1<<6
	endRequired    = 1<<1 | 1<<4
)

// parseEntry decodes the canonical encoding of an entry into e and
// reports whether b was one.
func parseEntry(b []byte, e *Entry) bool { return parseEntryOwned(bytes.Clone(b), e) }

// parseEntryOwned is parseEntry on bytes the caller gives up: the entry's
// byte fields point into b.
func parseEntryOwned(b []byte, e *Entry) bool {
	p := parser{b: b}
	n := p.head(majorMap)
	var seen, k uint64
	for range min(n, 21) {
		k = p.key(k, 21)
		seen |= 1 << k
		switch k {
		case 1:
			e.Version = uint8(p.uint(math.MaxUint8))
		case 2:
			if run := p.bytes(); len(run) == len(e.Run) {
				e.Run = RunID(run)
			} else {
				p.bad = true
			}
		case 3:
			e.Seq = p.uint(math.MaxUint64)
		case 4:
			e.Prev = p.nullable()
		case 5:
			e.Phase = Phase(p.uint(math.MaxUint8))
		case 6:
			e.Step = p.nonzero(math.MaxUint64)
		case 7:
			e.Op = p.nonemptyText()
		case 8:
			e.InputHash = p.nonempty()
		case 9:
			e.Request = p.nonempty()
		case 10:
			e.OutputHash = p.nonempty()
		case 11:
			e.Response = p.nonempty()
		case 12:
			e.Status = uint32(p.nonzero(math.MaxUint32))
		case 13:
			e.Cell = p.nullable()
		case 14:
			e.Time = p.int()
		case 15:
			e.Epoch = p.nonzero(math.MaxUint64)
		case 16:
			e.Key = p.nonemptyText()
		case 17:
			e.Header = p.header()
		case 18:
			e.End = p.end()
		case 19:
			e.Gate = p.nonempty()
		case 20:
			e.Budget = p.nonempty()
		case 21:
			e.Approval = p.nonempty()
		}
		if p.bad {
			return false
		}
	}
	return !p.bad && n <= 21 && seen&entryRequired == entryRequired && p.off == len(p.b)
}

func (p *parser) header() *Header {
	h := new(Header)
	n := p.head(majorMap)
	var seen, k uint64
	for range min(n, 12) {
		k = p.key(k, 12)
		seen |= 1 << k
		switch k {
		case 1:
			h.ModuleSHA256 = p.nullable()
		case 2:
			h.ABI = uint32(p.uint(math.MaxUint32))
		case 3:
			h.Input = p.nullable()
		case 4:
			h.Seed = p.nullable()
		case 5:
			h.WallBase = p.int()
		case 6:
			h.Grant = p.nullable()
		case 7:
			h.Parent = p.nonempty()
		case 8:
			h.ModuleName = p.nonemptyText()
		case 9:
			h.Token = p.nonempty()
		case 10:
			h.Fork = p.fork()
		case 11:
			h.Origin = p.origin()
		case 12:
			h.Trace = p.trace()
		}
	}
	if n > 12 || seen&headerRequired != headerRequired {
		p.bad = true
	}
	return h
}

// fork reads a header's fork: the four fields every fork has, the first a
// 16-byte run id (Entry.check checks the rest), then the llm override's.
func (p *parser) fork() *Fork {
	f := new(Fork)
	n := p.head(majorMap)
	if n < 4 || n > 6 || p.key(0, 1) != 1 {
		p.bad = true
		return f
	}
	if run := p.bytes(); len(run) == len(f.Parent) {
		f.Parent = RunID(run)
	} else {
		p.bad = true
	}
	p.key(1, 2)
	f.Seq = p.uint(math.MaxUint64)
	p.key(2, 3)
	f.Entry = p.nullable()
	p.key(3, 4)
	f.Step = p.uint(math.MaxUint64)
	k := uint64(4)
	for range n - 4 {
		switch k = p.key(k, 6); k {
		case 5:
			f.Provider = p.nonemptyText()
		case 6:
			f.Model = p.nonemptyText()
		}
	}
	return f
}

// origin reads a header's origin: its kind and id, then its seq when not 0.
func (p *parser) origin() *Origin {
	o := new(Origin)
	n := p.head(majorMap)
	if n < 2 || n > 3 || p.key(0, 1) != 1 {
		p.bad = true
		return o
	}
	o.Kind = p.text()
	p.key(1, 2)
	o.ID = p.text()
	if n == 3 {
		p.key(2, 3)
		o.Seq = p.nonzero(math.MaxUint64)
	}
	return o
}

// trace reads a header's trace: its trace id and span id, each a byte
// string or null as abi.Unmarshal takes them (Entry.check checks their
// sizes).
func (p *parser) trace() *TraceRef {
	t := new(TraceRef)
	if p.head(majorMap) != 2 || p.key(0, 1) != 1 {
		p.bad = true
		return t
	}
	t.ID = p.nullable()
	p.key(1, 2)
	t.Span = p.nullable()
	return t
}

func (p *parser) end() *End {
	end := new(End)
	n := p.head(majorMap)
	var seen, k uint64
	for range min(n, 4) {
		k = p.key(k, 4)
		seen |= 1 << k
		switch k {
		case 1:
			end.Status = RunStatus(p.text())
		case 2:
			end.Output = p.nonempty()
		case 3:
			end.Error = p.nonemptyText()
		case 4:
			end.Steps = p.uint(math.MaxUint64)
		}
	}
	if n > 4 || seen&endRequired != endRequired {
		p.bad = true
	}
	return end
}

// parseRecord decodes the canonical encoding of a record into r and
// reports whether b was one.
func parseRecord(b []byte, r *Record) bool { return parseRecordOwned(bytes.Clone(b), r) }

// parseRecordOwned is parseRecord on bytes the caller gives up.
func parseRecordOwned(b []byte, r *Record) bool {
	p := parser{b: b}
	if p.head(majorArray) != 2 {
		return false
	}
	r.Entry = p.nullable()
	if p.peek(cborNull) {
		p.off++
	} else {
		s := new(Seal)
		n := p.head(majorMap)
		if n < 2 || n > 5 || p.key(0, 1) != 1 {
			return false
		}
		s.Cell = p.nullable()
		if p.key(1, 2) != 2 {
			return false
		}
		s.Sig = p.nullable()
		k := uint64(2)
		for range n - 2 {
			switch k = p.key(k, 5); k {
			case 3:
				s.Index = p.nonzero(math.MaxUint64)
			case 4:
				s.Size = p.nonzero(math.MaxUint64)
			case 5:
				m := p.head(majorArray)
				if m == 0 || m > uint64(len(p.b)-p.off) {
					return false
				}
				s.Path = make([][]byte, m)
				for i := range s.Path {
					s.Path[i] = p.nullable()
				}
			}
			if p.bad {
				return false
			}
		}
		r.Seal = s
	}
	return !p.bad && p.off == len(p.b)
}
