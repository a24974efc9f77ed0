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
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"golang.org/x/net/http/httpguts"
	"google.golang.org/protobuf/proto"

	"github.com/kiln-ml/kiln/internal/version"
)

// exporter sends spans to an OTLP/HTTP receiver as binary protobuf (http/protobuf, OTLP's
// default protocol). kiln has its own instead of OpenTelemetry's: both of theirs link gRPC, whose
// code alone was 2 MiB of kiln's resident memory (DECISIONS #25).
type exporter struct {
	url     string
	shown   string // url without its user info, for messages
	headers http.Header
	gzip    bool
	timeout time.Duration
	client  *http.Client
}

// retryFor is how long one export retries a receiver that answers it is busy (429, 502, 503,
// 504), as OTLP asks, or cannot be reached; the batch goes to the error handler then.
const retryFor = 30 * time.Second

// newExporter configures the exporter from endpoint (the --otlp-endpoint flag: host:port or a
// URL, /v1/traces appended) or the OTLP exporter variables OpenTelemetry defines
// (OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, _INSECURE, _HEADERS, _TIMEOUT (each attempt's, as
// OpenTelemetry's Go exporters take it), _COMPRESSION, _CERTIFICATE, _CLIENT_CERTIFICATE,
// _CLIENT_KEY, _PROTOCOL); getenv reads them.
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
	_, insecure := env("INSECURE")
	u, err := endpointURL(endpoint, getenv, strings.EqualFold(insecure, "true"))
	if err != nil {
		return nil, err
	}
	e := &exporter{url: u.String(), shown: u.Redacted(), headers: http.Header{}, timeout: 10 * time.Second}
	if name, h := env("HEADERS"); h != "" {
		if err := addHeaders(e.headers, h); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	// After the user's headers, which may not change what the body is.
	e.headers.Set("Content-Type", "application/x-protobuf")
	e.headers.Del("Content-Encoding")
	e.headers.Set("User-Agent", "kiln/"+version.Get())
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
	if tlsConfig != nil && u.Scheme != "https" {
		return nil, fmt.Errorf("a CA or client certificate is set (OTEL_EXPORTER_OTLP_[TRACES_]CERTIFICATE, _CLIENT_CERTIFICATE) but %s is plain HTTP: give an https URL, or unset the certificates", e.shown)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	e.client = &http.Client{Transport: transport}
	return e, nil
}

// endpointURL is the URL to post spans to: from the flag (host:port or a URL, /v1/traces
// appended), else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (as given), else
// OTEL_EXPORTER_OTLP_ENDPOINT (/v1/traces appended). A bare host:port is HTTPS, as
// OpenTelemetry's exporters take it, unless insecure (OTEL_EXPORTER_OTLP_[TRACES_]INSECURE).
func endpointURL(flag string, getenv func(string) string, insecure bool) (*url.URL, error) {
	if flag != "" {
		return tracesURL(flag, "--otlp-endpoint", insecure)
	}
	if traces := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); traces != "" {
		return parseHTTPURL(traces, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	}
	return tracesURL(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), "OTEL_EXPORTER_OTLP_ENDPOINT", insecure)
}

// tracesURL is base's /v1/traces; base is host:port (https, or http if insecure) or an http(s)
// URL.
func tracesURL(base, name string, insecure bool) (*url.URL, error) {
	if !strings.Contains(base, "://") {
		scheme := "https://"
		if insecure {
			scheme = "http://"
		}
		base = scheme + base
	}
	u, err := parseHTTPURL(base, name)
	if err != nil {
		return nil, err
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	return u, nil
}

func parseHTTPURL(s, name string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err == nil && (u.Scheme != "http" && u.Scheme != "https" || u.Host == "") {
		err = errors.New("not an http or https URL with a host")
	}
	if err != nil {
		shown := s
		if u != nil {
			shown = u.Redacted()
		}
		return nil, fmt.Errorf("%s=%s: %w; give the collector's OTLP/HTTP receiver as host:port or http(s)://host:port", name, shown, err)
	}
	return u, nil
}

// addHeaders adds the comma-separated key=value pairs of s, their values URL-encoded. Its errors
// name a pair by its place and key only: values are often secrets.
func addHeaders(h http.Header, s string) error {
	for i, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return fmt.Errorf("pair %d is not key=value; give comma-separated key=value pairs, values URL-encoded", i+1)
		}
		value, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil || !httpguts.ValidHeaderFieldName(k) || !httpguts.ValidHeaderFieldValue(value) {
			return fmt.Errorf("pair %d (%.40q) is not a valid HTTP header; give comma-separated key=value pairs, values URL-encoded", i+1, k)
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

// ExportSpans sends spans in one request. It retries, for up to retryFor or ctx's end, while
// the receiver says it is busy or cannot be reached; not an answer that refuses the spans, nor a
// TLS error.
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
		again, retryAfter, err := e.send(ctx, body)
		if !again {
			return err
		}
		wait = max(wait, retryAfter)
		if deadline, _ := ctx.Deadline(); time.Until(deadline) < wait {
			return fmt.Errorf("%w (no time left to try again)", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%v)", err, context.Cause(ctx))
		case <-time.After(wait):
		}
	}
}

// send posts body once. again says whether to retry, after retryAfter at least (the
// receiver's Retry-After, in seconds).
func (e *exporter) send(ctx context.Context, body []byte) (again bool, retryAfter time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return false, 0, err
	}
	req.Header = e.headers.Clone()
	resp, err := e.client.Do(req)
	if err != nil {
		return transient(err), 0, fmt.Errorf("sending traces to %s: %w", e.shown, err)
	}
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // the rest, so that the connection is used again
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return false, 0, nil
	case c == http.StatusTooManyRequests || c == http.StatusBadGateway || c == http.StatusServiceUnavailable || c == http.StatusGatewayTimeout:
		s, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return true, time.Duration(s) * time.Second, fmt.Errorf("sending traces to %s: %s", e.shown, resp.Status)
	}
	return false, 0, fmt.Errorf("sending traces to %s: %s: %q (is it a collector's OTLP/HTTP receiver, usually on port 4318, and its path /v1/traces, appended once to OTEL_EXPORTER_OTLP_ENDPOINT or the flag?)", e.shown, resp.Status, answer)
}

// transient says whether a request that got no answer may get one if tried again: the receiver
// was not there or went away, or did not answer in time. A TLS or certificate error, or a
// request the client refuses to send, would fail again.
func transient(err error) bool {
	var netErr net.Error
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		(errors.As(err, &netErr) && netErr.Timeout())
}

// Shutdown closes idle connections; the batcher has exported what it held before it calls this.
func (e *exporter) Shutdown(context.Context) error {
	e.client.CloseIdleConnections()
	return nil
}
