// Package tracing turns on OpenTelemetry tracing from the standard OTEL_*
// environment variables, with an OTLP/HTTP exporter. Tracing is off unless
// they ask for it; off, nothing is exported and the purchase path starts
// no span.
//
// What is traced: each HTTP request (a server span named by its route
// pattern), the purchase script call (batch.lua, a child of the request),
// each projector batch with its ledger commit, and each reconciliation
// run. A sampled purchase carries its trace context in its stream entry
// (field tp, a W3C traceparent); the projector batch that writes it into
// the ledger links to it. Unsampled purchases carry nothing.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// ServiceName is the service.name unless OTEL_SERVICE_NAME or
// OTEL_RESOURCE_ATTRIBUTES name another.
const ServiceName = "invledger"

// Enabled reports whether the environment (read with getenv) asks for
// traces: OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) with
// OTEL_TRACES_EXPORTER unset; never with OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none. Any other exporter is an error naming the
// variable: only OTLP is built in.
func Enabled(getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "otlp":
		return true, nil
	case "none":
		return false, nil
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", nil
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not supported; use otlp or none", exp)
	}
}

// Setup installs a tracer provider exporting over OTLP/HTTP as the global
// one, with the W3C trace context propagator, when Enabled says so, and
// returns it; nil when tracing is off. The exporter and the sampler read
// their own OTEL_EXPORTER_OTLP_* and OTEL_TRACES_SAMPLER[_ARG] variables
// (the default sampler is parentbased_always_on). Shut the provider down
// at exit to flush the last spans.
func Setup(ctx context.Context, getenv func(string) string) (*sdktrace.TracerProvider, error) {
	on, err := Enabled(getenv)
	if err != nil || !on {
		return nil, err
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter (OTEL_EXPORTER_OTLP_*): %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(ServiceName)))
	if err == nil {
		// The environment's OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win.
		res, err = resource.Merge(res, resource.Environment())
	}
	if err != nil && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, fmt.Errorf("tracing: resource (OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	Install(tp)
	return tp, nil
}

// Install makes tp the global tracer provider, with the W3C trace context
// propagator; tests install one over an in-memory exporter.
func Install(tp trace.TracerProvider) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
}

// TraceParent returns the W3C traceparent of ctx's span when it is
// sampled, and "" otherwise: the one field a stream entry carries for it.
func TraceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// SpanContextOf parses a traceparent; the result is invalid when tp is
// empty or malformed.
func SpanContextOf(tp string) trace.SpanContext {
	if tp == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	return trace.SpanContextFromContext(ctx)
}
