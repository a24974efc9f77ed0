package inferenceservice

// KServe's InferenceService (serving.kserve.io/v1beta1), compiled for the engine: the predictor as
// KServe's Standard mode builds it (internal/kserve), under KServe's names and labels.

import (
	"slices"
	"strconv"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	kservev1beta1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1beta1"
	"github.com/kiln-ml/kiln/internal/kserve"
	"github.com/kiln-ml/kiln/internal/kueue"
	"github.com/kiln-ml/kiln/internal/modeluri"
)

// kserveID is LabelService's value on a KServe InferenceService's objects: its name, and .kserve,
// which no kiln InferenceService's name has, so that neither selects the other's pods.
func kserveID(name string) string { return name + ".kserve" }

// kserveMount is KServe's: the model in kserve-container, fetched by storage-initializer into
// kserve-provision-location.
var kserveMount = modelMount{container: kserve.ContainerName, volume: "kserve-provision-location", fetch: "storage-initializer"}

// kserveDefaultPort is the serving port of a kserve-container that declares none.
const kserveDefaultPort = 8080

// fromKServe compiles KServe's InferenceService isvc, whose predictor p kserve.Build built: one
// version, <name>-predictor, its Deployment selecting app=isvc.<name>-predictor and its Service
// the address; the model fetched by kiln-fetch (fetchImage) as storage-initializer.
func fromKServe(isvc *kservev1beta1.InferenceService, p kserve.Predictor, fetchImage string) endpoint {
	ext := isvc.Spec.Predictor.ComponentExtensionSpec
	e := endpoint{
		parent: isvc, name: isvc.Name, namespace: isvc.Namespace, address: p.Name, id: kserveID(isvc.Name),
		owner: metav1.OwnerReference{APIVersion: kservev1beta1.GroupVersion.String(), Kind: "InferenceService",
			Name: isvc.Name, UID: isvc.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)},
		deploymentSelector: kserve.Selector,
		labels:             p.Labels, annotations: p.Annotations,
		mount:          kserveMount,
		queue:          map[string]string{},
		port:           kserveDefaultPort,
		startupTimeout: DefaultStartupTimeoutSeconds,
	}
	kueue.CopyLabels(isvc.Labels, e.queue)
	pod := *p.Pod.DeepCopy()
	i := slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == kserve.ContainerName })
	if i >= 0 {
		server := &pod.Containers[i]
		if len(server.Ports) > 0 {
			e.port = server.Ports[0].ContainerPort
		}
		// As KServe: a server without a readiness probe is ready once its port opens.
		if server.ReadinessProbe == nil {
			server.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(e.port)}},
				TimeoutSeconds: 1, PeriodSeconds: 10, FailureThreshold: 3}
		}
	}
	if p.StorageURI != "" {
		mountModel(&pod, kserveMount, p.StorageURI, fetchImage, nil)
	}
	e.stable = versionPods{model: modeluri.Redact(p.StorageURI), template: corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{modelURIAnnotation: modeluri.Redact(p.StorageURI)}},
		Spec:       pod,
	}}
	if port, path := p.Annotations["prometheus.kserve.io/port"], p.Annotations["prometheus.kserve.io/path"]; path != "" {
		n, _ := strconv.Atoi(port)
		e.metrics = promEndpoint{port: int32(n), path: path}
	}
	// Replicas: minReplicas (default 1) to maxReplicas (0: minReplicas); KServe's HPA never
	// scales below one, and autoscalerClass none fixes the count at minReplicas.
	lo := max(ptr.Deref(ext.MinReplicas, 1), 1)
	hi := max(ext.MaxReplicas, lo)
	if isvc.Annotations[kserveAutoscalerClass] == "none" {
		hi = lo
	}
	e.minReplicas, e.maxReplicas = &lo, &hi
	e.hpaMetrics = kserveMetrics(ext)
	return e
}

// kserveAutoscalerClass picks the autoscaler: hpa (the default), none, keda or external.
const kserveAutoscalerClass = "serving.kserve.io/autoscalerClass"

// kserveMetrics are the HPA's metrics, as KServe sets them: autoScaling's resource metrics, else
// scaleMetric (cpu by default) at scaleTarget (a utilization, 80% by default; memory only with a
// target).
func kserveMetrics(ext kservev1beta1.ComponentExtensionSpec) []autoscalingv2.MetricSpec {
	resourceMetric := func(name corev1.ResourceName, target autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: name, Target: target}}
	}
	if a := ext.AutoScaling; a != nil && len(a.Metrics) > 0 {
		var out []autoscalingv2.MetricSpec
		for _, m := range a.Metrics {
			if m.Type != "Resource" || m.Resource == nil {
				continue
			}
			t := m.Resource.Target
			target := autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(ptr.Deref(t.AverageUtilization, 80))}
			switch {
			case t.Type == "AverageValue" && t.AverageValue != nil:
				target = autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: t.AverageValue}
			case t.Type == "Value" && t.Value != nil:
				target = autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: t.Value}
			}
			out = append(out, resourceMetric(corev1.ResourceName(m.Resource.Name), target))
		}
		return out
	}
	utilization := autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(ptr.Deref(ext.ScaleTarget, 80))}
	switch ptr.Deref(ext.ScaleMetric, "cpu") {
	case "cpu":
		return []autoscalingv2.MetricSpec{resourceMetric(corev1.ResourceCPU, utilization)}
	case "memory":
		if ext.ScaleTarget != nil {
			return []autoscalingv2.MetricSpec{resourceMetric(corev1.ResourceMemory, utilization)}
		}
	}
	return nil
}
