package replicajob

import (
	"strings"

	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/gang"
)

// The group objects of every backend; kiln reads them for why a job waits.
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=podgroups,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=scheduling.x-k8s.io,resources=podgroups,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=scheduling.volcano.sh,resources=podgroups,verbs=get;list;watch;create;patch;delete

// ganged says whether a job's pods are placed as a gang: those of a job with more than one pod,
// or that asks for it with a schedulingPolicy.
func ganged(job framework.Job) bool {
	return job.GetRunPolicy().SchedulingPolicy != nil || framework.TotalReplicas(job.GetReplicaSpecs()) > 1
}

// group is the gang group of a defaulted job: its pods in the order the job creates them. A
// replica type created only once others are ready (Framework.WaitsFor: MPI's launcher under
// WaitForWorkersReady) is not in it: the gang would wait for pods kiln holds back.
func group(fw framework.Framework, job framework.Job) gang.Group {
	var pods []gang.Pod
	specs := job.GetReplicaSpecs()
	for _, rtype := range fw.ReplicaTypes {
		if fw.WaitsFor != nil {
			if _, waits := fw.WaitsFor(job, rtype); waits {
				continue
			}
		}
		spec := specs[rtype]
		for range int(framework.NumReplicas(spec)) {
			p := gang.Pod{Role: strings.ToLower(string(rtype))}
			for _, c := range spec.Template.Spec.Containers {
				p.Resources = append(p.Resources, c.Resources)
			}
			pods = append(pods, p)
		}
	}
	var policy *gang.Policy
	if sp := job.GetRunPolicy().SchedulingPolicy; sp != nil {
		policy = &gang.Policy{MinAvailable: sp.MinAvailable, Queue: sp.Queue, MinResources: sp.MinResources,
			PriorityClass: sp.PriorityClass, ScheduleTimeoutSeconds: sp.ScheduleTimeoutSeconds}
	}
	return gang.NewGroup(gang.GroupName(job.GetName(), fw.Kind), job.GetNamespace(), policy, pods)
}
