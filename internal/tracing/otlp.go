package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/protobuf/proto"
)

// exporter sends spans to an OTLP/HTTP receiver as binary protobuf (http/protobuf, OTLP's
// default protocol). kiln has its own instead of OpenTelemetry's: both of theirs link gRPC, whose
// code alone was 2 MiB of kiln's resident memory (DECISIONS #25).
type exporter struct {
	url     string
	headers http.Header
	gzip    bool
	timeout time.Duration
	client  *http.Client
}

// retryFor is how long one export retries a receiver that answers it is busy (429, 502, 503,
// 504), as OTLP asks; the batch goes to the error handler then.
const retryFor = 30 * time.Second

// newExporter configures the exporter from endpoint (the --otlp-endpoint flag: host:port or a
// URL, /v1/traces appended) or the OTLP exporter variables OpenTelemetry defines
// (OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, _HEADERS, _TIMEOUT, _COMPRESSION, _CERTIFICATE,
// _CLIENT_CERTIFICATE, _CLIENT_KEY, _PROTOCOL); getenv reads them.
func newExporter(endpoint string, getenv func(string) string) (*exporter, error) {
	env := func(name string) (string, string) {
		if v := getenv("OTEL_EXPORTER_OTLP_TRACES_" + name); v != "" {
			return "OTEL_EXPORTER_OTLP_TRACES_" + name, v
		}
		return "OTEL_EXPORTER_OTLP_" + name, getenv("OTEL_EXPORTER_OTLP_" + name)
	}
	if name, p := env("PROTOCOL"); p != "" && p != "http/protobuf" {
		return nil, fmt.Errorf("%s=%s: kiln sends traces over OTLP/HTTP only; set it to http/protobuf (or unset it) and point the endpoint at the collector's OTLP/HTTP port (4318)", name, p)
	}
	e := &exporter{headers: http.Header{"Content-Type": {"application/x-protobuf"}}, timeout: 10 * time.Second}
	var err error
	switch traces := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); {
	case endpoint != "":
		e.url, err = tracesURL(endpoint, "--otlp-endpoint")
	case traces != "":
		e.url = traces // the whole URL, as OpenTelemetry defines this variable
		_, err = parseHTTPURL(traces, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	default:
		e.url, err = tracesURL(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), "OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	if err != nil {
		return nil, err
	}
	if name, h := env("HEADERS"); h != "" {
		if err := addHeaders(e.headers, h); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	if name, t := env("TIMEOUT"); t != "" {
		ms, err := strconv.Atoi(t)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("%s=%s: give the timeout in milliseconds, a whole number above 0", name, t)
		}
		e.timeout = time.Duration(ms) * time.Millisecond
	}
	switch name, c := env("COMPRESSION"); c {
	case "", "none":
	case "gzip":
		e.gzip = true
		e.headers.Set("Content-Encoding", "gzip")
	default:
		return nil, fmt.Errorf("%s=%s: kiln compresses with gzip or none", name, c)
	}
	tlsConfig, err := tlsFrom(env)
	if err != nil {
		return nil, err
	}
	e.client = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: tlsConfig, ForceAttemptHTTP2: true}}
	return e, nil
}

// tracesURL is base's /v1/traces; base is host:port (plain HTTP) or an http(s) URL.
func tracesURL(base, name string) (string, error) {
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u, err := parseHTTPURL(base, name)
	if err != nil {
		return "", err
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	return u.String(), nil
}

func parseHTTPURL(s, name string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err == nil && (u.Scheme != "http" && u.Scheme != "https" || u.Host == "") {
		err = errors.New("not an http or https URL with a host")
	}
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w; give the collector's OTLP/HTTP receiver as host:port or http(s)://host:port", name, s, err)
	}
	return u, nil
}

// addHeaders adds the comma-separated key=value pairs of s, their values URL-encoded.
func addHeaders(h http.Header, s string) error {
	for _, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return fmt.Errorf("%q is not key=value; give comma-separated key=value pairs", pair)
		}
		value, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("the value of %s: %w", k, err)
		}
		h.Set(k, value)
	}
	return nil
}

// tlsFrom is the TLS configuration the variables name (a CA to trust, a client certificate),
// or nil for the system's roots.
func tlsFrom(env func(string) (string, string)) (*tls.Config, error) {
	var c tls.Config
	name, ca := env("CERTIFICATE")
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s=%s: no PEM certificate in the file", name, ca)
		}
	}
	certName, cert := env("CLIENT_CERTIFICATE")
	keyName, key := env("CLIENT_KEY")
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("%s and %s: set both, or neither", certName, keyName)
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%s and %s: %w", certName, keyName, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	if ca == "" && cert == "" {
		return nil, nil
	}
	return &c, nil
}

// ExportSpans sends spans in one request, retrying while the receiver says it is busy.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	body, err := proto.Marshal(tracesData(spans))
	if err != nil {
		return fmt.Errorf("encoding %d spans: %w", len(spans), err)
	}
	if e.gzip {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		_, _ = w.Write(body)
		_ = w.Close()
		body = b.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, retryFor)
	defer cancel()
	for wait := 500 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		retryAfter, err := e.send(ctx, body)
		if retryAfter < 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (still failing after %s)", err, retryFor)
		case <-time.After(max(wait, retryAfter)):
		}
	}
}

// send posts body once. retryAfter is below zero when the export is done (err says how), else
// the receiver's Retry-After (or 0).
func (e *exporter) send(ctx context.Context, body []byte) (retryAfter time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return -1, err
	}
	req.Header = e.headers.Clone()
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("sending traces to %s: %w", e.url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	switch resp.StatusCode {
	case http.StatusOK, http.StatusAccepted, http.StatusNoContent:
		return -1, nil
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		s, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return time.Duration(s) * time.Second, fmt.Errorf("sending traces to %s: %s", e.url, resp.Status)
	}
	return -1, fmt.Errorf("sending traces to %s: %s: %q (is it a collector's OTLP/HTTP receiver? its port is usually 4318)", e.url, resp.Status, answer)
}

// Shutdown closes idle connections; the batcher has exported what it held before it calls this.
func (e *exporter) Shutdown(context.Context) error {
	e.client.CloseIdleConnections()
	return nil
}
