package trainjob

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
	"github.com/kiln-ml/kiln/internal/gang"
)

// gangBackend is the gang scheduler of a runtime's podGroupPolicy: kiln's own backend (its
// --gang-scheduler-name) when it has one, else the one the policy names (scheduler-plugins'
// coscheduling or Volcano). No policy: no gang.
func gangBackend(configured gang.Backend, rt *trainerv1alpha1.TrainingRuntimeSpec) gang.Backend {
	p := rt.PodGroupPolicy
	switch {
	case p == nil || (p.Coscheduling == nil && p.Volcano == nil):
		return nil
	case configured != nil:
		return configured
	case p.Volcano != nil:
		return gang.Volcano{}
	}
	return gang.ForName(gang.NameSchedulerPlugins)
}

// groupOf is the TrainJob's group of backend b: every pod of its JobSet, each replicated job's
// pods with the requests of their template, under the runtime's coscheduling timeout; a Volcano
// group at the pods' priority, as Trainer gives it (the last one set; other backends' groups take
// none, as in Trainer, and a native PodGroup's could not change).
func groupOf(b gang.Backend, job *trainerv1alpha1.TrainJob, rt *trainerv1alpha1.TrainingRuntimeSpec, js *jobsetv1alpha2.JobSet) gang.Group {
	var pods []gang.Pod
	policy := &gang.Policy{}
	_, volcano := b.(gang.Volcano)
	for _, rj := range js.Spec.ReplicatedJobs {
		if pc := rj.Template.Spec.Template.Spec.PriorityClassName; pc != "" && volcano {
			policy.PriorityClass = pc
		}
		pod := gang.Pod{Role: rj.Name}
		for _, c := range rj.Template.Spec.Template.Spec.Containers {
			pod.Resources = append(pod.Resources, c.Resources)
		}
		for range int(max(rj.Replicas, 1)) * int(ptr.Deref(rj.Template.Spec.Parallelism, 1)) {
			pods = append(pods, pod)
		}
	}
	if c := rt.PodGroupPolicy.Coscheduling; c != nil && ptr.Deref(c.ScheduleTimeoutSeconds, 0) > 0 {
		policy.ScheduleTimeoutSeconds = c.ScheduleTimeoutSeconds
	}
	if q := js.Annotations["scheduling.volcano.sh/queue-name"]; q != "" {
		policy.Queue = q
	}
	return gang.NewGroup(gang.GroupName(job.Name, trainerv1alpha1.TrainJobKind), job.Namespace, policy, pods)
}

// decorate puts every pod of the JobSet in the group.
func decorate(b gang.Backend, group string, js *jobsetv1alpha2.JobSet) {
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		b.Decorate(&rj.Template.Spec.Template, group, rj.Name)
	}
}

// syncGroup keeps the TrainJob's group while it runs and removes it once it finished; the state
// says whether its pods may be created and why they wait. No gang: pods may always be created.
func (r *Reconciler) syncGroup(ctx context.Context, job *trainerv1alpha1.TrainJob, b gang.Backend, group client.Object) (gang.State, error) {
	if b == nil {
		return gang.State{CreatePods: true}, nil
	}
	k := &gang.Keeper{Client: r.client, Backend: b, FieldOwner: "kiln"}
	key := client.ObjectKeyFromObject(job)
	var last gang.Synced
	if v, ok := r.groups.Load(key); ok {
		last = v.(gang.Synced)
	}
	synced, runs := last, !finished(job)
	var seen gang.Seen
	if runs {
		seen = k.Read(ctx, group)
	}
	st, err := k.Sync(ctx, group, runs, seen, &synced)
	if synced != last {
		r.groups.Store(key, synced)
	}
	return st, err
}

// groupObject is the backend's object of the group, owned by the TrainJob.
func groupObject(b gang.Backend, job *trainerv1alpha1.TrainJob, g gang.Group) client.Object {
	obj := b.Object(g)
	obj.SetOwnerReferences([]metav1.OwnerReference{ownerRef(job)})
	return obj
}
