package inferenceservice

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/promqltest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
)

// alert is the expression of the named alert of the InferenceService's PrometheusRule.
func alert(t *testing.T, i *servingv1alpha1.InferenceService, name string) string {
	t.Helper()
	groups := desiredPrometheusRule(endpointOf(i)).Object["spec"].(map[string]any)["groups"].([]any)
	for _, r := range groups[0].(map[string]any)["rules"].([]any) {
		if r.(map[string]any)["alert"] == name {
			return r.(map[string]any)["expr"].(string)
		}
	}
	return ""
}

// The alerts fire on the series each server really publishes, evaluated by Prometheus's own
// engine: 10% failed requests across both versions (a counter not yet published, such as
// TorchServe's Requests4XX, counts as zero) fire the error-rate alert; another service's failures
// do not count; an unavailable canary replica fires the replica alert.
func TestAlertsFireOnTheServersMetrics(t *testing.T) {
	served := map[servingv1alpha1.Framework][2]string{ // a series of answered and of failed requests
		servingv1alpha1.FrameworkTriton:     {"nv_inference_request_success", "nv_inference_request_failure"},
		servingv1alpha1.FrameworkSKLearn:    {"model_infer_request_success_total", "model_infer_request_failure_total"},
		servingv1alpha1.FrameworkTorchServe: {"Requests2XX", "Requests5XX"},
		servingv1alpha1.FrameworkVLLM:       {`http_requests_total{handler="/v1/completions",status="2xx"}`, `http_requests_total{handler="/v1/completions",status="5xx"}`},
	}
	for fw, series := range served {
		t.Run(string(fw), func(t *testing.T) {
			i := &servingv1alpha1.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns"}, Spec: servingv1alpha1.InferenceServiceSpec{Framework: fw}}
			at := func(s, service string) string {
				return withMatchers(s, `namespace="ns",service="`+service+`"`)
			}
			script := fmt.Sprintf(`
load 1m
  %s 0+45x10
  %s 0+45x10
  %s 0+5x10
  %s 0+5x10
  %s 0+100x10
  kube_deployment_status_replicas_unavailable{namespace="ns",deployment="m-predictor"} 0x10
  kube_deployment_status_replicas_unavailable{namespace="ns",deployment="m-predictor-canary"} 1x10

eval instant at 10m %s
  {} 0.1

eval instant at 10m %s
  {} 1
`, at(series[0], "m-predictor"), at(series[0], "m-predictor-canary"), at(series[1], "m-predictor"), at(series[1], "m-predictor-canary"),
				at(series[1], "mx-predictor"), alert(t, i, "InferenceServiceHighErrorRate"), alert(t, i, "InferenceServiceReplicasUnavailable"))
			promqltest.RunTest(t, script, promqltest.NewTestEngine(t, false, 0, 100))
		})
	}
	// A server whose metrics kiln does not know gets no error-rate alert (one that could never
	// fire) and no ServiceMonitor.
	custom := &servingv1alpha1.InferenceService{Spec: servingv1alpha1.InferenceServiceSpec{Framework: servingv1alpha1.FrameworkCustom, Image: "x"}}
	if e := alert(t, custom, "InferenceServiceHighErrorRate"); e != "" || desiredServiceMonitor(endpointOf(custom)) != nil {
		t.Errorf("custom server: error-rate alert %q, ServiceMonitor %v", e, desiredServiceMonitor(endpointOf(custom)))
	}
	if !strings.Contains(alert(t, custom, "InferenceServiceReplicasUnavailable"), "kube_deployment_status_replicas_unavailable") {
		t.Error("custom server: no replica alert")
	}
}
