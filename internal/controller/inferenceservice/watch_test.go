package inferenceservice

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kiln-ml/kiln/internal/stuck"
)

// A pod as the apiserver sends it, its containers in the states given.
func fullPod(name string, phase corev1.PodPhase, conditions []corev1.PodCondition, initStatuses, statuses []corev1.ContainerStatus) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: "7", CreationTimestamp: metav1.Time{Time: time.Unix(5, 0)},
			Labels: map[string]string{LabelService: "iris.kserve", "pod-template-hash": "abc"}, Annotations: map[string]string{"a": "b", modelURIAnnotation: "s3://m/1"}, Finalizers: []string{"f"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "kserve-container", Image: "sklearn:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
		Status: corev1.PodStatus{Phase: phase, Conditions: conditions, HostIP: "10.0.0.1", PodIP: "10.1.0.1", QOSClass: corev1.PodQOSBurstable,
			StartTime: &metav1.Time{Time: time.Unix(1, 0)}, InitContainerStatuses: initStatuses, ContainerStatuses: statuses},
	}
}

func running(name string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, Ready: true, RestartCount: 2, Image: "img", ImageID: "sha", ContainerID: "cri://1",
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Time{Time: time.Unix(2, 0)}}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}
}

// The cached pod is slimmed to what troubleOf, inMesh and asPodsSay read: they answer on it as on the pod
// the apiserver sent.
func TestCachedPodsKeepWhatTroubleAndTheMeshRead(t *testing.T) {
	failedFetch := corev1.ContainerStatus{Name: "storage-initializer", RestartCount: 3, Image: "fetch",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
			Message: "s3://models/iris: access denied", StartedAt: metav1.Time{Time: time.Unix(3, 0)}}}}
	pods := []*corev1.Pod{
		fullPod("ready", corev1.PodRunning, []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
			[]corev1.ContainerStatus{{Name: "storage-initializer", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}},
			[]corev1.ContainerStatus{running("kserve-container"), running("istio-proxy")}),
		fullPod("fetch-failed", corev1.PodPending, nil, []corev1.ContainerStatus{failedFetch}, []corev1.ContainerStatus{{Name: "kserve-container",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}),
		fullPod("fetch-ended", corev1.PodPending, nil, []corev1.ContainerStatus{{Name: "storage-initializer",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Message: "no such bucket"}}}}, nil),
		fullPod("pull", corev1.PodPending, nil, nil, []corev1.ContainerStatus{{Name: "kserve-container", Image: "typo:1",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "not found"}}}}),
		fullPod("unschedulable", corev1.PodPending, []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes have a GPU", LastTransitionTime: metav1.Time{Time: time.Unix(4, 0)}}}, nil, nil),
	}
	for _, full := range pods {
		slim, err := podTroubleOnly(full.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		p := slim.(*corev1.Pod)
		if got, want := podTrouble(p, "storage-initializer"), podTrouble(full, "storage-initializer"); got != want {
			t.Errorf("%s: trouble %+v cached, %+v as sent", full.Name, got, want)
		}
		if got, want := inMesh([]corev1.Pod{*p}), inMesh([]corev1.Pod{*full}); got != want {
			t.Errorf("%s: in the mesh %v cached, %v as sent", full.Name, got, want)
		}
		if got, want := stuck.Ready(p), stuck.Ready(full); got != want {
			t.Errorf("%s: ready %v cached, %v as sent", full.Name, got, want)
		}
		if p.Spec.Containers != nil || len(p.Annotations) != 1 || p.Annotations[modelURIAnnotation] != "s3://m/1" || p.ManagedFields != nil || p.Status.PodIP != "" ||
			p.Labels[LabelService] == "" || p.Labels["pod-template-hash"] == "" || !p.CreationTimestamp.Equal(&full.CreationTimestamp) {
			t.Errorf("%s: cached %+v, want its labels, model annotation and creation and none of its spec, other annotations, managedFields or addresses", full.Name, p)
		}
	}
	if podTrouble(pods[1], "storage-initializer").reason != reasonModelFetchFailed || podTrouble(pods[4], "storage-initializer").reason == "" || !stuck.Ready(pods[0]) {
		t.Error("the pods as sent do not show the troubles the test means to keep")
	}
}

// A cached Service keeps its metadata (the kit reads its owner, UID and version) and nothing else.
func TestCachedServicesKeepTheirMetadataOnly(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "iris-predictor", UID: "u", ResourceVersion: "3",
		OwnerReferences: []metav1.OwnerReference{{Name: "iris"}}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kiln"}}},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.9", Ports: []corev1.ServicePort{{Port: 80}}}}
	got, err := serviceMetaOnly(svc)
	if err != nil {
		t.Fatal(err)
	}
	s := got.(*corev1.Service)
	if s.Spec.ClusterIP != "" || s.Spec.Ports != nil || s.ManagedFields != nil || s.UID != "u" || s.ResourceVersion != "3" || len(s.OwnerReferences) != 1 {
		t.Errorf("cached Service %+v, want its metadata but managedFields, no spec", s)
	}
}
