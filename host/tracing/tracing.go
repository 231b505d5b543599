// Package tracing sets up the OpenTelemetry tracer of a cell from the
// standard OTEL_* environment variables: OTLP export of the runs' spans
// (host.Deps.Tracer) over HTTP or gRPC. Tracing is off unless the
// environment asks for it; this package never turns it on by itself.
//
// The variables read here:
//
//   - OTEL_SDK_DISABLED=true: off, whatever else is set.
//   - OTEL_TRACES_EXPORTER: "otlp" turns tracing on, "none" off; unset,
//     tracing is on when an OTLP endpoint is set
//     (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT).
//     Any other exporter is refused.
//   - OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL:
//     "http/protobuf" (the default) or "grpc"; "http/json" is refused (the
//     Go exporter does not speak it).
//   - AGENTRT_TRACE_PAYLOADS=true puts requests and responses into the
//     spans (host.Deps.TracePayloads); off by default.
//   - OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_EXPORT_TIMEOUT (ms),
//     OTEL_BSP_MAX_QUEUE_SIZE, OTEL_BSP_MAX_EXPORT_BATCH_SIZE: the
//     batching, as the SDK's batch span processor reads them; a value that
//     is not a positive integer is refused (the SDK would ignore it).
//
// The exporters read the rest of the OTLP variables themselves (endpoint,
// headers, timeout, compression, certificates; over HTTP, when no TLS or
// INSECURE variable hands the call spans to the client, an endpoint that
// is not a URL or a timeout that is not a number of milliseconds is
// refused here, where the exporter would ignore it), the SDK reads the
// sampler (OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG), the span limits and
// the batch processor, and the resource reads OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES; service.name defaults to "agentrt".
//
// The run spans are the SDK's. The call spans take the wire path
// (wire.go): the host writes them in OTLP's encoding (internal/otlpwire)
// and a batcher here sends them, batched by the same OTEL_BSP_* settings,
// to where the run spans go (otlphttp.go: over HTTP it posts the requests
// itself, by the OTLP client's rules; otherwise through that client),
// unless a span limit is set, which sends them through the SDK that
// applies it.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// EnvPayloads names the variable that puts payloads into spans.
const EnvPayloads = "AGENTRT_TRACE_PAYLOADS"

// ErrConfig is returned by FromEnv when a variable holds a value this
// package does not support; the error names the variable and the values
// it takes.
var ErrConfig = errors.New("tracing: bad OTEL_* configuration")

// Tracing is a configured tracer: the host's Tracer and TracePayloads,
// and the provider to shut down (which flushes the spans not yet sent).
type Tracing struct {
	Provider *sdktrace.TracerProvider
	Payloads bool
	// wire sends the call spans the host writes itself (wire.go); nil
	// when the span limits ask for the SDK's path.
	wire *wire
}

// Tracer returns the provider for host.Deps.Tracer; nil when t is nil
// (tracing off). Beside the SDK's provider, it offers the host the wire
// path for its call spans (wire.go).
func (t *Tracing) Tracer() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return provider{TracerProvider: t.Provider, t: t}
}

// ForceFlush sends every span ended so far; a nil t does nothing.
func (t *Tracing) ForceFlush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return errors.Join(t.wire.forceFlush(ctx), t.Provider.ForceFlush(ctx))
}

// Dropped is the number of call spans dropped so far on the wire path
// because its queue was full (OTEL_BSP_MAX_QUEUE_SIZE), as the SDK's
// batch processor drops spans.
func (t *Tracing) Dropped() uint64 {
	if t == nil {
		return 0
	}
	var n uint64
	_ = t.wire.each(false, func(b *batcher) error { n += b.Dropped(); return nil })
	return n
}

// TracePayloads reports whether spans carry payloads; false when t is nil.
func (t *Tracing) TracePayloads() bool { return t != nil && t.Payloads }

// Shutdown sends the spans not yet exported and stops the exporter; a
// nil t does nothing.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	// The wire first: the provider's exporter stops the client the wire
	// sends through.
	return errors.Join(t.wire.shutdown(ctx), t.Provider.Shutdown(ctx))
}

// FromEnv returns the tracing the environment configures, or nil when it
// configures none (the default).
func FromEnv(ctx context.Context) (*Tracing, error) {
	return fromLookup(ctx, os.LookupEnv)
}

func fromLookup(ctx context.Context, env func(string) (string, bool)) (*Tracing, error) {
	get := func(k string) string { v, _ := env(k); return strings.TrimSpace(v) }
	if v := get("OTEL_SDK_DISABLED"); v != "" {
		off, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%w: OTEL_SDK_DISABLED=%q is not true or false", ErrConfig, v)
		}
		if off {
			return nil, nil
		}
	}
	switch exp := get("OTEL_TRACES_EXPORTER"); exp {
	case "none":
		return nil, nil
	case "":
		if get("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, nil
		}
	case "otlp":
	default:
		return nil, fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q: agentrt exports traces with otlp only (or none)", ErrConfig, exp)
	}
	payloads := false
	if v := get(EnvPayloads); v != "" {
		var err error
		if payloads, err = strconv.ParseBool(v); err != nil {
			return nil, fmt.Errorf("%w: %s=%q is not true or false", ErrConfig, EnvPayloads, v)
		}
	}
	proto, from := get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	if proto == "" {
		proto, from = get("OTEL_EXPORTER_OTLP_PROTOCOL"), "OTEL_EXPORTER_OTLP_PROTOCOL"
	}
	cfg, err := bspFromLookup(get)
	if err != nil {
		return nil, err
	}
	// The client is the SDK exporter's and the wire path's: both send
	// protobuf (the wire path needs it: its spans are a message's unknown
	// fields, which only the binary encoding keeps).
	var client otlptrace.Client
	var sender *httpSender
	switch proto {
	case "", "http/protobuf":
		client = otlptracehttp.NewClient()
		if sender, err = httpSenderFrom(get); err != nil {
			return nil, err
		}
	case "grpc":
		client = otlptracegrpc.NewClient()
	default:
		return nil, fmt.Errorf("%w: %s=%q: agentrt exports over http/protobuf or grpc", ErrConfig, from, proto)
	}
	exp, err := otlptrace.New(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName("agentrt")),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("tracing: resource (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME): %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	t := &Tracing{Provider: tp, Payloads: payloads}
	if lim := sdktrace.NewSpanLimits(); lim.AttributeValueLengthLimit < 0 &&
		(lim.AttributeCountLimit < 0 || lim.AttributeCountLimit >= wireMaxAttrs) {
		t.wire = newWire(sender, client, res, cfg)
	}
	return t, nil
}
