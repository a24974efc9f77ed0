package replicajob

import (
	"maps"
	"slices"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
)

// exitCodeUnknown stands for a failed pod whose default container never terminated (evicted,
// deleted with its node): the failure is not the program's, so ExitCode treats it as retryable.
const exitCodeUnknown = 0xbeef

// children are a job's pods and services as the cache shows them now, by replica type and index.
// Objects whose type the spec no longer has, or whose index label is unreadable, are strays. A
// service of no replica type at all is one of the job's extras (MPI's Service of the whole job,
// for a job written at mpi-operator's API): jobServices, by name. The batch Jobs of replicas that
// run as Jobs (Framework.RunsAsJob) are grouped like pods, and their pods by the Job's UID.
type children struct {
	pods        map[kubeflowv1.ReplicaType]map[int]*corev1.Pod
	services    map[kubeflowv1.ReplicaType]map[int]*corev1.Service
	jobs        map[kubeflowv1.ReplicaType]map[int]*batchv1.Job
	jobPods     map[types.UID][]*corev1.Pod
	strayPods   []*corev1.Pod
	strayServes []*corev1.Service
	strayJobs   []*batchv1.Job
	jobServices map[string]bool
}

func groupChildren(fw framework.Framework, job framework.Job, pods []*corev1.Pod, services []*corev1.Service, jobs []*batchv1.Job) children {
	c := children{
		pods:     map[kubeflowv1.ReplicaType]map[int]*corev1.Pod{},
		services: map[kubeflowv1.ReplicaType]map[int]*corev1.Service{},
		jobs:     map[kubeflowv1.ReplicaType]map[int]*batchv1.Job{},
	}
	byLower := map[string]kubeflowv1.ReplicaType{}
	for rtype := range job.GetReplicaSpecs() {
		byLower[string(toLower(rtype))] = rtype
		c.pods[rtype] = map[int]*corev1.Pod{}
		c.services[rtype] = map[int]*corev1.Service{}
		c.jobs[rtype] = map[int]*batchv1.Job{}
	}
	for _, j := range jobs {
		rtype, index, ok := replicaOf(byLower, j.Labels)
		if !ok {
			c.strayJobs = append(c.strayJobs, j)
			continue
		}
		c.jobs[rtype][index] = j
	}
	for _, p := range pods {
		if _, uid := podOfJob(p); uid != "" {
			if c.jobPods == nil {
				c.jobPods = map[types.UID][]*corev1.Pod{}
			}
			c.jobPods[uid] = append(c.jobPods[uid], p)
			continue
		}
		rtype, index, ok := replicaOf(byLower, p.Labels)
		if !ok {
			c.strayPods = append(c.strayPods, p)
			continue
		}
		c.pods[rtype][index] = p
	}
	for _, s := range services {
		if _, typed := s.Labels[kubeflowv1.LabelReplicaType]; !typed {
			if c.jobServices == nil {
				c.jobServices = map[string]bool{}
			}
			c.jobServices[s.Name] = true
			continue
		}
		rtype, index, ok := replicaOf(byLower, s.Labels)
		if !ok {
			c.strayServes = append(c.strayServes, s)
			continue
		}
		c.services[rtype][index] = s
	}
	return c
}

// indexes are the replica indexes of the job's pods, by type, ascending.
func (c children) indexes() map[kubeflowv1.ReplicaType][]int {
	out := make(map[kubeflowv1.ReplicaType][]int, len(c.pods))
	for rtype, pods := range c.pods {
		if len(pods) > 0 {
			out[rtype] = slices.Sorted(maps.Keys(pods))
		}
	}
	return out
}

func replicaOf(byLower map[string]kubeflowv1.ReplicaType, l map[string]string) (kubeflowv1.ReplicaType, int, bool) {
	rtype, ok := byLower[l[kubeflowv1.LabelReplicaType]]
	if !ok {
		return "", 0, false
	}
	index, err := strconv.Atoi(l[kubeflowv1.LabelReplicaIndex])
	if err != nil || index < 0 {
		return "", 0, false
	}
	return rtype, index, true
}

func toLower(rtype kubeflowv1.ReplicaType) kubeflowv1.ReplicaType {
	b := []byte(rtype)
	for i, ch := range b {
		if 'A' <= ch && ch <= 'Z' {
			b[i] = ch + 'a' - 'A'
		}
	}
	return kubeflowv1.ReplicaType(b)
}

// mainContainer is the name of the default container of rtype's pods, read from the job's
// template (the cache keeps no pod specs).
func mainContainer(fw framework.Framework, job framework.Job, rtype kubeflowv1.ReplicaType) string {
	spec := job.GetReplicaSpecs()[rtype]
	if spec == nil {
		return fw.DefaultContainer
	}
	if i := defaultContainerIndex(fw, &spec.Template.Spec); i >= 0 {
		return spec.Template.Spec.Containers[i].Name
	}
	return fw.DefaultContainer
}

// exitCode is the exit code of the pod's container named container, or exitCodeUnknown.
func exitCode(container string, pod *corev1.Pod) int32 {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == container && s.State.Terminated != nil {
			return s.State.Terminated.ExitCode
		}
	}
	return exitCodeUnknown
}

// containerRestarts is how often the kubelet restarted the pod's containers in place.
func containerRestarts(pod *corev1.Pod) int32 {
	var n int32
	for _, s := range pod.Status.ContainerStatuses {
		n += s.RestartCount
	}
	for _, s := range pod.Status.InitContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// isRetryable says whether a failed pod is recreated under the replica's restart policy: always
// for OnFailure and Always, for ExitCode when the main container was killed by a signal (128+)
// or never terminated at all.
func isRetryable(container string, policy kubeflowv1.RestartPolicy, pod *corev1.Pod) bool {
	switch policy {
	case kubeflowv1.RestartPolicyOnFailure, kubeflowv1.RestartPolicyAlways:
		return true
	case kubeflowv1.RestartPolicyExitCode:
		return exitCode(container, pod) >= 128
	}
	return false
}

// serviceRestarts reads the retry history a service carries: the count, whether it already
// counts pod's failure, and whether the replica was restarted and pod is not the pod it counted
// (a replacement, or none yet).
func serviceRestarts(svc *corev1.Service, pod *corev1.Pod) (restarts int32, counted, replaced bool) {
	if svc == nil {
		return 0, false, false
	}
	n, _ := strconv.Atoi(svc.Annotations[AnnotationRestarts])
	last := svc.Annotations[AnnotationRestartedPod]
	counted = pod != nil && last == string(pod.UID)
	return int32(n), counted, last != "" && !counted
}
