package metrics

import "testing"

func TestResource(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/namespaces/ns/pods":                                      "pods",
		"/api/v1/namespaces/ns/pods/p":                                    "pods",
		"/api/v1/namespaces/ns/services/s":                                "services",
		"/apis/kubeflow.org/v1/namespaces/ns/tfjobs/j/status":             "tfjobs/status",
		"/apis/events.k8s.io/v1/namespaces/ns/events":                     "events",
		"/apis/coordination.k8s.io/v1/namespaces/kiln-system/leases/kiln": "leases",
		"/api/v1/namespaces/kiln-system":                                  "namespaces",
		"/api/v1/pods":                                                    "pods",
		"/apis/kubeflow.org/v1":                                           "discovery",
		"/version":                                                        "other",
	} {
		if got := Resource(path); got != want {
			t.Errorf("Resource(%q) = %q, want %q", path, got, want)
		}
	}
}
