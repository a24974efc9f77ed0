package trainjob

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
)

// The runtime template's marks and names a TrainJob's JobSet is built around (Trainer's).
const (
	// LabelAncestorStep on a replicated job's Job template says which step it is.
	LabelAncestorStep = "trainer.kubeflow.org/trainjob-ancestor-step"
	StepTrainer       = "trainer"
	StepDataset       = "dataset-initializer"
	StepModel         = "model-initializer"
	// ContainerNode is the trainer step's training container.
	ContainerNode = "node"
	// ReplicatedJobNode is the replicated job of the training nodes (the endpoints name it).
	ReplicatedJobNode = "node"
	// EnvStorageURI tells an initializer where to fetch from.
	EnvStorageURI = "STORAGE_URI"
	// AnnotationSpecHash on the JobSet is the hash of the spec kiln built: a suspended JobSet whose
	// hash differs takes the new spec.
	AnnotationSpecHash = "trainer.kiln.dev/jobset-spec-hash"
)

// DesiredJobSet builds the TrainJob's JobSet from the runtime spec rt: the runtime's template,
// the TrainJob's patches, the trainer step's node count and container, the framework's
// variables and the initializers' sources. A TrainJob that cannot make a JobSet (a patch naming
// a replicated job the runtime lacks, a framework kiln does not run) comes back as the problem.
func DesiredJobSet(job *trainerv1alpha1.TrainJob, rt *trainerv1alpha1.TrainingRuntimeSpec) (*jobsetv1alpha2.JobSet, Problem) {
	fw, p := frameworkOf(rt)
	if p.Reason != "" {
		return nil, p
	}
	spec := rt.Template.Spec.DeepCopy()
	labels, annotations := copyMap(rt.Template.Labels), copyMap(rt.Template.Annotations)
	for i, patch := range job.Spec.RuntimePatches {
		if p := applyPatch(spec, patch, fmt.Sprintf("spec.runtimePatches[%d]", i), &labels, &annotations); p.Reason != "" {
			return nil, p
		}
	}
	nodes := numNodes(job, rt)
	fed := map[string]bool{} // the initializer steps given their source
	for i := range spec.ReplicatedJobs {
		rj := &spec.ReplicatedJobs[i]
		step := rj.Template.Labels[LabelAncestorStep]
		if step != "" {
			rj.Replicas = 1 // a step is one Job
		}
		count := ptr.Deref(rj.Template.Spec.Parallelism, 1)
		if n, ok := fw.nodeCount(rj.Name, step, nodes); ok {
			count = n
		}
		rj.Template.Spec.Parallelism, rj.Template.Spec.Completions = ptr.To(max(count, 1)), ptr.To(max(count, 1))
		switch step {
		case StepTrainer:
			trainer(job, rj)
		case StepDataset:
			if d := job.Spec.Initializer; d != nil && d.Dataset != nil {
				fed[StepDataset] = initializer(rj, StepDataset, d.Dataset.StorageUri, d.Dataset.Env, d.Dataset.SecretRef)
			}
		case StepModel:
			if m := job.Spec.Initializer; m != nil && m.Model != nil {
				fed[StepModel] = initializer(rj, StepModel, m.Model.StorageUri, m.Model.Env, m.Model.SecretRef)
			}
		}
	}
	if p := unfed(job, fed); p.Reason != "" {
		return nil, p
	}
	if p := fw.apply(job, rt, spec, nodes); p.Reason != "" {
		return nil, p
	}
	spec.Suspend = ptr.To(ptr.Deref(job.Spec.Suspend, false))
	js := &jobsetv1alpha2.JobSet{
		TypeMeta: metav1.TypeMeta{APIVersion: jobsetv1alpha2.GroupVersion.String(), Kind: "JobSet"},
		ObjectMeta: metav1.ObjectMeta{Name: job.Name, Namespace: job.Namespace, Labels: labels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{ownerRef(job)}},
		Spec: *spec,
	}
	if js.Annotations == nil {
		js.Annotations = map[string]string{}
	}
	js.Annotations[AnnotationSpecHash] = specHash(spec)
	return js, Problem{}
}

func ownerRef(job *trainerv1alpha1.TrainJob) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: trainerv1alpha1.GroupVersion.String(), Kind: trainerv1alpha1.TrainJobKind,
		Name: job.Name, UID: job.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// numNodes is the trainer step's node count: the TrainJob's, else the runtime's mlPolicy's (1
// when it gives none); 0, none, for a runtime without mlPolicy, whose trainer step then keeps its
// template's parallelism, as Trainer's does.
func numNodes(job *trainerv1alpha1.TrainJob, rt *trainerv1alpha1.TrainingRuntimeSpec) int32 {
	if t := job.Spec.Trainer; t != nil && t.NumNodes != nil {
		return *t.NumNodes
	}
	if rt.MLPolicy == nil {
		return 0
	}
	return ptr.Deref(rt.MLPolicy.NumNodes, 1)
}

// trainer puts the TrainJob's trainer on the step's "node" container.
func trainer(job *trainerv1alpha1.TrainJob, rj *jobsetv1alpha2.ReplicatedJob) {
	t := job.Spec.Trainer
	c := container(&rj.Template.Spec.Template.Spec, ContainerNode)
	if t == nil || c == nil {
		return
	}
	if t.Image != nil {
		c.Image = *t.Image
	}
	if t.Command != nil {
		c.Command = t.Command
	}
	if t.Args != nil {
		c.Args = t.Args
	}
	if r := t.ResourcesPerNode; r != nil {
		c.Resources.Limits = mergeResources(c.Resources.Limits, r.Limits)
		c.Resources.Requests = mergeResources(c.Resources.Requests, r.Requests)
		if len(r.Claims) > 0 {
			c.Resources.Claims = r.Claims
		}
	}
	c.Env = upsertEnv(c.Env, t.Env...)
}

// unfed: an initializer the TrainJob sets whose step the runtime lacks (the step, or its container
// of the step's name) is a problem, as Trainer refuses it, rather than a run without its data.
func unfed(job *trainerv1alpha1.TrainJob, fed map[string]bool) Problem {
	i := job.Spec.Initializer
	for _, in := range []struct {
		set         bool
		step, field string
	}{{i != nil && i.Dataset != nil, StepDataset, "spec.initializer.dataset"}, {i != nil && i.Model != nil, StepModel, "spec.initializer.model"}} {
		if in.set && !fed[in.step] {
			return Problem{Reason: ReasonInvalid, Field: in.field, Message: fmt.Sprintf(
				"%s is set, but runtime %s has no %s step (a replicated job labelled %s: %s, with a container %s) to run it: use a runtime that has one, or remove %s",
				in.field, job.Spec.RuntimeRef.Name, in.step, LabelAncestorStep, in.step, in.step, in.field)}
		}
	}
	return Problem{}
}

// initializer points an initializer step's container at its source; false when the step has no
// container of its name.
func initializer(rj *jobsetv1alpha2.ReplicatedJob, name string, uri *string, env []corev1.EnvVar, secret *corev1.LocalObjectReference) bool {
	c := container(&rj.Template.Spec.Template.Spec, name)
	if c == nil {
		return false
	}
	if uri != nil {
		c.Env = upsertEnv(c.Env, corev1.EnvVar{Name: EnvStorageURI, Value: *uri})
	}
	c.Env = upsertEnv(c.Env, env...)
	if secret != nil {
		c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: *secret}})
	}
	return true
}

// container is the pod's container (else init container) of that name, or nil.
func container(pod *corev1.PodSpec, name string) *corev1.Container {
	for i := range pod.Containers {
		if pod.Containers[i].Name == name {
			return &pod.Containers[i]
		}
	}
	for i := range pod.InitContainers {
		if pod.InitContainers[i].Name == name {
			return &pod.InitContainers[i]
		}
	}
	return nil
}

// upsertEnv sets each variable of add in env, replacing one of the same name in place.
func upsertEnv(env []corev1.EnvVar, add ...corev1.EnvVar) []corev1.EnvVar {
next:
	for _, a := range add {
		for i := range env {
			if env[i].Name == a.Name {
				env[i] = a
				continue next
			}
		}
		env = append(env, a)
	}
	return env
}

// upsertPort adds p unless the container has a port of its number.
func upsertPort(c *corev1.Container, p corev1.ContainerPort) {
	for _, q := range c.Ports {
		if q.ContainerPort == p.ContainerPort {
			return
		}
	}
	c.Ports = append(c.Ports, p)
}

func mergeResources(base, over corev1.ResourceList) corev1.ResourceList {
	if len(over) == 0 {
		return base
	}
	out := corev1.ResourceList{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// specHash is the hash of the spec kiln built, which tells a changed TrainJob (a new patch) from
// the defaults the apiserver and JobSet's webhook added to the JobSet.
func specHash(spec *jobsetv1alpha2.JobSetSpec) string {
	s := spec.DeepCopy()
	s.Suspend = nil // suspension is carried by itself
	b, _ := json.Marshal(s)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// podTemplate is the replicated job's pod template.
func podTemplate(rj *jobsetv1alpha2.ReplicatedJob) *corev1.PodTemplateSpec {
	return &rj.Template.Spec.Template
}
