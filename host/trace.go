package host

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host/caps/llm"
	"github.com/agentrt/agentrt/host/caps/llm/provider"
	"github.com/agentrt/agentrt/internal/otlpwire"
	"github.com/agentrt/agentrt/journal"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Tracing (Deps.Tracer). A traced run has a span of its own for each
// execution in a process (its start, or a resume), and every import call
// it makes live has a span, a child of the run's. The spans and the signed
// journal name each other: every span carries the run id, the seq of the
// journal entry it stands for and that entry's hash, and the run's header
// records the trace id and the run's span id (journal/SPEC.md §6.3). A
// resumed run's span is a child of the recorded one, in the same trace.
// Calls a resume or a fork answers from a journal are not traced again.
// A call's span is made when the call is done, stamped with the time it
// started: a span processor sees it start and end at once, and the context
// a capability serves the call in holds the run's span.
//
// What a span holds of a call: its op, class, step, ABI status, the hash of
// its request, and for llm calls the attributes of the OpenTelemetry GenAI
// semantic conventions (GenAISemconv). Never a request or a response,
// unless Deps.TracePayloads asks for them.
//
// With no tracer (or the API's no-op one, noop.TracerProvider), the host
// makes no span and the path of a call pays one nil check.
//
// A tracer that offers a wire exporter (host/tracing's does: a method
// SpanExporter(otlpwire.Scope) otlpwire.Exporter) takes the call spans
// without the SDK: the host writes each one in OTLP's encoding and the
// exporter batches and sends them (internal/otlpwire says why). They are
// the spans the SDK would make, made only under a sampled run span (as
// every call span is: livePath.traced), as a parent-based sampler would.

// GenAISemconv is the version of the OpenTelemetry semantic conventions
// the spans follow, the GenAI ones of llm calls included; the tracer's
// schema URL names it.
const GenAISemconv = "1.41.0"

// TracerName is the instrumentation scope of the host's spans.
const TracerName = "github.com/agentrt/agentrt/host"

// MaxTracedPayload is the most bytes of a request or a response that a
// span holds when Deps.TracePayloads asks for payloads; a longer one is
// cut, and agentrt.request.size or agentrt.response.size says how long it
// was.
const MaxTracedPayload = 16 << 10

// The attributes of agentrt's spans.
const (
	AttrRunID      = attribute.Key("agentrt.run.id")
	AttrSeq        = attribute.Key("agentrt.journal.seq")
	AttrEntryHash  = attribute.Key("agentrt.journal.entry_hash")
	AttrIntentSeq  = attribute.Key("agentrt.journal.intent_seq")
	AttrLastSeq    = attribute.Key("agentrt.journal.last_seq")
	AttrLastHash   = attribute.Key("agentrt.journal.last_hash")
	AttrStep       = attribute.Key("agentrt.step")
	AttrOp         = attribute.Key("agentrt.op")
	AttrOpClass    = attribute.Key("agentrt.op.class")
	AttrStatus     = attribute.Key("agentrt.status")
	AttrInputHash  = attribute.Key("agentrt.input_hash")
	AttrModule     = attribute.Key("agentrt.module.sha256")
	AttrModuleName = attribute.Key("agentrt.module.name")
	AttrRunStatus  = attribute.Key("agentrt.run.status")
	AttrSteps      = attribute.Key("agentrt.run.steps")
	AttrResumed    = attribute.Key("agentrt.run.resumed")
	AttrRequest    = attribute.Key("agentrt.request")
	AttrResponse   = attribute.Key("agentrt.response")
	AttrReqSize    = attribute.Key("agentrt.request.size")
	AttrRespSize   = attribute.Key("agentrt.response.size")
)

// tracer makes a host's spans; nil when the host does not trace.
type tracer struct {
	t trace.Tracer
	// wire, when set, takes the call spans in place of t.
	wire     otlpwire.Exporter
	payloads bool
	llm      *llm.Providers
	// kinds are the span kinds' start options, made once.
	kinds [trace.SpanKindConsumer + 1]trace.SpanStartOption
	// epoch is a recent time.Now: now reads the time from it.
	epoch atomic.Pointer[time.Time]
}

// now is the time by the monotonic clock alone, from a recent wall clock
// reading (t.epoch): one clock read where time.Now makes two (the wall
// clock's and the monotonic one's), and a call's span is timed twice. The
// SDK times a span's end from its start by the monotonic clock too. The
// wall clock is read again every second, so that a step of the system's
// clock shows in the spans within a second.
func (t *tracer) now() time.Time {
	e := t.epoch.Load()
	d := time.Since(*e)
	if d < time.Second {
		return e.Add(d)
	}
	n := time.Now()
	t.epoch.Store(&n)
	return n
}

func newTracer(d *Deps) *tracer {
	if d.Tracer == nil {
		return nil
	}
	if _, ok := d.Tracer.(noop.TracerProvider); ok {
		// Spans that go nowhere: the host makes none.
		return nil
	}
	t := &tracer{
		t: d.Tracer.Tracer(TracerName, trace.WithSchemaURL(semconv.SchemaURL),
			trace.WithInstrumentationAttributes(attribute.Int("agentrt.abi", int(abi.Version)))),
		payloads: d.TracePayloads,
		llm:      d.LLM,
	}
	now := time.Now()
	t.epoch.Store(&now)
	for k := range t.kinds {
		t.kinds[k] = trace.WithSpanKind(trace.SpanKind(k))
	}
	if w, ok := d.Tracer.(interface {
		SpanExporter(otlpwire.Scope) otlpwire.Exporter
	}); ok {
		t.wire = w.SpanExporter(otlpwire.Scope{Name: TracerName, SchemaURL: semconv.SchemaURL,
			Attrs: []attribute.KeyValue{attribute.Int("agentrt.abi", int(abi.Version))}})
	}
	return t
}

// startRun starts the span of an execution of run. recorded, when set, is
// the span its header names (a resume): the new span is its child.
func (t *tracer) startRun(ctx context.Context, run journal.RunID, hdr *journal.Header, recorded *journal.TraceRef) trace.Span {
	attrs := []attribute.KeyValue{AttrRunID.String(run.String()), AttrModule.String(hex.EncodeToString(hdr.ModuleSHA256))}
	if hdr.ModuleName != "" {
		attrs = append(attrs, AttrModuleName.String(hdr.ModuleName))
	}
	if recorded != nil {
		attrs = append(attrs, AttrResumed.Bool(true))
		var tid trace.TraceID
		var sid trace.SpanID
		copy(tid[:], recorded.ID)
		copy(sid[:], recorded.Span)
		parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
		if parent.IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
		}
	}
	_, span := t.t.Start(ctx, "agentrt.run", trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindInternal))
	return span
}

// traceRef returns the header's record of span, nil when it names none.
func traceRef(span trace.Span) *journal.TraceRef {
	sc := span.SpanContext()
	if !sc.IsValid() {
		return nil
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	return &journal.TraceRef{ID: tid[:], Span: sid[:]}
}

// endRun ends a run's span: the run's status and steps, the last entry
// written and, when err is set, why the host stopped.
func endRun(span trace.Span, w *journal.Writer, res *Result, err error) {
	if w != nil && w.Next() > 0 {
		span.SetAttributes(AttrLastSeq.Int64(int64(w.Next()-1)), AttrLastHash.String(hex.EncodeToString(w.Head())))
	}
	if res != nil {
		span.SetAttributes(AttrRunStatus.String(string(res.Status)), AttrSteps.Int64(int64(res.Steps)))
		if res.Err != nil {
			span.SetStatus(codes.Error, res.Err.Error())
		}
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// callSpan is what the span of the call being journaled says, gathered as
// the call goes: the span is made when the call is done, with its start
// time and every attribute at once. On the wire path the host writes the
// attributes in OTLP's encoding itself, into a buffer kept from call to
// call; through the SDK, the SDK sizes the span's attributes once, the
// run id's attribute is made once per execution, and the buffers are the
// path's, kept from call to call.
type callSpan struct {
	on      bool
	start   time.Time
	name    string
	kind    trace.SpanKind
	step    uint64
	op      *abi.Op
	intent  int64 // the intent entry's seq; -1: none
	done    bool  // an outcome entry was added
	seq     uint64
	status  abi.Status
	run     journal.RunID
	runID   string
	runAttr attribute.KeyValue
	// hashes holds the input hash, then the outcome entry's hash from
	// inputLen on.
	hashes   []byte
	inputLen int
	// extra holds the GenAI and payload attributes; attrs the span's.
	extra, attrs []attribute.KeyValue
	// wire is the span handed to tracer.wire, raw its attributes.
	wire otlpwire.Span
	raw  []byte
}

// startCall begins the span of call c of run, in cs. An llm.complete's
// span is named and attributed as the GenAI conventions say.
func (t *tracer) startCall(cs *callSpan, run journal.RunID, c *Call) {
	if cs.runAttr.Key == "" || cs.run != run {
		cs.run, cs.runID = run, run.String()
		cs.runAttr = AttrRunID.String(cs.runID)
	}
	cs.on, cs.start, cs.name, cs.step, cs.op = true, t.now(), c.Op.Name, c.Step, c.Op
	cs.kind = trace.SpanKindInternal
	if c.Op.Class == abi.Effect {
		cs.kind = trace.SpanKindClient
	}
	cs.intent, cs.done = -1, false
	cs.hashes = append(cs.hashes[:0], c.InputHash()...)
	cs.inputLen = len(cs.hashes)
	cs.extra = cs.extra[:0]
	if c.Op.Cap == abi.CapLLM && c.Op.Code == abi.OpLLMComplete && !c.TooLarge {
		var req abi.LLMRequest
		if abi.Unmarshal(c.Request, &req) == nil {
			cs.name = "chat " + req.Model
			cs.extra = t.genAIRequest(cs.extra, &req)
		}
	}
	if t.payloads && !c.TooLarge {
		cs.extra = payload(cs.extra, AttrRequest, AttrReqSize, c.Request)
	}
}

// endCall makes and ends the span cs gathered, a child of ctx's span.
func (t *tracer) endCall(ctx context.Context, cs *callSpan) {
	if !cs.on {
		return
	}
	cs.on = false
	defer clear(cs.extra) // the payloads' strings let go
	failed := cs.done && cs.status != abi.StatusOK
	if t.wire != nil {
		// ctx holds the run's span, sampled: a call's span is started
		// only then (livePath.traced).
		t.exportWire(trace.SpanContextFromContext(ctx), cs, failed)
		return
	}
	hexes := hex.EncodeToString(cs.hashes)
	in := 2 * cs.inputLen
	a := append(cs.attrs[:0], cs.runAttr, AttrStep.Int64(int64(cs.step)), AttrOp.String(cs.op.Name),
		AttrOpClass.String(cs.op.Class.String()), AttrInputHash.String(hexes[:in]))
	if cs.intent >= 0 {
		a = append(a, AttrIntentSeq.Int64(cs.intent))
	}
	if cs.done {
		a = append(a, AttrSeq.Int64(int64(cs.seq)), AttrEntryHash.String(hexes[in:]), AttrStatus.String(cs.status.String()))
		if failed {
			a = append(a, semconv.ErrorTypeKey.String(cs.status.String()))
		}
	}
	a = append(a, cs.extra...)
	_, span := t.t.Start(ctx, cs.name, trace.WithTimestamp(cs.start), trace.WithAttributes(a...), t.kinds[cs.kind])
	if failed {
		span.SetStatus(codes.Error, cs.status.String())
	}
	span.End()
	// The SDK copied the attributes: the buffer serves the next call.
	clear(a)
	cs.attrs = a[:0]
}

// exportWire writes the span cs gathered, a child of parent, and hands it
// to the wire exporter: the attributes the SDK's span would have, in the
// same order, written here in OTLP's encoding (the extra ones, GenAI and
// payloads, by the exporter).
func (t *tracer) exportWire(parent trace.SpanContext, cs *callSpan, failed bool) {
	r := otlpwire.AppendStringAttr(cs.raw[:0], string(AttrRunID), cs.runID)
	r = otlpwire.AppendIntAttr(r, string(AttrStep), int64(cs.step))
	r = otlpwire.AppendStringAttr(r, string(AttrOp), cs.op.Name)
	r = otlpwire.AppendStringAttr(r, string(AttrOpClass), cs.op.Class.String())
	r = otlpwire.AppendHexAttr(r, string(AttrInputHash), cs.hashes[:cs.inputLen])
	if cs.intent >= 0 {
		r = otlpwire.AppendIntAttr(r, string(AttrIntentSeq), cs.intent)
	}
	if cs.done {
		r = otlpwire.AppendIntAttr(r, string(AttrSeq), int64(cs.seq))
		r = otlpwire.AppendHexAttr(r, string(AttrEntryHash), cs.hashes[cs.inputLen:])
		r = otlpwire.AppendStringAttr(r, string(AttrStatus), cs.status.String())
		if failed {
			r = otlpwire.AppendStringAttr(r, string(semconv.ErrorTypeKey), cs.status.String())
		}
	}
	cs.raw = r
	cs.wire = otlpwire.Span{Trace: parent.TraceID(), Parent: parent.SpanID(), Remote: parent.IsRemote(),
		State: parent.TraceState().String(), Flags: parent.TraceFlags(), Name: cs.name, Kind: cs.kind,
		Start: cs.start, End: t.now(), Raw: r, Attrs: cs.extra}
	if failed {
		cs.wire.Error = cs.status.String()
	}
	t.wire.ExportSpan(&cs.wire)
	cs.wire.Raw, cs.wire.Attrs = nil, nil
}

// genAIRequest adds the GenAI attributes of an llm request.
func (t *tracer) genAIRequest(attrs []attribute.KeyValue, req *abi.LLMRequest) []attribute.KeyValue {
	attrs = append(attrs, semconv.GenAIOperationNameChat, semconv.GenAIRequestModel(req.Model),
		semconv.GenAIRequestMaxTokens(int(req.MaxOutputTokens)), t.providerName(req.Provider))
	if req.Temperature != nil {
		attrs = append(attrs, semconv.GenAIRequestTemperature(float64(*req.Temperature)/1000))
	}
	if req.TopP != nil {
		attrs = append(attrs, semconv.GenAIRequestTopP(float64(*req.TopP)/1000))
	}
	if len(req.Stop) > 0 {
		attrs = append(attrs, semconv.GenAIRequestStopSequences(req.Stop...))
	}
	if t.payloads {
		attrs = append(attrs, semconv.GenAIInputMessagesKey.String(genAIMessages(req.Messages)))
	}
	return attrs
}

// providerName is gen_ai.provider.name for the cell's provider name (the
// grant's first when empty): its kind's API, or _OTHER for a
// Chat-Completions-compatible server.
func (t *tracer) providerName(name string) attribute.KeyValue {
	var kind provider.Kind
	if t.llm != nil && t.llm.Config() != nil {
		if p := t.llm.Config().Providers[name]; p != nil {
			kind = p.Kind
		}
	}
	switch kind {
	case provider.OpenAIChat, provider.OpenAIResponses:
		return semconv.GenAIProviderNameOpenAI
	case provider.Anthropic:
		return semconv.GenAIProviderNameAnthropic
	}
	return semconv.GenAIProviderNameKey.String("_OTHER")
}

// genAIResponse adds the GenAI attributes of an llm answer.
func (t *tracer) genAIResponse(attrs []attribute.KeyValue, r *abi.LLMResponse) []attribute.KeyValue {
	attrs = append(attrs, semconv.GenAIResponseID(r.ID), semconv.GenAIResponseModel(r.Model),
		semconv.GenAIResponseFinishReasons(r.StopReason),
		semconv.GenAIUsageInputTokens(int(r.Usage.Input)), semconv.GenAIUsageOutputTokens(int(r.Usage.Output)))
	if r.Usage.CacheRead > 0 {
		attrs = append(attrs, semconv.GenAIUsageCacheReadInputTokens(int(r.Usage.CacheRead)))
	}
	if r.Usage.CacheWrite > 0 {
		attrs = append(attrs, semconv.GenAIUsageCacheCreationInputTokens(int(r.Usage.CacheWrite)))
	}
	if t.llm != nil && r.Provider != "" {
		attrs = append(attrs, t.providerName(r.Provider))
	}
	if t.payloads {
		attrs = append(attrs, semconv.GenAIOutputMessagesKey.String(genAIMessages([]abi.LLMMessage{{Role: abi.RoleAssistant, Content: r.Content}})))
	}
	return attrs
}

// outcome records in cs the call's journaled outcome: the entry's seq and
// hash, its status and, for llm calls, the answer's GenAI attributes.
func (t *tracer) outcome(cs *callSpan, c *Call, status abi.Status, resp []byte, seq uint64, hash []byte) {
	cs.done, cs.seq, cs.status = true, seq, status
	cs.hashes = append(cs.hashes[:cs.inputLen], hash...)
	if t.payloads {
		cs.extra = payload(cs.extra, AttrResponse, AttrRespSize, resp)
	}
	if c.Op.Cap != abi.CapLLM || status != abi.StatusOK {
		return
	}
	switch c.Op.Code {
	case abi.OpLLMComplete, abi.OpLLMNext:
		// An unstreamed answer is a response; a streamed one comes in
		// batches, the last of which holds the whole response.
		var r abi.LLMResponse
		if c.Op.Code == abi.OpLLMComplete && abi.Unmarshal(resp, &r) == nil && r.Model != "" {
			cs.extra = t.genAIResponse(cs.extra, &r)
			return
		}
		var b abi.LLMBatch
		if abi.Unmarshal(resp, &b) == nil && b.Response != nil {
			cs.extra = t.genAIResponse(cs.extra, b.Response)
		}
	}
}

// payload adds the bytes b (cut at MaxTracedPayload, base64) under key,
// and their size under size when cut.
func payload(attrs []attribute.KeyValue, key, size attribute.Key, b []byte) []attribute.KeyValue {
	if len(b) > MaxTracedPayload {
		attrs = append(attrs, size.Int(len(b)))
		b = b[:MaxTracedPayload]
	}
	return append(attrs, key.String(base64.StdEncoding.EncodeToString(b)))
}

// genAIMessages writes messages as the GenAI conventions' JSON of input
// and output messages: a role and parts, text as content, tool calls and
// results with their ids; an image by its hash.
func genAIMessages(msgs []abi.LLMMessage) string {
	type part struct {
		Type      string          `json:"type"`
		Content   string          `json:"content,omitempty"`
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
		Response  string          `json:"response,omitempty"`
	}
	type message struct {
		Role  string `json:"role"`
		Parts []part `json:"parts"`
	}
	out := make([]message, 0, len(msgs))
	for _, m := range msgs {
		msg := message{Role: m.Role, Parts: []part{}}
		for _, p := range m.Content {
			switch p.Type {
			case abi.PartText:
				msg.Parts = append(msg.Parts, part{Type: "text", Content: p.Text})
			case abi.PartToolCall:
				args := json.RawMessage(p.Arguments)
				if !json.Valid(args) {
					args = nil
				}
				msg.Parts = append(msg.Parts, part{Type: "tool_call", ID: p.ID, Name: p.Name, Arguments: args})
			case abi.PartToolResult:
				msg.Parts = append(msg.Parts, part{Type: "tool_call_response", ID: p.ID, Response: p.Text})
			default:
				msg.Parts = append(msg.Parts, part{Type: p.Type, Content: "sha256:" + hex.EncodeToString(p.SHA256)})
			}
		}
		out = append(out, msg)
	}
	b, _ := json.Marshal(out)
	return string(b)
}
