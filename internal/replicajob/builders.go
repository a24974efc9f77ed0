package replicajob

import (
	"cmp"
	"fmt"
	"maps"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
)

// Annotations on a replica's service that carry its retry history across pod recreations, so
// that backoffLimit survives operator restarts (the pods that failed are gone). A kind without
// services carries the count on the pod instead: its replacement is created with the count so
// far (kept in memory between the failed pod's deletion and the replacement's creation).
const (
	// AnnotationRestarts counts the retries of this replica index: recreated pods plus the
	// in-place container restarts of pods since replaced.
	AnnotationRestarts = "kiln.dev/restarts"
	// AnnotationRestartedPod is the UID of the last pod counted into AnnotationRestarts; it makes
	// counting a failed pod idempotent.
	AnnotationRestartedPod = "kiln.dev/restarted-pod"
)

// jobLabels select every pod and service of a job.
func jobLabels(fw framework.Framework, job framework.Job) map[string]string {
	return map[string]string{
		kubeflowv1.LabelOperatorName: fw.ControllerName,
		kubeflowv1.LabelJobName:      strings.ReplaceAll(job.GetName(), "/", "-"),
	}
}

// replicaLabels select the pod and service of one replica: the job's labels plus type and index.
func replicaLabels(fw framework.Framework, job framework.Job, rtype kubeflowv1.ReplicaType, index int) map[string]string {
	l := jobLabels(fw, job)
	l[kubeflowv1.LabelReplicaType] = strings.ToLower(string(rtype))
	l[kubeflowv1.LabelReplicaIndex] = strconv.Itoa(index)
	return l
}

// typeSelector is the selector of one replica type's pods, which the scale subresource reports.
func typeSelector(fw framework.Framework, job framework.Job, rtype kubeflowv1.ReplicaType) string {
	l := jobLabels(fw, job)
	l[kubeflowv1.LabelReplicaType] = strings.ToLower(string(rtype))
	return labels.FormatLabels(l)
}

func controllerRef(fw framework.Framework, job framework.Job) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{
		APIVersion: kubeflowv1.GroupVersion.String(), Kind: fw.Kind,
		Name: job.GetName(), UID: job.GetUID(),
		Controller: &yes, BlockOwnerDeletion: &yes,
	}
}

// desiredPod is the pod of replica (rtype, index): the replica template with the job's labels
// written over the template's, the framework's cluster environment, and the replica's restart
// policy (ExitCode restarts are kiln's, so the kubelet is told Never).
// AnnotationReadinessAwaited marks the pods of a replica type that another waits to be ready
// (Framework.WaitsFor): the engine's cache keeps their Ready condition, and only theirs, so a
// pod turning ready costs a reconcile only where that is read.
const AnnotationReadinessAwaited = "kiln.dev/readiness-awaited"

// awaited says whether another replica type of the job waits for rtype's pods to be ready.
func awaited(fw framework.Framework, job framework.Job, rtype kubeflowv1.ReplicaType) bool {
	if fw.WaitsFor == nil {
		return false
	}
	for _, other := range fw.ReplicaTypes {
		if of, waits := fw.WaitsFor(job, other); waits && of == rtype {
			return true
		}
	}
	return false
}

func desiredPod(fw framework.Framework, ps plugins, job framework.Job, rtype kubeflowv1.ReplicaType, index int) (*corev1.Pod, error) {
	spec := job.GetReplicaSpecs()[rtype]
	t := spec.Template.DeepCopy()
	if err := fw.SetClusterSpec(job, t, rtype, index); err != nil {
		return nil, fmt.Errorf("building pod %s: %w", fw.PodNameOf(job, rtype, index), err)
	}
	ps.pod(fw, job, t, rtype, index)
	podLabels := make(map[string]string, len(t.Labels)+5)
	for k, v := range t.Labels {
		podLabels[k] = v
	}
	for k, v := range replicaLabels(fw, job, rtype, index) {
		podLabels[k] = v
	}
	if fw.IsMasterRole(job, rtype, index) {
		podLabels[kubeflowv1.LabelJobRole] = kubeflowv1.JobRoleMaster
	}
	if awaited(fw, job, rtype) {
		t.Annotations = maps.Clone(t.Annotations)
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations[AnnotationReadinessAwaited] = "true"
	}
	t.Spec.RestartPolicy = corev1.RestartPolicy(spec.RestartPolicy)
	if spec.RestartPolicy == kubeflowv1.RestartPolicyExitCode {
		t.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            fw.PodNameOf(job, rtype, index),
			Namespace:       job.GetNamespace(),
			Labels:          podLabels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{controllerRef(fw, job)},
		},
		Spec: t.Spec,
	}, nil
}

// desiredJob is the batch Job of replica (rtype, index) of a type that runs as one
// (Framework.RunsAsJob): named and labelled as the replica's pod would be, and that pod its
// template. The Job retries the pod under the job's backoffLimit (a failed pod is replaced once it
// has failed, not while it terminates), stops it at its activeDeadlineSeconds and is deleted its
// ttlSecondsAfterFinished after it finished, as mpi-operator's launcher Job. The restart policy is
// the Job's to carry out: under ExitCode the pod is never restarted in place and an exit code
// below 128 (the program's own verdict) fails the Job instead of retrying it; Always, which a Job
// cannot run, restarts the container in place as OnFailure does.
func desiredJob(fw framework.Framework, ps plugins, job framework.Job, rtype kubeflowv1.ReplicaType, index int) (*batchv1.Job, error) {
	pod, err := desiredPod(fw, ps, job, rtype, index)
	if err != nil {
		return nil, err
	}
	rp := job.GetRunPolicy()
	spec := batchv1.JobSpec{
		BackoffLimit: rp.BackoffLimit, ActiveDeadlineSeconds: rp.ActiveDeadlineSeconds, TTLSecondsAfterFinished: rp.TTLSecondsAfterFinished,
		PodReplacementPolicy: ptr.To(batchv1.Failed),
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels, Annotations: pod.Annotations, Finalizers: pod.Finalizers},
			Spec:       pod.Spec,
		},
	}
	switch job.GetReplicaSpecs()[rtype].RestartPolicy {
	case kubeflowv1.RestartPolicyAlways:
		spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	case kubeflowv1.RestartPolicyExitCode:
		spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
			Action: batchv1.PodFailurePolicyActionFailJob,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
				ContainerName: ptr.To(mainContainer(fw, job, rtype)), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: programExitCodes(),
			},
		}}}
	}
	// Owned through the version the job was written at (mpi-operator's launcher Job names its
	// MPIJob at v2beta1): Kueue finds a Job's managed ancestor only by the exact group, version
	// and kind of its owner reference, and would otherwise queue the launcher Job on its own
	// (manageJobsWithoutQueueName, a default LocalQueue) and hold it suspended. The annotation is
	// the user's to write too: only a version the CRDs serve names the owner.
	ref := controllerRef(fw, job)
	if v := job.GetAnnotations()[kubeflowv1.AnnotationAPIVersion]; v == kubeflowv1.APIVersionV2beta1 {
		ref.APIVersion = v
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, Labels: pod.Labels, OwnerReferences: []metav1.OwnerReference{ref}},
		Spec:       spec,
	}, nil
}

// programExitCodes are the exit codes a program gives of itself, 1 to 127: above, a signal killed it.
func programExitCodes() []int32 {
	codes := make([]int32, 0, 127)
	for code := int32(1); code < 128; code++ {
		codes = append(codes, code)
	}
	return codes
}

// desiredService is the headless service of replica (rtype, index). It exposes every port of the
// default container in the container's order (DECISIONS #11).
func desiredService(fw framework.Framework, job framework.Job, rtype kubeflowv1.ReplicaType, index int) *corev1.Service {
	var ports []corev1.ServicePort
	podSpec := &job.GetReplicaSpecs()[rtype].Template.Spec
	if i := defaultContainerIndex(fw, podSpec); i >= 0 {
		ports = servicePorts(podSpec.Containers[i].Ports)
	}
	l := replicaLabels(fw, job, rtype, index)
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            fw.PodNameOf(job, rtype, index),
			Namespace:       job.GetNamespace(),
			Labels:          l,
			OwnerReferences: []metav1.OwnerReference{controllerRef(fw, job)},
		},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: l, Ports: ports},
	}
}

// servicePorts are the ports of a replica's headless service: every port of its default
// container, with its protocol. A Service with more than one port needs a name on each (Kubeflow
// copies them as they are, and the apiserver refuses the Service of a template with an unnamed
// port beside the framework's): an unnamed port is named "<protocol>-<port>", e.g. "tcp-6006".
// A port whose name or number and protocol another already has is left out, as the apiserver
// would refuse it too, and so is an unnamed port whose generated name the template gives another.
func servicePorts(ports []corev1.ContainerPort) []corev1.ServicePort {
	out := make([]corev1.ServicePort, 0, len(ports))
	named := map[string]bool{} // the names the template gives: a generated name never takes one
	for _, p := range ports {
		named[p.Name] = p.Name != ""
	}
	names := map[string]bool{}
	numbers := map[corev1.ServicePort]bool{}
	for _, p := range ports {
		proto := cmp.Or(p.Protocol, corev1.ProtocolTCP)
		name := p.Name
		if name == "" {
			if name = strings.ToLower(string(proto)) + "-" + strconv.Itoa(int(p.ContainerPort)); named[name] {
				continue
			}
		}
		number := corev1.ServicePort{Port: p.ContainerPort, Protocol: proto}
		if names[name] || numbers[number] {
			continue
		}
		names[name], numbers[number] = true, true
		out = append(out, corev1.ServicePort{Name: name, Port: p.ContainerPort, Protocol: proto})
	}
	return out
}

// defaultContainerIndex is the container named like the framework's default container, else the
// first one (which then received the default port), or -1 for a template without containers.
func defaultContainerIndex(fw framework.Framework, spec *corev1.PodSpec) int {
	for i, c := range spec.Containers {
		if fw.DefaultContainer != "" && c.Name == fw.DefaultContainer {
			return i
		}
	}
	if len(spec.Containers) > 0 {
		return 0
	}
	return -1
}

// Children are the pods and services kiln creates for a defaulted job, in the framework's replica
// order: what the benchmark's floor creates without a controller.
func Children(fw framework.Framework, job framework.Job) ([]*corev1.Pod, []*corev1.Service, error) {
	var pods []*corev1.Pod
	var services []*corev1.Service
	specs := job.GetReplicaSpecs()
	for _, rtype := range fw.ReplicaTypes {
		for index := range int(framework.NumReplicas(specs[rtype])) {
			pod, err := desiredPod(fw, nil, job, rtype, index)
			if err != nil {
				return nil, nil, err
			}
			pods = append(pods, pod)
			if fw.HasServices(job) {
				services = append(services, desiredService(fw, job, rtype, index))
			}
		}
	}
	return pods, services, nil
}
