// Package paddle is the PaddleJob framework: PaddlePaddle's launcher environment (PADDLE_MASTER,
// PADDLE_NNODES, PADDLE_JOB_ID) in collective mode (worker 0 is the endpoint) and parameter-server
// mode (the Master is), and the master-drives-the-job success rule.
package paddle

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
)

// What the engine does with PaddleJobs: read and watch them, delete them (TTL), write their status.
// +kubebuilder:rbac:groups=kubeflow.org,resources=paddlejobs,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=kubeflow.org,resources=paddlejobs/status,verbs=get;patch
// +kubebuilder:rbac:groups=kubeflow.org,resources=paddlejobs/finalizers,verbs=update

const (
	// ContainerName is the container that gets the default port.
	ContainerName = "paddle"
	// PortName and Port are the default port of the paddle container: the endpoint's.
	PortName = "master"
	Port     = 36543
)

// New returns the PaddleJob framework.
func New() framework.Framework {
	return framework.Framework{
		Kind:                 kubeflowv1.PaddleJobKind,
		Name:                 "paddle",
		ControllerName:       "paddlejob-controller",
		ReplicaSpecsField:    "paddleReplicaSpecs",
		ReplicaTypes:         []kubeflowv1.ReplicaType{kubeflowv1.PaddleJobReplicaTypeMaster, kubeflowv1.PaddleJobReplicaTypeWorker},
		DefaultContainer:     ContainerName,
		DefaultPortName:      PortName,
		DefaultPort:          Port,
		DefaultRestartPolicy: kubeflowv1.RestartPolicyOnFailure,
		ScaleSelector:        true,
		NewJob:               func() framework.Job { return &kubeflowv1.PaddleJob{} },
		NewJobList:           func() client.ObjectList { return &kubeflowv1.PaddleJobList{} },
		Default:              func(job framework.Job) { setDefaults(paddleJob(job)) },
		Validate: func(job framework.Job, specs *field.Path) (field.ErrorList, []string) {
			return framework.ValidateSingleMaster(paddleJob(job).Spec.PaddleReplicaSpecs, specs), nil
		},
		SetClusterSpec: func(job framework.Job, t *corev1.PodTemplateSpec, rtype kubeflowv1.ReplicaType, index int) error {
			env, err := Env(paddleJob(job), rtype, index)
			if err != nil {
				return err
			}
			framework.AppendEnv(t, "", env...)
			return nil
		},
		// As Kubeflow: only a Master is labelled job-role=master.
		IsMasterRole: func(_ framework.Job, rtype kubeflowv1.ReplicaType, _ int) bool {
			return rtype == kubeflowv1.PaddleJobReplicaTypeMaster
		},
		Outcome: func(job framework.Job, replicas framework.Replicas) framework.Outcome {
			return framework.MasterOrWorkers(kubeflowv1.PaddleJobKind, job, replicas, false)
		},
	}
}

func paddleJob(job framework.Job) *kubeflowv1.PaddleJob { return job.(*kubeflowv1.PaddleJob) }

// setDefaults fills the elastic bounds, as Kubeflow does (and, as Kubeflow, runs the job with its
// Worker replicas all the same).
func setDefaults(job *kubeflowv1.PaddleJob) {
	if ep := job.Spec.ElasticPolicy; ep != nil {
		framework.DefaultElasticBounds(&ep.MinReplicas, &ep.MaxReplicas, framework.NumReplicas(job.Spec.PaddleReplicaSpecs[kubeflowv1.PaddleJobReplicaTypeWorker]))
	}
}

// Env is the environment of replica (rtype, index), in Kubeflow's order. The endpoint (the
// Master in parameter-server mode, worker 0 in collective mode) is given its own pod IP through
// POD_IP_DUMMY; every other replica reaches it by its Service name.
func Env(job *kubeflowv1.PaddleJob, rtype kubeflowv1.ReplicaType, index int) ([]corev1.EnvVar, error) {
	specs := job.Spec.PaddleReplicaSpecs
	endpointType := kubeflowv1.PaddleJobReplicaTypeWorker
	if specs[kubeflowv1.PaddleJobReplicaTypeMaster] != nil {
		endpointType = kubeflowv1.PaddleJobReplicaTypeMaster
	}
	endpoint := specs[endpointType]
	if endpoint == nil {
		return nil, fmt.Errorf("spec.paddleReplicaSpecs: a PaddleJob needs a Master or a Worker")
	}
	port := framework.ContainerPort(endpoint, ContainerName, PortName, -1)
	if port < 0 {
		return nil, fmt.Errorf("spec.paddleReplicaSpecs[%s]: container %q has no port named %q: add it, or leave the ports empty to get the default %d",
			endpointType, ContainerName, PortName, Port)
	}
	env := []corev1.EnvVar{
		framework.Env("PYTHONUNBUFFERED", "1"),
		framework.Env("PADDLE_JOB_ID", job.Name),
		framework.Env("PADDLE_NNODES", strconv.Itoa(int(framework.TotalReplicas(specs)))),
	}
	if rtype == endpointType && index == 0 {
		env = append(env,
			corev1.EnvVar{Name: "POD_IP_DUMMY", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			framework.Env("PADDLE_MASTER", fmt.Sprintf("$(POD_IP_DUMMY):%d", port)))
	} else {
		env = append(env, framework.Env("PADDLE_MASTER", fmt.Sprintf("%s:%d", framework.ReplicaName(job.Name, endpointType, 0), port)))
	}
	if endpointType == kubeflowv1.PaddleJobReplicaTypeMaster {
		if rtype == kubeflowv1.PaddleJobReplicaTypeMaster {
			env = append(env, framework.Env("PADDLE_SERVER_NUM", "1"))
		} else {
			env = append(env, framework.Env("PADDLE_TRAINER_NUM", "1"))
		}
	}
	return env, nil
}
