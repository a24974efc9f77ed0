package pytorch

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/podsecurity"
)

// setClusterSpec appends torchrun's environment to every container and, on the workers of a job
// with a master, an init container that waits until the master's name resolves.
func setClusterSpec(cfg Config, job *kubeflowv1.PyTorchJob, t *corev1.PodTemplateSpec, rtype kubeflowv1.ReplicaType, index int) error {
	env, err := Env(job, rtype, index)
	if err != nil {
		return err
	}
	framework.AppendEnv(t, "", env...)
	if hasMaster(job) && rtype == kubeflowv1.PyTorchJobReplicaTypeWorker {
		t.Spec.InitContainers = append(t.Spec.InitContainers, initContainer(cfg, job))
	}
	return nil
}

// Env is the environment of replica (rtype, index), in Kubeflow's order. Without a Master, worker
// 0 plays the master (DECISIONS #9): MASTER_ADDR, WORLD_SIZE and RANK are set all the same.
func Env(job *kubeflowv1.PyTorchJob, rtype kubeflowv1.ReplicaType, index int) ([]corev1.EnvVar, error) {
	specs := job.Spec.PyTorchReplicaSpecs
	env := []corev1.EnvVar{framework.Env("PYTHONUNBUFFERED", "1")}

	masterType, rank := kubeflowv1.PyTorchJobReplicaTypeMaster, index
	if !hasMaster(job) {
		masterType = kubeflowv1.PyTorchJobReplicaTypeWorker
	} else if rtype == kubeflowv1.PyTorchJobReplicaTypeWorker {
		rank = index + int(framework.NumReplicas(specs[kubeflowv1.PyTorchJobReplicaTypeMaster]))
	}
	port := framework.ContainerPort(specs[masterType], ContainerName, PortName, -1)
	if port < 0 {
		return nil, fmt.Errorf("spec.pytorchReplicaSpecs[%s]: container %q has no port named %q: add it, or leave the ports empty to get the default %d",
			masterType, ContainerName, PortName, Port)
	}
	worldSize := framework.TotalReplicas(specs) * int64(nprocInt(job.Spec.NprocPerNode))
	env = append(env,
		framework.Env("MASTER_PORT", strconv.Itoa(int(port))),
		framework.Env("PET_MASTER_PORT", strconv.Itoa(int(port))),
		framework.Env("MASTER_ADDR", framework.ReplicaName(job.Name, masterType, 0)),
		framework.Env("PET_MASTER_ADDR", framework.ReplicaName(job.Name, masterType, 0)),
		framework.Env("WORLD_SIZE", strconv.Itoa(int(worldSize))),
		framework.Env("RANK", strconv.Itoa(rank)),
		framework.Env("PET_NODE_RANK", strconv.Itoa(rank)),
	)
	if job.Spec.NprocPerNode != nil {
		env = append(env, framework.Env("PET_NPROC_PER_NODE", *job.Spec.NprocPerNode))
	}
	if job.Spec.ElasticPolicy == nil {
		return append(env, framework.Env("PET_NNODES", strconv.Itoa(int(framework.TotalReplicas(specs))))), nil
	}
	return append(env, elasticEnv(job)...), nil
}

// nprocInt is the number of processes per node when nprocPerNode is a number, else 1.
func nprocInt(nproc *string) int32 {
	if nproc == nil {
		return 1
	}
	n, err := strconv.Atoi(*nproc)
	if err != nil || n < 1 {
		return 1
	}
	return int32(n)
}

func elasticEnv(job *kubeflowv1.PyTorchJob) []corev1.EnvVar {
	ep := job.Spec.ElasticPolicy
	worker := job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker]
	host := framework.ReplicaName(job.Name, kubeflowv1.PyTorchJobReplicaTypeWorker, 0)
	if ep.RDZVHost != nil {
		host = *ep.RDZVHost
	}
	port := framework.ContainerPort(worker, ContainerName, PortName, Port)
	if ep.RDZVPort != nil {
		port = *ep.RDZVPort
	}
	backend := "c10d"
	if ep.RDZVBackend != nil {
		backend = string(*ep.RDZVBackend)
	}
	nnodes := strconv.Itoa(int(framework.NumReplicas(worker)))
	if ep.MinReplicas != nil && ep.MaxReplicas != nil {
		nnodes = fmt.Sprintf("%d:%d", *ep.MinReplicas, *ep.MaxReplicas)
	}
	env := []corev1.EnvVar{
		framework.Env("PET_RDZV_ENDPOINT", fmt.Sprintf("%s:%d", host, port)),
		framework.Env("PET_RDZV_BACKEND", backend),
		framework.Env("PET_NNODES", nnodes),
	}
	if ep.MaxRestarts != nil {
		env = append(env, framework.Env("PET_MAX_RESTARTS", strconv.Itoa(int(*ep.MaxRestarts))))
	}
	if ep.NProcPerNode != nil {
		env = append(env, framework.Env("PET_NPROC_PER_NODE", strconv.Itoa(int(*ep.NProcPerNode))))
	}
	if ep.RDZVID != nil {
		env = append(env, framework.Env("PET_RDZV_ID", *ep.RDZVID))
	}
	if len(ep.RDZVConf) > 0 {
		kv := make([]string, 0, len(ep.RDZVConf))
		for _, c := range ep.RDZVConf {
			kv = append(kv, c.Key+"="+c.Value)
		}
		env = append(env, framework.Env("PET_RDZV_CONF", strings.Join(kv, ",")))
	}
	if ep.Standalone != nil && *ep.Standalone {
		env = append(env, framework.Env("PET_STANDALONE", ""))
	}
	return env
}

func initContainer(cfg Config, job *kubeflowv1.PyTorchJob) corev1.Container {
	master := framework.ReplicaName(job.Name, kubeflowv1.PyTorchJobReplicaTypeMaster, 0)
	return corev1.Container{
		Name:            "init-pytorch",
		Image:           cfg.InitContainerImage,
		ImagePullPolicy: corev1.PullIfNotPresent,
		// Kubeflow's init container looks the master up with nslookup in a shell loop, 2 s apart;
		// kiln's image does the same without a shell.
		Command: []string{"/kiln", "wait-for", "--tries", strconv.Itoa(cfg.InitContainerMaxTries), "--interval", "2s", master},
		Resources: corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("20Mi")},
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("10Mi")},
		},
		SecurityContext: podsecurity.Restricted(),
	}
}
