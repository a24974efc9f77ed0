package replicajob

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/gang"
	"github.com/kiln-ml/kiln/internal/tracing"
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
			b.Decorate(t, job.GetName(), strings.ToLower(string(rtype)))
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
	return gang.NewGroup(job.GetName(), job.GetNamespace(), policy, pods)
}

// gangState is what syncGroup found: why the job's pods wait, and whether they may be created.
type gangState struct {
	waiting    string
	createPods bool
}

// syncGroup keeps a ganged job's group: applied (owned by the job) when it is missing or what it
// is built into changed, deleted once the job no longer runs. The cache's copy says why the pods
// wait. Pods may be created once the group exists (Volcano: once it left Pending); never while a
// previous run's group is still being deleted (the scheduler would lose them with it).
func (r *Reconciler) syncGroup(ctx context.Context, job framework.Job, status *kubeflowv1.JobStatus) (gangState, error) {
	b := r.opts.Gang
	if b == nil || !ganged(job) {
		return gangState{createPods: true}, nil
	}
	active := !isFinished(status) && !isSuspended(job)
	obj := b.Object(group(r.fw, job))
	owner := metav1.NewControllerRef(job, kubeflowv1.GroupVersion.WithKind(r.fw.Kind))
	obj.SetOwnerReferences([]metav1.OwnerReference{*owner})
	obj.SetLabels(map[string]string{kubeflowv1.LabelJobName: job.GetName(), kubeflowv1.LabelOperatorName: r.fw.ControllerName})
	built, err := json.Marshal(obj)
	if err != nil {
		return gangState{}, err
	}
	synced := syncedState{uid: job.GetUID(), sum: sha256.Sum256(append(built, fmt.Sprint(active)...))}
	key := types.NamespacedName{Namespace: job.GetNamespace(), Name: job.GetName()}
	v, ok := r.groupSynced.Load(key)
	changed := !ok || v.(syncedState) != synced
	what := b.GroupKind().Kind + " " + job.GetName() + " of " + r.fw.Kind + " " + job.GetName()
	if !active {
		if changed {
			ctx, end := tracing.Start(ctx, "delete "+b.GroupKind().Kind, tracing.Object(r.fw.Kind, job.GetNamespace(), job.GetName())...)
			err := client.IgnoreNotFound(r.client.Delete(ctx, obj))
			end(err)
			if err != nil && !meta.IsNoMatchError(err) {
				return gangState{createPods: true}, fmt.Errorf("deleting %s: %w", what, err)
			}
			r.groupSynced.Store(key, synced)
		}
		return gangState{createPods: true}, nil
	}
	seen := b.NewObject()
	getErr := r.client.Get(ctx, key, seen)
	switch {
	case getErr == nil && seen.GetDeletionTimestamp() != nil:
		r.groupSynced.Delete(key) // applied again once it is gone (its deletion's event)
		return gangState{waiting: "the " + b.GroupKind().Kind + " of its previous run is still being deleted"}, nil
	case getErr != nil && !apierrors.IsNotFound(getErr) && !meta.IsNoMatchError(getErr):
		return gangState{}, fmt.Errorf("reading %s: %w", what, getErr)
	case getErr == nil && !changed:
		waiting := b.Waiting(seen)
		return gangState{waiting: waiting, createPods: !gang.DelaysPods(b) || waiting == ""}, nil
	}
	ctx, end := tracing.Start(ctx, "apply "+b.GroupKind().Kind, tracing.Object(r.fw.Kind, job.GetNamespace(), job.GetName())...)
	err = r.client.Patch(ctx, obj, client.Apply, client.FieldOwner(fieldManager), client.ForceOwnership) //nolint:staticcheck // typed apply of a built object
	end(err)
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return gangState{waiting: gang.NotInstalled(b)}, nil
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
		// Refused for what the job asks (a priority class that does not exist, say): the job says
		// so, and is retried with backoff should the cluster change.
		return gangState{waiting: fmt.Sprintf("its %s was refused: %v", b.GroupKind().Kind, err)}, fmt.Errorf("applying %s: %w", what, err)
	case err != nil:
		return gangState{}, fmt.Errorf("applying %s: %w", what, err)
	}
	r.groupSynced.Store(key, synced)
	waiting := ""
	if getErr == nil {
		waiting = b.Waiting(seen)
	}
	// Just created, Volcano has not admitted it yet; the other schedulers hold pods until they can
	// place the group.
	return gangState{waiting: waiting, createPods: !gang.DelaysPods(b) || (getErr == nil && waiting == "")}, nil
}
