// Package tracing checks that kiln's reconciles produce OpenTelemetry spans, with a child span
// per API write, using an in-process exporter.
package tracing

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env, nil)) }

func TestReconcileSpansWithChildSpansForWrites(t *testing.T) {
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	otel.SetTracerProvider(tp)
	defer tp.Shutdown(context.Background())

	stop, err := env.StartManager(testenv.ManagerOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ns := env.Namespace(t)
	if err := env.Client.Create(context.Background(), builder.TFJob("traced", ns).Replicas("Worker", 2).Obj()); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() error {
		reconciles := map[string]bool{}
		for _, s := range exporter.GetSpans() {
			if s.Name == "Reconcile TFJob" {
				reconciles[s.SpanContext.SpanID().String()] = true
			}
		}
		creates := 0
		for _, s := range exporter.GetSpans() {
			if s.Name == "create Pod" && reconciles[s.Parent.SpanID().String()] {
				creates++
			}
		}
		if creates != 2 {
			return fmt.Errorf("%d create Pod spans under a Reconcile TFJob span (of %d spans), want 2", creates, len(exporter.GetSpans()))
		}
		return nil
	})
}
