package replicajob

import (
	"context"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/transition"
)

// createdWriter writes a new job's Created condition (with startTime, unless it is suspended) as
// soon as it sees the job, in a queue of its own: the reconcile that creates the job's pods also
// writes Created, but with many new jobs it waits behind the other jobs' pod creation (tens of
// seconds for half the jobs of 1,000; measured: docs/performance.md, Measurements behind the
// code), and Kubeflow's clients, kubectl and the SDK's is_job_created expect it at once. Only one
// of the two writes lands: both are guarded by the resourceVersion they read.
// The exception: a job that arrives while jobs are still being submitted into its namespace in
// a burst gets its Created once the burst is in, with its pods (internal/burst): a status write
// costs the apiserver about what the submitter's create does, so each one written while the
// burst arrived slowed the submitter (DECISIONS #20; docs/performance.md, Measurements behind
// the code).
type createdWriter struct{ r *Reconciler }

func (w createdWriter) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	r := w.r
	job := r.fw.NewJob()
	if err := r.client.Get(ctx, req.NamespacedName, job); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !needsCreated(job) {
		return reconcile.Result{}, nil
	}
	if !isSuspended(job) {
		if again := r.opts.Burst.Hold(job, &r.createdWakes); again > 0 {
			return reconcile.Result{RequeueAfter: again}, nil
		}
	}
	p, err := plan(r.fw, r.plugins, job, Inputs{Now: r.clock.Now(), CreatedOnly: true})
	if err != nil {
		return reconcile.Result{}, nil // the job's own reconcile says why
	}
	if err := r.patchStatus(ctx, req.NamespacedName, job, p.Status); err != nil {
		// The job's own reconcile wrote first (a conflict), or will write it: nothing is lost.
		return reconcile.Result{}, nil
	}
	r.tell.Tell(job, transition.Told{Changes: []transition.Change{transition.Created}})
	return reconcile.Result{}, nil
}

// needsCreated says whether a job kiln runs has no Created condition yet.
func needsCreated(job framework.Job) bool {
	return ManagedByKiln(job) && job.GetDeletionTimestamp() == nil && getCondition(job.GetJobStatus(), kubeflowv1.JobCreated) == nil
}

// arrivals tells the burst Gate of each new job either of the kind's controllers hears of first.
func (r *Reconciler) arrivals() predicate.Funcs {
	return r.opts.Burst.Arrivals(func(o client.Object) bool { return needsCreated(o.(framework.Job)) })
}

// setupCreatedWriter registers the createdWriter of the reconciler's kind: it hears only of jobs
// created without a Created condition. Each of its reconciles is one write, so it has as many in
// flight as one reconcile of a job has (Options.Parallelism): with the reconcile's workers only, a
// burst of jobs waited in its queue far longer than each write took (measured:
// docs/performance.md, Measurements behind the code).
func (r *Reconciler) setupCreatedWriter(mgr ctrl.Manager, workers int) error {
	onlyNew := predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return needsCreated(e.Object.(framework.Job)) },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(strings.ToLower(r.fw.Kind)+"-created").
		For(r.fw.NewJob(), builder.WithPredicates(onlyNew, r.arrivals())).
		WatchesRawSource(r.createdWakes.Source()).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, workers, r.opts.Parallelism)}).
		Complete(createdWriter{r})
}
