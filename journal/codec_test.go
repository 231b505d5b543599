package journal

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"pgregory.net/rapid"

	"github.com/agentrt/agentrt/abi"
)

// The hand-written encoders of codec.go must write exactly what abi.Marshal
// writes; its parser must accept exactly what abi.Unmarshal accepts, with
// the same values; and so DecodeEntry and DecodeRecord must accept and
// reject exactly what they did when they decoded with abi.Unmarshal, with
// the same errors. The tests below hold them to all three, against the
// reflective encoder and decoder and the former DecodeEntry and
// DecodeRecord, kept here as references. Run them with -rapid.checks=20000
// after a change to codec.go; plain go test draws 100 cases each.

// decodeEntryRef is DecodeEntry as it was before codec.go: abi.Unmarshal,
// whose canonical check re-encodes with abi.Marshal.
func decodeEntryRef(b []byte) (*Entry, error) {
	var e Entry
	if err := abi.Unmarshal(b, &e); err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("empty entry")
	}
	if err := e.check(); err != nil {
		return nil, err
	}
	return &e, nil
}

// decodeRecordRef is DecodeRecord as it was before codec.go.
func decodeRecordRef(b []byte) (*Record, error) {
	var r Record
	if len(b) == 0 {
		return nil, fmt.Errorf("empty record")
	}
	if err := abi.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	if err := r.Seal.check(); err != nil {
		return nil, err
	}
	return &r, nil
}

// Generators. Lengths and integers are drawn near the points where a CBOR
// head changes size (23/24, 255/256, 65535/65536, 2^32-1/2^32), where a
// hand-written encoder is most likely to differ.

var (
	boundaryLens  = []int{0, 1, 23, 24, 255, 256, 65535, 65536}
	boundaryUints = []uint64{0, 1, 23, 24, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64}
	boundaryInts  = []int64{0, 1, -1, 23, 24, -24, -25, 255, 256, -256, -257, 65535, 65536, -65536, -65537,
		math.MaxUint32, math.MaxUint32 + 1, -math.MaxUint32 - 1, -math.MaxUint32 - 2, math.MaxInt64, math.MinInt64}
)

func drawLen(t *rapid.T, label string) int {
	if rapid.Bool().Draw(t, label+" at a boundary") {
		return rapid.SampledFrom(boundaryLens).Draw(t, label)
	}
	return rapid.IntRange(0, 300).Draw(t, label)
}

// drawFilled returns n bytes. Short ones are drawn byte by byte, so that
// they shrink; long ones come from a drawn seed, since drawing 64 KiB a
// byte at a time makes each case slow.
func drawFilled(t *rapid.T, label string, n int) []byte {
	if n <= 64 {
		return rapid.SliceOfN(rapid.Byte(), n, n).Draw(t, label)
	}
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], rapid.Uint64().Draw(t, label+" seed"))
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(seed).Read(b)
	return b
}

// drawBytes returns nil, an empty slice or bytes of any length: the first
// two encode differently where a field is not omitempty.
func drawBytes(t *rapid.T, label string) []byte {
	switch rapid.IntRange(0, 3).Draw(t, label+" kind") {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	return drawFilled(t, label, drawLen(t, label+" length"))
}

// drawText returns a string; with invalid set it may not be valid UTF-8,
// which the encoder writes as it is and the decoder rejects.
func drawText(t *rapid.T, label string, invalid bool) string {
	switch rapid.IntRange(0, 3).Draw(t, label+" kind") {
	case 0:
		return ""
	case 1:
		return rapid.String().Draw(t, label)
	case 2:
		return strings.Repeat("é", drawLen(t, label+" length")/2) + rapid.StringN(0, 1, -1).Draw(t, label+" tail")
	}
	if invalid {
		return string(drawFilled(t, label, drawLen(t, label+" length")))
	}
	return strings.Repeat("a", drawLen(t, label+" length"))
}

func drawUint(t *rapid.T, label string) uint64 {
	if rapid.Bool().Draw(t, label+" at a boundary") {
		return rapid.SampledFrom(boundaryUints).Draw(t, label)
	}
	return rapid.Uint64().Draw(t, label)
}

func drawUint32(t *rapid.T, label string) uint32 {
	if rapid.Bool().Draw(t, label+" at a boundary") {
		return uint32(rapid.SampledFrom(boundaryUints[:9]).Draw(t, label))
	}
	return rapid.Uint32().Draw(t, label)
}

func drawInt(t *rapid.T, label string) int64 {
	if rapid.Bool().Draw(t, label+" at a boundary") {
		return rapid.SampledFrom(boundaryInts).Draw(t, label)
	}
	return rapid.Int64().Draw(t, label)
}

func drawHash(t *rapid.T, label string) []byte { return drawFilled(t, label, HashSize) }

func drawHeader(t *rapid.T, invalid bool) *Header {
	return &Header{
		ModuleSHA256: drawBytes(t, "module sha256"),
		ABI:          drawUint32(t, "abi"),
		Input:        drawBytes(t, "input"),
		Seed:         drawBytes(t, "seed"),
		WallBase:     drawInt(t, "wall base"),
		Grant:        drawBytes(t, "grant"),
		Parent:       drawBytes(t, "parent"),
		ModuleName:   drawText(t, "module name", invalid),
		Token:        drawBytes(t, "token"),
		Origin:       drawOrigin(t, invalid),
		Trace:        drawTrace(t, invalid),
	}
}

func drawTrace(t *rapid.T, invalid bool) *TraceRef {
	if !rapid.Bool().Draw(t, "has trace") {
		return nil
	}
	if invalid {
		return &TraceRef{ID: drawBytes(t, "trace id"), Span: drawBytes(t, "span id")}
	}
	tr := &TraceRef{ID: drawFilled(t, "trace id", 16), Span: drawFilled(t, "span id", 8)}
	tr.ID[0], tr.Span[0] = tr.ID[0]|1, tr.Span[0]|1 // all-zero ids are invalid
	return tr
}

func drawOrigin(t *rapid.T, invalid bool) *Origin {
	if !rapid.Bool().Draw(t, "has origin") {
		return nil
	}
	o := &Origin{Kind: drawText(t, "origin kind", invalid), ID: drawText(t, "origin id", invalid), Seq: drawUint(t, "origin seq")}
	if !invalid {
		o.Kind, o.ID = "trigger"+o.Kind, "t"+o.ID
	}
	return o
}

func drawEnd(t *rapid.T, invalid bool) *End {
	return &End{
		Status: RunStatus(rapid.OneOf(rapid.SampledFrom([]string{"", "completed", "failed", "running"}),
			rapid.Just(drawText(t, "status", invalid))).Draw(t, "status")),
		Output: drawBytes(t, "output"),
		Error:  drawText(t, "error", invalid),
		Steps:  drawUint(t, "steps"),
	}
}

// drawEntry returns an entry with every field drawn freely. With shaped
// set, it then overrides the fields the shape rules constrain, so that the
// entry passes check and the round trip through DecodeEntry is exercised.
func drawEntry(t *rapid.T, shaped bool) *Entry {
	e := &Entry{
		Version:    rapid.Uint8().Draw(t, "version"),
		Run:        RunID(drawFilled(t, "run", 16)),
		Seq:        drawUint(t, "seq"),
		Prev:       drawBytes(t, "prev"),
		Phase:      Phase(rapid.Uint8().Draw(t, "phase")),
		Step:       drawUint(t, "step"),
		Op:         drawText(t, "op", !shaped),
		InputHash:  drawBytes(t, "input hash"),
		Request:    drawBytes(t, "request"),
		OutputHash: drawBytes(t, "output hash"),
		Response:   drawBytes(t, "response"),
		Status:     drawUint32(t, "status"),
		Cell:       drawBytes(t, "cell"),
		Time:       drawInt(t, "time"),
		Epoch:      drawUint(t, "epoch"),
		Key:        drawText(t, "key", !shaped),
		Gate:       drawBytes(t, "gate"),
		Approval:   drawBytes(t, "approval"),
	}
	if rapid.Bool().Draw(t, "has header") {
		e.Header = drawHeader(t, !shaped)
	}
	if rapid.Bool().Draw(t, "has end") {
		e.End = drawEnd(t, !shaped)
	}
	if !shaped {
		return e
	}
	e.Version = FormatVersion
	e.Prev = drawHash(t, "shaped prev")
	e.Cell = drawFilled(t, "shaped cell", ed25519.PublicKeySize)
	e.Phase = Phase(rapid.IntRange(int(PhaseStart), int(PhaseEnd)).Draw(t, "shaped phase"))
	e.Header, e.End = nil, nil
	switch e.Phase {
	case PhaseStart:
		e.Seq = 0
		e.Header = drawHeader(t, false)
	case PhaseEnd:
		e.End = drawEnd(t, false)
	}
	if e.Phase != PhaseStart && e.Seq == 0 {
		e.Seq = 1
	}
	switch e.Phase {
	case PhaseIntent, PhaseExecuting, PhaseCompleted, PhaseFailed:
		e.Step = max(e.Step, 1)
		if e.Op == "" {
			e.Op = "kv.put"
		}
		e.InputHash = drawHash(t, "shaped input hash")
	}
	if e.Phase == PhaseCompleted || e.Phase == PhaseFailed {
		e.OutputHash = drawHash(t, "shaped output hash")
	}
	if e.Phase != PhaseIntent && e.Phase != PhaseCompleted && e.Phase != PhaseFailed {
		e.Gate = nil
	}
	if e.Phase == PhaseStart || e.Phase == PhaseEnd {
		e.Approval = nil
	}
	if err := e.check(); err != nil {
		t.Fatalf("the shaped generator drew an entry that fails the shape check: %v", err)
	}
	return e
}

func drawRecord(t *rapid.T) *Record {
	r := &Record{Entry: drawBytes(t, "entry")}
	switch rapid.IntRange(0, 2).Draw(t, "seal kind") {
	case 1:
		r.Seal = &Seal{Cell: drawBytes(t, "seal cell"), Sig: drawBytes(t, "seal sig")}
	case 2:
		r.Seal = &Seal{Cell: drawFilled(t, "seal cell", ed25519.PublicKeySize), Sig: drawFilled(t, "seal sig", ed25519.SignatureSize)}
	}
	if r.Seal != nil && rapid.Bool().Draw(t, "round seal") {
		r.Seal.Index = drawUint(t, "round index")
		r.Seal.Size = drawUint(t, "round size")
		if n := rapid.IntRange(0, 12).Draw(t, "proof length"); n > 0 {
			r.Seal.Path = make([][]byte, n)
			for i := range r.Seal.Path {
				r.Seal.Path[i] = drawBytes(t, "proof hash")
			}
		}
	}
	return r
}

// decodedEntry returns what e decodes to after encoding: omitempty fields
// of length 0 are omitted, so they come back nil.
func decodedEntry(e *Entry) *Entry {
	d := *e
	for _, p := range []*[]byte{&d.InputHash, &d.Request, &d.OutputHash, &d.Response, &d.Gate, &d.Approval} {
		if len(*p) == 0 {
			*p = nil
		}
	}
	if e.Header != nil {
		h := *e.Header
		if len(h.Parent) == 0 {
			h.Parent = nil
		}
		if len(h.Token) == 0 {
			h.Token = nil
		}
		d.Header = &h
	}
	if e.End != nil {
		end := *e.End
		if len(end.Output) == 0 {
			end.Output = nil
		}
		d.End = &end
	}
	return &d
}

func TestEncodeEntryMatchesMarshal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := drawEntry(t, rapid.Bool().Draw(t, "shaped"))
		want, err := abi.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := EncodeEntry(e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("EncodeEntry differs from abi.Marshal:\n got  %x\n want %x", got, want)
		}
		if cap(got) != len(got) {
			t.Fatalf("entrySize is %d, the encoding %d bytes", cap(got), len(got))
		}
		if e.check() != nil {
			return
		}
		if !parseEntry(got, new(Entry)) {
			t.Fatalf("parseEntry refuses the encoding %x", got)
		}
		d, err := DecodeEntry(got)
		if err != nil {
			t.Fatalf("DecodeEntry rejects the encoding of an entry that passes the shape check: %v", err)
		}
		if want := decodedEntry(e); !reflect.DeepEqual(d, want) {
			t.Fatalf("round trip changed the entry:\n got  %+v\n want %+v", d, want)
		}
	})
}

func TestEncodeRecordMatchesMarshal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := drawRecord(t)
		want, err := abi.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := EncodeRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("EncodeRecord differs from abi.Marshal:\n got  %x\n want %x", got, want)
		}
		if cap(got) != len(got) {
			t.Fatalf("recordSize is %d, the encoding %d bytes", cap(got), len(got))
		}
		if r.Seal != nil {
			if want := mustMarshal(t, r.Seal); !bytes.Equal(appendSeal(nil, r.Seal), want) {
				t.Fatalf("appendSeal differs from abi.Marshal:\n got  %x\n want %x", appendSeal(nil, r.Seal), want)
			}
		}
		if !parseRecord(got, new(Record)) {
			t.Fatalf("parseRecord refuses the encoding %x", got)
		}
		d, err := DecodeRecord(got)
		if r.Seal.check() != nil {
			if err == nil {
				t.Fatalf("DecodeRecord accepts a seal that breaks the shape rules: %+v", r.Seal)
			}
			return
		}
		if err != nil {
			t.Fatalf("DecodeRecord rejects an encoded record: %v", err)
		}
		if !reflect.DeepEqual(d, r) {
			t.Fatalf("round trip changed the record:\n got  %+v\n want %+v", d, r)
		}
	})
}

// TestEncodeNil pins the encoding of nil pointers, which abi.Marshal
// writes as null.
func TestEncodeNil(t *testing.T) {
	for _, tt := range []struct {
		name      string
		got, want []byte
	}{
		{"entry", appendEntry(nil, nil), mustMarshal(t, (*Entry)(nil))},
		{"record", appendRecord(nil, nil), mustMarshal(t, (*Record)(nil))},
		{"seal", appendSeal(nil, nil), mustMarshal(t, (*Seal)(nil))},
		{"zero entry", appendEntry(nil, &Entry{}), mustMarshal(t, &Entry{})},
		{"zero record", appendRecord(nil, &Record{}), mustMarshal(t, &Record{})},
	} {
		if !bytes.Equal(tt.got, tt.want) {
			t.Errorf("%s: got %x, want %x", tt.name, tt.got, tt.want)
		}
	}
}

// fataler is what the helpers need of a *testing.T, *testing.B or *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func mustMarshal(tb fataler, v any) []byte {
	tb.Helper()
	b, err := abi.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// sameDecode fails unless DecodeEntry and DecodeRecord give b the result
// and the error message their references give it, and unless the parsers
// of their fast path accept b exactly when abi.Unmarshal does, with the
// same value: then the strict decoder's only role is to word the errors.
func sameDecode(t fataler, b []byte) {
	t.Helper()
	e, err := DecodeEntry(b)
	re, rerr := decodeEntryRef(b)
	if fmt.Sprint(err) != fmt.Sprint(rerr) || !reflect.DeepEqual(e, re) {
		t.Fatalf("DecodeEntry(%x) = %+v, %v; before it was %+v, %v", b, e, err, re, rerr)
	}
	r, err := DecodeRecord(b)
	rr, rerr := decodeRecordRef(b)
	if fmt.Sprint(err) != fmt.Sprint(rerr) || !reflect.DeepEqual(r, rr) {
		t.Fatalf("DecodeRecord(%x) = %+v, %v; before it was %+v, %v", b, r, err, rr, rerr)
	}
	if len(b) == 0 {
		return // never parsed: both decoders refuse it first
	}
	var pe, ue Entry
	ok, uerr := parseEntry(b, &pe), abi.Unmarshal(b, &ue)
	if ok != (uerr == nil) || ok && !reflect.DeepEqual(pe, ue) {
		t.Fatalf("parseEntry(%x) = %v, %+v; abi.Unmarshal gives %v, %+v", b, ok, pe, uerr, ue)
	}
	var pr, ur Record
	ok, uerr = parseRecord(b, &pr), abi.Unmarshal(b, &ur)
	if ok != (uerr == nil) || ok && !reflect.DeepEqual(pr, ur) {
		t.Fatalf("parseRecord(%x) = %v, %+v; abi.Unmarshal gives %v, %+v", b, ok, pr, uerr, ur)
	}
}

// oddValues are CBOR items a field may hold in a hostile input: integers
// out of a field's range or of the wrong sign, null and the other simple
// values, floats, strings of the wrong type, length or encoding, maps and
// arrays where they do not belong, tags and indefinite lengths.
var oddValues = func() []cbor.RawMessage {
	var out []cbor.RawMessage
	for _, h := range []string{
		"00", "17", "1818", "18ff", "190100", "1a00010000", "1b0000000100000000", "1b7fffffffffffffff",
		"1b8000000000000000", "1bffffffffffffffff",
		"20", "3b7fffffffffffffff", "3b8000000000000000", "3bffffffffffffffff",
		"f4", "f5", "f6", "f7", "e0", "f820", "f90000", "fa3fc00000", "fb3ff8000000000000",
		"40", "4100", "4f" + strings.Repeat("00", 15), "50" + strings.Repeat("00", 16), "51" + strings.Repeat("00", 17),
		"5820" + strings.Repeat("00", 32), "5f4100ff", "5fff",
		"60", "6161", "61ff", "62c3a9", "7f6161ff",
		"a0", "a10100", "bfff", "80", "9f ff", "90" + strings.Repeat("00", 16),
		"c04161", "d8184100", "d9d9f7a0",
		"1c", "1d", "1e", "1f", "3c", "5f", "7f", "9f", "bf", "dc", "fc", "ff",
	} {
		b, err := hex.DecodeString(strings.ReplaceAll(h, " ", ""))
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	return out
}()

// pair is one key and value of a map a test writes by hand; empty marks a
// field that the canonical form omits.
type pair struct {
	key   uint64
	value any
	empty bool
}

// looseMap writes pairs as a map the way a careless or hostile writer
// might: with the fields the canonical form omits put back, pairs dropped,
// repeated or shuffled, an unknown key added or a value swapped for an
// odd one. Without any of that, it writes the canonical map.
func looseMap(t *rapid.T, label string, pairs []pair) []byte {
	keepEmpty := rapid.Bool().Draw(t, label+": keep empty fields")
	var out []pair
	for _, p := range pairs {
		if !p.empty || keepEmpty && rapid.Bool().Draw(t, label+": keep empty field") {
			out = append(out, p)
		}
	}
	if rapid.Bool().Draw(t, label+": mess with the pairs") {
		if len(out) > 0 && rapid.Bool().Draw(t, label+": drop a pair") {
			i := rapid.IntRange(0, len(out)-1).Draw(t, label+": dropped")
			out = slices.Delete(out, i, i+1)
		}
		if len(out) > 0 && rapid.Bool().Draw(t, label+": repeat a pair") {
			out = append(out, out[rapid.IntRange(0, len(out)-1).Draw(t, label+": repeated")])
		}
		if len(out) > 0 && rapid.Bool().Draw(t, label+": odd value") {
			i := rapid.IntRange(0, len(out)-1).Draw(t, label+": odd at")
			out[i].value = rapid.SampledFrom(oddValues).Draw(t, label+": odd")
		}
		if rapid.Bool().Draw(t, label+": unknown key") {
			out = append(out, pair{key: rapid.SampledFrom([]uint64{0, 19, 24, 1 << 20}).Draw(t, label+": unknown"), value: uint64(0)})
		}
		if rapid.Bool().Draw(t, label+": shuffle") {
			out = rapid.Permutation(out).Draw(t, label+": order")
		}
	}
	b := appendHead(nil, majorMap, uint64(len(out)))
	for _, p := range out {
		b = appendItem(t, appendHead(b, majorUint, p.key), p.value)
	}
	return b
}

// appendItem appends v encoded by abi.Marshal, or as it is if it is a
// cbor.RawMessage, which abi.Marshal would refuse when it is not canonical.
func appendItem(t fataler, b []byte, v any) []byte {
	if raw, ok := v.(cbor.RawMessage); ok {
		return append(b, raw...)
	}
	return append(b, mustMarshal(t, v)...)
}

// The pairs of each structure as its encoder writes them, the nested
// header and end given as values of their own.

func entryPairs(e *Entry, header, end any) []pair {
	return []pair{
		{1, e.Version, false}, {2, e.Run, false}, {3, e.Seq, false}, {4, e.Prev, false},
		{5, e.Phase, false}, {6, e.Step, e.Step == 0}, {7, e.Op, e.Op == ""},
		{8, e.InputHash, len(e.InputHash) == 0}, {9, e.Request, len(e.Request) == 0},
		{10, e.OutputHash, len(e.OutputHash) == 0}, {11, e.Response, len(e.Response) == 0},
		{12, e.Status, e.Status == 0}, {13, e.Cell, false}, {14, e.Time, false},
		{15, e.Epoch, e.Epoch == 0}, {16, e.Key, e.Key == ""},
		{17, header, e.Header == nil}, {18, end, e.End == nil}, {19, e.Gate, len(e.Gate) == 0},
	}
}

func headerPairs(h *Header) []pair {
	return []pair{
		{1, h.ModuleSHA256, false}, {2, h.ABI, false}, {3, h.Input, false}, {4, h.Seed, false},
		{5, h.WallBase, false}, {6, h.Grant, false}, {7, h.Parent, len(h.Parent) == 0},
		{8, h.ModuleName, h.ModuleName == ""}, {9, h.Token, len(h.Token) == 0},
	}
}

func endPairs(x *End) []pair {
	return []pair{{1, x.Status, false}, {2, x.Output, len(x.Output) == 0}, {3, x.Error, x.Error == ""}, {4, x.Steps, false}}
}

func sealPairs(s *Seal) []pair { return []pair{{1, s.Cell, false}, {2, s.Sig, false}} }

// looseEntry writes e with looseMap, its header and end record too.
func looseEntry(t *rapid.T, e *Entry) []byte {
	var header, end any = e.Header, e.End
	if e.Header != nil && rapid.Bool().Draw(t, "loose header") {
		header = cbor.RawMessage(looseMap(t, "header", headerPairs(e.Header)))
	}
	if e.End != nil && rapid.Bool().Draw(t, "loose end") {
		end = cbor.RawMessage(looseMap(t, "end", endPairs(e.End)))
	}
	return looseMap(t, "entry", entryPairs(e, header, end))
}

// looseRecord writes a record holding entry, loosely: an array of the
// wrong length, an odd item in place of the entry or the seal, a loose seal.
func looseRecord(t *rapid.T, entry []byte) []byte {
	r := drawRecord(t)
	items := []any{entry, r.Seal}
	if r.Seal != nil && rapid.Bool().Draw(t, "loose seal") {
		items[1] = cbor.RawMessage(looseMap(t, "seal", sealPairs(r.Seal)))
	}
	if rapid.Bool().Draw(t, "odd record") {
		i := rapid.IntRange(0, 2).Draw(t, "odd item")
		odd := rapid.SampledFrom(oddValues).Draw(t, "odd")
		if i < len(items) {
			items[i] = odd
		} else {
			items = append(items, odd)
		}
	}
	b := appendHead(nil, majorArray, uint64(len(items)))
	for _, it := range items {
		b = appendItem(t, b, it)
	}
	return b
}

// mutate applies a few random edits to b: a byte changed, inserted or
// removed, a cut, or a head written in a longer form than needed.
func mutate(t *rapid.T, b []byte) []byte {
	b = slices.Clone(b)
	for range rapid.IntRange(0, 3).Draw(t, "mutations") {
		if len(b) == 0 {
			return b
		}
		i := rapid.IntRange(0, len(b)-1).Draw(t, "at")
		switch rapid.IntRange(0, 4).Draw(t, "mutation") {
		case 0:
			b[i] = rapid.Byte().Draw(t, "byte")
		case 1:
			b = slices.Insert(b, i, rapid.Byte().Draw(t, "byte"))
		case 2:
			b = slices.Delete(b, i, i+1)
		case 3:
			b = b[:i]
		case 4:
			// Where b[i] is a head with its argument inside it, the same
			// head with a one-byte argument: valid CBOR, not canonical.
			if b[i]&0x1f < 24 && b[i]>>5 < 6 {
				b = slices.Insert(b, i+1, b[i]&0x1f)
				b[i] = b[i]&0xe0 | 24
			}
		}
	}
	return b
}

// TestDecodeMatchesReference checks, on canonical, loose and mutated
// encodings of entries and of records holding them, that DecodeEntry and
// DecodeRecord accept what they accepted before, with the same result, and
// reject what they rejected, with the same message; see sameDecode.
func TestDecodeMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := drawEntry(t, rapid.Bool().Draw(t, "shaped"))
		var b []byte
		if rapid.Bool().Draw(t, "loose") {
			b = looseEntry(t, e)
		} else {
			b = mustMarshal(t, e)
		}
		if rapid.Bool().Draw(t, "in a record") {
			b = looseRecord(t, b)
		}
		if rapid.Bool().Draw(t, "mutated") {
			b = mutate(t, b)
		}
		sameDecode(t, b)
	})
}

// writeMap writes pairs as a map, in the order given, all of them.
func writeMap(t fataler, pairs []pair) []byte {
	b := appendHead(nil, majorMap, uint64(len(pairs)))
	for _, p := range pairs {
		b = appendItem(t, appendHead(b, majorUint, p.key), p.value)
	}
	return b
}

// defects returns pairs with one defect each: every value swapped for
// every odd value, every pair dropped, repeated or swapped with the next,
// an unknown key added and the map head miscounted. Each defect is alone,
// so that the property test's rarer draws are all tried on every run.
func defects(t fataler, pairs []pair) [][]byte {
	var out [][]byte
	with := func(ps []pair) { out = append(out, writeMap(t, ps)) }
	with(pairs)
	for i := range pairs {
		for _, odd := range oddValues {
			ps := slices.Clone(pairs)
			ps[i].value = odd
			with(ps)
		}
		with(slices.Delete(slices.Clone(pairs), i, i+1))
		with(slices.Insert(slices.Clone(pairs), i, pairs[i]))
		if i+1 < len(pairs) {
			ps := slices.Clone(pairs)
			ps[i], ps[i+1] = ps[i+1], ps[i]
			with(ps)
		}
	}
	for _, k := range []uint64{0, 19, 24, 1 << 20} {
		with(append(slices.Clone(pairs), pair{key: k, value: uint64(1)}))
	}
	whole := writeMap(t, pairs)
	out = append(out, append([]byte{majorMap | byte(len(pairs)+1)}, whole[1:]...))
	out = append(out, append([]byte{majorMap | byte(len(pairs)-1)}, whole[1:]...))
	return out
}

// fullEntry has every field set, so that every key of the entry, its
// header and its end record is in its encoding (no entry of the format has
// both a header and an end; the parser must still read one the way the
// strict decoder does).
func fullEntry() *Entry {
	e := benchEntries()["call"]
	e.Key, e.Status = "run-1", 7
	e.Header = benchEntries()["start"].Header
	e.Header.Parent = bytes.Repeat([]byte{9}, 16)
	e.End = &End{Status: StatusFailed, Output: []byte("out"), Error: "boom", Steps: 3}
	return e
}

// TestDecodeSingleDefects runs sameDecode over every single defect of a
// full entry, of its header and end record, and of a sealed record.
func TestDecodeSingleDefects(t *testing.T) {
	e := fullEntry()
	entry := mustMarshal(t, e)
	var inputs [][]byte
	inputs = append(inputs, defects(t, entryPairs(e, e.Header, e.End))...)
	for _, h := range defects(t, headerPairs(e.Header)) {
		inputs = append(inputs, writeMap(t, entryPairs(e, cbor.RawMessage(h), e.End)))
	}
	for _, x := range defects(t, endPairs(e.End)) {
		inputs = append(inputs, writeMap(t, entryPairs(e, e.Header, cbor.RawMessage(x))))
	}
	seal := &Seal{Cell: e.Cell, Sig: bytes.Repeat([]byte{0x55}, ed25519.SignatureSize)}
	record := func(items ...any) []byte {
		b := appendHead(nil, majorArray, uint64(len(items)))
		for _, it := range items {
			b = appendItem(t, b, it)
		}
		return b
	}
	for _, s := range defects(t, sealPairs(seal)) {
		inputs = append(inputs, record(entry, cbor.RawMessage(s)))
	}
	for _, odd := range oddValues {
		inputs = append(inputs, record(odd, seal), record(entry, odd), record(entry, seal, odd), record(odd))
	}
	inputs = append(inputs, record(), record(entry), record((*Seal)(nil), entry), record([]byte(nil), (*Seal)(nil)))
	for _, b := range inputs {
		sameDecode(t, b)
	}
}

// vectorInputs returns every record of the vectors in testdata/vectors,
// and the entry inside each, that vectors_test.go runs through a Verifier.
func vectorInputs(tb testing.TB) [][]byte {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "vectors", "*.txt"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no vectors: %v", err)
	}
	var out [][]byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			h, ok := strings.CutPrefix(sc.Text(), "record: ")
			if !ok {
				continue
			}
			raw, err := hex.DecodeString(h)
			if err != nil {
				tb.Fatalf("%s: %v", f, err)
			}
			out = append(out, raw)
			if r, err := decodeRecordRef(raw); err == nil {
				out = append(out, r.Entry)
			}
		}
		if err := sc.Err(); err != nil {
			tb.Fatal(err)
		}
	}
	return out
}

// TestVectorsDecodeAsBefore runs every record and entry of the vectors,
// the defective ones included, through both decoders, and re-encodes what
// decodes: the encoders must give back the stored bytes.
func TestVectorsDecodeAsBefore(t *testing.T) {
	for _, b := range vectorInputs(t) {
		sameDecode(t, b)
		if r, err := DecodeRecord(b); err == nil {
			if got, _ := EncodeRecord(r); !bytes.Equal(got, b) {
				t.Errorf("EncodeRecord(DecodeRecord(%x)) = %x", b, got)
			}
		}
		if e, err := DecodeEntry(b); err == nil {
			if got, _ := EncodeEntry(e); !bytes.Equal(got, b) {
				t.Errorf("EncodeEntry(DecodeEntry(%x)) = %x", b, got)
			}
		}
	}
}

// FuzzDecodeMatchesReference explores from the vectors for an input on
// which DecodeEntry or DecodeRecord departs from its reference.
func FuzzDecodeMatchesReference(f *testing.F) {
	for _, b := range vectorInputs(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { sameDecode(t, b) })
}

// benchEntries are entries as the host writes them: a start entry and a
// pure call with a small request and response.
func benchEntries() map[string]*Entry {
	prev, cell := bytes.Repeat([]byte{0x11}, HashSize), bytes.Repeat([]byte{0x22}, ed25519.PublicKeySize)
	req, resp := bytes.Repeat([]byte{0x33}, 40), bytes.Repeat([]byte{0x44}, 120)
	return map[string]*Entry{
		"start": {Version: FormatVersion, Seq: 0, Prev: prev, Phase: PhaseStart, Cell: cell, Time: 1767323045000000000,
			Header: &Header{ModuleSHA256: Sum([]byte("m")), ABI: 1, Input: []byte("hello"), Seed: bytes.Repeat([]byte{5}, 32),
				WallBase: 1767323045000000000, Grant: bytes.Repeat([]byte{0xa0}, 60), ModuleName: "bench"}},
		"call": {Version: FormatVersion, Seq: 7, Prev: prev, Phase: PhaseCompleted, Step: 3, Op: "kv.get",
			InputHash: Sum(req), Request: req, OutputHash: Sum(resp), Response: resp, Cell: cell,
			Time: 1767323045000000000, Epoch: 2},
	}
}

// BenchmarkEncodeEntry compares abi.Marshal, which EncodeEntry was, with
// EncodeEntry.
func BenchmarkEncodeEntry(b *testing.B) {
	for name, e := range benchEntries() {
		b.Run(name+"/abi.Marshal", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := abi.Marshal(e); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/EncodeEntry", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := EncodeEntry(e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// strictEntry and strictRecord are DecodeEntry and DecodeRecord on their
// slow path alone: the strict decoder, then the canonical check with the
// hand-written encoders.
func strictEntry(b []byte) (*Entry, error) {
	e := new(Entry)
	if err := decodeStrict(b, e); err != nil {
		return nil, err
	}
	return e, e.check()
}

func strictRecord(b []byte) (*Record, error) {
	r := new(Record)
	return r, decodeStrict(b, r)
}

// BenchmarkDecodeEntry compares the former DecodeEntry (abi.Unmarshal),
// its slow path alone (abi.DecodeStrict and appendEntry) and DecodeEntry.
func BenchmarkDecodeEntry(b *testing.B) {
	for name, e := range benchEntries() {
		raw := mustMarshal(b, e)
		for _, d := range []struct {
			name   string
			decode func([]byte) (*Entry, error)
		}{{"abi.Unmarshal", decodeEntryRef}, {"DecodeStrict", strictEntry}, {"DecodeEntry", DecodeEntry}} {
			b.Run(name+"/"+d.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := d.decode(raw); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkDecodeRecord does the same for DecodeRecord, on a sealed record
// of the call entry.
func BenchmarkDecodeRecord(b *testing.B) {
	r := &Record{Entry: mustMarshal(b, benchEntries()["call"]),
		Seal: &Seal{Cell: bytes.Repeat([]byte{0x22}, ed25519.PublicKeySize), Sig: bytes.Repeat([]byte{0x55}, ed25519.SignatureSize)}}
	raw := mustMarshal(b, r)
	for _, d := range []struct {
		name   string
		decode func([]byte) (*Record, error)
	}{{"abi.Unmarshal", decodeRecordRef}, {"DecodeStrict", strictRecord}, {"DecodeRecord", DecodeRecord}} {
		b.Run(d.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.decode(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodeRecord compares abi.Marshal, which EncodeRecord was, with
// EncodeRecord, on a sealed record of the call entry.
func BenchmarkEncodeRecord(b *testing.B) {
	r := &Record{Entry: mustMarshal(b, benchEntries()["call"]),
		Seal: &Seal{Cell: bytes.Repeat([]byte{0x22}, ed25519.PublicKeySize), Sig: bytes.Repeat([]byte{0x55}, ed25519.SignatureSize)}}
	b.Run("abi.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := abi.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("EncodeRecord", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := EncodeRecord(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
