package gang

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

func requests(cpu, gpu string) []corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}
	if gpu != "" {
		r.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpu)}
	}
	return []corev1.ResourceRequirements{r}
}

// A TFJob of 1 PS (1 CPU) and 4 workers (2 CPU, 1 GPU each).
var pods = []Pod{
	{Role: "ps", Resources: requests("1", "")},
	{Role: "worker", Resources: requests("2", "1")}, {Role: "worker", Resources: requests("2", "1")},
	{Role: "worker", Resources: requests("2", "1")}, {Role: "worker", Resources: requests("2", "1")},
}

func TestNewGroupDefaults(t *testing.T) {
	g := NewGroup("dist", "ns", nil, pods)
	want := Group{Name: "dist", Namespace: "ns", MinMember: 5, Queue: "default",
		MinResources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("9"), "nvidia.com/gpu": resource.MustParse("4")}}
	if diff := cmp.Diff(want, g); diff != "" {
		t.Errorf("group (-want +got):\n%s", diff)
	}
	g = NewGroup("dist", "ns", &Policy{MinAvailable: ptr.To[int32](3), Queue: "research", PriorityClass: "high", ScheduleTimeoutSeconds: ptr.To[int32](90)}, pods)
	want = Group{Name: "dist", Namespace: "ns", MinMember: 3, Queue: "research", PriorityClass: "high", ScheduleTimeoutSeconds: ptr.To[int32](90),
		MinResources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5"), "nvidia.com/gpu": resource.MustParse("2")}}
	if diff := cmp.Diff(want, g); diff != "" {
		t.Errorf("group with a policy (-want +got):\n%s", diff)
	}
	mr := map[corev1.ResourceName]resource.Quantity{corev1.ResourceCPU: resource.MustParse("100")}
	if g := NewGroup("dist", "ns", &Policy{MinResources: &mr}, pods); !g.MinResources[corev1.ResourceCPU].Equal(resource.MustParse("100")) || len(g.MinResources) != 1 {
		t.Errorf("minResources given: %v, want it as given", g.MinResources)
	}
}

func TestNative(t *testing.T) {
	n := ForName("native")
	obj := n.Object(NewGroup("dist", "ns", &Policy{PriorityClass: "high"}, pods)).(*schedulingv1beta1.PodGroup)
	want := schedulingv1beta1.PodGroupSpec{
		SchedulingPolicy:  schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 5}},
		PriorityClassName: "high",
	}
	if diff := cmp.Diff(want, obj.Spec); diff != "" || obj.Name != "dist" || obj.APIVersion != "scheduling.k8s.io/v1beta1" || obj.Kind != "PodGroup" {
		t.Errorf("%s %s/%s spec (-want +got):\n%s", obj.Kind, obj.APIVersion, obj.Name, diff)
	}
	var tmpl corev1.PodTemplateSpec
	n.Decorate(&tmpl, "dist", "worker")
	if g := tmpl.Spec.SchedulingGroup; g == nil || *g.PodGroupName != "dist" {
		t.Errorf("schedulingGroup %+v, want podGroupName dist", g)
	}
	if msg := n.Waiting(obj); msg != "" {
		t.Errorf("a new group waits for %q: want nothing known yet", msg)
	}
	obj.Status.Conditions = []metav1.Condition{{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse,
		Reason: schedulingv1beta1.PodGroupReasonUnschedulable, Message: "0/6 nodes are available: 6 Insufficient nvidia.com/gpu."}}
	if msg, want := n.Waiting(obj), "waiting for 5 pods to be schedulable together: 0/6 nodes are available: 6 Insufficient nvidia.com/gpu."; msg != want {
		t.Errorf("waiting %q, want %q", msg, want)
	}
	obj.Status.Conditions[0].Status = metav1.ConditionTrue
	if msg := n.Waiting(obj); msg != "" {
		t.Errorf("scheduled group waits for %q", msg)
	}
}

// Volcano's objects are Kubeflow v1.9's for the same job: PodGroup named after the job with
// minMember all pods, queue default, minResources the pods' requests; pods to the volcano
// scheduler with the group-name and task-spec annotations.
func TestVolcanoMatchesKubeflow(t *testing.T) {
	v := ForName("volcano")
	obj := v.Object(NewGroup("dist", "ns", nil, pods)).(*unstructured.Unstructured)
	want := map[string]any{
		"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
		"metadata": map[string]any{"name": "dist", "namespace": "ns"},
		"spec":     map[string]any{"minMember": int64(5), "queue": "default", "minResources": map[string]any{"cpu": "9", "nvidia.com/gpu": "4"}},
	}
	if diff := cmp.Diff(want, obj.Object); diff != "" {
		t.Errorf("PodGroup (-want +got):\n%s", diff)
	}
	tmpl := corev1.PodTemplateSpec{}
	v.Decorate(&tmpl, "dist", "worker")
	if tmpl.Spec.SchedulerName != "volcano" || tmpl.Annotations["scheduling.k8s.io/group-name"] != "dist" || tmpl.Annotations["volcano.sh/task-spec"] != "worker" {
		t.Errorf("pod template %+v", tmpl)
	}
	tmpl = corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: "mine"}}
	v.Decorate(&tmpl, "dist", "ps")
	if tmpl.Spec.SchedulerName != "mine" {
		t.Errorf("a template's own scheduler %q was replaced", tmpl.Spec.SchedulerName)
	}
	if msg := v.Waiting(obj); msg != "waiting for 5 pods to be schedulable together: Volcano has not admitted the PodGroup to queue default yet" {
		t.Errorf("a group without phase: %q", msg)
	}
	_ = unstructured.SetNestedField(obj.Object, "Inqueue", "status", "phase")
	if msg := v.Waiting(obj); msg != "" || !DelaysPods(v) {
		t.Errorf("an Inqueue group waits for %q (or Volcano creates pods before)", msg)
	}
}

func TestSchedulerPluginsMatchesKubeflow(t *testing.T) {
	s := ForName("coscheduler")
	obj := s.Object(NewGroup("dist", "ns", &Policy{ScheduleTimeoutSeconds: ptr.To[int32](60)}, pods)).(*unstructured.Unstructured)
	want := map[string]any{
		"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
		"metadata": map[string]any{"name": "dist", "namespace": "ns"},
		"spec":     map[string]any{"minMember": int64(5), "scheduleTimeoutSeconds": int64(60), "minResources": map[string]any{"cpu": "9", "nvidia.com/gpu": "4"}},
	}
	if diff := cmp.Diff(want, obj.Object); diff != "" {
		t.Errorf("PodGroup (-want +got):\n%s", diff)
	}
	var tmpl corev1.PodTemplateSpec
	s.Decorate(&tmpl, "dist", "worker")
	if tmpl.Spec.SchedulerName != "coscheduler" || tmpl.Labels["scheduling.x-k8s.io/pod-group"] != "dist" {
		t.Errorf("pod template %+v", tmpl)
	}
	if ForName("scheduler-plugins").(SchedulerPlugins).SchedulerName != DefaultSchedulerPluginsName || ForName("none") != nil || ForName("") != nil {
		t.Error("names: scheduler-plugins uses its default scheduler; none and empty are no backend")
	}
	_ = unstructured.SetNestedField(obj.Object, "Scheduling", "status", "phase")
	if msg := s.Waiting(obj); msg != "waiting for 5 pods to be schedulable together: PodGroup phase Scheduling" {
		t.Errorf("waiting %q", msg)
	}
}

func TestNotInstalledSaysWhatToDo(t *testing.T) {
	if got, want := NotInstalled(Volcano{}), "gang scheduling with volcano needs podgroups scheduling.volcano.sh/v1beta1, which this cluster does not serve: install it, or run kiln with another --gang-scheduler-name (none turns gang scheduling off); no pods are created meanwhile"; got != want {
		t.Errorf("%q\nwant %q", got, want)
	}
}

func TestGroupNameIsTheJobsAndItsKindsAndFitsALabel(t *testing.T) {
	if got := GroupName("mnist", "PyTorchJob"); got != "mnist-pytorchjob" {
		t.Errorf("GroupName = %q, want mnist-pytorchjob", got)
	}
	long := strings.Repeat("a", 60)
	a, b := GroupName(long+"x", "TFJob"), GroupName(long+"y", "TFJob")
	if len(a) > 63 || len(b) > 63 || a == b {
		t.Errorf("long names %q and %q: want distinct names of at most 63 characters", a, b)
	}
	if errs := validation.IsValidLabelValue(a); len(errs) > 0 {
		t.Errorf("%q is no label value: %v", a, errs)
	}
}
