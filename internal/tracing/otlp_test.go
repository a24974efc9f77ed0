package tracing

import (
	"compress/gzip"
	"context"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

// receiver is an OTLP/HTTP trace receiver: it decodes each request as the collector's own
// ExportTraceServiceRequest, so a test fails if what kiln sends is not that on the wire.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*http.Request
	got      []*coltracepb.ExportTraceServiceRequest
	answers  []int // status codes to answer with, in turn; then 200
	// retryAfter is the Retry-After header of those answers, if any.
	retryAfter string
}

func newReceiver(t *testing.T, answers ...int) *receiver {
	r := &receiver{answers: answers}
	r.Server = httptest.NewServer(r.handler())
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.requests = append(r.requests, req)
		if len(r.answers) > 0 {
			code := r.answers[0]
			r.answers = r.answers[1:]
			if r.retryAfter != "" {
				w.Header().Set("Retry-After", r.retryAfter)
			}
			http.Error(w, "busy", code)
			return
		}
		if req.URL.Path != "/v1/traces" {
			http.NotFound(w, req)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		var m coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.got = append(r.got, &m)
		w.Header().Set("Content-Type", "application/x-protobuf")
	})
}

func (r *receiver) received() ([]*http.Request, []*coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests, r.got
}

func TestReconcileSpansReachAnOTLPHTTPReceiver(t *testing.T) {
	rcv := newReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=team%20a, authorization=Bearer%20t0ken, content-type=text/plain")
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
	shutdown, err := Setup("", logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { otel.SetTracerProvider(off) })

	ctx, end := Start(context.Background(), "reconcile", "TFJob", "ns", "job-a")
	_, endWrite := Start(ctx, "apply", "Pod", "ns", "job-a-worker-0")
	endWrite(errors.New("the apiserver refused it"))
	end(nil)
	if err := shutdown(context.Background()); err != nil { // exports what the batcher holds
		t.Fatal(err)
	}

	requests, got := rcv.received()
	if len(got) != 1 {
		t.Fatalf("the receiver decoded %d requests, want 1 (%d came)", len(got), len(requests))
	}
	h := requests[0].Header
	for k, want := range map[string]string{"Content-Type": "application/x-protobuf", "X-Tenant": "team a", "Authorization": "Bearer t0ken", "Content-Encoding": "gzip"} {
		if h.Get(k) != want {
			t.Errorf("header %s: %q, want %q", k, h.Get(k), want)
		}
	}
	if ua := h.Get("User-Agent"); !strings.HasPrefix(ua, "kiln/") {
		t.Errorf("User-Agent %q, want kiln/<version>", ua)
	}
	rs := got[0].ResourceSpans
	if len(rs) != 1 || len(rs[0].ScopeSpans) != 1 {
		t.Fatalf("want one resource with one scope: %v", got[0])
	}
	if diff := cmp.Diff([]*commonpb.KeyValue{str("service.name", "kiln")}, rs[0].Resource.Attributes, protocmp.Transform()); diff != "" {
		t.Errorf("resource attributes (-want +got):\n%s", diff)
	}
	ss := rs[0].ScopeSpans[0]
	if ss.Scope.GetName() != scopeName {
		t.Errorf("scope %q, want %q", ss.Scope.GetName(), scopeName)
	}
	spans := map[string]*tracepb.Span{}
	for _, s := range ss.Spans {
		spans[s.Name] = s
	}
	parent, child := spans["reconcile"], spans["apply"]
	if parent == nil || child == nil || len(ss.Spans) != 2 {
		t.Fatalf("want the spans reconcile and apply: %v", ss.Spans)
	}
	if diff := cmp.Diff([]*commonpb.KeyValue{str("k8s.kind", "Pod"), str("k8s.namespace", "ns"), str("k8s.name", "job-a-worker-0")},
		child.Attributes, protocmp.Transform()); diff != "" {
		t.Errorf("the apply span's attributes (-want +got):\n%s", diff)
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"the apply span's parent", string(child.ParentSpanId), string(parent.SpanId)},
		{"the apply span's trace", string(child.TraceId), string(parent.TraceId)},
		{"the reconcile span's parent", len(parent.ParentSpanId), 0},
		{"the apply span's status", child.Status.GetCode(), tracepb.Status_STATUS_CODE_ERROR},
		{"the apply span's status message", child.Status.GetMessage(), "the apiserver refused it"},
		{"the reconcile span's status", parent.Status.GetCode(), tracepb.Status_STATUS_CODE_UNSET},
		{"the apply span's event (the error)", len(child.Events) == 1 && child.Events[0].Name == "exception", true},
		{"the span kind", parent.Kind, tracepb.Span_SPAN_KIND_INTERNAL},
		{"the trace id's length", len(parent.TraceId), 16},
		{"the span id's length", len(parent.SpanId), 8},
		{"sampled, and a local parent", parent.Flags, uint32(0x101)},
		{"the span's times", parent.StartTimeUnixNano > 0 && parent.EndTimeUnixNano >= parent.StartTimeUnixNano, true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
}

func TestAFailedExportIsLogged(t *testing.T) {
	rcv := newReceiver(t, http.StatusBadRequest)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10") // ms: the batcher exports at once, as it does every 5 s
	logged := make(chan string, 1)
	log := funcr.New(func(_, args string) {
		select {
		case logged <- args:
		default:
		}
	}, funcr.Options{})
	shutdown, err := Setup(rcv.URL, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = shutdown(context.Background())
		otel.SetTracerProvider(off)
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	})
	_, end := Start(context.Background(), "reconcile", "PyJob", "ns", "job-a")
	end(nil)
	select {
	case l := <-logged:
		if !strings.Contains(l, `"msg"="OpenTelemetry reported an error"`) || !strings.Contains(l, "400 Bad Request") {
			t.Errorf("logged %s, want the error naming the receiver's answer", l)
		}
	case <-time.After(10 * time.Second):
		t.Error("no error logged 10 s after a span was sent to a receiver that refuses it")
	}
}

func TestEveryAttributeTypeIsSent(t *testing.T) {
	kvs := []attribute.KeyValue{
		attribute.Bool("b", true), attribute.Int("i", -3), attribute.Float64("f", 0.5), attribute.String("s", "x"),
		attribute.BoolSlice("bs", []bool{true, false}), attribute.Int64Slice("is", []int64{1, 2}),
		attribute.Float64Slice("fs", []float64{1.5}), attribute.StringSlice("ss", []string{"a", "b"}),
		attribute.ByteSlice("by", []byte{7}), attribute.Slice("sl", attribute.IntValue(1), attribute.StringValue("x")),
		attribute.Map("m", attribute.String("k", "v")),
	}
	got := keyValues(kvs)
	value := func(v any) *commonpb.AnyValue {
		switch v := v.(type) {
		case bool:
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v}}
		case int64:
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}
		case float64:
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v}}
		}
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.(string)}}
	}
	arr := func(vs ...any) *commonpb.AnyValue {
		a := &commonpb.ArrayValue{}
		for _, v := range vs {
			a.Values = append(a.Values, value(v))
		}
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: a}}
	}
	want := []*commonpb.KeyValue{
		{Key: "b", Value: value(true)}, {Key: "i", Value: value(int64(-3))}, {Key: "f", Value: value(0.5)}, {Key: "s", Value: value("x")},
		{Key: "bs", Value: arr(true, false)}, {Key: "is", Value: arr(int64(1), int64(2))},
		{Key: "fs", Value: arr(1.5)}, {Key: "ss", Value: arr("a", "b")},
		{Key: "by", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{7}}}},
		{Key: "sl", Value: arr(int64(1), "x")},
		{Key: "m", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: []*commonpb.KeyValue{str("k", "v")}}}}},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("attributes (-want +got):\n%s", diff)
	}
}

func TestABusyReceiverIsAskedAgain(t *testing.T) {
	rcv := newReceiver(t, http.StatusServiceUnavailable, http.StatusTooManyRequests)
	e, err := newExporter(rcv.URL, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.exportOne(t); err != nil {
		t.Fatalf("an export the receiver took on the third try: %v", err)
	}
	if requests, got := rcv.received(); len(requests) != 3 || len(got) != 1 {
		t.Errorf("%d requests, %d taken; want 3 and 1", len(requests), len(got))
	}
}

func TestABusyReceiversRetryAfterIsWaited(t *testing.T) {
	rcv := newReceiver(t, http.StatusTooManyRequests)
	rcv.retryAfter = "2"
	e, err := newExporter(rcv.URL, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := e.exportOne(t); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("asked again after %s, want after the receiver's Retry-After: 2 (s)", took)
	}
}

func TestTLS(t *testing.T) {
	rcv := &receiver{}
	rcv.Server = httptest.NewTLSServer(rcv.handler())
	t.Cleanup(rcv.Close)

	// Not trusted: a certificate error, which trying again would not mend.
	e, err := newExporter(rcv.URL, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := e.send(context.Background(), nil)
	if again || err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("again=%v, err=%v; want a certificate error, not tried again", again, err)
	}

	// Trusted through the variable.
	ca := caFileOf(t, rcv.Server)
	e, err = newExporter(rcv.URL, func(k string) string { return map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": ca}[k] })
	if err != nil {
		t.Fatal(err)
	}
	if err := e.exportOne(t); err != nil {
		t.Fatalf("exporting to a receiver whose CA is given: %v", err)
	}
	if _, got := rcv.received(); len(got) != 1 {
		t.Errorf("the receiver took %d requests, want 1", len(got))
	}
}

func TestAnUnreachableReceiverIsTriedAgain(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	e, err := newExporter(gone.URL, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := e.send(context.Background(), nil)
	if !again || err == nil {
		t.Errorf("again=%v, err=%v; want connection refused, tried again", again, err)
	}
}

func TestAReceiverThatRefusesSaysWhereToLook(t *testing.T) {
	rcv := newReceiver(t, http.StatusNotFound)
	e, err := newExporter(rcv.URL, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	err = e.exportOne(t)
	if err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "4318") || !strings.Contains(err.Error(), "/v1/traces") {
		t.Fatalf("err = %v, want the status and the OTLP/HTTP port", err)
	}
	if requests, _ := rcv.received(); len(requests) != 1 {
		t.Errorf("%d requests, want 1: a refusal is not retried", len(requests))
	}
}

// exportOne exports one recorded span through e.
func (e *exporter) exportOne(t *testing.T) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return e.ExportSpans(ctx, recordedSpans(t))
}

func TestExporterConfiguration(t *testing.T) {
	tests := []struct {
		name      string
		endpoint  string
		env       map[string]string
		wantURL   string
		wantErr   string // a part of the error
		wantNoErr string // a part the error must not show (a secret)
	}{
		{name: "host:port", endpoint: "collector:4318", wantURL: "https://collector:4318/v1/traces"},
		{name: "host:port, insecure", endpoint: "collector:4318", env: map[string]string{"OTEL_EXPORTER_OTLP_INSECURE": "true"}, wantURL: "http://collector:4318/v1/traces"},
		{name: "a base URL", endpoint: "https://otel.example/otlp/", wantURL: "https://otel.example/otlp/v1/traces"},
		{name: "the variable", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, wantURL: "http://c:4318/v1/traces"},
		{name: "the traces variable, whole", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:9/traces"}, wantURL: "http://t:9/traces"},
		{name: "the flag over the variables", endpoint: "http://f:1", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:9/traces"}, wantURL: "http://f:1/v1/traces"},
		{name: "http/protobuf", endpoint: "c:4318", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, wantURL: "https://c:4318/v1/traces"},
		{name: "gRPC", endpoint: "c:4317", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, wantErr: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc: kiln sends traces over OTLP/HTTP only"},
		{name: "another scheme", endpoint: "unix:///run/otel.sock", wantErr: "--otlp-endpoint=unix:///run/otel.sock: not an http or https URL"},
		{name: "a password in the URL", endpoint: "ftp://kiln:s3cret@c:1", wantErr: "--otlp-endpoint=ftp://kiln:xxxxx@c:1", wantNoErr: "s3cret"},
		{name: "headers", endpoint: "c:1", env: map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "a=1,Authorization:Bearer s3cret"}, wantErr: "OTEL_EXPORTER_OTLP_HEADERS: pair 2 is not key=value", wantNoErr: "s3cret"},
		{name: "a header name", endpoint: "c:1", env: map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "bad name=s3cret"}, wantErr: `OTEL_EXPORTER_OTLP_HEADERS: pair 1 ("bad name") is not a valid HTTP header`, wantNoErr: "s3cret"},
		{name: "timeout", endpoint: "c:1", env: map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "5s"}, wantErr: "OTEL_EXPORTER_OTLP_TIMEOUT=5s: give the timeout in milliseconds"},
		{name: "compression", endpoint: "c:1", env: map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, wantErr: "OTEL_EXPORTER_OTLP_COMPRESSION=zstd: kiln compresses with gzip or none"},
		{name: "a CA file that is not there", endpoint: "c:1", env: map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent/ca.pem"}, wantErr: "OTEL_EXPORTER_OTLP_CERTIFICATE: open /nonexistent/ca.pem"},
		{name: "a client certificate without its key", endpoint: "c:1", env: map[string]string{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "/x.pem"}, wantErr: "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY: set both"},
		{name: "a CA for plain HTTP", endpoint: "http://c:1", env: map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": caFile(t)}, wantErr: "but http://c:1/v1/traces is plain HTTP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := newExporter(tt.endpoint, func(k string) string { return tt.env[k] })
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to say %q", err, tt.wantErr)
				}
				if tt.wantNoErr != "" && strings.Contains(err.Error(), tt.wantNoErr) {
					t.Errorf("err = %v shows %q", err, tt.wantNoErr)
				}
			case err != nil:
				t.Fatal(err)
			case e.url != tt.wantURL:
				t.Errorf("url %q, want %q", e.url, tt.wantURL)
			}
		})
	}
}

func noEnv(string) string { return "" }

// caFile is a file with a CA certificate (a test server's).
func caFile(t *testing.T) string {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	return caFileOf(t, srv)
}

// caFileOf is a file with the certificate of TLS server srv, for OTEL_EXPORTER_OTLP_CERTIFICATE.
func caFileOf(t *testing.T, srv *httptest.Server) string {
	f := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// recordedSpans is one ended span, as the SDK hands it to an exporter.
func recordedSpans(t *testing.T) []sdktrace.ReadOnlySpan {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	_, span := tp.Tracer(scopeName).Start(context.Background(), "reconcile")
	span.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rec.Ended()
}

func str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}
