// Package otlpwire writes finished spans straight into OTLP's protobuf
// encoding (opentelemetry/proto/trace/v1, the messages of an
// ExportTraceServiceRequest), without the SDK's span objects or the OTLP
// exporter's transform into generated messages.
//
// Why: the host makes a span for every import call, and through the SDK
// each one costs some 12 µs of CPU and 45 allocations (a recording span,
// its read-only snapshot, the transform's messages, their reflection-driven
// marshalling and the garbage of all of it), which is tens of percent of a
// group-committed call's own CPU. Written here, a call's span costs a few
// hundred nanoseconds and no allocation. The bytes are the ones
// proto.Marshal writes for the same message (the tests check it field by
// field against the generated types). FrameRequest frames a batch of them,
// in place, as an ExportTraceServiceRequest, an OTLP/HTTP body; they also
// travel as
// the unknown fields of a generated ScopeSpans, which an OTLP client
// (otlptracehttp, otlptracegrpc) marshals with the message.
package otlpwire

import (
	"math"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// Span is a finished span, as an exporter takes it.
type Span struct {
	Trace trace.TraceID
	ID    trace.SpanID
	// Parent is the parent span's id, zero for a root span; Remote says
	// the parent came from another process.
	Parent trace.SpanID
	Remote bool
	// State is the W3C tracestate, Flags the trace flags.
	State string
	Flags trace.TraceFlags
	Name  string
	Kind  trace.SpanKind
	// Start and End are the span's times.
	Start, End time.Time
	// Raw holds attributes already written as a Span's attribute fields
	// (AppendStringAttr, AppendIntAttr, AppendHexAttr), before Attrs.
	Raw   []byte
	Attrs []attribute.KeyValue
	// Error, when set, is the description of an error status; an unset
	// status otherwise.
	Error string
}

// ResourceAttrs is the field number of a Resource's attributes.
const ResourceAttrs = 1

// Field numbers of the OTLP messages written here.
const (
	// ScopeSpans
	fSpans = 2
	// InstrumentationScope
	fScopeName    = 1
	fScopeVersion = 2
	fScopeAttrs   = 3
	// Span
	fTraceID   = 1
	fSpanID    = 2
	fState     = 3
	fParentID  = 4
	fName      = 5
	fKind      = 6
	fStart     = 7
	fEnd       = 8
	fAttrs     = 9
	fStatus    = 15
	fFlags     = 16
	fStatusMsg = 2
	fStatusCd  = 3
	// KeyValue
	fKey   = 1
	fValue = 2
	// AnyValue
	fString = 1
	fBool   = 2
	fInt    = 3
	fDouble = 4
	fArray  = 5
	fKVList = 6
	fBytes  = 7
	// ArrayValue and KeyValueList
	fValues = 1
)

// Span flags of OTLP (SpanFlags): the lower 8 bits are the W3C trace flags.
const (
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// statusError is Status.STATUS_CODE_ERROR.
const statusError = 2

// AppendSpan appends s, encoded as a ScopeSpans' spans field (its tag, its
// length and the Span message), to b.
func AppendSpan(b []byte, s *Span) []byte {
	b, at := openLen(b, fSpans)
	b = appendBytes(b, fTraceID, s.Trace[:])
	b = appendBytes(b, fSpanID, s.ID[:])
	if s.State != "" {
		b = appendString(b, fState, s.State)
	}
	if s.Parent.IsValid() {
		b = appendBytes(b, fParentID, s.Parent[:])
	}
	if s.Name != "" {
		b = appendString(b, fName, s.Name)
	}
	if s.Kind != 0 {
		b = appendTag(b, fKind, protowire.VarintType)
		b = appendVarint(b, uint64(s.Kind))
	}
	b = appendTag(b, fStart, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, unixNano(s.Start))
	b = appendTag(b, fEnd, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, unixNano(s.End))
	b = append(b, s.Raw...)
	b = AppendAttrs(b, fAttrs, s.Attrs)
	b, st := openLen(b, fStatus)
	if s.Error != "" {
		b = appendString(b, fStatusMsg, s.Error)
		b = appendTag(b, fStatusCd, protowire.VarintType)
		b = appendVarint(b, statusError)
	}
	b = closeLen(b, st)
	flags := uint32(s.Flags) | flagHasIsRemote
	if s.Remote {
		flags |= flagIsRemote
	}
	b = appendTag(b, fFlags, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, flags)
	return closeLen(b, at)
}

// openLen appends the tag of a length-delimited field and one byte for
// its length, and returns where its contents start; closeLen writes the
// length once they are written. Most fields here are shorter than 128
// bytes, whose length is that one byte; a longer one's contents move up
// to make room for the length's varint. This writes a message in one pass,
// with no pass to size its fields first.
func openLen(b []byte, field protowire.Number) ([]byte, int) {
	b = appendTag(b, field, protowire.BytesType)
	b = append(b, 0)
	return b, len(b)
}

func closeLen(b []byte, at int) []byte {
	n := len(b) - at
	if n < 0x80 {
		b[at-1] = byte(n)
		return b
	}
	k := protowire.SizeVarint(uint64(n))
	var pad [9]byte
	b = append(b, pad[:k-1]...)
	copy(b[at+k-1:], b[at:at+n])
	appendVarint(b[:at-1], uint64(n))
	return b
}

// unixNano is t in nanoseconds since the epoch, 0 for the zero time (as
// the SDK's transform writes it).
func unixNano(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixNano())
}

// AppendAttrs appends attrs as repeated KeyValue fields of number field.
// An attribute without a key is left out, as the SDK drops it.
func AppendAttrs(b []byte, field protowire.Number, attrs []attribute.KeyValue) []byte {
	for i := range attrs {
		kv := &attrs[i]
		if !kv.Valid() {
			continue
		}
		var at, av int
		b, at, av = openAttr(b, field, string(kv.Key))
		b = closeAttr(appendValue(b, &kv.Value), at, av)
	}
	return b
}

// openAttr appends the start of a KeyValue field of number field, its key
// and the start of its AnyValue, whose fields follow; closeAttr ends both.
func openAttr(b []byte, field protowire.Number, key string) ([]byte, int, int) {
	b, at := openLen(b, field)
	b = appendString(b, fKey, key)
	b, av := openLen(b, fValue)
	return b, at, av
}

func closeAttr(b []byte, at, av int) []byte { return closeLen(closeLen(b, av), at) }

// AppendStringAttr appends the attribute key = v, a string, as a Span's
// attribute field (for Span.Raw).
func AppendStringAttr(b []byte, key, v string) []byte {
	b, at, av := openAttr(b, fAttrs, key)
	return closeAttr(appendString(b, fString, v), at, av)
}

// AppendIntAttr appends the attribute key = v, an integer, as a Span's
// attribute field (for Span.Raw).
func AppendIntAttr(b []byte, key string, v int64) []byte {
	b, at, av := openAttr(b, fAttrs, key)
	b = appendTag(b, fInt, protowire.VarintType)
	return closeAttr(appendVarint(b, uint64(v)), at, av)
}

// AppendHexAttr appends the attribute key = the lower-case hex of v, a
// string, as a Span's attribute field (for Span.Raw).
func AppendHexAttr(b []byte, key string, v []byte) []byte {
	b, at, av := openAttr(b, fAttrs, key)
	b = appendTag(b, fString, protowire.BytesType)
	b = appendVarint(b, uint64(2*len(v)))
	return closeAttr(appendHex(b, v), at, av)
}

// AppendScopeFields appends the fields of an InstrumentationScope
// message: its name, version and attributes.
func AppendScopeFields(b []byte, name, version string, attrs []attribute.KeyValue) []byte {
	if name != "" {
		b = appendString(b, fScopeName, name)
	}
	if version != "" {
		b = appendString(b, fScopeVersion, version)
	}
	return AppendAttrs(b, fScopeAttrs, attrs)
}

// appendValue appends the fields of v's AnyValue message. A value of a
// type OTLP has no field for (EMPTY) is an empty AnyValue, as the SDK's
// transform writes it.
func appendValue(b []byte, v *attribute.Value) []byte {
	switch v.Type() {
	case attribute.STRING:
		return appendString(b, fString, v.AsString())
	case attribute.INT64:
		b = appendTag(b, fInt, protowire.VarintType)
		return appendVarint(b, uint64(v.AsInt64()))
	case attribute.BOOL:
		b = appendTag(b, fBool, protowire.VarintType)
		return appendVarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.FLOAT64:
		b = appendTag(b, fDouble, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	case attribute.BYTESLICE:
		return appendBytes(b, fBytes, v.AsByteSlice())
	case attribute.BOOLSLICE, attribute.INT64SLICE, attribute.FLOAT64SLICE, attribute.STRINGSLICE, attribute.SLICE:
		b, at := openLen(b, fArray)
		return closeLen(appendArray(b, v), at)
	case attribute.MAP:
		b, at := openLen(b, fKVList)
		return closeLen(AppendAttrs(b, fValues, v.AsMap()), at)
	}
	return b
}

// appendArray appends the values of a slice v as an ArrayValue's fields.
func appendArray(b []byte, v *attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOLSLICE:
		return appendElems(b, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return appendElems(b, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return appendElems(b, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return appendElems(b, v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		return appendElems(b, v.AsSlice(), func(x attribute.Value) attribute.Value { return x })
	}
	return b
}

// appendElems appends xs, each made a Value by value, as an ArrayValue's
// values.
func appendElems[T any](b []byte, xs []T, value func(T) attribute.Value) []byte {
	for _, x := range xs {
		v := value(x)
		var at int
		b, at = openLen(b, fValues)
		b = closeLen(appendValue(b, &v), at)
	}
	return b
}

func appendBytes(b []byte, field protowire.Number, v []byte) []byte {
	b = appendTag(b, field, protowire.BytesType)
	return append(appendVarint(b, uint64(len(v))), v...)
}

func appendString(b []byte, field protowire.Number, v string) []byte {
	b = appendTag(b, field, protowire.BytesType)
	return append(appendVarint(b, uint64(len(v))), v...)
}

// appendTag and appendVarint are protowire's, with the one-byte case
// inlined: every tag here but a Span's flags', and most lengths, are one
// byte, and protowire's functions are too large for the compiler to
// inline (a call each was a tenth of a span's CPU).
func appendTag(b []byte, num protowire.Number, typ protowire.Type) []byte {
	if num < 16 {
		return append(b, byte(num)<<3|byte(typ))
	}
	return protowire.AppendTag(b, num, typ)
}

func appendVarint(b []byte, v uint64) []byte {
	if v < 0x80 {
		return append(b, byte(v))
	}
	return protowire.AppendVarint(b, v)
}

// hexPairs holds the two lower-case hex digits of every byte value.
const hexPairs = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f" +
	"202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f" +
	"404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f" +
	"606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f" +
	"808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f" +
	"a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf" +
	"c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf" +
	"e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"

// appendHex appends the lower-case hex of v, as hex.AppendEncode does,
// two digits per byte from hexPairs.
func appendHex(b []byte, v []byte) []byte {
	n := len(b)
	b = slices.Grow(b, 2*len(v))[:n+2*len(v)]
	dst := b[n:]
	for i, c := range v {
		copy(dst[2*i:2*i+2], hexPairs[2*int(c):])
	}
	return b
}

// Scope is an instrumentation scope: the spans an Exporter takes are
// sent under it.
type Scope struct {
	Name, Version, SchemaURL string
	Attrs                    []attribute.KeyValue
}

// An Exporter takes finished spans and sends them, batched. ExportSpan
// encodes s before it returns and keeps nothing of it; it gives s an id
// when s.ID is zero. It never blocks on the network: a span that finds
// the exporter's queue full is dropped, as the SDK's batch processor
// drops it.
type Exporter interface {
	ExportSpan(s *Span)
}

// Field numbers of ExportTraceServiceRequest and ResourceSpans, and a
// ScopeSpans' scope and schema.
const (
	fResourceSpans = 1
	fResource      = 1
	fScopeSpans    = 2
	fSchemaURL     = 3
	fScope         = 1
)

// Batch is what an ExportTraceServiceRequest of one resource and one
// scope holds besides its spans, its parts already encoded: the fields of
// the Resource (AppendAttrs with ResourceAttrs) and those of the
// InstrumentationScope (AppendScopeFields).
type Batch struct {
	Resource       []byte
	ResourceSchema string
	Scope          []byte
	ScopeSchema    string
}

// PrefixLen is the most bytes of a request's framing that come before its
// spans, for batch's resource and scope: the room FrameRequest needs.
func PrefixLen(batch *Batch) int {
	const tagAndLen = 1 + 5 // a one-byte tag, a length under 4 GiB
	return 2*tagAndLen + 1 + protowire.SizeBytes(len(batch.Resource)) + 1 + protowire.SizeBytes(len(batch.Scope))
}

// FrameRequest makes the ExportTraceServiceRequest of one ResourceSpans
// with one ScopeSpans that batch describes, whose spans (AppendSpan's,
// one after another) are buf[at:], in buf itself: an OTLP/HTTP request's
// body. Its framing is written just before the spans, in the room
// buf[:at] (at least PrefixLen(batch) bytes), and its last fields after
// them. It returns the request, which shares buf's memory unless the last
// fields did not fit in its capacity. The spans are not copied.
func FrameRequest(buf []byte, at int, batch *Batch) []byte {
	rs, ss := requestSizes(batch, len(buf)-at)
	p := prefixLen(batch, rs, ss)
	if p > at {
		panic("otlpwire: FrameRequest: less room before the spans than PrefixLen")
	}
	start := at - p
	appendPrefix(buf[start:start:at], batch, rs, ss)
	return appendSuffix(buf[start:], batch)
}

// requestSizes returns the lengths of the ResourceSpans (rs) and of the
// ScopeSpans (ss) of batch with spans bytes of spans.
func requestSizes(batch *Batch, spans int) (rs, ss int) {
	ss = field(len(batch.Scope)) + spans
	if batch.ScopeSchema != "" {
		ss += field(len(batch.ScopeSchema))
	}
	rs = field(len(batch.Resource)) + field(ss)
	if batch.ResourceSchema != "" {
		rs += field(len(batch.ResourceSchema))
	}
	return rs, ss
}

// field is the size of a length-delimited field of n bytes, its tag one.
func field(n int) int { return 1 + protowire.SizeBytes(n) }

// prefixLen is the size of what appendPrefix writes.
func prefixLen(batch *Batch, rs, ss int) int {
	return 1 + protowire.SizeVarint(uint64(rs)) + field(len(batch.Resource)) + 1 + protowire.SizeVarint(uint64(ss)) + field(len(batch.Scope))
}

// appendPrefix appends a request's framing up to its spans: the
// ResourceSpans' tag and length, its resource, the ScopeSpans' tag and
// length, its scope.
func appendPrefix(b []byte, batch *Batch, rs, ss int) []byte {
	b = appendTag(b, fResourceSpans, protowire.BytesType)
	b = appendVarint(b, uint64(rs))
	b = appendBytes(b, fResource, batch.Resource)
	b = appendTag(b, fScopeSpans, protowire.BytesType)
	b = appendVarint(b, uint64(ss))
	return appendBytes(b, fScope, batch.Scope)
}

// appendSuffix appends a request's fields after its spans: the schema
// URLs of the ScopeSpans, then of the ResourceSpans.
func appendSuffix(b []byte, batch *Batch) []byte {
	if batch.ScopeSchema != "" {
		b = appendString(b, fSchemaURL, batch.ScopeSchema)
	}
	if batch.ResourceSchema != "" {
		b = appendString(b, fSchemaURL, batch.ResourceSchema)
	}
	return b
}
