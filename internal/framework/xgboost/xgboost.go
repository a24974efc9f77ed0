// Package xgboost is the XGBoostJob framework: the Rabit tracker environment (MASTER_*, WORKER_*,
// WORLD_SIZE, RANK) and the master-drives-the-job success rule.
package xgboost

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
)

// What the engine does with XGBoostJobs: read and watch them, delete them (TTL), write their status.
// +kubebuilder:rbac:groups=kubeflow.org,resources=xgboostjobs,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=kubeflow.org,resources=xgboostjobs/status,verbs=get;patch
// +kubebuilder:rbac:groups=kubeflow.org,resources=xgboostjobs/finalizers,verbs=update

const (
	// ContainerName is the container that gets the default port.
	ContainerName = "xgboost"
	// PortName and Port are the default port of the xgboost container.
	PortName = "xgboostjob-port"
	Port     = 9999
)

// New returns the XGBoostJob framework.
func New() framework.Framework {
	return framework.Framework{
		Kind:                 kubeflowv1.XGBoostJobKind,
		Name:                 "xgboost",
		ControllerName:       "xgboostjob-controller",
		ReplicaSpecsField:    "xgbReplicaSpecs",
		MaxReplicas:          2000,
		MaxReplicasWhy:       "every pod's WORKER_ADDRS lists every worker",
		ReplicaTypes:         []kubeflowv1.ReplicaType{kubeflowv1.XGBoostJobReplicaTypeMaster, kubeflowv1.XGBoostJobReplicaTypeWorker},
		DefaultContainer:     ContainerName,
		DefaultPortName:      PortName,
		DefaultPort:          Port,
		DefaultRestartPolicy: kubeflowv1.RestartPolicyNever,
		NewJob:               func() framework.Job { return &kubeflowv1.XGBoostJob{} },
		NewJobList:           func() client.ObjectList { return &kubeflowv1.XGBoostJobList{} },
		Validate: func(job framework.Job, specs *field.Path) (field.ErrorList, []string) {
			return validate(job.(*kubeflowv1.XGBoostJob), specs), nil
		},
		SetClusterSpec: func(job framework.Job, t *corev1.PodTemplateSpec, rtype kubeflowv1.ReplicaType, index int) error {
			env, err := Env(job.(*kubeflowv1.XGBoostJob), rtype, index)
			if err != nil {
				return err
			}
			framework.AppendEnv(t, "", env...)
			return nil
		},
		IsMasterRole: func(_ framework.Job, rtype kubeflowv1.ReplicaType, _ int) bool {
			return rtype == kubeflowv1.XGBoostJobReplicaTypeMaster
		},
		Outcome: func(job framework.Job, replicas framework.Replicas) framework.Outcome {
			m := replicas[kubeflowv1.XGBoostJobReplicaTypeMaster]
			switch {
			case m.Replicas > 0 && m.Succeeded >= m.Replicas:
				return framework.Outcome{Succeeded: true, Message: fmt.Sprintf("XGBoostJob %s is successfully completed.", job.GetName())}
			case m.Active > 0:
				return framework.Outcome{Running: true, Message: fmt.Sprintf("XGBoostJob %s is running.", job.GetName())}
			}
			return framework.Outcome{}
		},
	}
}

// Env is the environment of replica (rtype, index), in Kubeflow's order.
func Env(job *kubeflowv1.XGBoostJob, rtype kubeflowv1.ReplicaType, index int) ([]corev1.EnvVar, error) {
	specs := job.Spec.XGBReplicaSpecs
	master := specs[kubeflowv1.XGBoostJobReplicaTypeMaster]
	if master == nil {
		return nil, fmt.Errorf("spec.xgbReplicaSpecs[Master]: required: an XGBoostJob needs one Master replica")
	}
	port := framework.ContainerPort(master, ContainerName, PortName, -1)
	if port < 0 {
		return nil, fmt.Errorf("spec.xgbReplicaSpecs[Master]: container %q has no port named %q: add it, or leave the ports empty to get the default %d",
			ContainerName, PortName, Port)
	}
	rank := index
	if rtype == kubeflowv1.XGBoostJobReplicaTypeWorker {
		rank += int(framework.NumReplicas(master))
	}
	total := framework.TotalReplicas(specs)
	env := []corev1.EnvVar{
		framework.Env("MASTER_PORT", strconv.Itoa(int(port))),
		framework.Env("MASTER_ADDR", framework.ReplicaName(job.Name, kubeflowv1.XGBoostJobReplicaTypeMaster, 0)),
		framework.Env("WORLD_SIZE", strconv.Itoa(int(total))),
		framework.Env("RANK", strconv.Itoa(rank)),
		framework.Env("PYTHONUNBUFFERED", "1"),
	}
	if total > 1 {
		worker := specs[kubeflowv1.XGBoostJobReplicaTypeWorker]
		addrs := make([]string, 0, total-1)
		for i := range int(total - 1) {
			addrs = append(addrs, framework.ReplicaName(job.Name, kubeflowv1.XGBoostJobReplicaTypeWorker, i))
		}
		env = append(env,
			framework.Env("WORKER_PORT", strconv.Itoa(int(framework.ContainerPort(worker, ContainerName, PortName, Port)))),
			framework.Env("WORKER_ADDRS", strings.Join(addrs, ",")),
		)
	}
	return env, nil
}
