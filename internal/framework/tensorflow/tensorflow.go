// Package tensorflow is the TFJob framework: TF_CONFIG, the chief-or-worker-0 success rule and
// dynamic workers.
package tensorflow

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
)

// What the engine does with TFJobs: read and watch them, delete them (TTL), write their status.
// +kubebuilder:rbac:groups=kubeflow.org,resources=tfjobs,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=kubeflow.org,resources=tfjobs/status,verbs=get;patch
// +kubebuilder:rbac:groups=kubeflow.org,resources=tfjobs/finalizers,verbs=update

const (
	// ContainerName is the container that gets TF_CONFIG and the default port.
	ContainerName = "tensorflow"
	// PortName and Port are the default port of the tensorflow container.
	PortName = "tfjob-port"
	Port     = 2222
	// MaxReplicas bounds a TFJob's replicas: every pod's TF_CONFIG lists every replica, so the
	// pods grow with the job and their sum with its square.
	MaxReplicas = 1000
)

// Config holds the operator-level settings of the TensorFlow framework.
type Config struct {
	// ClusterDomain, when set, is appended to the service hosts in TF_CONFIG
	// ("<svc>.<ns>.svc.<domain>"); Kubeflow reads it from CUSTOM_CLUSTER_DOMAIN.
	ClusterDomain string
}

// New returns the TFJob framework.
func New(cfg Config) framework.Framework {
	return framework.Framework{
		Kind:              kubeflowv1.TFJobKind,
		Name:              "tensorflow",
		ControllerName:    "tfjob-controller",
		ReplicaSpecsField: "tfReplicaSpecs",
		MaxReplicas:       MaxReplicas,
		MaxReplicasWhy:    "every pod's TF_CONFIG lists every replica",
		ReplicaTypes: []kubeflowv1.ReplicaType{
			kubeflowv1.TFJobReplicaTypeChief, kubeflowv1.TFJobReplicaTypeEval, kubeflowv1.TFJobReplicaTypeMaster,
			kubeflowv1.TFJobReplicaTypePS, kubeflowv1.TFJobReplicaTypeWorker,
		},
		DefaultContainer:     ContainerName,
		DefaultPortName:      PortName,
		DefaultPort:          Port,
		DefaultRestartPolicy: kubeflowv1.RestartPolicyNever,
		NewJob:               func() framework.Job { return &kubeflowv1.TFJob{} },
		NewJobList:           func() client.ObjectList { return &kubeflowv1.TFJobList{} },
		Validate: func(job framework.Job, specs *field.Path) (field.ErrorList, []string) {
			return validate(cfg, tfJob(job), specs), nil
		},
		SetClusterSpec: func(job framework.Job, t *corev1.PodTemplateSpec, rtype kubeflowv1.ReplicaType, index int) error {
			return setClusterSpec(cfg, tfJob(job), t, rtype, index)
		},
		IsMasterRole: func(job framework.Job, rtype kubeflowv1.ReplicaType, index int) bool {
			specs := job.GetReplicaSpecs()
			if hasChief(specs) {
				return rtype == kubeflowv1.TFJobReplicaTypeChief || rtype == kubeflowv1.TFJobReplicaTypeMaster
			}
			return rtype == kubeflowv1.TFJobReplicaTypeWorker && index == 0
		},
		Outcome: func(job framework.Job, replicas framework.Replicas) framework.Outcome {
			return outcome(tfJob(job), replicas)
		},
		IgnoresFailures: func(job framework.Job, rtype kubeflowv1.ReplicaType) bool {
			return tfJob(job).Spec.EnableDynamicWorker && rtype == kubeflowv1.TFJobReplicaTypeWorker
		},
		FailedMessage: func(job framework.Job, rtype kubeflowv1.ReplicaType, n int32) string {
			return fmt.Sprintf("TFJob %s/%s has failed because %d %s replica(s) failed.", job.GetNamespace(), job.GetName(), n, rtype)
		},
	}
}

func tfJob(job framework.Job) *kubeflowv1.TFJob { return job.(*kubeflowv1.TFJob) }

func hasChief(specs map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec) bool {
	return specs[kubeflowv1.TFJobReplicaTypeChief] != nil || specs[kubeflowv1.TFJobReplicaTypeMaster] != nil
}

// outcome: a chief (or legacy master) drives the job when there is one; otherwise the workers do,
// and by default worker 0 completing ends the job.
func outcome(job *kubeflowv1.TFJob, replicas framework.Replicas) framework.Outcome {
	key := job.Namespace + "/" + job.Name
	running := framework.Outcome{Running: true, Message: fmt.Sprintf("TFJob %s is running.", key)}
	succeeded := framework.Outcome{Succeeded: true, Message: fmt.Sprintf("TFJob %s successfully completed.", key)}
	for _, chief := range []kubeflowv1.ReplicaType{kubeflowv1.TFJobReplicaTypeChief, kubeflowv1.TFJobReplicaTypeMaster} {
		c, ok := replicas[chief]
		if !ok {
			continue
		}
		switch {
		case c.Replicas > 0 && c.Succeeded >= c.Replicas:
			return succeeded
		case c.Active > 0:
			return running
		}
		return framework.Outcome{}
	}
	w, ok := replicas[kubeflowv1.TFJobReplicaTypeWorker]
	if !ok {
		return framework.Outcome{}
	}
	allWorkers := job.Spec.SuccessPolicy != nil && *job.Spec.SuccessPolicy == kubeflowv1.SuccessPolicyAllWorkers
	switch {
	case w.Replicas > 0 && w.Succeeded >= w.Replicas:
		return succeeded
	case !allWorkers && w.Index0Succeeded:
		return succeeded
	case w.Active > 0:
		return running
	}
	return framework.Outcome{}
}
