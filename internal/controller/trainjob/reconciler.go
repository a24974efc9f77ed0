// Package trainjob runs Kubeflow Trainer v2's TrainJobs: it resolves the runtime a TrainJob names,
// builds the JobSet the runtime's template, the framework and the TrainJob's own trainer,
// initializers and patches make (jobset.go, plugins.go, patches.go), creates it with the shared
// owned.Kit, keeps its suspension in line, and derives the TrainJob's status from it (status.go).
// The real JobSet controller runs the JobSet.
package trainjob

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
	"github.com/kiln-ml/kiln/internal/burst"
	"github.com/kiln-ml/kiln/internal/gang"
	"github.com/kiln-ml/kiln/internal/owned"
	"github.com/kiln-ml/kiln/internal/statuspatch"
	"github.com/kiln-ml/kiln/internal/tracing"
	"github.com/kiln-ml/kiln/internal/transition"
)

// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs/status,verbs=get;patch
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainingruntimes;clustertrainingruntimes,verbs=get;list;watch
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets,verbs=get;list;watch;create;patch;delete

// Framework is the framework label of the TrainJob's metrics (training_operator_jobs_*{framework}).
const Framework = "trainjob"

// ManagedByTrainer is spec.managedBy of the TrainJobs kiln runs (the default): kiln answers to
// Trainer's controller name, so manifests and Kueue's MultiKueue keep their meaning.
const ManagedByTrainer = "trainer.kubeflow.org/trainjob-controller"

// Reconciler reconciles TrainJobs.
type Reconciler struct {
	client client.Client
	status *statuspatch.Writer // set up with the manager
	kit    owned.Kit
	clock  clock.PassiveClock
	tell   transition.Teller
	// jobSets says whether the cluster serves JobSets and kiln watches them; until it does, every
	// TrainJob says JobSet is missing, and kiln looks again every jobSetRecheck.
	jobSets atomic.Bool
	watch   func() error
	// gangWatched says kiln watches the groups of its gang scheduler.
	gangWatched bool
	// gang is kiln's gang scheduler (nil: none configured): TrainJobs whose runtime has a
	// podGroupPolicy are gang-scheduled with it. groups holds what was written of each TrainJob's
	// group (a gang.Synced), forgotten when the TrainJob is gone.
	gang   gang.Backend
	groups sync.Map
	// ran holds the UID of each TrainJob whose first run this kiln told (its time to running is
	// observed once: not again when its pods become ready again), forgotten when it is gone.
	ran sync.Map
	// Burst holds the JobSet of TrainJobs that arrive in a burst of submissions until it is in
	// (shared with every kind: internal/burst); nil holds none. wakes queues them then.
	Burst *burst.Gate
	wakes burst.Wakes
}

// gangRecheck is how often a TrainJob whose gang waits looks again when kiln does not watch the
// group's kind (a podGroupPolicy's scheduler that is not kiln's own).
const gangRecheck = 15 * time.Second

// jobSetRecheck is how often kiln looks for the JobSet API while the cluster lacks it.
const jobSetRecheck = 30 * time.Second

// trainJobKind is the parent kind of what a TrainJob makes (its JobSet, its gang group).
var trainJobKind = trainerv1alpha1.GroupVersion.WithKind(trainerv1alpha1.TrainJobKind).GroupKind()

// NewReconciler returns the TrainJob reconciler.
func NewReconciler(c client.Client, reader client.Reader, rec recorder.EventRecorder, clk clock.PassiveClock, g gang.Backend) *Reconciler {
	return &Reconciler{client: c, clock: clk, gang: g, tell: transition.Teller{Recorder: rec, Framework: Framework, Now: clk.Now},
		kit: owned.Kit{Client: c, Reader: reader, FieldOwner: "kiln", ParentKind: trainerv1alpha1.TrainJobKind, Cached: jobSetCache(c)}}
}

// jobSetCache gives the kit's JobSets c's cache, which holds every JobSet, and whose JobSets
// the reconciler watches: a new JobSet is created without a read first (owned.Kit.Cached). No
// cache of kiln's holds the other kinds the kit writes (an MPI runtime's hostfile).
func jobSetCache(c client.Client) func(client.Object) client.Reader {
	return func(o client.Object) client.Reader {
		if _, ok := o.(*jobsetv1alpha2.JobSet); ok {
			return c
		}
		return nil
	}
}

// SetupWithManager watches TrainJobs, their JobSets (once the cluster serves JobSets) and the
// runtimes, whose arrival starts the TrainJobs that wait for them.
func (r *Reconciler) SetupWithManager(mgr manager.Manager, workers int) error {
	b := ctrl.ControllerManagedBy(mgr).
		Named("trainjob").
		For(&trainerv1alpha1.TrainJob{}, ctrl.WithPredicates(r.Burst.Arrivals(func(o client.Object) bool {
			return len(o.(*trainerv1alpha1.TrainJob).Status.Conditions) == 0
		}))).
		Watches(&trainerv1alpha1.TrainingRuntime{}, handler.EnqueueRequestsFromMapFunc(r.waitingFor(trainerv1alpha1.TrainingRuntimeKind))).
		Watches(&trainerv1alpha1.ClusterTrainingRuntime{}, handler.EnqueueRequestsFromMapFunc(r.waitingFor(trainerv1alpha1.ClusterTrainingRuntimeKind))).
		WatchesRawSource(r.wakes.Source()).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, workers)})
	if r.gang != nil && gang.Served(mgr.GetRESTMapper(), r.gang) {
		// The gang's group: its state is why the pods wait.
		b = b.Watches(r.gang.NewObject(), owned.EnqueueController(trainJobKind))
		r.gangWatched = true
	}
	c, err := b.Build(r)
	if err != nil {
		return err
	}
	// A new JobSet is created, answered with its metadata: the whole answer would be its pod
	// templates. It is applied once it changes (update: a suspended one's new spec).
	r.kit.Creator = owned.NewCreator(mgr.GetConfig(), mgr.GetHTTPClient(), mgr.GetRESTMapper())
	if r.status, err = statuspatch.NewWriter(mgr.GetConfig(), mgr.GetHTTPClient(), mgr.GetRESTMapper(), trainerv1alpha1.GroupVersion.WithKind(trainerv1alpha1.TrainJobKind)); err != nil {
		return err
	}
	// The JobSet watch starts once the API is served: kiln starts without JobSet installed, and
	// its TrainJobs say what is missing meanwhile.
	mapper := mgr.GetRESTMapper()
	var lastLook atomic.Int64 // unix nanoseconds: the mapper asks discovery on each look
	var once sync.Mutex       // one worker at a time adds the watch
	r.watch = func() error {
		if r.jobSets.Load() {
			return nil
		}
		once.Lock()
		defer once.Unlock()
		now := r.clock.Now().UnixNano()
		if r.jobSets.Load() || (lastLook.Load() != 0 && now-lastLook.Load() < int64(jobSetRecheck)) {
			return nil
		}
		lastLook.Store(now)
		if _, err := mapper.RESTMapping(jobsetv1alpha2.GroupVersion.WithKind("JobSet").GroupKind(), jobsetv1alpha2.GroupVersion.Version); err != nil {
			if meta.IsNoMatchError(err) {
				return nil // not served: the status says so
			}
			return fmt.Errorf("looking up the JobSet API: %w", err)
		}
		if err := c.Watch(source.Kind(mgr.GetCache(), client.Object(&jobsetv1alpha2.JobSet{}),
			owned.EnqueueController(trainJobKind))); err != nil {
			return fmt.Errorf("watching JobSets: %w", err)
		}
		r.jobSets.Store(true)
		return nil
	}
	return r.watch()
}

// waitingFor maps a runtime to the TrainJobs that name it and have no JobSet yet.
func (r *Reconciler) waitingFor(kind string) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var jobs trainerv1alpha1.TrainJobList
		opts := []client.ListOption{}
		if kind == trainerv1alpha1.TrainingRuntimeKind {
			opts = append(opts, client.InNamespace(o.GetNamespace()))
		}
		if err := r.client.List(ctx, &jobs, opts...); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, j := range jobs.Items {
			if refKind(&j) == kind && j.Spec.RuntimeRef.Name == o.GetName() && (!madeJobSet(&j) || meta.IsStatusConditionFalse(j.Status.Conditions, trainerv1alpha1.TrainJobCreated)) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&j)})
			}
		}
		return out
	}
}

// Reconcile makes the TrainJob's JobSet from its runtime, keeps its suspension in line, fails
// it past its deadline and writes the status.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, err error) {
	ctx, end := tracing.Start(ctx, "Reconcile TrainJob", trainerv1alpha1.TrainJobKind, req.Namespace, req.Name)
	defer func() { end(err) }()
	job := &trainerv1alpha1.TrainJob{}
	if err := r.client.Get(ctx, req.NamespacedName, job); err != nil || job.DeletionTimestamp != nil {
		if apierrors.IsNotFound(err) {
			r.groups.Delete(req.NamespacedName)
			r.ran.Delete(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	// 1. Another controller's (MultiKueue sends it to a worker cluster): not kiln's to run.
	if ptr.Deref(job.Spec.ManagedBy, ManagedByTrainer) != ManagedByTrainer {
		return reconcile.Result{}, nil
	}
	if err := r.watch(); err != nil {
		return reconcile.Result{}, err
	}
	o := observed{now: r.clock.Now(), jobSetServed: r.jobSets.Load()}
	var res reconcile.Result
	if !o.jobSetServed {
		res.RequeueAfter = jobSetRecheck
	}
	// 2. The JobSet as it is; a finished TrainJob only reads it.
	if o.jobSetServed {
		if o.jobSet, err = r.readJobSet(ctx, job); err != nil {
			return reconcile.Result{}, err
		}
	}
	// 3. The deadline: past it, the run fails and its JobSet goes (and is not made again).
	left, has := deadlineLeft(job, o.jobSet, o.now)
	o.deadlinePassed = has && left <= 0
	switch {
	case o.deadlinePassed:
		if o.jobSet != nil {
			if err := r.kit.Delete(ctx, job, o.jobSet); err != nil {
				return reconcile.Result{}, err
			}
		}
	case has:
		res.RequeueAfter = minPositive(res.RequeueAfter, left)
	}
	// A TrainJob that arrived in a burst of submissions makes its JobSet once the burst is in.
	if o.jobSetServed && o.jobSet == nil && !o.deadlinePassed && !finished(job) && !ptr.Deref(job.Spec.Suspend, false) {
		if again := r.Burst.Hold(job, &r.wakes); again > 0 {
			return reconcile.Result{RequeueAfter: minPositive(res.RequeueAfter, again)}, nil
		}
	}
	// 4. The JobSet as it should be, made or brought in line, after its gang's group; a finished
	// TrainJob's group goes.
	switch {
	case o.deadlinePassed:
	case o.jobSetServed && !finished(job):
		if err := r.sync(ctx, job, &o); err != nil {
			return reconcile.Result{}, err
		}
		if o.waiting != "" && o.gangUnwatched {
			res.RequeueAfter = minPositive(res.RequeueAfter, gangRecheck)
		}
	case finished(job):
		if err := r.removeGroup(ctx, job); err != nil {
			return reconcile.Result{}, err
		}
	}
	return res, r.writeStatus(ctx, job, o)
}

// sync resolves the runtime, builds the JobSet and creates it, or carries the TrainJob's
// suspension (and, while suspended, its patches) to the one there is. What keeps it from doing
// so goes to o.problem.
func (r *Reconciler) sync(ctx context.Context, job *trainerv1alpha1.TrainJob, o *observed) error {
	rt, p, err := Runtime(ctx, r.client, job)
	if err == nil && p.Reason == "" {
		if runsAsMade(job, o.jobSet) && gangBackend(r.gang, rt) == nil {
			// Only a suspended JobSet takes a new spec (update): the JobSet as it should be
			// could change nothing, and is not built (most reconciles of a TrainJob are its
			// running JobSet's status changing).
			return nil
		}
		var desired *jobsetv1alpha2.JobSet
		if desired, p = DesiredJobSet(job, rt); p.Reason == "" {
			return r.syncJobSet(ctx, job, rt, desired, o)
		}
	}
	o.problem = p
	if o.jobSet != nil && err == nil {
		// The runtime went, or no longer takes the TrainJob: its JobSet still follows its
		// suspension (a queue preempting it waits for that).
		return r.suspend(ctx, o.jobSet, ptr.Deref(job.Spec.Suspend, false))
	}
	return err
}

// runsAsMade says the TrainJob and its JobSet both run: neither is suspended.
func runsAsMade(job *trainerv1alpha1.TrainJob, js *jobsetv1alpha2.JobSet) bool {
	return js != nil && !ptr.Deref(job.Spec.Suspend, false) && !ptr.Deref(js.Spec.Suspend, false)
}

// syncJobSet keeps the gang's group, then creates the JobSet (after what its pods mount), or
// brings the one there is in line.
func (r *Reconciler) syncJobSet(ctx context.Context, job *trainerv1alpha1.TrainJob, rt *trainerv1alpha1.TrainingRuntimeSpec, desired *jobsetv1alpha2.JobSet, o *observed) error {
	if b := gangBackend(r.gang, rt); b != nil {
		g := groupOf(b, job, rt, desired)
		decorate(b, g.Name, desired)
		st, err := r.syncGroup(ctx, job, b, groupObject(b, job, g))
		if err != nil && st.Waiting == "" {
			return err
		}
		o.waiting, o.gangUnwatched = st.Waiting, st.Recheck || b != r.gang || !r.gangWatched
		if !st.CreatePods && (o.jobSet == nil || ptr.Deref(o.jobSet.Spec.Suspend, false)) {
			// Its pods wait for the group: a JobSet not made yet is made suspended, and one held
			// suspended stays so until the group may have pods. A JobSet already running keeps
			// its pods.
			desired.Spec.Suspend = ptr.To(true)
		}
	}
	if o.jobSet != nil {
		var err error
		o.problem, err = r.update(ctx, job, o.jobSet, desired)
		return err
	}
	// What the JobSet's pods mount comes first (an MPI runtime's hostfile and keys).
	p, err := r.ensureObjects(ctx, job, rt, desired)
	if err != nil || p.Reason != "" {
		o.problem = p
		return err
	}
	// Created (the kit's Creator), then applied: its first apply hands the create's fields to the
	// apply's field manager, so a field a patch no longer sets goes at that apply.
	reason, message, err := owned.Why(r.kit.Apply(ctx, job, desired))
	o.problem = Problem{Reason: reason, Message: message}
	if reason == "" && err == nil {
		o.jobSet = desired
	}
	return err
}

// ensureObjects creates the objects the framework needs beside the JobSet. Keys are created
// unread: kiln may create Secrets, not read them.
func (r *Reconciler) ensureObjects(ctx context.Context, job *trainerv1alpha1.TrainJob, rt *trainerv1alpha1.TrainingRuntimeSpec, js *jobsetv1alpha2.JobSet) (Problem, error) {
	fw, _ := frameworkOf(rt)
	w, ok := fw.(withObjects)
	if !ok {
		return Problem{}, nil
	}
	objs, err := w.objects(job, &js.Spec)
	if err != nil {
		return Problem{}, err
	}
	for _, obj := range objs {
		if _, secret := obj.(*corev1.Secret); secret {
			if reason, message, err := owned.Why(r.kit.CreateUnread(ctx, job, obj)); err != nil || reason != "" {
				return Problem{Reason: reason, Message: message}, err
			}
			continue
		}
		if p, err := r.ensure(ctx, job, obj, obj.DeepCopyObject().(client.Object)); err != nil || p.Reason != "" {
			return p, err
		}
	}
	return Problem{}, nil
}

// removeGroup deletes a finished TrainJob's group (its runtime says which scheduler's).
func (r *Reconciler) removeGroup(ctx context.Context, job *trainerv1alpha1.TrainJob) error {
	rt, p, err := Runtime(ctx, r.client, job)
	if err != nil || p.Reason != "" {
		return err
	}
	b := gangBackend(r.gang, rt)
	if b == nil {
		return nil
	}
	desired, p := DesiredJobSet(job, rt)
	if p.Reason != "" {
		return nil
	}
	_, err = r.syncGroup(ctx, job, b, groupObject(b, job, groupOf(b, job, rt, desired)))
	return err
}

// readJobSet is the TrainJob's JobSet from the cache, nil when there is none or it is someone
// else's (creating it then reports the conflict).
func (r *Reconciler) readJobSet(ctx context.Context, job *trainerv1alpha1.TrainJob) (*jobsetv1alpha2.JobSet, error) {
	js := &jobsetv1alpha2.JobSet{}
	js.Namespace, js.Name = job.Namespace, job.Name
	switch ok, err := r.kit.Get(ctx, job, js); {
	case err != nil:
		return nil, err
	case !ok:
		return nil, nil
	}
	return js, nil
}

// ensure creates obj unless it exists (owned.Kit.Create): a same-named object the TrainJob does
// not control, or one the apiserver refuses, is the problem returned.
func (r *Reconciler) ensure(ctx context.Context, job *trainerv1alpha1.TrainJob, obj, existing client.Object) (Problem, error) {
	reason, message, err := owned.Why(r.kit.Create(ctx, job, obj, existing))
	return Problem{Reason: reason, Message: message}, err
}

// update brings the JobSet in line: suspending it is one small patch; a suspended JobSet takes
// the whole desired spec (the pod templates may change only while it is suspended: Kueue patches
// a TrainJob's placement before it admits it), resuming it if the TrainJob is resumed. JobSet's
// webhook takes only some changes of a suspended JobSet's templates (labels, annotations, node
// selectors, tolerations, scheduling gates): one it refuses is made anew, as it has no pods.
func (r *Reconciler) update(ctx context.Context, job *trainerv1alpha1.TrainJob, js, desired *jobsetv1alpha2.JobSet) (Problem, error) {
	want, got := ptr.Deref(desired.Spec.Suspend, false), ptr.Deref(js.Spec.Suspend, false)
	changed := js.Annotations[AnnotationSpecHash] != desired.Annotations[AnnotationSpecHash]
	switch {
	case want && !got:
		return Problem{}, r.suspend(ctx, js, true)
	case got && changed:
		reason, message, err := owned.Why(r.kit.Apply(ctx, job, desired))
		if reason == ReasonRefused {
			return Problem{}, r.kit.Delete(ctx, job, js) // made anew at its deletion's event
		}
		return Problem{Reason: reason, Message: message}, err
	case got != want:
		return Problem{}, r.suspend(ctx, js, want)
	}
	return Problem{}, nil
}

// suspend sets the JobSet's suspension, unless it has it.
func (r *Reconciler) suspend(ctx context.Context, js *jobsetv1alpha2.JobSet, on bool) error {
	if ptr.Deref(js.Spec.Suspend, false) == on {
		return nil
	}
	base := js.DeepCopy()
	js.Spec.Suspend = ptr.To(on)
	return r.client.Patch(ctx, js, client.MergeFrom(base))
}

// writeStatus writes the status derived from what was observed, when it changed, then tells of
// its transitions (once: after the write).
func (r *Reconciler) writeStatus(ctx context.Context, job *trainerv1alpha1.TrainJob, o observed) error {
	st := status(job, o)
	if equality.Semantic.DeepEqual(job.Status, st) {
		return nil
	}
	if err := r.status.Write(ctx, job, &st); err != nil {
		if apierrors.IsConflict(err) {
			return nil // a newer version is on its way to the cache, and reconciles again
		}
		return fmt.Errorf("writing status of TrainJob %s: %w", job.Name, err)
	}
	r.tell.Tell(job, r.firstRun(job, told(job, job.Status, st, o.jobSet)))
	job.Status = st
	return nil
}

// firstRun keeps t's Running change only the first time this kiln tells it of job: pods that
// become ready again (a pod's restart, a resumption) do not count again in the time to running.
// After a restart of kiln, a run already told is told again only if its pods become ready anew.
func (r *Reconciler) firstRun(job *trainerv1alpha1.TrainJob, t transition.Told) transition.Told {
	i := slices.Index(t.Changes, transition.Running)
	if i < 0 {
		return t
	}
	if uid, told := r.ran.Swap(client.ObjectKeyFromObject(job), job.UID); told && uid == job.UID {
		t.Changes = slices.Delete(t.Changes, i, i+1)
	}
	return t
}

// minPositive is the smaller of a and b, ignoring zero.
func minPositive(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}
