package pytorch

import (
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateMetrics checks elasticPolicy.metrics as the apiserver checks an HPA's: the job's HPA
// gets them as they are, and one the apiserver refuses would leave the job without autoscaling
// on every reconcile. Each error names the metric's field and what it needs.
func validateMetrics(metrics []autoscalingv2.MetricSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, m := range metrics {
		errs = append(errs, validateMetric(m, path.Index(i))...)
	}
	return errs
}

// metricSources are the metric types and the field each one's source is in.
var metricSources = []struct {
	typ   autoscalingv2.MetricSourceType
	field string
	set   func(autoscalingv2.MetricSpec) bool
}{
	{autoscalingv2.ResourceMetricSourceType, "resource", func(m autoscalingv2.MetricSpec) bool { return m.Resource != nil }},
	{autoscalingv2.ContainerResourceMetricSourceType, "containerResource", func(m autoscalingv2.MetricSpec) bool { return m.ContainerResource != nil }},
	{autoscalingv2.PodsMetricSourceType, "pods", func(m autoscalingv2.MetricSpec) bool { return m.Pods != nil }},
	{autoscalingv2.ObjectMetricSourceType, "object", func(m autoscalingv2.MetricSpec) bool { return m.Object != nil }},
	{autoscalingv2.ExternalMetricSourceType, "external", func(m autoscalingv2.MetricSpec) bool { return m.External != nil }},
}

func validateMetric(m autoscalingv2.MetricSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	var src *field.Path // the source's field, once the type is known
	for _, s := range metricSources {
		switch {
		case s.typ == m.Type && !s.set(m):
			errs = append(errs, field.Required(path.Child(s.field), fmt.Sprintf("must be set for a metric of type %s", m.Type)))
		case s.typ != m.Type && s.set(m):
			errs = append(errs, field.Forbidden(path.Child(s.field), fmt.Sprintf("must not be set for a metric of type %q: a metric has the one source its type names", m.Type)))
		}
		if s.typ == m.Type {
			src = path.Child(s.field)
		}
	}
	if src == nil {
		types := make([]string, len(metricSources))
		for i, s := range metricSources {
			types[i] = string(s.typ)
		}
		return append(errs, field.NotSupported(path.Child("type"), m.Type, types))
	}
	if len(errs) > 0 {
		return errs
	}
	switch m.Type {
	case autoscalingv2.ResourceMetricSourceType:
		errs = append(errs, resourceTarget(string(m.Resource.Name), m.Resource.Target, src)...)
	case autoscalingv2.ContainerResourceMetricSourceType:
		errs = append(errs, resourceTarget(string(m.ContainerResource.Name), m.ContainerResource.Target, src)...)
		errs = append(errs, containerResourceName(m.ContainerResource.Name, src.Child("name"))...)
		for _, msg := range validation.IsDNS1123Label(m.ContainerResource.Container) {
			errs = append(errs, field.Invalid(src.Child("container"), m.ContainerResource.Container, "must name a container of the Worker pods: "+msg))
		}
	case autoscalingv2.PodsMetricSourceType:
		errs = append(errs, metricIdentifier(m.Pods.Metric, src.Child("metric"))...)
		errs = append(errs, target(m.Pods.Target, src.Child("target"))...)
		if m.Pods.Target.AverageValue == nil {
			errs = append(errs, field.Required(src.Child("target", "averageValue"), "a Pods metric's target is a per-pod averageValue"))
		}
	case autoscalingv2.ObjectMetricSourceType:
		o := m.Object.DescribedObject
		if o.Kind == "" || o.Name == "" {
			errs = append(errs, field.Required(src.Child("describedObject"), "must name the object the metric describes: its kind and name"))
		}
		errs = append(errs, pathSegment(o.Kind, src.Child("describedObject", "kind"))...)
		errs = append(errs, pathSegment(o.Name, src.Child("describedObject", "name"))...)
		errs = append(errs, metricIdentifier(m.Object.Metric, src.Child("metric"))...)
		errs = append(errs, valueTarget(m.Object.Target, src.Child("target"), false)...)
	case autoscalingv2.ExternalMetricSourceType:
		errs = append(errs, metricIdentifier(m.External.Metric, src.Child("metric"))...)
		errs = append(errs, valueTarget(m.External.Target, src.Child("target"), true)...)
	}
	return errs
}

// resourceTarget checks a (container) resource metric: a resource name, and a target of either
// averageUtilization or averageValue.
func resourceTarget(name string, t autoscalingv2.MetricTarget, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(path.Child("name"), "must name a resource such as cpu or memory"))
	}
	errs = append(errs, target(t, path.Child("target"))...)
	switch {
	case t.AverageUtilization == nil && t.AverageValue == nil:
		errs = append(errs, field.Required(path.Child("target", "averageUtilization"), "a resource metric's target is an averageUtilization (percent of the request) or an averageValue"))
	case t.AverageUtilization != nil && t.AverageValue != nil:
		errs = append(errs, field.Forbidden(path.Child("target", "averageValue"), "must not be set with averageUtilization: keep one"))
	}
	return errs
}

// valueTarget checks the target of an Object or External metric: a value or an averageValue
// (not both, for an External one).
func valueTarget(t autoscalingv2.MetricTarget, path *field.Path, oneOnly bool) field.ErrorList {
	errs := target(t, path)
	switch {
	case t.Value == nil && t.AverageValue == nil:
		errs = append(errs, field.Required(path.Child("averageValue"), "set a value (for the metric) or an averageValue (per pod)"))
	case oneOnly && t.Value != nil && t.AverageValue != nil:
		errs = append(errs, field.Forbidden(path.Child("value"), "must not be set with averageValue: keep one"))
	}
	return errs
}

// target checks what every metric's target needs: a known type, some value, every value positive.
func target(t autoscalingv2.MetricTarget, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch t.Type {
	case autoscalingv2.UtilizationMetricType, autoscalingv2.ValueMetricType, autoscalingv2.AverageValueMetricType:
	default:
		errs = append(errs, field.NotSupported(path.Child("type"), t.Type, []string{string(autoscalingv2.UtilizationMetricType), string(autoscalingv2.ValueMetricType), string(autoscalingv2.AverageValueMetricType)}))
	}
	if t.AverageUtilization == nil && t.Value == nil && t.AverageValue == nil {
		errs = append(errs, field.Required(path, "set averageUtilization, value or averageValue"))
	}
	for _, q := range []struct {
		name string
		v    *resource.Quantity
	}{{"value", t.Value}, {"averageValue", t.AverageValue}} {
		if q.v != nil && q.v.Sign() <= 0 {
			errs = append(errs, field.Invalid(path.Child(q.name), q.v.String(), "must be positive"))
		}
	}
	if t.AverageUtilization != nil && *t.AverageUtilization < 1 {
		errs = append(errs, field.Invalid(path.Child("averageUtilization"), *t.AverageUtilization, "must be at least 1 (percent of the request)"))
	}
	return errs
}

// metricIdentifier checks a custom or external metric's name.
func metricIdentifier(id autoscalingv2.MetricIdentifier, path *field.Path) field.ErrorList {
	if id.Name == "" {
		return field.ErrorList{field.Required(path.Child("name"), "must name the metric")}
	}
	return pathSegment(id.Name, path.Child("name"))
}

// pathSegment refuses a name the metrics APIs could not take as a URL path segment.
func pathSegment(name string, path *field.Path) field.ErrorList {
	if name == "." || name == ".." {
		return field.ErrorList{field.Invalid(path, name, "must be a name, not . or ..")}
	}
	var errs field.ErrorList
	for _, c := range []string{"/", "%"} {
		if strings.Contains(name, c) {
			errs = append(errs, field.Invalid(path, name, fmt.Sprintf("must not contain %q: the metrics APIs take it as a URL path segment", c)))
		}
	}
	return errs
}

// containerResourceName refuses what no container can request: a name without a domain must be
// cpu, memory, ephemeral-storage or hugepages-<size>; one with a domain a qualified name
// (an extended resource such as nvidia.com/gpu).
func containerResourceName(name corev1.ResourceName, path *field.Path) field.ErrorList {
	n := string(name)
	if n == "" {
		return nil // resourceTarget says it is required
	}
	if !strings.Contains(n, "/") {
		switch {
		case name == corev1.ResourceCPU, name == corev1.ResourceMemory, name == corev1.ResourceEphemeralStorage, strings.HasPrefix(n, corev1.ResourceHugePagesPrefix):
			return nil
		}
		return field.ErrorList{field.Invalid(path, n, "must be a resource a container requests: cpu, memory, ephemeral-storage, hugepages-<size>, or an extended resource such as nvidia.com/gpu")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(n) {
		errs = append(errs, field.Invalid(path, n, msg))
	}
	return errs
}
