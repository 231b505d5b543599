package tracing

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/agentrt/agentrt/internal/otlpwire"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The spans of import calls take a path of their own (otlpwire): the host
// writes each one straight into OTLP's encoding, and a batcher here sends
// them, batched by the same OTEL_BSP_* settings as the SDK's, to where the
// SDK's exporter sends the run spans: posted by httpSender (otlphttp.go)
// or, when it leaves the configuration to the client, through the same
// OTLP client. The run spans stay SDK spans.

// wireMaxAttrs is the most attributes a call span of the host has (a
// traced llm call with payloads has some 30): the wire path is taken only
// when the span limits (OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT) keep them all and
// no value length limit is set; otherwise call spans go through the SDK,
// which applies the limits.
const wireMaxAttrs = 64

// bsp is the batch span processor's configuration (OTEL_BSP_*, the SDK's
// defaults), applied to the wire path as the SDK applies it to its own.
type bsp struct {
	delay, timeout time.Duration
	queue, batch   int
}

func bspFromLookup(get func(string) string) (bsp, error) {
	c := bsp{delay: sdktrace.DefaultScheduleDelay * time.Millisecond, timeout: sdktrace.DefaultExportTimeout * time.Millisecond,
		queue: sdktrace.DefaultMaxQueueSize, batch: sdktrace.DefaultMaxExportBatchSize}
	for _, v := range []struct {
		key string
		ms  *time.Duration
		n   *int
	}{
		{"OTEL_BSP_SCHEDULE_DELAY", &c.delay, nil},
		{"OTEL_BSP_EXPORT_TIMEOUT", &c.timeout, nil},
		{"OTEL_BSP_MAX_QUEUE_SIZE", nil, &c.queue},
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", nil, &c.batch},
	} {
		s := get(v.key)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return c, fmt.Errorf("%w: %s=%q is not a positive integer", ErrConfig, v.key, s)
		}
		if v.ms != nil {
			*v.ms = time.Duration(n) * time.Millisecond
		} else {
			*v.n = n
		}
	}
	if c.batch > c.queue {
		c.batch = min(sdktrace.DefaultMaxExportBatchSize, c.queue)
	}
	return c, nil
}

// provider is the tracer provider a Tracing gives the host: the SDK's,
// and the wire path for call spans (the host asks for it by the
// SpanExporter method).
type provider struct {
	*sdktrace.TracerProvider
	t *Tracing
}

// SpanExporter returns the exporter of spans written by otlpwire under
// scope, or nil when the span limits ask for the SDK's path.
func (p provider) SpanExporter(scope otlpwire.Scope) otlpwire.Exporter {
	if p.t.wire == nil {
		return nil
	}
	if b := p.t.wire.batcher(scope); b != nil {
		return b
	}
	return nil // shut down
}

// wire sends the spans written by otlpwire: a batcher per scope.
type wire struct {
	// sender posts the batches (OTLP/HTTP); when nil, client sends them.
	sender *httpSender
	client otlptrace.Client
	res    *resourcepb.Resource
	// resRaw is the resource's fields, encoded.
	resRaw []byte
	schema string
	cfg    bsp

	mu       sync.Mutex
	batchers map[string]*batcher
	closed   bool
}

func newWire(sender *httpSender, client otlptrace.Client, res *resource.Resource, cfg bsp) *wire {
	raw := otlpwire.AppendAttrs(nil, otlpwire.ResourceAttrs, res.Attributes())
	pb := &resourcepb.Resource{}
	pb.ProtoReflect().SetUnknown(protoreflect.RawFields(raw))
	return &wire{sender: sender, client: client, res: pb, resRaw: raw, schema: res.SchemaURL(), cfg: cfg, batchers: map[string]*batcher{}}
}

func (w *wire) batcher(scope otlpwire.Scope) *batcher {
	sb := otlpwire.AppendScopeFields(nil, scope.Name, scope.Version, scope.Attrs)
	key := scope.SchemaURL + "\x00" + string(sb)
	w.mu.Lock()
	defer w.mu.Unlock()
	if b := w.batchers[key]; b != nil || w.closed {
		return b
	}
	b := &batcher{w: w, schema: scope.SchemaURL, kick: make(chan struct{}, 1), flush: make(chan chan error),
		stop: make(chan struct{}), done: make(chan struct{})}
	b.scope = protoreflect.RawFields(sb)
	if w.sender != nil {
		b.room = otlpwire.PrefixLen(&otlpwire.Batch{Resource: w.resRaw, Scope: sb})
	}
	w.batchers[key] = b
	go b.loop()
	return b
}

// each calls f on every batcher; closing marks the wire closed first, so
// that no batcher starts after. A nil w (no wire path) has none.
func (w *wire) each(closing bool, f func(*batcher) error) error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	w.closed = w.closed || closing
	bs := make([]*batcher, 0, len(w.batchers))
	for _, b := range w.batchers {
		bs = append(bs, b)
	}
	w.mu.Unlock()
	var errs []error
	for _, b := range bs {
		errs = append(errs, f(b))
	}
	return errors.Join(errs...)
}

func (w *wire) forceFlush(ctx context.Context) error {
	return w.each(false, func(b *batcher) error { return b.forceFlush(ctx) })
}

func (w *wire) shutdown(ctx context.Context) error {
	err := w.each(true, func(b *batcher) error { return b.shutdown(ctx) })
	if w != nil && w.sender != nil {
		w.sender.close()
	}
	return err
}

// maxFree is the most sent chunks a batcher keeps to fill again: enough
// for the batches of a default queue (2048 spans of 512), not the memory
// of a long queue that filled once.
const maxFree = 4

// chunk is a batch of encoded spans, each a ScopeSpans' spans field,
// after the batcher's room for a request's framing (room bytes).
type chunk struct {
	b []byte
	n int
}

// batcher queues the encoded spans of one scope and sends them: a batch
// as soon as one is full, whatever is queued every schedule delay, and at
// a flush or at shutdown. A span that finds cfg.queue spans queued is
// dropped and counted.
type batcher struct {
	w      *wire
	schema string
	scope  protoreflect.RawFields
	// room is the bytes each chunk keeps before its spans, where the
	// sender's request frames them in place (otlpwire.FrameRequest); 0
	// when the client sends.
	room int

	mu      sync.Mutex
	cur     *chunk
	ready   []*chunk
	free    []*chunk
	queued  int
	size    int // the largest chunk's bytes so far
	dropped uint64
	// reported is how many of the dropped reportDrops told of.
	reported uint64
	closed   bool

	kick  chan struct{}
	flush chan chan error
	stop  chan struct{}
	done  chan struct{}
	err   error // the last export's error, read at flush
}

// ExportSpan implements otlpwire.Exporter.
func (b *batcher) ExportSpan(s *otlpwire.Span) {
	if !s.ID.IsValid() {
		s.ID = newSpanID()
	}
	b.mu.Lock()
	if b.closed || b.queued >= b.w.cfg.queue {
		b.dropped++
		b.mu.Unlock()
		return
	}
	c := b.cur
	if c == nil {
		if n := len(b.free); n > 0 {
			c, b.free = b.free[n-1], b.free[:n-1]
		} else {
			// As large as the largest batch so far, so that it seldom
			// grows (and is copied) as it fills.
			c = &chunk{b: make([]byte, b.room, max(b.size, b.room))}
		}
		b.cur = c
	}
	c.b = otlpwire.AppendSpan(c.b, s)
	c.n++
	b.queued++
	full := c.n >= b.w.cfg.batch
	if full {
		b.seal()
	}
	b.mu.Unlock()
	if full {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

// seal moves the chunk being filled to the ready ones; b.mu is held.
func (b *batcher) seal() {
	b.size = max(b.size, len(b.cur.b))
	b.ready, b.cur = append(b.ready, b.cur), nil
}

func newSpanID() trace.SpanID {
	var id trace.SpanID
	for !id.IsValid() {
		binary.LittleEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}

func (b *batcher) loop() {
	defer close(b.done)
	timer := time.NewTimer(b.w.cfg.delay)
	defer timer.Stop()
	for {
		var reply chan error
		all := false
		select {
		case <-b.kick:
		case <-timer.C:
			all = true
		case reply = <-b.flush:
			all = true
		case <-b.stop:
			b.send(true)
			b.reportDrops()
			return
		}
		b.send(all)
		b.reportDrops()
		if reply != nil {
			reply <- b.err
		}
		timer.Reset(b.w.cfg.delay)
	}
}

// send exports the full batches, and what is queued besides when all.
func (b *batcher) send(all bool) {
	b.err = nil
	for {
		b.mu.Lock()
		if all && b.cur != nil {
			b.seal()
		}
		if len(b.ready) == 0 {
			b.mu.Unlock()
			return
		}
		// The batch being sent is no longer queued: the queue fills
		// meanwhile, as the SDK's does.
		c := b.ready[0]
		b.ready = b.ready[1:]
		b.queued -= c.n
		b.mu.Unlock()

		if err := b.export(c); err != nil {
			b.err = err
			otel.Handle(err)
		}
		b.mu.Lock()
		if len(b.free) < maxFree {
			c.b, c.n = c.b[:b.room], 0
			b.free = append(b.free, c)
		}
		b.mu.Unlock()
	}
}

// export sends c: a ResourceSpans of the wire's resource, with one
// ScopeSpans whose spans are c's bytes. The sender posts the request
// framed around them in place; the client takes generated messages, with
// the encoded parts as their unknown fields.
func (b *batcher) export(c *chunk) error {
	ctx, cancel := context.WithTimeout(context.Background(), b.w.cfg.timeout)
	defer cancel()
	if s := b.w.sender; s != nil {
		return s.send(ctx, otlpwire.FrameRequest(c.b, b.room, &otlpwire.Batch{Resource: b.w.resRaw, ResourceSchema: b.w.schema,
			Scope: b.scope, ScopeSchema: b.schema}))
	}
	scope := &commonpb.InstrumentationScope{}
	scope.ProtoReflect().SetUnknown(b.scope)
	ss := &tracepb.ScopeSpans{Scope: scope, SchemaUrl: b.schema}
	ss.ProtoReflect().SetUnknown(protoreflect.RawFields(c.b[b.room:]))
	rs := &tracepb.ResourceSpans{Resource: b.w.res, SchemaUrl: b.w.schema, ScopeSpans: []*tracepb.ScopeSpans{ss}}
	return b.w.client.UploadTraces(ctx, []*tracepb.ResourceSpans{rs})
}

func (b *batcher) forceFlush(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case b.flush <- reply:
	case <-b.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *batcher) shutdown(ctx context.Context) error {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.stop)
	}
	b.mu.Unlock()
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reportDrops tells the OpenTelemetry error handler (otel.Handle: the
// process's log, unless one was set) how many spans were dropped since it
// last did, if any: a trace with holes says why.
func (b *batcher) reportDrops() {
	b.mu.Lock()
	n := b.dropped - b.reported
	b.reported = b.dropped
	b.mu.Unlock()
	if n > 0 {
		otel.Handle(fmt.Errorf("agentrt tracing: %d call spans dropped, the queue of %d was full (OTEL_BSP_MAX_QUEUE_SIZE; the collector is slower than the calls)", n, b.w.cfg.queue))
	}
}

// Dropped is the number of call spans dropped so far because the queue
// was full (OTEL_BSP_MAX_QUEUE_SIZE) or tracing was shut down.
func (b *batcher) Dropped() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropped
}
