package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/internal/otlpwire"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// request is what a receiver saw of one export request.
type request struct {
	method, path, contentType, encoding string
	// headers are the ones the configuration adds (all but the ones
	// every request has).
	headers map[string]string
	body    *coltracepb.ExportTraceServiceRequest
}

// recorder is an OTLP/HTTP receiver that records every request and
// answers each with the next of its answers (200 when none is left).
type recorder struct {
	mu      sync.Mutex
	reqs    []request
	answers []func(w http.ResponseWriter)
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err == nil && req.Header.Get("Content-Encoding") == "gzip" {
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(bytes.NewReader(body)); err == nil {
			body, err = io.ReadAll(zr)
		}
	}
	got := request{method: req.Method, path: req.URL.Path, contentType: req.Header.Get("Content-Type"),
		encoding: req.Header.Get("Content-Encoding"), headers: map[string]string{}, body: &coltracepb.ExportTraceServiceRequest{}}
	if err == nil {
		err = proto.Unmarshal(body, got.body)
	}
	if err != nil {
		got.body = nil
	}
	for k := range req.Header {
		switch k {
		case "User-Agent", "Content-Type", "Content-Encoding", "Content-Length", "Accept-Encoding":
		default:
			got.headers[k] = req.Header.Get(k)
		}
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, got)
	var answer func(w http.ResponseWriter)
	if len(r.answers) > 0 {
		answer, r.answers = r.answers[0], r.answers[1:]
	}
	r.mu.Unlock()
	if answer != nil {
		answer(w)
	}
}

func (r *recorder) take() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	reqs := r.reqs
	r.reqs = nil
	return reqs
}

// testBatch is a batch of three spans, encoded (spans), its request as
// the sender posts it (body), and the same as the generated ResourceSpans
// the client takes.
func testBatch() (batch *otlpwire.Batch, spans, body []byte, rs *tracepb.ResourceSpans) {
	start := time.Unix(1700000000, 0)
	for i := range 3 {
		spans = otlpwire.AppendSpan(spans, &otlpwire.Span{Trace: trace.TraceID{1, 2, 3}, ID: trace.SpanID{byte(i + 1)},
			Name: "kv.put", Kind: trace.SpanKindClient, Start: start, End: start.Add(time.Millisecond),
			Attrs: []attribute.KeyValue{attribute.Int("agentrt.journal.seq", i)}})
	}
	res := otlpwire.AppendAttrs(nil, otlpwire.ResourceAttrs, []attribute.KeyValue{attribute.String("service.name", "agentrt")})
	scope := otlpwire.AppendScopeFields(nil, "github.com/agentrt/agentrt/host", "", nil)
	const schema = "https://opentelemetry.io/schemas/1.41.0"
	batch = &otlpwire.Batch{Resource: res, ResourceSchema: schema, Scope: scope, ScopeSchema: schema}
	room := otlpwire.PrefixLen(batch)
	body = otlpwire.FrameRequest(append(make([]byte, room), spans...), room, batch)
	// The generated messages, decoded from the request's own bytes so that
	// the client marshals the same message.
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		panic(err)
	}
	return batch, spans, body, req.ResourceSpans[0]
}

// TestSenderSendsAsTheClient: for each configuration of the OTLP
// variables, the wire path's sender and otlptracehttp's client (which
// sends the run spans) send the same batch to the same path, with the
// same content type, encoding and headers, and a body that decodes to
// the same request.
func TestSenderSendsAsTheClient(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	base := srv.URL
	_, _, body, rs := testBatch()
	for _, tc := range []struct {
		name string
		env  map[string]string
		path string // the path both must post to
	}{
		{"base endpoint", map[string]string{"ENDPOINT": base}, "/v1/traces"},
		{"base endpoint with a path", map[string]string{"ENDPOINT": base + "/otlp/"}, "/otlp/v1/traces"},
		{"base endpoint with a query", map[string]string{"ENDPOINT": base + "/q?x=1"}, "/q/v1/traces"},
		{"traces endpoint as it is", map[string]string{"TRACES_ENDPOINT": base + "/custom/traces"}, "/custom/traces"},
		{"traces endpoint without a path", map[string]string{"TRACES_ENDPOINT": base}, "/"},
		{"traces endpoint over the base", map[string]string{"ENDPOINT": base + "/otlp", "TRACES_ENDPOINT": base + "/t"}, "/t"},
		{"headers", map[string]string{"ENDPOINT": base, "HEADERS": "api-key=s3cret, x-tenant = a%20b ,bad key=1,noequals,x-empty="}, "/v1/traces"},
		{"traces headers replace the others", map[string]string{"ENDPOINT": base, "HEADERS": "a=1,b=2", "TRACES_HEADERS": "c=3"}, "/v1/traces"},
		{"gzip", map[string]string{"ENDPOINT": base, "COMPRESSION": "gzip"}, "/v1/traces"},
		{"traces compression over the other", map[string]string{"ENDPOINT": base, "COMPRESSION": "gzip", "TRACES_COMPRESSION": "none"}, "/v1/traces"},
		{"timeout", map[string]string{"ENDPOINT": base, "TIMEOUT": "2500", "TRACES_TIMEOUT": "3000"}, "/v1/traces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"ENDPOINT", "TRACES_ENDPOINT", "HEADERS", "TRACES_HEADERS", "COMPRESSION", "TRACES_COMPRESSION", "TIMEOUT", "TRACES_TIMEOUT"} {
				t.Setenv(otlpEnv+k, tc.env[k])
			}
			ctx := context.Background()
			client := otlptracehttp.NewClient()
			if err := client.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer client.Stop(ctx)
			if err := client.UploadTraces(ctx, []*tracepb.ResourceSpans{rs}); err != nil {
				t.Fatalf("the client: %v", err)
			}
			s, err := httpSenderFrom(func(k string) string { return strings.TrimSpace(tc.env[strings.TrimPrefix(k, otlpEnv)]) })
			if err != nil || s == nil {
				t.Fatalf("httpSenderFrom: %v, %v", s, err)
			}
			defer s.close()
			if err := s.send(ctx, body); err != nil {
				t.Fatalf("the sender: %v", err)
			}
			reqs := rec.take()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			c, w := reqs[0], reqs[1]
			if c.path != tc.path {
				t.Errorf("the client posted to %s, the test expects %s", c.path, tc.path)
			}
			if w.method != c.method || w.path != c.path || w.contentType != c.contentType || w.encoding != c.encoding {
				t.Errorf("sender: %s %s %q %q; client: %s %s %q %q", w.method, w.path, w.contentType, w.encoding, c.method, c.path, c.contentType, c.encoding)
			}
			if len(w.headers) != len(c.headers) {
				t.Errorf("sender headers %v, client's %v", w.headers, c.headers)
			}
			for k, v := range c.headers {
				if w.headers[k] != v {
					t.Errorf("header %s: sender %q, client %q", k, w.headers[k], v)
				}
			}
			if c.body == nil || w.body == nil || !proto.Equal(c.body, w.body) {
				t.Errorf("the bodies differ:\nsender %v\nclient %v", w.body, c.body)
			}
			if want := tc.env["TRACES_TIMEOUT"]; want != "" && s.client.Timeout.Milliseconds() != 3000 {
				t.Errorf("timeout %s, want 3s", s.client.Timeout)
			}
		})
	}
}

// TestSenderLeavesTLSAndInsecureToTheClient: a certificate, a client key
// or INSECURE, for all signals or for traces, sends the wire path through
// the client; an endpoint that is not a URL, or a timeout that is not a
// number, is refused (the client would ignore it with a log line).
func TestSenderLeavesTLSAndInsecureToTheClient(t *testing.T) {
	for _, k := range clientOnly {
		for _, signal := range []string{"", "TRACES_"} {
			env := map[string]string{otlpEnv + "ENDPOINT": "https://collector:4318", otlpEnv + signal + k: "x"}
			s, err := httpSenderFrom(func(k string) string { return env[k] })
			if s != nil || err != nil {
				t.Errorf("%s%s set: sender %v, error %v; want neither", signal, k, s, err)
			}
		}
	}
	for _, env := range []map[string]string{
		{otlpEnv + "ENDPOINT": "http://collector:4318\x7f"},
		{otlpEnv + "ENDPOINT": "http://collector:4318", otlpEnv + "TRACES_TIMEOUT": "10s"},
	} {
		if _, err := httpSenderFrom(func(k string) string { return env[k] }); !errors.Is(err, ErrConfig) {
			t.Errorf("%v: error %v, want ErrConfig", env, err)
		}
	}
	unix := map[string]string{otlpEnv + "ENDPOINT": "unix:///run/otlp.sock"}
	if s, err := httpSenderFrom(func(k string) string { return unix[k] }); s != nil || err != nil {
		t.Errorf("a unix endpoint: sender %v, error %v; want the client's path", s, err)
	}
}

// TestSenderRetriesAsTheClient: a 503 with Retry-After and a 429 are
// tried again, after the back-off; a 400 is not, and its error carries
// the receiver's answer; a receiver that keeps answering 503 is given up
// on once the retry policy's time is spent; a partial success is an
// error naming the rejected spans.
func TestSenderRetriesAsTheClient(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	s, err := httpSenderFrom(func(k string) string {
		if k == otlpEnv+"ENDPOINT" {
			return srv.URL
		}
		return ""
	})
	if err != nil || s == nil {
		t.Fatal(s, err)
	}
	defer s.close()
	s.retry = retryPolicy{initial: 5 * time.Millisecond, max: 20 * time.Millisecond, elapsed: 2 * time.Second}
	status := func(code int, header, value, body string) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			if header != "" {
				w.Header().Set(header, value)
			}
			w.WriteHeader(code)
			io.WriteString(w, body)
		}
	}
	_, _, body, _ := testBatch()
	ctx := context.Background()

	rec.answers = []func(http.ResponseWriter){status(503, "Retry-After", "0", "busy"), status(429, "", "", "slow down")}
	if err := s.send(ctx, body); err != nil {
		t.Fatalf("after a 503 and a 429: %v", err)
	}
	if n := len(rec.take()); n != 3 {
		t.Errorf("%d attempts, want 3", n)
	}

	rec.answers = []func(http.ResponseWriter){status(400, "", "", "no such tenant")}
	err = s.send(ctx, body)
	if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "no such tenant") {
		t.Errorf("a 400: %v", err)
	}
	if n := len(rec.take()); n != 1 {
		t.Errorf("a 400 was tried %d times, want once", n)
	}

	s.retry.elapsed = 200 * time.Millisecond
	rec.answers = nil
	for range 1000 {
		rec.answers = append(rec.answers, status(503, "", "", "down"))
	}
	start := time.Now()
	err = s.send(ctx, body)
	if err == nil || !strings.Contains(err.Error(), "gave up") || time.Since(start) > 5*time.Second {
		t.Errorf("a receiver down: %v after %s", err, time.Since(start))
	}
	if n := len(rec.take()); n < 2 {
		t.Errorf("a receiver down was tried %d times", n)
	}

	partial, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: 2, ErrorMessage: "too old"}})
	rec.answers = []func(http.ResponseWriter){status(200, "Content-Type", "application/x-protobuf", string(partial))}
	if err := s.send(ctx, body); err == nil || !strings.Contains(err.Error(), "rejected 2 spans: too old") {
		t.Errorf("a partial success: %v", err)
	}
	rec.take()
}

// TestClientPathStillSends: with INSECURE set, the wire path sends its
// batches through the client, as generated messages whose unknown fields
// hold the spans; a receiver reads the same request.
func TestClientPathStillSends(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	t.Setenv(otlpEnv+"ENDPOINT", srv.URL)
	t.Setenv(otlpEnv+"INSECURE", "true")
	tr, err := FromEnv(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if tr.wire == nil || tr.wire.sender != nil {
		t.Fatalf("wire %v: want the wire path through the client", tr.wire)
	}
	batch, spans, _, rs := testBatch()
	b := tr.wire.batcher(otlpwire.Scope{Name: "github.com/agentrt/agentrt/host", SchemaURL: batch.ScopeSchema})
	if err := b.export(&chunk{b: spans, n: 3}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	reqs := rec.take()
	if len(reqs) != 1 || reqs[0].body == nil {
		t.Fatalf("requests %v", reqs)
	}
	got := reqs[0].body.ResourceSpans[0].ScopeSpans[0]
	want := rs.ScopeSpans[0]
	got.ProtoReflect().SetUnknown(protoreflect.RawFields(nil))
	if !proto.Equal(got.Scope, want.Scope) || got.SchemaUrl != want.SchemaUrl || len(got.Spans) != 3 {
		t.Errorf("scope spans %v, want %v", got, want)
	}
	for i := range got.Spans {
		if !proto.Equal(got.Spans[i], want.Spans[i]) {
			t.Errorf("span %d: %v, want %v", i, got.Spans[i], want.Spans[i])
		}
	}
}

// TestSenderSendsConcurrently: batchers of several scopes share the
// sender; compressed bodies sent at once each arrive whole (run with
// -race), and closing the sender twice is harmless.
func TestSenderSendsConcurrently(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	env := map[string]string{otlpEnv + "ENDPOINT": srv.URL, otlpEnv + "COMPRESSION": "gzip"}
	s, err := httpSenderFrom(func(k string) string { return env[k] })
	if err != nil || s == nil {
		t.Fatal(s, err)
	}
	_, _, body, rs := testBatch()
	want := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{rs}}
	var wg sync.WaitGroup
	errs := make(chan error, 4*5)
	for range 4 {
		wg.Go(func() {
			for range 5 {
				errs <- s.send(context.Background(), body)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	reqs := rec.take()
	if len(reqs) != 20 {
		t.Fatalf("%d requests, want 20", len(reqs))
	}
	for i, r := range reqs {
		if r.encoding != "gzip" || r.body == nil || !proto.Equal(r.body, want) {
			t.Errorf("request %d: encoding %q, body %v", i, r.encoding, r.body)
		}
	}
	s.close()
	s.close()
}
