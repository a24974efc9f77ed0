package trainjob

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
)

// framework is what a runtime's mlPolicy adds to the JobSet: which replicated job's count is the
// node count, and the variables (and objects) the training processes find each other by.
type framework interface {
	// nodeCount is the count of the replicated job of that name and step, when the framework sets it.
	nodeCount(name, step string, nodes int32) (int32, bool)
	// apply adds the framework's variables and ports to the JobSet's spec.
	apply(job *trainerv1alpha1.TrainJob, rt *trainerv1alpha1.TrainingRuntimeSpec, spec *jobsetv1alpha2.JobSetSpec, nodes int32) Problem
	// reserved are the variables the framework sets, which a TrainJob's trainer.env may not.
	reserved() []string
}

// withObjects is a framework that needs objects beside the JobSet (MPI's hostfile and keys).
type withObjects interface {
	objects(job *trainerv1alpha1.TrainJob, spec *jobsetv1alpha2.JobSetSpec) ([]client.Object, error)
}

// frameworkOf is the runtime's framework; one kiln does not run fails the TrainJob.
func frameworkOf(rt *trainerv1alpha1.TrainingRuntimeSpec) (framework, Problem) {
	p := rt.MLPolicy
	switch {
	case p == nil:
		return plain{}, Problem{}
	case p.Torch != nil:
		return torch{policy: p.Torch}, Problem{}
	case p.JAX != nil:
		return jax{}, Problem{}
	case p.XGBoost != nil:
		return xgboost{}, Problem{}
	case p.MPI != nil:
		return mpiRuntime{policy: p.MPI}, Problem{}
	case p.Flux != nil:
		return nil, Problem{Reason: reasonNotSupported, Message: "the runtime's mlPolicy.flux is not run by kiln: use a torch, jax or xgboost runtime"}
	}
	return plain{}, Problem{}
}

// ReservedEnv is the framework variables a TrainJob on rt may not set in trainer.env.
func ReservedEnv(rt *trainerv1alpha1.TrainingRuntimeSpec) []string {
	if fw, p := frameworkOf(rt); p.Reason == "" {
		return fw.reserved()
	}
	return nil
}

// trainerNodeCount: the trainer step's Job runs one pod per node.
func trainerNodeCount(step string, nodes int32) (int32, bool) {
	return nodes, step == StepTrainer
}

// Where the training processes meet: the first node's pod, by its JobSet host name, on Trainer's port.
const (
	// PortTrainer is the port of the first node the others reach (torch's master, JAX's coordinator, XGBoost's tracker).
	PortTrainer = 29500
	// AnnotationCompletionIndex is the pod's index in its Indexed Job.
	annotationCompletionIndex = "batch.kubernetes.io/job-completion-index"
)

// firstNode is the host name of the first node's pod: <job>-node-0-0.<job> (JobSet's pod host name
// under the JobSet's subdomain).
func firstNode(job *trainerv1alpha1.TrainJob) string {
	return fmt.Sprintf("%s-%s-0-0.%s", job.Name, ReplicatedJobNode, job.Name)
}

var indexEnv = &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + annotationCompletionIndex + "']"}}

// onTrainer runs add on the "node" container of each trainer step.
func onTrainer(spec *jobsetv1alpha2.JobSetSpec, add func(c *corev1.Container)) {
	for i := range spec.ReplicatedJobs {
		rj := &spec.ReplicatedJobs[i]
		if rj.Template.Labels[LabelAncestorStep] != StepTrainer {
			continue
		}
		if c := container(&podTemplate(rj).Spec, ContainerNode); c != nil {
			add(c)
		}
	}
}

// plain is a runtime without a framework: the trainer step gets its node count, nothing more.
type plain struct{}

func (plain) nodeCount(_, step string, nodes int32) (int32, bool) {
	if nodes == 0 { // neither the TrainJob nor an mlPolicy gives one: the template's stands
		return 0, false
	}
	return trainerNodeCount(step, nodes)
}
func (plain) apply(*trainerv1alpha1.TrainJob, *trainerv1alpha1.TrainingRuntimeSpec, *jobsetv1alpha2.JobSetSpec, int32) Problem {
	return Problem{}
}
func (plain) reserved() []string { return nil }

// torch is torchrun's PET_* variables.
type torch struct {
	policy *trainerv1alpha1.TorchMLPolicySource
}

func (torch) nodeCount(_, step string, nodes int32) (int32, bool) {
	return trainerNodeCount(step, nodes)
}
func (torch) reserved() []string {
	return []string{"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"}
}

func (t torch) apply(job *trainerv1alpha1.TrainJob, rt *trainerv1alpha1.TrainingRuntimeSpec, spec *jobsetv1alpha2.JobSetSpec, nodes int32) Problem {
	env := []corev1.EnvVar{
		{Name: "PET_NNODES", Value: strconv.Itoa(int(nodes))},
		{Name: "PET_NPROC_PER_NODE", Value: procPerNode(job, spec)},
		{Name: "PET_NODE_RANK", ValueFrom: indexEnv},
		{Name: "PET_MASTER_ADDR", Value: firstNode(job)},
		{Name: "PET_MASTER_PORT", Value: strconv.Itoa(PortTrainer)},
	}
	onTrainer(spec, func(c *corev1.Container) {
		c.Env = upsertEnv(c.Env, env...)
		upsertPort(c, corev1.ContainerPort{ContainerPort: PortTrainer})
	})
	if t.policy.EnvInjection == nil {
		return Problem{}
	}
	for i, target := range t.policy.EnvInjection.Targets {
		j := slices.IndexFunc(spec.ReplicatedJobs, func(rj jobsetv1alpha2.ReplicatedJob) bool { return rj.Name == target.JobName })
		if j < 0 {
			return Problem{ReasonInvalid, fmt.Sprintf("the runtime's mlPolicy.torch.envInjection.targets[%d].jobName %q is no replicated job of the runtime: fix the runtime", i, target.JobName), "spec.runtimeRef"}
		}
		for _, name := range target.ContainerNames {
			c := container(&podTemplate(&spec.ReplicatedJobs[j]).Spec, name)
			if c == nil {
				return Problem{ReasonInvalid, fmt.Sprintf("the runtime's mlPolicy.torch.envInjection.targets[%d] names container %q, which replicated job %s lacks: fix the runtime", i, name, target.JobName), "spec.runtimeRef"}
			}
			c.Env = upsertEnv(c.Env, env...)
		}
	}
	return Problem{}
}

// procPerNode is PET_NPROC_PER_NODE: the trainer's numProcPerNode; else "auto" (a process per
// GPU) when the node has GPUs, else a process per CPU it requests (at least 1).
func procPerNode(job *trainerv1alpha1.TrainJob, spec *jobsetv1alpha2.JobSetSpec) string {
	if t := job.Spec.Trainer; t != nil && t.NumProcPerNode != nil {
		return strconv.Itoa(int(*t.NumProcPerNode))
	}
	r := nodeResources(job, spec)
	if gpus(r) > 0 {
		return "auto"
	}
	cpu := r.Requests.Cpu()
	if cpu.IsZero() {
		cpu = r.Limits.Cpu()
	}
	return strconv.Itoa(max(1, int(cpu.Value())))
}

// nodeResources is what a node's processes are counted from, as Trainer counts them: the
// TrainJob's resourcesPerNode when it gives them (alone, not merged with the runtime's), else the
// resources of the trainer step's "node" container.
func nodeResources(job *trainerv1alpha1.TrainJob, spec *jobsetv1alpha2.JobSetSpec) corev1.ResourceRequirements {
	if t := job.Spec.Trainer; t != nil && t.ResourcesPerNode != nil {
		return *t.ResourcesPerNode
	}
	var r corev1.ResourceRequirements
	found := false
	onTrainer(spec, func(c *corev1.Container) {
		if !found {
			r, found = c.Resources, true
		}
	})
	return r
}

// gpus is the node's GPU count: the first resource whose name says gpu, requested or limited.
func gpus(r corev1.ResourceRequirements) int64 {
	for _, list := range []corev1.ResourceList{r.Requests, r.Limits} {
		names := make([]string, 0, len(list))
		for n := range list {
			names = append(names, string(n))
		}
		slices.Sort(names)
		for _, n := range names {
			if strings.Contains(strings.ToLower(n), "gpu") {
				q := list[corev1.ResourceName(n)]
				return q.Value()
			}
		}
	}
	return 0
}

// jax is JAX's distributed initialization variables.
type jax struct{}

func (jax) nodeCount(_, step string, nodes int32) (int32, bool) { return trainerNodeCount(step, nodes) }
func (jax) reserved() []string {
	return []string{"JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "JAX_COORDINATOR_ADDRESS"}
}

func (jax) apply(job *trainerv1alpha1.TrainJob, _ *trainerv1alpha1.TrainingRuntimeSpec, spec *jobsetv1alpha2.JobSetSpec, nodes int32) Problem {
	onTrainer(spec, func(c *corev1.Container) {
		c.Env = upsertEnv(c.Env,
			corev1.EnvVar{Name: "JAX_NUM_PROCESSES", Value: strconv.Itoa(int(nodes))},
			corev1.EnvVar{Name: "JAX_PROCESS_ID", ValueFrom: indexEnv},
			corev1.EnvVar{Name: "JAX_COORDINATOR_ADDRESS", Value: fmt.Sprintf("%s:%d", firstNode(job), PortTrainer)})
		upsertPort(c, corev1.ContainerPort{ContainerPort: PortTrainer})
	})
	return Problem{}
}

// xgboost is the Rabit tracker's DMLC_* variables: a worker per GPU of a node, else one per node.
type xgboost struct{}

func (xgboost) nodeCount(_, step string, nodes int32) (int32, bool) {
	return trainerNodeCount(step, nodes)
}
func (xgboost) reserved() []string {
	return []string{"DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER"}
}

func (xgboost) apply(job *trainerv1alpha1.TrainJob, _ *trainerv1alpha1.TrainingRuntimeSpec, spec *jobsetv1alpha2.JobSetSpec, nodes int32) Problem {
	workers := int64(nodes) * max(1, gpus(nodeResources(job, spec)))
	onTrainer(spec, func(c *corev1.Container) {
		c.Env = upsertEnv(c.Env,
			corev1.EnvVar{Name: "DMLC_TRACKER_URI", Value: firstNode(job)},
			corev1.EnvVar{Name: "DMLC_TRACKER_PORT", Value: strconv.Itoa(PortTrainer)},
			corev1.EnvVar{Name: "DMLC_TASK_ID", ValueFrom: indexEnv},
			corev1.EnvVar{Name: "DMLC_NUM_WORKER", Value: strconv.FormatInt(workers, 10)})
		upsertPort(c, corev1.ContainerPort{ContainerPort: PortTrainer})
	})
	return Problem{}
}
