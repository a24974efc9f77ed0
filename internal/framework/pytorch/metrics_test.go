package pytorch

import (
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// The metrics an HPA takes pass; each one it refuses is refused naming the field.
func TestValidateMetrics(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	util := func(n int32) autoscalingv2.MetricTarget {
		return autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(n)}
	}
	avg := func(v string) autoscalingv2.MetricTarget {
		return autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q(v)}
	}
	id := autoscalingv2.MetricIdentifier{Name: "requests"}
	svc := autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service", Name: "queue"}
	for _, c := range []struct {
		name string
		m    autoscalingv2.MetricSpec
		want string // "" when the HPA takes it
	}{
		{"cpu utilization", autoscalingv2.MetricSpec{Type: "Resource", Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: util(80)}}, ""},
		{"container memory", autoscalingv2.MetricSpec{Type: "ContainerResource", ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: corev1.ResourceMemory, Container: "pytorch", Target: avg("1Gi")}}, ""},
		{"pods", autoscalingv2.MetricSpec{Type: "Pods", Pods: &autoscalingv2.PodsMetricSource{Metric: id, Target: avg("10")}}, ""},
		{"object", autoscalingv2.MetricSpec{Type: "Object", Object: &autoscalingv2.ObjectMetricSource{DescribedObject: svc, Metric: id,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("100")}}}, ""},
		{"external", autoscalingv2.MetricSpec{Type: "External", External: &autoscalingv2.ExternalMetricSource{Metric: id, Target: avg("5")}}, ""},
		{"no type", autoscalingv2.MetricSpec{}, "metrics[0].type: Unsupported value"},
		{"another type's source", autoscalingv2.MetricSpec{Type: "Pods", Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: util(80)}}, "metrics[0].resource: Forbidden"},
		{"no source", autoscalingv2.MetricSpec{Type: "External"}, "metrics[0].external: Required"},
		{"0 percent", autoscalingv2.MetricSpec{Type: "Resource", Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: util(0)}}, "metrics[0].resource.target.averageUtilization: Invalid"},
		{"no target value", autoscalingv2.MetricSpec{Type: "Resource", Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType}}}, "metrics[0].resource.target: Required"},
		{"unknown target type", autoscalingv2.MetricSpec{Type: "Pods", Pods: &autoscalingv2.PodsMetricSource{Metric: id,
			Target: autoscalingv2.MetricTarget{Type: "Most", AverageValue: q("1")}}}, "metrics[0].pods.target.type: Unsupported value"},
		{"negative value", autoscalingv2.MetricSpec{Type: "Pods", Pods: &autoscalingv2.PodsMetricSource{Metric: id, Target: avg("-1")}}, "metrics[0].pods.target.averageValue: Invalid"},
		{"pods without averageValue", autoscalingv2.MetricSpec{Type: "Pods", Pods: &autoscalingv2.PodsMetricSource{Metric: id,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("1")}}}, "metrics[0].pods.target.averageValue: Required"},
		{"unnamed metric", autoscalingv2.MetricSpec{Type: "External", External: &autoscalingv2.ExternalMetricSource{Target: avg("5")}}, "metrics[0].external.metric.name: Required"},
		{"metric name with /", autoscalingv2.MetricSpec{Type: "External", External: &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "a/b"}, Target: avg("5")}}, "metrics[0].external.metric.name: Invalid"},
		{"object without a name", autoscalingv2.MetricSpec{Type: "Object", Object: &autoscalingv2.ObjectMetricSource{DescribedObject: autoscalingv2.CrossVersionObjectReference{Kind: "Service"},
			Metric: id, Target: avg("5")}}, "metrics[0].object.describedObject: Required"},
		{"container without a name", autoscalingv2.MetricSpec{Type: "ContainerResource", ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: corev1.ResourceCPU, Target: util(80)}}, "metrics[0].containerResource.container: Invalid"},
		{"container GPUs", autoscalingv2.MetricSpec{Type: "ContainerResource", ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: "nvidia.com/gpu", Container: "pytorch", Target: avg("1")}}, ""},
		{"container resource no container requests", autoscalingv2.MetricSpec{Type: "ContainerResource", ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: "gpu", Container: "pytorch", Target: avg("1")}}, "metrics[0].containerResource.name: Invalid"},
		{"described object name with /", autoscalingv2.MetricSpec{Type: "Object", Object: &autoscalingv2.ObjectMetricSource{DescribedObject: autoscalingv2.CrossVersionObjectReference{Kind: "Service", Name: "a/b"},
			Metric: id, Target: avg("5")}}, "metrics[0].object.describedObject.name: Invalid"},
		{"utilization and averageValue", autoscalingv2.MetricSpec{Type: "Resource", Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80), AverageValue: q("1")}}}, "metrics[0].resource.target.averageValue: Forbidden"},
	} {
		errs := validateMetrics([]autoscalingv2.MetricSpec{c.m}, field.NewPath("metrics"))
		switch {
		case c.want == "" && len(errs) > 0:
			t.Errorf("%s: refused: %v", c.name, errs)
		case c.want != "" && !strings.Contains(errs.ToAggregate().Error(), c.want):
			t.Errorf("%s: %v, want an error naming %s", c.name, errs, c.want)
		}
	}
}
