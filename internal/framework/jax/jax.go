// Package jax is the JAXJob framework: jax.distributed's environment (COORDINATOR_ADDRESS and
// _PORT on worker 0, NUM_PROCESSES, PROCESS_ID) and the every-worker-succeeds rule.
package jax

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
)

// What the engine does with JAXJobs: read and watch them, delete them (TTL), write their status.
// +kubebuilder:rbac:groups=kubeflow.org,resources=jaxjobs,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=kubeflow.org,resources=jaxjobs/status,verbs=get;patch
// +kubebuilder:rbac:groups=kubeflow.org,resources=jaxjobs/finalizers,verbs=update

const (
	// ContainerName is the container that gets the default port.
	ContainerName = "jax"
	// PortName and Port are the default port of the jax container: the coordinator's.
	PortName = "jaxjob-port"
	Port     = 6666
)

// New returns the JAXJob framework.
func New() framework.Framework {
	return framework.Framework{
		Kind:                 kubeflowv1.JAXJobKind,
		Name:                 "jax",
		ControllerName:       "jaxjob-controller",
		ReplicaSpecsField:    "jaxReplicaSpecs",
		ReplicaTypes:         []kubeflowv1.ReplicaType{kubeflowv1.JAXJobReplicaTypeWorker},
		DefaultContainer:     ContainerName,
		DefaultPortName:      PortName,
		DefaultPort:          Port,
		DefaultRestartPolicy: kubeflowv1.RestartPolicyNever,
		ScaleSelector:        true,
		NewJob:               func() framework.Job { return &kubeflowv1.JAXJob{} },
		NewJobList:           func() client.ObjectList { return &kubeflowv1.JAXJobList{} },
		SetClusterSpec: func(job framework.Job, t *corev1.PodTemplateSpec, rtype kubeflowv1.ReplicaType, index int) error {
			env, err := Env(job.(*kubeflowv1.JAXJob), index)
			if err != nil {
				return err
			}
			framework.AppendEnv(t, "", env...)
			return nil
		},
		IsMasterRole: func(_ framework.Job, _ kubeflowv1.ReplicaType, index int) bool { return index == 0 },
		Outcome: func(job framework.Job, replicas framework.Replicas) framework.Outcome {
			return framework.MasterOrWorkers(kubeflowv1.JAXJobKind, job, replicas, false)
		},
	}
}

// Env is the environment of worker index, in Kubeflow's order.
func Env(job *kubeflowv1.JAXJob, index int) ([]corev1.EnvVar, error) {
	worker := job.Spec.JAXReplicaSpecs[kubeflowv1.JAXJobReplicaTypeWorker]
	if worker == nil {
		return nil, fmt.Errorf("spec.jaxReplicaSpecs[Worker]: required: a JAXJob runs Workers")
	}
	port := framework.ContainerPort(worker, ContainerName, PortName, -1)
	if port < 0 {
		return nil, fmt.Errorf("spec.jaxReplicaSpecs[Worker]: container %q has no port named %q: add it, or leave the ports empty to get the default %d",
			ContainerName, PortName, Port)
	}
	return []corev1.EnvVar{
		framework.Env("PYTHONUNBUFFERED", "1"),
		framework.Env("COORDINATOR_PORT", strconv.Itoa(int(port))),
		framework.Env("COORDINATOR_ADDRESS", framework.ReplicaName(job.Name, kubeflowv1.JAXJobReplicaTypeWorker, 0)),
		framework.Env("NUM_PROCESSES", strconv.Itoa(int(framework.TotalReplicas(job.Spec.JAXReplicaSpecs)))),
		framework.Env("PROCESS_ID", strconv.Itoa(index)),
	}, nil
}
