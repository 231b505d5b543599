package otlpwire_test

import (
	"bytes"
	"encoding/hex"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/internal/otlpwire"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// differ returns the two spans' texts when they are not equal, "" when
// they are.
func differ(want, got []*tracepb.Span) string {
	w, g := &tracepb.ScopeSpans{Spans: want}, &tracepb.ScopeSpans{Spans: got}
	if proto.Equal(w, g) {
		return ""
	}
	return "want:\n" + prototext.Format(w) + "\ngot:\n" + prototext.Format(g)
}

func str(s string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
}
func num(n int64) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: n}}
}
func dbl(f float64) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: f}}
}
func boo(b bool) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: b}}
}
func arr(vs ...*commonpb.AnyValue) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
}

// attrs is every attribute type, with the AnyValue OTLP has for it (the
// OTLP exporter's transform), zero values and long strings included.
var attrs = []struct {
	kv   attribute.KeyValue
	want *commonpb.AnyValue
}{
	{attribute.String("agentrt.run.id", "01JFQ3ZK2V8M4N6P8R0T2V4X6Z"), str("01JFQ3ZK2V8M4N6P8R0T2V4X6Z")},
	{attribute.String("empty", ""), str("")},
	{attribute.String("long", string(bytes.Repeat([]byte("é"), 300))), str(string(bytes.Repeat([]byte("é"), 300)))},
	{attribute.Int64("agentrt.step", 0), num(0)},
	{attribute.Int64("agentrt.journal.seq", 1<<40+7), num(1<<40 + 7)},
	{attribute.Int64("negative", -3), num(-3)},
	{attribute.Float64("gen_ai.request.temperature", 0.7), dbl(0.7)},
	{attribute.Float64("nan", math.Inf(-1)), dbl(math.Inf(-1))},
	{attribute.Bool("agentrt.run.resumed", true), boo(true)},
	{attribute.Bool("no", false), boo(false)},
	{attribute.StringSlice("gen_ai.response.finish_reasons", []string{"stop", ""}), arr(str("stop"), str(""))},
	{attribute.Int64Slice("ints", []int64{1, -1, 0}), arr(num(1), num(-1), num(0))},
	{attribute.Float64Slice("floats", []float64{0.5}), arr(dbl(0.5))},
	{attribute.BoolSlice("bools", []bool{true, false}), arr(boo(true), boo(false))},
	{attribute.StringSlice("none", nil), arr()},
}

// wireSpan is a span with every field this package writes set, and the
// generated message the OTLP exporter would send for it.
func wireSpan(failed bool) (*otlpwire.Span, *tracepb.Span) {
	start := time.Date(2026, 12, 7, 2, 0, 0, 123456789, time.UTC)
	s := &otlpwire.Span{
		Trace:  trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		ID:     trace.SpanID{0xa1, 2, 3, 4, 5, 6, 7, 8},
		Parent: trace.SpanID{0xb1, 2, 3, 4, 5, 6, 7, 9},
		State:  "vendor=x",
		Flags:  trace.FlagsSampled,
		Name:   "http.fetch",
		Kind:   trace.SpanKindClient,
		Start:  start,
		End:    start.Add(1500 * time.Microsecond),
	}
	want := &tracepb.Span{TraceId: s.Trace[:], SpanId: s.ID[:], ParentSpanId: s.Parent[:], TraceState: "vendor=x",
		Flags: 0x101, Name: "http.fetch", Kind: tracepb.Span_SPAN_KIND_CLIENT,
		StartTimeUnixNano: uint64(start.UnixNano()), EndTimeUnixNano: uint64(start.Add(1500 * time.Microsecond).UnixNano()),
		Status: &tracepb.Status{}}
	for _, a := range attrs {
		s.Attrs = append(s.Attrs, a.kv)
		want.Attributes = append(want.Attributes, &commonpb.KeyValue{Key: string(a.kv.Key), Value: a.want})
	}
	if failed {
		s.Error, s.Remote = "denied", true
		want.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "denied"}
		want.Flags |= 0x200
	}
	return s, want
}

// TestSpanIsTheGeneratedMessage: what AppendSpan writes decodes, as the
// spans of a ScopeSpans, to the message the OTLP exporter's transform
// makes of the same span, and is byte for byte what proto.Marshal writes
// for it.
func TestSpanIsTheGeneratedMessage(t *testing.T) {
	for _, failed := range []bool{false, true} {
		s, want := wireSpan(failed)
		b := otlpwire.AppendSpan(nil, s)
		var ss tracepb.ScopeSpans
		if err := proto.Unmarshal(b, &ss); err != nil {
			t.Fatalf("the span does not decode: %v", err)
		}
		if len(ss.Spans) != 1 {
			t.Fatalf("%d spans decoded, want 1", len(ss.Spans))
		}
		if d := differ([]*tracepb.Span{want}, ss.Spans); d != "" {
			t.Errorf("failed=%v: the decoded span differs from the exporter's :\n%s", failed, d)
		}
		m, err := proto.MarshalOptions{Deterministic: true}.Marshal(&tracepb.ScopeSpans{Spans: []*tracepb.Span{want}})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m, b) {
			t.Errorf("failed=%v: the bytes differ from proto.Marshal's:\n%x\n%x", failed, b, m)
		}
	}
}

// TestSpansAsUnknownFieldsTravel: spans written by AppendSpan, set as the
// unknown fields of a generated ScopeSpans (as host/tracing sends them),
// are marshalled with the message and read back as its spans, beside its
// known fields; so are a scope's fields and a resource's attributes.
func TestSpansAsUnknownFieldsTravel(t *testing.T) {
	var spans []byte
	var want []*tracepb.Span
	for _, failed := range []bool{false, true, false} {
		s, w := wireSpan(failed)
		spans = otlpwire.AppendSpan(spans, s)
		want = append(want, w)
	}
	scope := &commonpb.InstrumentationScope{}
	scope.ProtoReflect().SetUnknown(protoreflect.RawFields(otlpwire.AppendScopeFields(nil, "github.com/agentrt/agentrt/host", "",
		[]attribute.KeyValue{attribute.Int("agentrt.abi", 3)})))
	ss := &tracepb.ScopeSpans{Scope: scope, SchemaUrl: "https://opentelemetry.io/schemas/1.41.0"}
	ss.ProtoReflect().SetUnknown(protoreflect.RawFields(spans))
	b, err := proto.Marshal(&tracepb.TracesData{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{ss}}}})
	if err != nil {
		t.Fatal(err)
	}
	var got tracepb.TracesData
	if err := proto.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	gs := got.ResourceSpans[0].ScopeSpans[0]
	if gs.SchemaUrl != ss.SchemaUrl || gs.Scope.GetName() != "github.com/agentrt/agentrt/host" ||
		len(gs.Scope.GetAttributes()) != 1 || gs.Scope.Attributes[0].Value.GetIntValue() != 3 {
		t.Errorf("scope %v, schema %q", gs.Scope, gs.SchemaUrl)
	}
	if d := differ(want, gs.Spans); d != "" {
		t.Errorf("the spans differ :\n%s", d)
	}
}

// TestRequestIsTheGeneratedMessage: FrameRequest's bytes decode as the
// ExportTraceServiceRequest of the same resource, scope and spans, made
// of generated messages, with and without schema URLs, for one span and
// for a batch whose lengths take more than one varint byte each.
func TestRequestIsTheGeneratedMessage(t *testing.T) {
	resAttrs := []attribute.KeyValue{attribute.String("service.name", "agentrt"), attribute.String("host.name", "cell-1")}
	scopeAttrs := []attribute.KeyValue{attribute.Int("agentrt.abi", 3)}
	for _, n := range []int{1, 600} {
		for _, schema := range []string{"", "https://opentelemetry.io/schemas/1.41.0"} {
			var spans []byte
			var want []*tracepb.Span
			for i := range n {
				s, w := wireSpan(i%3 == 1)
				spans = otlpwire.AppendSpan(spans, s)
				want = append(want, w)
			}
			wantReq := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
				Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
					{Key: "service.name", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "agentrt"}}},
					{Key: "host.name", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "cell-1"}}}}},
				SchemaUrl: schema,
				ScopeSpans: []*tracepb.ScopeSpans{{
					Scope: &commonpb.InstrumentationScope{Name: "github.com/agentrt/agentrt/host", Version: "v1",
						Attributes: []*commonpb.KeyValue{{Key: "agentrt.abi", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 3}}}}},
					SchemaUrl: schema, Spans: want}}}}}
			batch := &otlpwire.Batch{Resource: otlpwire.AppendAttrs(nil, otlpwire.ResourceAttrs, resAttrs), ResourceSchema: schema,
				Scope: otlpwire.AppendScopeFields(nil, "github.com/agentrt/agentrt/host", "v1", scopeAttrs), ScopeSchema: schema}
			// In the room PrefixLen asks for, or more, which is left as it
			// was.
			for _, extra := range []int{0, 7} {
				room := otlpwire.PrefixLen(batch) + extra
				buf := append(bytes.Repeat([]byte{0xee}, room), spans...)
				framed := otlpwire.FrameRequest(buf, room, batch)
				if !bytes.Equal(buf[:extra], bytes.Repeat([]byte{0xee}, extra)) {
					t.Fatalf("FrameRequest wrote into the room it did not need")
				}
				var got coltracepb.ExportTraceServiceRequest
				if err := proto.Unmarshal(framed, &got); err != nil {
					t.Fatalf("%d spans, schema %q: %v", n, schema, err)
				}
				if !proto.Equal(&got, wantReq) {
					t.Errorf("%d spans, schema %q, room %d: the request differs from the generated one:\n%s", n, schema, room, prototext.Format(&got)[:min(2000, len(prototext.Format(&got)))])
				}
			}
		}
	}
}

// TestInvalidAttributesAreLeftOut: an attribute without a key is not
// written, as the SDK drops it; one with an empty value is an empty
// AnyValue, as the exporter's transform writes it.
func TestInvalidAttributesAreLeftOut(t *testing.T) {
	s, want := wireSpan(false)
	s.Attrs = append([]attribute.KeyValue{attribute.String("", "no key"), {Key: "empty.value"}}, s.Attrs...)
	want.Attributes = append([]*commonpb.KeyValue{{Key: "empty.value", Value: &commonpb.AnyValue{}}}, want.Attributes...)
	var ss tracepb.ScopeSpans
	if err := proto.Unmarshal(otlpwire.AppendSpan(nil, s), &ss); err != nil {
		t.Fatal(err)
	}
	if d := differ([]*tracepb.Span{want}, ss.Spans); d != "" {
		t.Errorf("%s", d)
	}
}

func BenchmarkAppendSpan(b *testing.B) {
	s, _ := wireSpan(false)
	s.Attrs = s.Attrs[:9]
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = otlpwire.AppendSpan(buf[:0], s)
	}
	b.SetBytes(int64(len(buf)))
}

// TestRawAttrsAreTheAttrs: attributes written ahead (Span.Raw, with
// AppendStringAttr, AppendIntAttr and AppendHexAttr) are the bytes the
// same attributes given as Span.Attrs make, ahead of the others.
func TestRawAttrsAreTheAttrs(t *testing.T) {
	hash := bytes.Repeat([]byte{0xab, 0x01}, 16)
	long := strings.Repeat("x", 200) // a length of two varint bytes
	every := make([]byte, 256)       // every byte's hex digits
	for i := range every {
		every[i] = byte(i)
	}
	s, _ := wireSpan(false)
	extra := s.Attrs[:3]
	s.Attrs = append([]attribute.KeyValue{attribute.String("agentrt.run.id", "run"), attribute.Int64("agentrt.step", 1<<33),
		attribute.Int64("neg", -7), attribute.String("agentrt.input_hash", hex.EncodeToString(hash)), attribute.String("long", long),
		attribute.String("every", hex.EncodeToString(every))}, extra...)
	want := otlpwire.AppendSpan(nil, s)
	r := otlpwire.AppendStringAttr(nil, "agentrt.run.id", "run")
	r = otlpwire.AppendIntAttr(r, "agentrt.step", 1<<33)
	r = otlpwire.AppendIntAttr(r, "neg", -7)
	r = otlpwire.AppendHexAttr(r, "agentrt.input_hash", hash)
	r = otlpwire.AppendStringAttr(r, "long", long)
	r = otlpwire.AppendHexAttr(r, "every", every)
	s.Raw, s.Attrs = r, extra
	if got := otlpwire.AppendSpan(nil, s); !bytes.Equal(got, want) {
		t.Fatalf("with raw attributes:\n%x\nwith the same as attrs:\n%x", got, want)
	}
}

// BenchmarkAppendHexAttr: a call span's two hashes as hex attributes.
func BenchmarkAppendHexAttr(b *testing.B) {
	hash := bytes.Repeat([]byte{0xab, 0x01, 0x7f, 0xe0}, 8)
	var buf []byte
	for b.Loop() {
		buf = otlpwire.AppendHexAttr(buf[:0], "agentrt.input_hash", hash)
		buf = otlpwire.AppendHexAttr(buf, "agentrt.journal.entry_hash", hash)
	}
}
