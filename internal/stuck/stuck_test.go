package stuck

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestPod(t *testing.T) {
	waiting := func(reason, msg string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "pytorch", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}}}
	}
	for _, c := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{waiting("ImagePullBackOff", `Back-off pulling image "pytorch/pytorh:2.0"`),
			`worker 0 cannot start: container pytorch is ImagePullBackOff: Back-off pulling image "pytorch/pytorh:2.0"; check the image name and tag`},
		{waiting("CreateContainerConfigError", `secret "hf-token" not found`), `a Secret or ConfigMap it references (env, volumes) is missing`},
		{waiting("CrashLoopBackOff", ""), "worker 0 cannot start: container pytorch is CrashLoopBackOff; the container keeps exiting"},
		{waiting("ContainerCreating", ""), ""},
		{&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}}}},
			"worker 0 cannot be scheduled: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."},
		{&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}, ""},
	} {
		_, got := Pod(c.pod, "worker 0")
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("Pod() = %q, want one containing %q", got, c.want)
		}
	}
}

func TestReady(t *testing.T) {
	pod := func(conds ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: conds}}
	}
	scheduled := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}
	for _, c := range []struct {
		pod  *corev1.Pod
		want bool
	}{
		{pod(scheduled, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}), true},
		{pod(scheduled, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse}), false},
		{pod(scheduled), false},
	} {
		if got := Ready(c.pod); got != c.want {
			t.Errorf("%+v: ready %v, want %v", c.pod.Status.Conditions, got, c.want)
		}
	}
}
