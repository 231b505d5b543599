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
// field against the generated types); they travel as the unknown fields of
// a generated ScopeSpans, so that the OTLP client (otlptracehttp,
// otlptracegrpc) still sends them, with everything it reads from OTEL_*
// (endpoint, headers, compression, certificates, retries).
package otlpwire

import (
	"encoding/hex"
	"math"
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
		b = protowire.AppendTag(b, fKind, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(s.Kind))
	}
	b = protowire.AppendTag(b, fStart, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, unixNano(s.Start))
	b = protowire.AppendTag(b, fEnd, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, unixNano(s.End))
	b = append(b, s.Raw...)
	b = AppendAttrs(b, fAttrs, s.Attrs)
	b, st := openLen(b, fStatus)
	if s.Error != "" {
		b = appendString(b, fStatusMsg, s.Error)
		b = protowire.AppendTag(b, fStatusCd, protowire.VarintType)
		b = protowire.AppendVarint(b, statusError)
	}
	b = closeLen(b, st)
	flags := uint32(s.Flags) | flagHasIsRemote
	if s.Remote {
		flags |= flagIsRemote
	}
	b = protowire.AppendTag(b, fFlags, protowire.Fixed32Type)
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
	b = protowire.AppendTag(b, field, protowire.BytesType)
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
	protowire.AppendVarint(b[:at-1], uint64(n))
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
	b = protowire.AppendTag(b, fInt, protowire.VarintType)
	return closeAttr(protowire.AppendVarint(b, uint64(v)), at, av)
}

// AppendHexAttr appends the attribute key = the lower-case hex of v, a
// string, as a Span's attribute field (for Span.Raw).
func AppendHexAttr(b []byte, key string, v []byte) []byte {
	b, at, av := openAttr(b, fAttrs, key)
	b = protowire.AppendTag(b, fString, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(hex.EncodedLen(len(v))))
	return closeAttr(hex.AppendEncode(b, v), at, av)
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
		b = protowire.AppendTag(b, fInt, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(v.AsInt64()))
	case attribute.BOOL:
		b = protowire.AppendTag(b, fBool, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.FLOAT64:
		b = protowire.AppendTag(b, fDouble, protowire.Fixed64Type)
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
	b = protowire.AppendTag(b, field, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendString(b []byte, field protowire.Number, v string) []byte {
	b = protowire.AppendTag(b, field, protowire.BytesType)
	return protowire.AppendString(b, v)
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
