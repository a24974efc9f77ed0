// Package tracing gives kiln OpenTelemetry spans: one per reconcile, with a child per API write.
// Tracing is off (a no-op provider) unless an OTLP endpoint is configured, by flag or by the
// standard OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT variables.
package tracing

import (
	"context"
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
)

const instrumentation = "github.com/kiln-ml/kiln"

// Setup installs an OTLP/gRPC exporter as the global tracer provider when endpoint (host:port)
// or the standard OTEL_* variables name one, and returns its shutdown; otherwise it does nothing.
func Setup(ctx context.Context, endpoint string) (shutdown func(context.Context) error, err error) {
	if endpoint == "" && os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return func(context.Context) error { return nil }, nil
	}
	var opts []otlptracegrpc.Option
	if endpoint != "" {
		opts = append(opts, otlptracegrpc.WithEndpoint(endpoint))
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("kiln"))))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// Start starts a span under ctx's; end records err (if any) and ends it.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, func(err error)) {
	ctx, span := otel.Tracer(instrumentation).Start(ctx, name, trace.WithAttributes(attrs...))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// Object names the object a span is about.
func Object(kind, namespace, name string) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("k8s.kind", kind), attribute.String("k8s.namespace", namespace), attribute.String("k8s.name", name)}
}
