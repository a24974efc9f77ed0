// Package framework defines what a training framework declares to the replica-job engine: its
// kind, replica types, default container and port, the environment that tells each replica about
// the cluster, and the rule that says when a job is running or has succeeded. The engine knows
// nothing else about TensorFlow, PyTorch, XGBoost, JAX, Paddle or MPI.
package framework

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
)

// Job is a kubeflow.org/v1 training job as the engine and frameworks see it.
type Job interface {
	client.Object
	kubeflowv1.Job
}

// Framework is one kind of training job. Every field is required unless it says otherwise.
type Framework struct {
	// Kind is the API kind, e.g. "TFJob". Condition reasons are "<Kind><Reason>".
	Kind string
	// Name is the framework label of metrics, e.g. "tensorflow".
	Name string
	// ControllerName is the value of the training.kubeflow.org/operator-name label.
	ControllerName string
	// ReplicaSpecsField is the JSON name of the spec's replica-spec map, e.g. "tfReplicaSpecs".
	ReplicaSpecsField string
	// ReplicaTypes lists every valid replica type in its canonical spelling, in the fixed order
	// in which the engine evaluates them.
	ReplicaTypes []kubeflowv1.ReplicaType
	// DefaultContainer is the container that receives the default port and whose exit code decides
	// an ExitCode restart; every replica must have one. Empty: the first container is, whatever
	// its name (MPI).
	DefaultContainer string
	// DefaultPortName and DefaultPort are added to the default container when it has no port of
	// that name (none when DefaultPortName is empty); the headless services expose the default
	// container's ports.
	DefaultPortName string
	DefaultPort     int32
	// DefaultRestartPolicy applies to replica specs that leave restartPolicy empty.
	DefaultRestartPolicy kubeflowv1.RestartPolicy
	// ScaleSelector sets replicaStatuses[*].selector, which the scale subresource reads.
	ScaleSelector bool
	// MaxReplicas is the most pods a job of this kind may have, its replica types together; 0
	// means DefaultMaxReplicas. A kind whose every pod lists every replica (TF_CONFIG) sets it
	// lower, and says why in MaxReplicasWhy, which the refusal quotes. Optional.
	MaxReplicas    int32
	MaxReplicasWhy string

	// NewJob returns an empty job of this kind; NewJobList an empty list.
	NewJob     func() Job
	NewJobList func() client.ObjectList

	// Default sets kind-specific defaults after the common ones. Optional.
	Default func(job Job)
	// Validate checks the kind's own rules on a defaulted job; specs is the path of its replica-spec
	// map. It returns errors and warnings. Optional.
	Validate func(job Job, specs *field.Path) (field.ErrorList, []string)
	// SetClusterSpec adds to the pod template of replica (rtype, index) what tells it about the
	// rest of the job: environment variables, init containers. It must be a pure function.
	SetClusterSpec func(job Job, template *corev1.PodTemplateSpec, rtype kubeflowv1.ReplicaType, index int) error
	// PodName names the pod and service of replica (rtype, index). Optional; the default is
	// ReplicaName's "<job>-<lowercase type>-<index>".
	PodName func(job Job, rtype kubeflowv1.ReplicaType, index int) string
	// RunsAsJob says whether the replicas of rtype each run as a batch/v1 Job of one pod at a
	// time, named and labelled as the replica's pod would be, its template that pod's (MPI's
	// launcher for a job written at mpi-operator's API). The Job retries its pod under the job's
	// backoffLimit and carries its activeDeadlineSeconds and ttlSecondsAfterFinished; the engine
	// reads the replica's state from the Job and its pods. Optional; nil means none does.
	RunsAsJob func(job Job, rtype kubeflowv1.ReplicaType) bool
	// Services says whether the job's replicas get headless services. Optional; nil means they
	// do. Without them a replica's retry count rides on its pods (see the engine's
	// AnnotationRestarts).
	Services func(job Job) bool
	// IsMasterRole says whether replica (rtype, index) gets the job-role=master label.
	IsMasterRole func(job Job, rtype kubeflowv1.ReplicaType, index int) bool
	// WaitsFor says whether the pods of rtype are created only once every pod of another replica
	// type is Ready, and of which: MPI's launcher under WaitForWorkersReady waits for the workers.
	// Optional.
	WaitsFor func(job Job, rtype kubeflowv1.ReplicaType) (kubeflowv1.ReplicaType, bool)
	// Outcome applies the framework's success and running rules to the replicas seen now.
	Outcome func(job Job, replicas Replicas) Outcome
	// IgnoresFailures says whether failed pods of rtype leave the job running (TensorFlow's
	// dynamic workers). Optional.
	IgnoresFailures func(job Job, rtype kubeflowv1.ReplicaType) bool
	// FailedMessage is the Failed condition's message when n pods of rtype failed. Optional; the
	// default is "<Kind> <name> is failed because <n> <rtype> replica(s) failed.".
	FailedMessage func(job Job, rtype kubeflowv1.ReplicaType, n int32) string
	// Extras are the objects a job needs besides its pods and services (PyTorch's elastic HPA,
	// MPI's hostfile ConfigMap), built purely from the job and its State. The engine server-side
	// applies the wanted ones, owned by the job, whenever what it built differs from what it last
	// applied, and deletes the unwanted ones by name. Optional.
	Extras func(job Job, state State) []Extra
	// ExtraKinds are the kinds of the Extras, watched (their metadata, by the operator-name label)
	// so that one deleted while its job runs is made again. Optional.
	ExtraKinds []schema.GroupVersionKind
	// Secrets are created once per job, before its pods, and never read, updated or deleted by
	// kiln (they go with the job, which owns them): key material kiln needs no right to read
	// back. Built when they are to be created; an existing one of the same name is taken as
	// created. Optional.
	Secrets func(job Job) ([]*corev1.Secret, error)
}

// JobReplica says whether the replicas of rtype run as batch Jobs (RunsAsJob).
func (fw Framework) JobReplica(job Job, rtype kubeflowv1.ReplicaType) bool {
	return fw.RunsAsJob != nil && fw.RunsAsJob(job, rtype)
}

// DefaultMaxReplicas is the most pods a job may have unless its framework says fewer: above the
// largest training runs there are (a few thousand nodes), below what one reconcile can build
// and the apiserver can hold (docs/limits.md has the measured memory at this limit).
const DefaultMaxReplicas = 10000

// ReplicaLimit is the most pods a job of fw's kind may have.
func (fw Framework) ReplicaLimit() int32 {
	if fw.MaxReplicas > 0 {
		return fw.MaxReplicas
	}
	return DefaultMaxReplicas
}

// State is what the engine saw of a job, beyond its spec, when it builds the job's extras.
type State struct {
	// Active says whether the job runs: neither suspended nor finished.
	Active bool
	// Running lists, by replica type, the indexes of the pods in phase Running, ascending.
	Running map[kubeflowv1.ReplicaType][]int
	// Existing lists, by replica type, the indexes whose pod exists and is the job's own (it
	// controls it), in any phase, ascending: a pod of a replica's name that another owner made
	// is not among them.
	Existing map[kubeflowv1.ReplicaType][]int
}

// Extra is one object of Framework.Extras: Object is applied when Wanted, deleted otherwise.
type Extra struct {
	Object client.Object
	Wanted bool
}

// ReplicaCount is what the engine saw of one replica type's pods in this reconcile.
type ReplicaCount struct {
	// Replicas is the desired number of pods.
	Replicas int32
	// Active, Succeeded and Failed count pods by phase.
	Active, Succeeded, Failed int32
	// Index0Succeeded is true when the pod of index 0 succeeded and its default container exited 0.
	Index0Succeeded bool
}

// Replicas maps each replica type of the job's spec to what was seen of it.
type Replicas map[kubeflowv1.ReplicaType]ReplicaCount

// Outcome is a framework's verdict on a job that has not failed.
type Outcome struct {
	// Succeeded ends the job successfully; Message is the Succeeded condition's message.
	Succeeded bool
	// Running means the replicas that drive the job are running; Message is the Running
	// condition's message.
	Running bool
	Message string
}
