package gpu

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestTolerations(t *testing.T) {
	own := []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	got := Tolerations(own, "amd.com/gpu", 1)
	if len(got) != 2 || got[1] != (corev1.Toleration{Key: "amd.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}) || len(own) != 1 {
		t.Errorf("Tolerations = %v (own now %v): want spot, then amd.com/gpu's NoSchedule, own unchanged", got, own)
	}
	if got := Tolerations(own, DefaultResource, 0); len(got) != 1 {
		t.Errorf("no GPUs, tolerations %v: want only the pod's own", got)
	}
	all := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	if got := Tolerations(all, Resource(""), 2); len(got) != 1 {
		t.Errorf("a pod tolerating every taint got %v: want nothing added", got)
	}
	if Resource("") != "nvidia.com/gpu" || Resource("amd.com/gpu") != "amd.com/gpu" {
		t.Error("Resource: want the name given, nvidia.com/gpu when none")
	}
}
