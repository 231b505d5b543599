package tracing

import (
	"context"
	"testing"

	"github.com/agentrt/agentrt/internal/otlpwire"
)

// TestWirePathOnlyWithoutLimits: the call spans take the wire path unless
// a span limit (attribute count below what a call span holds, or any
// value length) asks for the SDK's, which applies it.
func TestWirePathOnlyWithoutLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		wire bool
	}{
		{"defaults", nil, true},
		{"count limit large enough", map[string]string{"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "64"}, true},
		{"count limit", map[string]string{"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "3"}, false},
		{"value length limit", map[string]string{"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "16"}, false},
		{"span value length limit", map[string]string{"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT": "100000"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
			for _, k := range []string{"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT"} {
				t.Setenv(k, tc.env[k])
			}
			tr, err := FromEnv(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Shutdown(context.Background())
			if (tr.wire != nil) != tc.wire {
				t.Errorf("wire path %v, want %v", tr.wire != nil, tc.wire)
			}
			p := tr.Tracer().(provider)
			if e := p.SpanExporter(otlpwire.Scope{Name: "test"}); (e != nil) != tc.wire {
				t.Errorf("SpanExporter = %v, want one: %v", e, tc.wire)
			}
		})
	}
}
