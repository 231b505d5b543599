// Package otlptest is an in-process OTLP/HTTP trace receiver for tests:
// it decodes every export request (protobuf) and keeps the spans and the
// raw bodies, so that a test checks what a real exporter sent.
package otlptest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is an exported span with what its scope and attributes say.
type Span struct {
	Name          string
	Trace, ID     []byte
	Parent        []byte
	Kind          tracepb.Span_SpanKind
	Status        tracepb.Status_StatusCode
	Schema, Scope string
	Service       string
	Attrs         map[string]*common.AnyValue
}

// Str, Num and Has read an attribute.
func (s Span) Str(k string) string { return s.Attrs[k].GetStringValue() }
func (s Span) Num(k string) int64  { return s.Attrs[k].GetIntValue() }
func (s Span) Has(k string) bool   { return s.Attrs[k] != nil }

// Receiver keeps what it was sent.
type Receiver struct {
	// URL is the receiver's base, for OTEL_EXPORTER_OTLP_ENDPOINT.
	URL string

	mu    sync.Mutex
	spans []Span
	raw   [][]byte
}

// Start starts a receiver on loopback until tb ends.
func Start(tb testing.TB) *Receiver {
	r := &Receiver{}
	srv := httptest.NewServer(r)
	tb.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "not an OTLP/HTTP protobuf trace export", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var ex collector.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &ex); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.raw = append(r.raw, body)
	for _, rs := range ex.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				s := Span{Name: sp.Name, Trace: sp.TraceId, ID: sp.SpanId, Parent: sp.ParentSpanId, Kind: sp.Kind,
					Status: sp.GetStatus().GetCode(), Schema: ss.SchemaUrl, Scope: ss.GetScope().GetName(), Service: service,
					Attrs: map[string]*common.AnyValue{}}
				for _, kv := range sp.Attributes {
					s.Attrs[kv.Key] = kv.Value
				}
				r.spans = append(r.spans, s)
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Spans returns every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Raw returns the bodies of every export received so far.
func (r *Receiver) Raw() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.raw...)
}

// Of returns the spans whose agentrt.run.id is run.
func (r *Receiver) Of(run string) []Span {
	var out []Span
	for _, s := range r.Spans() {
		if s.Str("agentrt.run.id") == run {
			out = append(out, s)
		}
	}
	return out
}

// StartDiscarding starts a receiver on loopback, until tb ends, that
// reads every export request whole and drops it, decoding nothing (for
// benchmarks, where a test's decoding would be counted), and returns its
// URL, for OTEL_EXPORTER_OTLP_ENDPOINT.
func StartDiscarding(tb testing.TB) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	tb.Cleanup(srv.Close)
	return srv.URL
}
