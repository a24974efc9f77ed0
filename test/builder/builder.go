// Package builder makes kubeflow.org/v1 jobs and PyJobs for tests:
//
//	builder.TFJob("dist", ns).Replicas("Chief", 1).Replicas("Worker", 4).BackoffLimit(2).Obj()
package builder

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	kubeflowv2beta1 "github.com/kiln-ml/kiln/api/kubeflow.org/v2beta1"
	"github.com/kiln-ml/kiln/internal/framework"
)

// Image is the image of every container the builder makes.
const Image = "kiln.dev/test-trainer:1"

// Job builds a training job of any kind.
type Job struct {
	obj       framework.Job
	container string
}

// TFJob starts a TFJob.
func TFJob(name, ns string) *Job {
	return &Job{obj: &kubeflowv1.TFJob{ObjectMeta: meta(name, ns)}, container: "tensorflow"}
}

// PyTorchJob starts a PyTorchJob.
func PyTorchJob(name, ns string) *Job {
	return &Job{obj: &kubeflowv1.PyTorchJob{ObjectMeta: meta(name, ns)}, container: "pytorch"}
}

// JAXJob starts a JAXJob.
func JAXJob(name, ns string) *Job {
	return &Job{obj: &kubeflowv1.JAXJob{ObjectMeta: meta(name, ns)}, container: "jax"}
}

// PaddleJob starts a PaddleJob.
func PaddleJob(name, ns string) *Job {
	return &Job{obj: &kubeflowv1.PaddleJob{ObjectMeta: meta(name, ns)}, container: "paddle"}
}

// MPIJob starts an MPIJob (its containers are named mpi; MPI uses the first whatever its name).
func MPIJob(name, ns string) *Job {
	return &Job{obj: &kubeflowv1.MPIJob{ObjectMeta: meta(name, ns)}, container: "mpi"}
}

// XGBoostJob starts an XGBoostJob.
func XGBoostJob(name, ns string) *Job {
	return &Job{obj: &kubeflowv1.XGBoostJob{ObjectMeta: meta(name, ns)}, container: "xgboost"}
}

func meta(name, ns string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }

// Replicas adds (or replaces) a replica type with n pods of one container named as the kind's
// default container, leaving restartPolicy to the kind's default.
func (b *Job) Replicas(rtype kubeflowv1.ReplicaType, n int32) *Job {
	specs := b.obj.GetReplicaSpecs()
	if specs == nil {
		specs = map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{}
	}
	specs[rtype] = &kubeflowv1.ReplicaSpec{
		Replicas: &n,
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: b.container, Image: Image}},
		}},
	}
	b.obj.SetReplicaSpecs(specs)
	return b
}

// RestartPolicy sets the restart policy of a replica type added before.
func (b *Job) RestartPolicy(rtype kubeflowv1.ReplicaType, p kubeflowv1.RestartPolicy) *Job {
	b.obj.GetReplicaSpecs()[rtype].RestartPolicy = p
	return b
}

// Template edits the pod template of a replica type added before.
func (b *Job) Template(rtype kubeflowv1.ReplicaType, edit func(*corev1.PodTemplateSpec)) *Job {
	edit(&b.obj.GetReplicaSpecs()[rtype].Template)
	return b
}

// CleanPodPolicy sets runPolicy.cleanPodPolicy.
func (b *Job) CleanPodPolicy(p kubeflowv1.CleanPodPolicy) *Job {
	b.obj.GetRunPolicy().CleanPodPolicy = &p
	return b
}

// BackoffLimit sets runPolicy.backoffLimit.
func (b *Job) BackoffLimit(n int32) *Job {
	b.obj.GetRunPolicy().BackoffLimit = &n
	return b
}

// ActiveDeadlineSeconds sets runPolicy.activeDeadlineSeconds.
func (b *Job) ActiveDeadlineSeconds(s int64) *Job {
	b.obj.GetRunPolicy().ActiveDeadlineSeconds = &s
	return b
}

// TTLSecondsAfterFinished sets runPolicy.ttlSecondsAfterFinished.
func (b *Job) TTLSecondsAfterFinished(s int32) *Job {
	b.obj.GetRunPolicy().TTLSecondsAfterFinished = &s
	return b
}

// Suspend sets runPolicy.suspend.
func (b *Job) Suspend(s bool) *Job {
	b.obj.GetRunPolicy().Suspend = &s
	return b
}

// ManagedBy sets runPolicy.managedBy.
func (b *Job) ManagedBy(m string) *Job {
	b.obj.GetRunPolicy().ManagedBy = &m
	return b
}

// Edit applies any change the other methods do not offer.
func (b *Job) Edit(edit func(framework.Job)) *Job {
	edit(b.obj)
	return b
}

// Obj returns the job.
func (b *Job) Obj() framework.Job { return b.obj }

// Annotate sets an annotation on the pod template of a replica type added before; on the local
// cluster kiln.dev/simulate-duration and kiln.dev/simulate-exit-code play the training.
func (b *Job) Annotate(rtype kubeflowv1.ReplicaType, key, value string) *Job {
	t := &b.obj.GetReplicaSpecs()[rtype].Template
	if t.Annotations == nil {
		t.Annotations = map[string]string{}
	}
	t.Annotations[key] = value
	return b
}

// Restricted writes every replica type added before as Pod Security "restricted" asks: a
// non-root user and the runtime's seccomp profile for the pod, no privilege escalation and no
// capabilities for its containers.
func (b *Job) Restricted() *Job {
	for _, spec := range b.obj.GetReplicaSpecs() {
		spec.Template.Spec.SecurityContext = RestrictedPod()
		for i := range spec.Template.Spec.Containers {
			spec.Template.Spec.Containers[i].SecurityContext = RestrictedContainer()
		}
	}
	return b
}

// RestrictedPod is a pod securityContext that Pod Security "restricted" admits.
func RestrictedPod() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
}

// RestrictedContainer is a container securityContext that Pod Security "restricted" admits.
func RestrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
}

// MPIJobV2beta1 is an mpi-operator (kubeflow.org/v2beta1) MPIJob of one launcher and n workers
// with the builder's containers, written as mpi-operator's examples write them.
func MPIJobV2beta1(name, ns string, workers int32) *kubeflowv2beta1.MPIJob {
	v1 := MPIJob(name, ns).Replicas(kubeflowv1.MPIJobReplicaTypeLauncher, 1).Replicas(kubeflowv1.MPIJobReplicaTypeWorker, workers).Obj()
	return &kubeflowv2beta1.MPIJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubeflowv2beta1.GroupVersion.String(), Kind: kubeflowv1.MPIJobKind},
		ObjectMeta: meta(name, ns),
		Spec:       kubeflowv2beta1.MPIJobSpec{SlotsPerWorker: ptr.To[int32](1), MPIReplicaSpecs: v1.GetReplicaSpecs()},
	}
}
