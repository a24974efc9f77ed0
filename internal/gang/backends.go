package gang

import (
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Native is the PodGroup Kubernetes serves itself (KEP-4671): the stock kube-scheduler places a
// group's pods all-or-nothing once minCount of them can be.
type Native struct{}

func (Native) Name() string { return NameNative }

func (Native) GroupKind() schema.GroupVersionKind {
	return schedulingv1beta1.SchemeGroupVersion.WithKind("PodGroup")
}

func (Native) NewObject() client.Object { return &schedulingv1beta1.PodGroup{} }

// Object is a standalone PodGroup with a gang policy of minCount MinMember.
func (n Native) Object(g Group) client.Object {
	pg := &schedulingv1beta1.PodGroup{Spec: schedulingv1beta1.PodGroupSpec{
		SchedulingPolicy:  schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: max(1, g.MinMember)}},
		PriorityClassName: g.PriorityClass,
	}}
	pg.SetGroupVersionKind(n.GroupKind())
	pg.Name, pg.Namespace = g.Name, g.Namespace
	return pg
}

// Decorate names the group in the pod's schedulingGroup.
func (Native) Decorate(t *corev1.PodTemplateSpec, group, _ string) {
	name := group
	t.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &name}
}

// Waiting reads the scheduler's PodGroupInitiallyScheduled condition: False means the group could
// not be placed, and its message says why.
func (Native) Waiting(obj client.Object) string {
	pg, ok := obj.(*schedulingv1beta1.PodGroup)
	if !ok || pg.Spec.SchedulingPolicy.Gang == nil {
		return ""
	}
	for _, c := range pg.Status.Conditions {
		if c.Type == schedulingv1beta1.PodGroupInitiallyScheduled && c.Status == "False" {
			return Waiting(pg.Spec.SchedulingPolicy.Gang.MinCount, c.Message)
		}
	}
	return ""
}

// Volcano is Volcano's PodGroup, as Kubeflow v1 makes it: minMember, queue, priority class and
// minimum resources; pods go to the volcano scheduler with the group's name and their task.
type Volcano struct{}

func (Volcano) Name() string { return NameVolcano }

func (Volcano) GroupKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: "scheduling.volcano.sh", Version: "v1beta1", Kind: "PodGroup"}
}

func (v Volcano) NewObject() client.Object { return empty(v.GroupKind()) }

func (v Volcano) Object(g Group) client.Object {
	spec := map[string]any{"minMember": int64(g.MinMember), "queue": g.Queue, "minResources": quantities(g.MinResources)}
	if g.PriorityClass != "" {
		spec["priorityClassName"] = g.PriorityClass
	}
	return object(v.GroupKind(), g, spec)
}

// Volcano's pod annotations: the group (KubeGroupNameAnnotationKey) and the task (TaskSpecKey).
const (
	VolcanoGroupAnnotation = "scheduling.k8s.io/group-name"
	VolcanoTaskAnnotation  = "volcano.sh/task-spec"
)

func (Volcano) Decorate(t *corev1.PodTemplateSpec, group, role string) {
	if t.Spec.SchedulerName == "" {
		t.Spec.SchedulerName = NameVolcano
	}
	setAnnotation(t, VolcanoGroupAnnotation, group)
	setAnnotation(t, VolcanoTaskAnnotation, role)
}

// Waiting: a group without a phase, or Pending, has not been admitted to its queue (as Kubeflow,
// kiln creates its pods only then); its last condition says why.
func (Volcano) Waiting(obj client.Object) string {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return ""
	}
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	if phase != "" && phase != "Pending" {
		return ""
	}
	minMember, _, _ := unstructured.NestedInt64(u.Object, "spec", "minMember")
	reason := lastConditionMessage(u)
	if reason == "" {
		queue, _, _ := unstructured.NestedString(u.Object, "spec", "queue")
		reason = "Volcano has not admitted the PodGroup to queue " + queue + " yet"
	}
	return Waiting(int32(minMember), reason)
}

// SchedulerPlugins is scheduler-plugins' coscheduling PodGroup, as Kubeflow v1 makes it:
// minMember, minResources and scheduleTimeoutSeconds; pods carry the group label and go to the
// scheduler named SchedulerName (a profile with the Coscheduling plugin).
type SchedulerPlugins struct{ SchedulerName string }

func (SchedulerPlugins) Name() string { return NameSchedulerPlugins }

func (SchedulerPlugins) GroupKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Kind: "PodGroup"}
}

func (s SchedulerPlugins) NewObject() client.Object { return empty(s.GroupKind()) }

func (s SchedulerPlugins) Object(g Group) client.Object {
	spec := map[string]any{"minMember": int64(g.MinMember), "minResources": quantities(g.MinResources)}
	if g.ScheduleTimeoutSeconds != nil {
		spec["scheduleTimeoutSeconds"] = int64(*g.ScheduleTimeoutSeconds)
	}
	return object(s.GroupKind(), g, spec)
}

// SchedulerPluginsGroupLabel is the pod label naming its coscheduling PodGroup.
const SchedulerPluginsGroupLabel = "scheduling.x-k8s.io/pod-group"

func (s SchedulerPlugins) Decorate(t *corev1.PodTemplateSpec, group, _ string) {
	if t.Spec.SchedulerName == "" {
		t.Spec.SchedulerName = s.SchedulerName
	}
	setLabel(t, SchedulerPluginsGroupLabel, group)
}

// Waiting: the coscheduling plugin reports no reason; its phase says whether the group is placed.
func (SchedulerPlugins) Waiting(obj client.Object) string {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return ""
	}
	switch phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase {
	case "Pending", "PreScheduling", "Scheduling":
		minMember, _, _ := unstructured.NestedInt64(u.Object, "spec", "minMember")
		return Waiting(int32(minMember), "PodGroup phase "+phase)
	}
	return ""
}

// empty is an object of a kind kiln has no Go type for (the PodGroup CRDs of other projects).
func empty(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	return u
}

func object(gvk schema.GroupVersionKind, g Group, spec map[string]any) *unstructured.Unstructured {
	u := empty(gvk)
	u.Object["spec"] = spec
	u.SetName(g.Name)
	u.SetNamespace(g.Namespace)
	return u
}

func quantities(l corev1.ResourceList) map[string]any {
	out := map[string]any{}
	for _, n := range sortedNames(l) {
		q := l[corev1.ResourceName(n)]
		out[n] = q.String()
	}
	return out
}

func lastConditionMessage(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	if len(conds) == 0 {
		return ""
	}
	m, _ := conds[len(conds)-1].(map[string]any)
	msg, _ := m["message"].(string)
	return msg
}
