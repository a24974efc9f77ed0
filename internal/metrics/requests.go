package metrics

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// APIRequests counts the manager's requests to the apiserver by method and resource
// ("pods", "tfjobs/status", "events"): client-go's own rest_client_requests_total has no resource.
var APIRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "kiln_api_requests_total", Help: "Requests kiln sent to the apiserver, by HTTP method and resource."},
	[]string{"method", "resource"})

func init() { crmetrics.Registry.MustRegister(APIRequests) }

// CountRequests wraps a client transport to count every request in APIRequests.
func CountRequests(next http.RoundTripper) http.RoundTripper { return &counter{next: next} }

type counter struct{ next http.RoundTripper }

func (c *counter) RoundTrip(req *http.Request) (*http.Response, error) {
	APIRequests.WithLabelValues(req.Method, Resource(req.URL.Path)).Inc()
	return c.next.RoundTrip(req)
}

// WrappedRoundTripper is the round tripper it wraps (k8s.io/apimachinery/pkg/util/net.RoundTripperWrapper).
func (c *counter) WrappedRoundTripper() http.RoundTripper { return c.next }

// Resource is the resource (and subresource) an API path names: /api/v1/namespaces/ns/pods/p
// is "pods", /apis/kubeflow.org/v1/namespaces/ns/tfjobs/j/status is "tfjobs/status".
func Resource(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "other"
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return "discovery"
	case 1, 2:
		return parts[0]
	}
	return parts[0] + "/" + parts[2]
}
