// Package tracing gives kiln OpenTelemetry spans: one per reconcile, with a child per API write.
// Tracing is off (a no-op provider) unless an OTLP endpoint is configured, by flag or by the
// standard OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT variables. Spans go
// over OTLP/HTTP (otlp.go).
package tracing

import (
	"context"
	"os"
	"sync/atomic"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
)

// scopeName is the instrumentation scope of kiln's spans.
const scopeName = "github.com/kiln-ml/kiln"

// Setup installs an OTLP/HTTP exporter as the global tracer provider when endpoint (host:port or
// a URL) or the standard OTEL_* variables name one, and returns its shutdown; otherwise it does
// nothing. An export that fails is logged to log.
func Setup(endpoint string, log logr.Logger) (shutdown func(context.Context) error, err error) {
	if endpoint == "" && os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := newExporter(endpoint, os.Getenv)
	if err != nil {
		return nil, err
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Error(err, "OpenTelemetry reported an error") }))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("kiln"))))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// off is the global tracer provider before any is set: otel's, which hands out spans that record
// nothing. While it is the provider, Start makes no span at all.
var off = otel.GetTracerProvider()

// Start starts a span under ctx's about the object kind namespace/name; end records err (if any)
// and ends it. With tracing off it costs nothing (a span that records nothing, its attributes and
// its context were a measurable share of the bytes kiln allocated in a burst of jobs; measured:
// docs/performance.md, Measurements behind the code).
func Start(ctx context.Context, name, kind, namespace, objName string) (context.Context, func(err error)) {
	if otel.GetTracerProvider() == off {
		return ctx, func(error) {}
	}
	ctx, span := tracerOf(otel.GetTracerProvider()).Start(ctx, name, trace.WithAttributes(
		attribute.String("k8s.kind", kind), attribute.String("k8s.namespace", namespace), attribute.String("k8s.name", objName)))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// tracer is kiln's tracer of provider p. A tracer taken before a provider was set would follow
// the first provider ever set only, and asking p for one at every span takes its lock.
type tracer struct {
	p trace.TracerProvider
	t trace.Tracer
}

var lastTracer atomic.Pointer[tracer]

// tracerOf is p's tracer of kiln's scope.
func tracerOf(p trace.TracerProvider) trace.Tracer {
	if last := lastTracer.Load(); last != nil && last.p == p {
		return last.t
	}
	t := p.Tracer(scopeName)
	lastTracer.Store(&tracer{p: p, t: t})
	return t
}
