// Package pytorch is the PyTorchJob framework: torchrun's environment (MASTER_*, WORLD_SIZE,
// RANK, PET_*), elastic rendezvous, the wait-for-master init container and the master-or-workers
// success rule.
package pytorch

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/version"
)

// What the engine does with PyTorchJobs: read and watch them, delete them (TTL), write their status.
// +kubebuilder:rbac:groups=kubeflow.org,resources=pytorchjobs,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=kubeflow.org,resources=pytorchjobs/status,verbs=get;patch
// +kubebuilder:rbac:groups=kubeflow.org,resources=pytorchjobs/finalizers,verbs=update
// The elastic HPA of an elastic job (an extra: read before it is written, watched so that a deleted one
// comes back).
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;patch;delete

const (
	// ContainerName is the container that gets the default port.
	ContainerName = "pytorch"
	// PortName and Port are the default port of the pytorch container.
	PortName = "pytorchjob-port"
	Port     = 23456
	// DefaultInitContainerMaxTries is how many times, 2 s apart, a worker looks up the master.
	DefaultInitContainerMaxTries = 100
)

// Config holds the operator-level settings of the PyTorch framework.
type Config struct {
	// InitContainerImage is the image of the workers' init-pytorch container: kiln's own, whose
	// `kiln wait-for` waits for the master (default: this build's, version.Image()).
	InitContainerImage string
	// InitContainerMaxTries bounds the init container's wait for the master's DNS name.
	InitContainerMaxTries int
}

// New returns the PyTorchJob framework.
func New(cfg Config) framework.Framework {
	if cfg.InitContainerImage == "" {
		cfg.InitContainerImage = version.Image()
	}
	if cfg.InitContainerMaxTries <= 0 {
		cfg.InitContainerMaxTries = DefaultInitContainerMaxTries
	}
	return framework.Framework{
		Kind:                 kubeflowv1.PyTorchJobKind,
		Name:                 "pytorch",
		ControllerName:       "pytorchjob-controller",
		ReplicaSpecsField:    "pytorchReplicaSpecs",
		ReplicaTypes:         []kubeflowv1.ReplicaType{kubeflowv1.PyTorchJobReplicaTypeMaster, kubeflowv1.PyTorchJobReplicaTypeWorker},
		DefaultContainer:     ContainerName,
		DefaultPortName:      PortName,
		DefaultPort:          Port,
		DefaultRestartPolicy: kubeflowv1.RestartPolicyOnFailure,
		ScaleSelector:        true,
		NewJob:               func() framework.Job { return &kubeflowv1.PyTorchJob{} },
		NewJobList:           func() client.ObjectList { return &kubeflowv1.PyTorchJobList{} },
		Default:              func(job framework.Job) { setDefaults(pyTorchJob(job)) },
		Validate: func(job framework.Job, specs *field.Path) (field.ErrorList, []string) {
			return validate(pyTorchJob(job), specs)
		},
		SetClusterSpec: func(job framework.Job, t *corev1.PodTemplateSpec, rtype kubeflowv1.ReplicaType, index int) error {
			return setClusterSpec(cfg, pyTorchJob(job), t, rtype, index)
		},
		IsMasterRole: func(job framework.Job, rtype kubeflowv1.ReplicaType, index int) bool {
			if hasMaster(pyTorchJob(job)) {
				return rtype == kubeflowv1.PyTorchJobReplicaTypeMaster
			}
			return rtype == kubeflowv1.PyTorchJobReplicaTypeWorker && index == 0
		},
		Outcome: func(job framework.Job, replicas framework.Replicas) framework.Outcome {
			return outcome(pyTorchJob(job), replicas)
		},
		Extras:     func(job framework.Job, s framework.State) []framework.Extra { return extras(pyTorchJob(job), s.Active) },
		ExtraKinds: []schema.GroupVersionKind{autoscalingv2.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler")},
	}
}

func pyTorchJob(job framework.Job) *kubeflowv1.PyTorchJob { return job.(*kubeflowv1.PyTorchJob) }

func hasMaster(job *kubeflowv1.PyTorchJob) bool {
	return job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster] != nil
}

// setDefaults fills the elastic bounds from each other (or from the Worker replicas) and
// nprocPerNode with "auto", as Kubeflow does.
func setDefaults(job *kubeflowv1.PyTorchJob) {
	if ep := job.Spec.ElasticPolicy; ep != nil {
		framework.DefaultElasticBounds(&ep.MinReplicas, &ep.MaxReplicas, framework.NumReplicas(job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker]))
	}
	if job.Spec.NprocPerNode == nil && (job.Spec.ElasticPolicy == nil || job.Spec.ElasticPolicy.NProcPerNode == nil) {
		auto := "auto"
		job.Spec.NprocPerNode = &auto
	}
}

// outcome: the master drives the job when there is one; otherwise every worker must succeed,
// or, for an elastic job, any one of them.
func outcome(job *kubeflowv1.PyTorchJob, replicas framework.Replicas) framework.Outcome {
	return framework.MasterOrWorkers(kubeflowv1.PyTorchJobKind, job, replicas, job.Spec.ElasticPolicy != nil)
}
