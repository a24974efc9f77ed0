package pyjob

import (
	"context"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	trainingv1beta1 "github.com/kiln-ml/kiln/api/training/v1beta1"
	"github.com/kiln-ml/kiln/internal/burst"
	"github.com/kiln-ml/kiln/internal/conversion"
	"github.com/kiln-ml/kiln/internal/gang"
	"github.com/kiln-ml/kiln/internal/owned"
	"github.com/kiln-ml/kiln/internal/statuspatch"
	"github.com/kiln-ml/kiln/internal/tracing"
	"github.com/kiln-ml/kiln/internal/transition"
	"github.com/kiln-ml/kiln/internal/ttl"
)

// +kubebuilder:rbac:groups=training.kiln.dev,resources=pyjobs,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=training.kiln.dev,resources=pyjobs/status,verbs=get;patch
// +kubebuilder:rbac:groups=training.kiln.dev,resources=pyjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=events,verbs=list

// Reconciler reconciles PyJobs.
type Reconciler struct {
	client client.Client
	status *statuspatch.Writer // set up with the manager
	// kit creates what the PyJob needs, never adopting what it does not control.
	kit owned.Kit
	// reader reads the apiserver directly: the batch Job controller's events.
	reader client.Reader
	clock  clock.PassiveClock
	// tell records the events and metrics of what was written.
	tell transition.Teller
	// gang keeps the groups of distributed PyJobs; nil without gang scheduling. groups holds what
	// it wrote of each PyJob's group (a gang.Synced), forgotten when the PyJob is gone.
	gang   *gang.Keeper
	groups sync.Map
	// DefaultNetworkPolicy is the network policy of PyJobs that choose none (netpol.Isolated
	// or netpol.None; "" is none).
	DefaultNetworkPolicy string
	// Burst holds the Job of PyJobs that arrive in a burst of submissions until it is in (shared
	// with every kind: internal/burst); nil holds none. wakes queues them then.
	Burst *burst.Gate
	wakes burst.Wakes
}

// NewReconciler returns the PyJob reconciler; g (nil: none) gang-schedules distributed PyJobs.
func NewReconciler(c client.Client, reader client.Reader, rec recorder.EventRecorder, clk clock.PassiveClock, g gang.Backend) *Reconciler {
	r := &Reconciler{client: c, reader: reader, clock: clk, tell: transition.Teller{Recorder: rec, Framework: Framework, Now: clk.Now},
		kit: owned.Kit{Client: c, Reader: reader, FieldOwner: "kiln", ParentKind: "PyJob", Kept: keptClaim}}
	if g != nil {
		r.gang = &gang.Keeper{Client: c, Backend: g, FieldOwner: "kiln"}
	}
	return r
}

// SetupWithManager watches PyJobs, the Jobs, services, claims and script ConfigMaps they own, and
// their pods (for the scheduler's reasons and exit codes), which carry the PyJob's name in a label.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	byLabel := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if name := o.GetLabels()[LabelPyJob]; name != "" {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
		}
		return nil
	})
	owner := owned.EnqueueController(trainingv1beta1.GroupVersion.WithKind("PyJob").GroupKind())
	b := ctrl.NewControllerManagedBy(mgr).
		Named("pyjob").
		// The stored version: once every object is stored at it, no read waits for the conversion webhook.
		For(&trainingv1beta1.PyJob{}, builder.WithPredicates(r.Burst.Arrivals(func(o client.Object) bool {
			return o.(*trainingv1beta1.PyJob).Status.Phase == ""
		}))).
		Watches(&batchv1.Job{}, owner).
		Watches(&corev1.Service{}, owner).
		Watches(&corev1.PersistentVolumeClaim{}, owner).
		Watches(&corev1.ConfigMap{}, owner).
		Watches(&networkingv1.NetworkPolicy{}, owner).
		Watches(&corev1.Pod{}, byLabel).
		WatchesRawSource(r.wakes.Source())
	if r.gang != nil && gang.Served(mgr.GetRESTMapper(), r.gang.Backend) {
		// The gang's group: its state is why the workers wait.
		b = b.Watches(r.gang.Backend.NewObject(), byLabel)
	}
	var err error
	if r.status, err = statuspatch.NewWriter(mgr.GetConfig(), mgr.GetHTTPClient(), mgr.GetRESTMapper(), trainingv1beta1.GroupVersion.WithKind("PyJob")); err != nil {
		return err
	}
	return b.WithOptions(controller.Options{MaxConcurrentReconciles: max(1, workers)}).Complete(r)
}

// Reconcile creates what the PyJob needs, keeps the Job's changeable fields in line, writes the
// status and deletes the PyJob once its TTL after finishing ran out.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, err error) {
	ctx, end := tracing.Start(ctx, "Reconcile PyJob", "PyJob", req.Namespace, req.Name)
	defer func() { end(err) }()
	var job trainingv1alpha1.PyJob
	if err := conversion.ReadHub(ctx, r.client, req.NamespacedName, &trainingv1beta1.PyJob{}, &job); err != nil || job.DeletionTimestamp != nil {
		if apierrors.IsNotFound(err) {
			r.groups.Delete(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if job.Spec.Workers < 1 {
		job.Spec.Workers = 1 // the CRD defaults it; a PyJob written before that gets the same
	}
	// A finished run never starts new work: what it owned and someone deleted (its batch Job, by
	// hand or by a TTL controller) is not made again.
	if finished(&job) {
		return r.finish(ctx, &job)
	}
	if job.Spec.Workers > MaxWorkers { // the CRD bounds it; one written before that is not run
		return reconcile.Result{}, r.writeStatus(ctx, &job, observed{problem: problem{ReasonInvalid, fmt.Sprintf(
			"spec.workers is %d, more than the %d a PyJob may have (docs/limits.md): create a PyJob with fewer", job.Spec.Workers, MaxWorkers)}})
	}
	if !ptr.Deref(job.Spec.Suspend, false) {
		if again := r.Burst.Hold(&job, &r.wakes); again > 0 {
			// It arrived in a burst of submissions: what it runs is made once the burst is in.
			return reconcile.Result{RequeueAfter: again}, nil
		}
	}
	problem, reused, err := r.ensureChildren(ctx, &job)
	if err != nil {
		return reconcile.Result{}, err
	}
	g, gangErr := r.syncGroup(ctx, &job)
	if gangErr != nil && g.Waiting == "" {
		return reconcile.Result{}, gangErr
	}
	read, lost, err := r.batchJob(ctx, &job)
	if err != nil {
		return reconcile.Result{}, err
	}
	var bj *batchv1.Job // the PyJob's own, once it may run
	if problem.reason == "" && g.CreatePods && !lost {
		if bj, problem, err = r.ensureJob(ctx, &job, read); err != nil {
			return reconcile.Result{}, err
		}
		if bj != nil {
			if err := r.syncJob(ctx, &job, bj); err != nil {
				return reconcile.Result{}, err
			}
		}
	}
	refused, recheck, err := r.refusal(ctx, &job, bj)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.writeStatus(ctx, &job, observed{job: bj, problem: problem, waiting: g.Waiting, reusedClaim: reused, refused: refused, lost: lost}); err != nil {
		return reconcile.Result{}, err
	}
	if gangErr != nil {
		return reconcile.Result{}, gangErr // the group was refused: retried with backoff
	}
	res, err := r.expire(ctx, &job)
	if problem.reason != "" {
		recheck = refusalRecheck // nothing kiln watches tells when the object in the way goes
	}
	if recheck > 0 && (res.RequeueAfter == 0 || recheck < res.RequeueAfter) {
		res.RequeueAfter = recheck
	}
	return res, err
}

// batchJob is the PyJob's batch Job from the cache (nil: none), read once per reconcile, and
// whether its run is lost: it started (the status says when) and the Job is gone before kiln
// recorded how it ended (kiln down meanwhile, a TTL of 0 set by a policy). A lost run is never
// started again; its verdict comes from the pods that are left, if they tell it.
func (r *Reconciler) batchJob(ctx context.Context, job *trainingv1alpha1.PyJob) (_ *batchv1.Job, lost bool, _ error) {
	bj := &batchv1.Job{}
	switch err := r.client.Get(ctx, client.ObjectKeyFromObject(job), bj); {
	case apierrors.IsNotFound(err):
		return nil, job.Status.StartTime != nil, nil
	case err != nil:
		return nil, false, err
	}
	return bj, false, nil
}

// ensureJob is the PyJob's batch Job: read (as the cache has it), or created when read is nil.
// An object of its name that the PyJob does not control is never adopted: it comes back as the
// problem, with no Job.
func (r *Reconciler) ensureJob(ctx context.Context, job *trainingv1alpha1.PyJob, read *batchv1.Job) (*batchv1.Job, problem, error) {
	desired := desiredJob(job)
	if r.gang != nil && distributed(job) {
		r.gang.Backend.Decorate(&desired.Spec.Template, gang.GroupName(job.Name, "PyJob"), "worker")
	}
	if read != nil {
		if c := owned.AsConflict(r.kit.Owns(job, desired, read)); c != nil {
			return nil, problem{ReasonNameConflict, c.Error()}, nil
		}
		return read, problem{}, nil
	}
	created := &batchv1.Job{}
	if p, err := r.ensure(ctx, job, desired, created); err != nil || p.reason != "" {
		return nil, p, err
	}
	return created, problem{}, nil
}

// A batch Job gets refusalGrace to create its workers before kiln reads why it has not; while
// workers are missing, kiln looks again every refusalRecheck (a refused creation changes nothing
// kiln watches).
const (
	refusalGrace   = 5 * time.Second
	refusalRecheck = 15 * time.Second
)

// refusal is why the batch Job's controller cannot create the PyJob's workers — its newest
// FailedCreate event of the last two minutes (a quota exceeded, an admission policy) — or "", and
// when to look again. It reads the apiserver only for a Job that had refusalGrace to create its
// workers and still misses some, not in the moment every new Job lacks them.
func (r *Reconciler) refusal(ctx context.Context, job *trainingv1alpha1.PyJob, bj *batchv1.Job) (string, time.Duration, error) {
	if bj == nil || (bj.Spec.Suspend != nil && *bj.Spec.Suspend) || bj.Status.Active+bj.Status.Succeeded+bj.Status.Failed >= job.Spec.Workers {
		return "", 0, nil
	}
	if age := r.clock.Since(bj.CreationTimestamp.Time); age < refusalGrace {
		return "", refusalGrace - age, nil
	}
	var events corev1.EventList
	if err := r.reader.List(ctx, &events, client.InNamespace(bj.Namespace),
		client.MatchingFields{"involvedObject.uid": string(bj.UID), "reason": "FailedCreate"}); err != nil {
		return "", 0, fmt.Errorf("reading the events of batch Job %s: %w", bj.Name, err)
	}
	var newest *corev1.Event
	for i := range events.Items {
		if e := &events.Items[i]; newest == nil || lastSeen(e).After(lastSeen(newest)) {
			newest = e
		}
	}
	if newest == nil || r.clock.Since(lastSeen(newest)) > 2*time.Minute {
		return "", refusalRecheck, nil
	}
	return newest.Message, refusalRecheck, nil
}

func lastSeen(e *corev1.Event) time.Time {
	var series time.Time
	if e.Series != nil {
		series = e.Series.LastObservedTime.Time
	}
	for _, t := range []time.Time{series, e.LastTimestamp.Time, e.EventTime.Time, e.CreationTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

func finished(job *trainingv1alpha1.PyJob) bool {
	return job.Status.Phase == trainingv1alpha1.PyJobSucceeded || job.Status.Phase == trainingv1alpha1.PyJobFailed
}

// finish looks after a finished PyJob: its gang's group goes, its status follows its batch Job
// while that is there, and its TTL runs.
func (r *Reconciler) finish(ctx context.Context, job *trainingv1alpha1.PyJob) (reconcile.Result, error) {
	if _, err := r.syncGroup(ctx, job); err != nil {
		return reconcile.Result{}, err
	}
	bj := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name}}
	switch ok, err := r.kit.Get(ctx, job, bj); {
	case err != nil:
		return reconcile.Result{}, err
	case !ok:
		bj = nil
	}
	if err := r.writeStatus(ctx, job, observed{job: bj}); err != nil {
		return reconcile.Result{}, err
	}
	return r.expire(ctx, job)
}

// writeStatus writes the status derived from what was observed and the PyJob's pods, when it
// changed, then tells of its transitions in events and metrics (once: after the write).
func (r *Reconciler) writeStatus(ctx context.Context, job *trainingv1alpha1.PyJob, o observed) error {
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{LabelPyJob: job.Name}); err != nil {
		return err
	}
	o.pods = pods.Items
	now := r.clock.Now()
	st := status(job, o, metav1.NewTime(now))
	if equality.Semantic.DeepEqual(job.Status, st) {
		return nil
	}
	// Written over the version read only: a status derived from a stale cached copy would
	// write (and count) a transition twice. A conflict means a newer version is on its way to
	// the cache, and its event reconciles again.
	if err := r.status.Write(ctx, job, &st); err != nil {
		if apierrors.IsConflict(err) {
			return nil
		}
		return fmt.Errorf("writing status of PyJob %s: %w", job.Name, err)
	}
	r.tell.Tell(job, told(job, job.Status, st, o.problem))
	job.Status = st
	return nil
}

// Framework is the framework label of the PyJob's metrics (training_operator_jobs_*{framework}).
const Framework = "pyjob"

// told is what the write of the PyJob's status st over old tells: an event per transition (a
// Warning when a child cannot be written, p), and the metrics the kubeflow.org kinds have.
func told(job *trainingv1alpha1.PyJob, old, st trainingv1alpha1.PyJobStatus, p problem) transition.Told {
	t := transition.Told{Start: st.StartTime, Completion: st.CompletionTime}
	if p.reason != "" && st.Message != old.Message {
		t.Event(corev1.EventTypeWarning, p.reason, p.message)
	}
	if c := meta.FindStatusCondition(st.Conditions, ConditionOutputReused); c != nil && meta.FindStatusCondition(old.Conditions, ConditionOutputReused) == nil {
		t.Event(corev1.EventTypeWarning, "OutputClaimReused", c.Message)
	}
	if meta.IsStatusConditionTrue(st.Conditions, ConditionPodsRefused) && !meta.IsStatusConditionTrue(old.Conditions, ConditionPodsRefused) {
		t.Event(corev1.EventTypeWarning, "FailedCreatePods", meta.FindStatusCondition(st.Conditions, ConditionPodsRefused).Message)
	}
	if st.Phase == old.Phase {
		return t
	}
	kind := corev1.EventTypeNormal
	if st.Phase == trainingv1alpha1.PyJobFailed {
		kind = corev1.EventTypeWarning
	}
	t.Event(kind, "PyJob"+string(st.Phase), fmt.Sprintf("PyJob %s is %s: %s", job.Name, st.Phase, st.Message))
	if old.Phase == "" {
		t.Changes = append(t.Changes, transition.Created)
	}
	switch st.Phase {
	case trainingv1alpha1.PyJobRunning:
		t.Changes = append(t.Changes, transition.Running)
	case trainingv1alpha1.PyJobSucceeded:
		t.Changes = append(t.Changes, transition.Succeeded)
	case trainingv1alpha1.PyJobFailed:
		t.Changes = append(t.Changes, transition.Failed)
	}
	return t
}

// syncGroup keeps the group of a distributed PyJob's workers (see gang.Keeper) until it finished.
func (r *Reconciler) syncGroup(ctx context.Context, job *trainingv1alpha1.PyJob) (gang.State, error) {
	if r.gang == nil || !distributed(job) {
		return gang.State{CreatePods: true}, nil
	}
	worker := gang.Pod{Role: "worker", Resources: []corev1.ResourceRequirements{trainer(job).Resources}}
	pods := make([]gang.Pod, job.Spec.Workers)
	for i := range pods {
		pods[i] = worker
	}
	obj := r.gang.Backend.Object(gang.NewGroup(gang.GroupName(job.Name, "PyJob"), job.Namespace, &gang.Policy{PriorityClass: job.Spec.PriorityClassName}, pods))
	obj.SetOwnerReferences([]metav1.OwnerReference{ownerRef(job)})
	obj.SetLabels(labels(job))
	key := client.ObjectKeyFromObject(job)
	var last gang.Synced
	if v, ok := r.groups.Load(key); ok {
		last = v.(gang.Synced)
	}
	synced, runs := last, !finished(job)
	var seen gang.Seen // read only for a group to keep: one to delete is read by its deletion
	if runs {
		seen = r.gang.Read(ctx, obj)
	}
	st, err := r.gang.Sync(ctx, obj, runs, seen, &synced)
	if synced != last {
		r.groups.Store(key, synced)
	}
	return st, err
}

// Reasons a PyJob stays Pending because kiln cannot write one of its children, or will not run
// it (Invalid: stored before the CRD refused what it asks).
const (
	ReasonNameConflict = owned.ReasonNameConflict
	ReasonRefused      = owned.ReasonRefused
	ReasonInvalid      = "Invalid"
)

// MaxWorkers is the CRD's bound on spec.workers (docs/limits.md).
const MaxWorkers = 10000

// problem is what keeps kiln from writing a PyJob's child: an object in the way of its name, or
// the apiserver refusing it (a quota, an admission policy). The zero problem is none.
type problem struct{ reason, message string }

// ensureChildren creates what the PyJob's batch Job mounts and reaches, in order, stopping at the
// first problem; reused is an earlier run's output claim it mounts.
func (r *Reconciler) ensureChildren(ctx context.Context, job *trainingv1alpha1.PyJob) (_ problem, reused *corev1.PersistentVolumeClaim, _ error) {
	claim := &corev1.PersistentVolumeClaim{}
	for _, c := range mounted(job, r.DefaultNetworkPolicy) {
		if !c.want {
			continue
		}
		got := c.empty()
		if p, err := r.ensure(ctx, job, c.build(job), got); err != nil || p.reason != "" {
			return p, nil, err
		}
		if cl, ok := got.(*corev1.PersistentVolumeClaim); ok {
			claim = cl
		}
	}
	if claim.Name != "" && claim.CreationTimestamp.Before(&job.CreationTimestamp) {
		reused = claim // a Retain claim of an earlier PyJob of this name
	}
	return problem{}, reused, nil
}

// ensure creates obj unless it exists; existing receives what is there (owned.Kit.Create). A
// same-named object the PyJob does not control is never adopted, and one the apiserver refuses
// is not retried at once: the returned problem says which.
func (r *Reconciler) ensure(ctx context.Context, job *trainingv1alpha1.PyJob, obj, existing client.Object) (problem, error) {
	reason, message, err := owned.Why(r.kit.Create(ctx, job, obj, existing))
	return problem{reason, message}, err
}

// keptClaim says whether existing, an object a PyJob keeps without owning it (a Retain output
// claim), is the PyJob's: it carries the PyJob's name.
func keptClaim(parent, existing client.Object) bool {
	return existing.GetLabels()[LabelPyJob] == parent.GetName()
}

// syncJob carries the fields of the spec that may change to the batch Job: suspend,
// backoffLimit and activeDeadlineSeconds (the CRD refuses changes to the rest). A Job in a
// Kueue queue is suspended by the PyJob's suspend but never resumed by kiln: Kueue resumes it
// when it admits it.
func (r *Reconciler) syncJob(ctx context.Context, job *trainingv1alpha1.PyJob, bj *batchv1.Job) error {
	base := bj.DeepCopy()
	want := job.Spec.Suspend != nil && *job.Spec.Suspend
	got := bj.Spec.Suspend != nil && *bj.Spec.Suspend
	if got != want && !(got && queued(bj)) {
		bj.Spec.Suspend = &want
	}
	if backoff := ptr.Deref(job.Spec.BackoffLimit, defaultBackoffLimit); ptr.Deref(bj.Spec.BackoffLimit, defaultBackoffLimit) != backoff {
		bj.Spec.BackoffLimit = &backoff
	}
	if !equality.Semantic.DeepEqual(bj.Spec.ActiveDeadlineSeconds, job.Spec.ActiveDeadlineSeconds) {
		bj.Spec.ActiveDeadlineSeconds = job.Spec.ActiveDeadlineSeconds
	}
	if equality.Semantic.DeepEqual(base.Spec, bj.Spec) {
		return nil
	}
	return r.client.Patch(ctx, bj, client.MergeFrom(base))
}

// defaultBackoffLimit is a batch Job's backoffLimit when none is given.
const defaultBackoffLimit int32 = 6

// expire deletes a finished PyJob whose ttlSecondsAfterFinished ran out, or says when it will.
func (r *Reconciler) expire(ctx context.Context, job *trainingv1alpha1.PyJob) (reconcile.Result, error) {
	switch left, has := ttl.Left(job.Spec.TTLSecondsAfterFinished, job.Status.CompletionTime, r.clock.Now()); {
	case !has:
		return reconcile.Result{}, nil
	case left > 0:
		return reconcile.Result{RequeueAfter: left}, nil
	}
	deleted, err := r.kit.DeleteParent(ctx, &trainingv1beta1.PyJob{ObjectMeta: job.ObjectMeta})
	if deleted {
		r.tell.Tell(job, transition.Told{Changes: []transition.Change{transition.Deleted}})
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, nil
}
