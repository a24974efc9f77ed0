// Package gang is kiln's one abstraction of gang scheduling: from a job's schedulingPolicy and
// pods it builds the group the scheduler places all-or-nothing, decorates the pod templates to
// join it, and reads back why a group waits. Backends: the PodGroup Kubernetes itself serves
// (scheduling.k8s.io/v1beta1, gate GenericWorkload), scheduler-plugins' coscheduling
// (scheduling.x-k8s.io/v1alpha1) and Volcano (scheduling.volcano.sh/v1beta1), each built as
// Kubeflow Training Operator v1 builds it where Kubeflow has it.
package gang

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Group is what every backend's group object says: the pods that must be placed together.
type Group struct {
	// Name and Namespace of the group: the job's.
	Name, Namespace string
	// MinMember is how many pods must be schedulable together (schedulingPolicy.minAvailable,
	// default every pod of the job).
	MinMember int32
	// Queue is the scheduler's queue (Volcano; default "default", as Kubeflow).
	Queue string
	// PriorityClass is the group's priority class.
	PriorityClass string
	// MinResources is what MinMember pods request together (schedulingPolicy.minResources, default
	// the sum of the requests of the first MinMember pods).
	MinResources corev1.ResourceList
	// ScheduleTimeoutSeconds bounds the wait of scheduler-plugins' Permit barrier.
	ScheduleTimeoutSeconds *int32
}

// Pod is one pod a group is made of: its role and what its containers request.
type Pod struct {
	Role      string
	Resources []corev1.ResourceRequirements
}

// Policy is a job's schedulingPolicy, as the kinds carry it.
type Policy struct {
	MinAvailable           *int32
	Queue                  string
	MinResources           *map[corev1.ResourceName]resource.Quantity
	PriorityClass          string
	ScheduleTimeoutSeconds *int32
}

// GroupName is the group of the job of that kind and name: "<job>-<kind>" in lower case, so jobs
// of different kinds may share a name (a TFJob and a PyTorchJob "mnist" each have a group of
// their own). A name longer than a label value allows (coscheduling puts it in a pod label) is
// cut and ends in a digest of the whole, so it stays unique.
func GroupName(job, kind string) string {
	name := job + "-" + strings.ToLower(kind)
	if len(name) <= maxGroupName {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	suffix := "-" + hex.EncodeToString(sum[:])[:8]
	return strings.TrimRight(name[:maxGroupName-len(suffix)], "-.") + suffix
}

// maxGroupName is the longest label value.
const maxGroupName = 63

// NewGroup builds the group of a job's pods (in the order the job creates them) under policy
// (nil: the defaults).
func NewGroup(name, namespace string, policy *Policy, pods []Pod) Group {
	g := Group{Name: name, Namespace: namespace, MinMember: int32(len(pods)), Queue: "default"}
	if policy != nil {
		if policy.MinAvailable != nil {
			g.MinMember = *policy.MinAvailable
		}
		if policy.Queue != "" {
			g.Queue = policy.Queue
		}
		g.PriorityClass, g.ScheduleTimeoutSeconds = policy.PriorityClass, policy.ScheduleTimeoutSeconds
		if policy.MinResources != nil {
			g.MinResources = corev1.ResourceList(*policy.MinResources).DeepCopy()
		}
	}
	if g.MinResources == nil {
		g.MinResources = corev1.ResourceList{}
		for _, p := range pods[:min(len(pods), max(0, int(g.MinMember)))] {
			for _, r := range p.Resources {
				addRequests(g.MinResources, r)
			}
		}
	}
	return g
}

// addRequests adds a container's requests (its limits where it requests nothing, as the
// apiserver defaults them) to total.
func addRequests(total corev1.ResourceList, r corev1.ResourceRequirements) {
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			add(total, name, q)
		}
	}
	for name, q := range r.Requests {
		add(total, name, q)
	}
}

func add(total corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	sum := total[name]
	sum.Add(q)
	total[name] = sum
}

// Backend is one gang scheduler.
type Backend interface {
	// Name is the backend's name, as --gang-scheduler-name takes it.
	Name() string
	// GroupKind is the group object's kind, for watching and for messages.
	GroupKind() schema.GroupVersionKind
	// Object builds the group object, ready to apply.
	Object(g Group) client.Object
	// Decorate adds to a pod template of role what makes the scheduler place it with group.
	Decorate(t *corev1.PodTemplateSpec, group, role string)
	// Waiting says why a group's pods wait to be placed together, or "" when they do not (or
	// not yet known). obj is the group object as read from the cluster.
	Waiting(obj client.Object) string
	// NewObject is an empty group object to read into.
	NewObject() client.Object
}

// Names of the backends --gang-scheduler-name takes; any other name is scheduler-plugins'
// coscheduling under that scheduler name, as in Kubeflow.
const (
	NameNone             = "none"
	NameNative           = "native"
	NameVolcano          = "volcano"
	NameSchedulerPlugins = "scheduler-plugins"
	// DefaultSchedulerPluginsName is the scheduler name pods get for "scheduler-plugins": the
	// name scheduler-plugins' own manifests give their second scheduler.
	DefaultSchedulerPluginsName = "scheduler-plugins-scheduler"
)

// ForName returns the backend of a --gang-scheduler-name value ("" and "none": nil).
func ForName(name string) Backend {
	switch name {
	case "", NameNone:
		return nil
	case NameNative:
		return Native{}
	case NameVolcano:
		return Volcano{}
	case NameSchedulerPlugins:
		return SchedulerPlugins{SchedulerName: DefaultSchedulerPluginsName}
	}
	return SchedulerPlugins{SchedulerName: name}
}

// Served says whether the cluster serves b's group API.
func Served(mapper meta.RESTMapper, b Backend) bool {
	gvk := b.GroupKind()
	_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	return err == nil
}

// DelaysPods says whether pods are created only once the group is admitted (Volcano, as Kubeflow
// does); the other schedulers hold pods that exist until their group can be placed.
func DelaysPods(b Backend) bool {
	_, ok := b.(Volcano)
	return ok
}

// NotInstalled is the message of a job whose backend's group API the cluster does not serve.
func NotInstalled(b Backend) string {
	gvk := b.GroupKind()
	fix := "install it, or run kiln with another --gang-scheduler-name (none turns gang scheduling off)"
	if b.Name() == NameNative {
		fix = "enable the GenericWorkload feature gate and scheduling.k8s.io/v1beta1 on the apiserver and scheduler, or run kiln with another --gang-scheduler-name"
	}
	return fmt.Sprintf("gang scheduling with %s needs %s %s, which this cluster does not serve: %s; no pods are created meanwhile",
		b.Name(), strings.ToLower(gvk.Kind)+"s", gvk.GroupVersion(), fix)
}

// Waiting is the message of a group whose pods wait: "waiting for N pods to be schedulable
// together", and the scheduler's reason when it gave one.
func Waiting(minMember int32, reason string) string {
	msg := fmt.Sprintf("waiting for %d pods to be schedulable together", minMember)
	if reason = strings.TrimSpace(reason); reason != "" {
		msg += ": " + reason
	}
	return msg
}

func setAnnotation(t *corev1.PodTemplateSpec, k, v string) {
	if t.Annotations == nil {
		t.Annotations = map[string]string{}
	}
	t.Annotations[k] = v
}

func setLabel(t *corev1.PodTemplateSpec, k, v string) {
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Labels[k] = v
}

// sortedNames lists a resource list's names in order, for stable messages.
func sortedNames(l corev1.ResourceList) []string {
	var out []string
	for n := range l {
		out = append(out, string(n))
	}
	slices.Sort(out)
	return out
}
