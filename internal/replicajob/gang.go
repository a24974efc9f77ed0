package replicajob

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
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

// withGang returns fw whose pod templates also join the job's group under backend b.
func withGang(fw framework.Framework, b gang.Backend) framework.Framework {
	inner := fw.SetClusterSpec
	fw.SetClusterSpec = func(job framework.Job, t *corev1.PodTemplateSpec, rtype kubeflowv1.ReplicaType, index int) error {
		if err := inner(job, t, rtype, index); err != nil {
			return err
		}
		if ganged(job) {
			b.Decorate(t, gang.GroupName(job.GetName(), fw.Kind), strings.ToLower(string(rtype)))
		}
		return nil
	}
	return fw
}

// group is the gang group of a defaulted job: its pods in the order the job creates them.
func group(fw framework.Framework, job framework.Job) gang.Group {
	var pods []gang.Pod
	specs := job.GetReplicaSpecs()
	for _, rtype := range fw.ReplicaTypes {
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

// syncGroup keeps a ganged job's group (see gang.Keeper): there while the job runs, deleted
// once it finished or is suspended.
func (r *Reconciler) syncGroup(ctx context.Context, job framework.Job, status *kubeflowv1.JobStatus) (gang.State, error) {
	k := r.gang
	if k == nil || !ganged(job) {
		return gang.State{CreatePods: true}, nil
	}
	obj := k.Backend.Object(group(r.fw, job))
	r.own(obj, job)
	if isFinished(status) || isSuspended(job) {
		return gang.State{CreatePods: true}, k.Remove(ctx, obj)
	}
	return k.Ensure(ctx, obj)
}
