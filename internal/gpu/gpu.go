// Package gpu holds what kiln does for pods that ask for GPUs: the extended resource they are
// (nvidia.com/gpu unless a spec names another) and the toleration of the NoSchedule taint GPU
// nodes carry under that name, as Kubernetes' ExtendedResourceToleration admission plugin adds.
package gpu

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// DefaultResource is the GPU of a spec that names none.
const DefaultResource corev1.ResourceName = "nvidia.com/gpu"

// Resource is name, or DefaultResource when it is empty.
func Resource(name corev1.ResourceName) corev1.ResourceName {
	if name != "" {
		return name
	}
	return DefaultResource
}

// Tolerations are tolerations plus, when the pod asks for count > 0 GPUs of resource, one of
// the NoSchedule taint named after the resource, unless tolerations tolerate it already.
func Tolerations(tolerations []corev1.Toleration, resource corev1.ResourceName, count int32) []corev1.Toleration {
	if count <= 0 {
		return tolerations
	}
	gpu := corev1.Toleration{Key: string(resource), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	taint := corev1.Taint{Key: gpu.Key, Effect: gpu.Effect}
	for _, t := range tolerations {
		if t.ToleratesTaint(klog.Background(), &taint, false) {
			return tolerations
		}
	}
	return append(slices.Clone(tolerations), gpu)
}
