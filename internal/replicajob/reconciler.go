// Package replicajob is the engine behind every kubeflow.org/v1 training job: for each replica
// index one pod and one headless service (or a batch Job, for a type that runs as one),
// restarts under the replica's restart policy, the run policies (clean-up, TTL, deadline,
// backoff, suspend, managedBy) and a status derived from the pods seen now. A reconcile observes the job, plans every write purely (plan.go) and carries
// the plan out (execute.go). A framework (package framework) supplies only what differs between
// TensorFlow, PyTorch, XGBoost, JAX, Paddle and MPI; plugins (plugins.go) what every job gets
// from the cluster's features: gang scheduling, the network policy, Kueue's queues.
package replicajob

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/burst"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/gang"
	"github.com/kiln-ml/kiln/internal/owned"
	"github.com/kiln-ml/kiln/internal/statuspatch"
	"github.com/kiln-ml/kiln/internal/tracing"
	"github.com/kiln-ml/kiln/internal/transition"
)

// DefaultChildEventBatch is Options.ChildEventBatch unless the operator sets it
// (--child-event-batch): half the Kubernetes Job controller's second, which gathered as many
// events per job in the benchmark's bursts (docs/performance.md).
const DefaultChildEventBatch = 500 * time.Millisecond

// expectationsRecheck is how soon a job waiting for the cache to catch up is looked at again,
// should no watch event arrive first.
const expectationsRecheck = 5 * time.Second

// Options are the operator-level settings of the engine.
type Options struct {
	// DefaultCleanPodPolicy applies to jobs that do not set runPolicy.cleanPodPolicy.
	DefaultCleanPodPolicy kubeflowv1.CleanPodPolicy
	// Parallelism is the number of pod and service writes one reconcile has in flight.
	Parallelism int
	// Gang places the pods of jobs with more than one pod (or a schedulingPolicy) all-or-nothing
	// through its group object; nil: no gang scheduling.
	Gang gang.Backend
	// StatusInterval paces status writes: a condition turning is written one interval after it was
	// first seen, replica counts alone ten intervals after; a new job's Created and its finishing
	// at once. Changes seen meanwhile join the same write. 0 writes every change at once.
	StatusInterval time.Duration
	// ChildEventBatch is how long the events of a job's pods and services are gathered before the
	// job is planned again (see NewChildEvents); 0 plans at every event.
	ChildEventBatch time.Duration
	// DefaultNetworkPolicy is the network policy of jobs that do not choose one
	// (netpol.Isolated or netpol.None; "" is none).
	DefaultNetworkPolicy string
	// Burst holds the first pods and the Created condition of jobs that arrive in a burst of
	// submissions until it is in (shared by every kind: see internal/burst); nil holds none.
	Burst *burst.Gate
}

// Reconciler reconciles the jobs of one framework.
type Reconciler struct {
	client client.Client
	// kit writes everything the job owns: pods and services (through the engine's own wire, set
	// up with the manager), the gang group's, extras and secrets.
	kit    owned.Kit
	status *statuspatch.Writer // set up with the manager
	kids   *ChildEvents        // set up with the manager: the pods and services of each job
	fw     framework.Framework
	// tell records events and metrics, once what they tell of is written.
	tell  transition.Teller
	clock clock.PassiveClock
	opts  Options
	// mem is what the engine remembers of each job between reconciles (memory.go).
	mem *memory
	// plugins are the cluster features every job gets (plugins.go).
	plugins plugins
	// gang keeps the groups of ganged jobs; nil without gang scheduling.
	gang *gang.Keeper
	// wakes queues the jobs whose pods waited for a burst once it is in, createdWakes those whose
	// Created waited in the createdWriter's queue (each set up with its controller).
	wakes, createdWakes burst.Wakes
}

// noteRefusal keeps (err != nil) or forgets what refused a job's pods: the apiserver (a quota, a
// policy), or an object of a pod's name that is not the job's.
func (r *Reconciler) noteRefusal(key types.NamespacedName, uid types.UID, err error) {
	r.mem.update(key, uid, func(j *jobMemory) {
		j.refused, j.podConflict = "", ""
		switch {
		case owned.AsConflict(err) != nil:
			j.podConflict = err.Error()
		case err != nil:
			j.refused = err.Error()
		}
	})
}

// noteServiceRefusal keeps (err != nil) or forgets what refused a job's services.
func (r *Reconciler) noteServiceRefusal(key types.NamespacedName, uid types.UID, err error) {
	r.mem.update(key, uid, func(j *jobMemory) {
		j.refusedServices = ""
		if err != nil {
			j.refusedServices = err.Error()
		}
	})
}

// noteExtrasRefusal keeps what the apiserver refused of a job's secrets and extras (err is a
// refusal: owned.Refused), or forgets it (nil). It says whether that changed.
func (r *Reconciler) noteExtrasRefusal(key types.NamespacedName, uid types.UID, was string, err error) bool {
	why := ""
	if err != nil {
		why = strings.ReplaceAll(err.Error(), "\n", "; ")
	}
	if why != was {
		r.mem.update(key, uid, func(j *jobMemory) { j.refusedExtras = why })
	}
	return why != was
}

// NewReconciler returns the reconciler of fw's jobs.
// reader reads the apiserver: the extras are in no cache of the engine's, and are read only before
// they are written (see syncExtras).
func NewReconciler(c client.Client, reader client.Reader, fw framework.Framework, rec recorder.EventRecorder, clk clock.PassiveClock, opts Options) *Reconciler {
	r := &Reconciler{client: c, fw: fw, clock: clk, opts: opts, mem: newMemory(), plugins: pluginsFor(opts),
		tell: transition.Teller{Recorder: rec, Framework: fw.Name, Now: clk.Now},
		kit: owned.Kit{Client: c, Reader: reader, FieldOwner: fieldManager, ParentKind: fw.Kind,
			Cached: func(client.Object) client.Reader { return nil }}}
	if opts.Gang != nil {
		r.gang = &gang.Keeper{Client: c, Backend: opts.Gang, FieldOwner: fieldManager}
	}
	return r
}

// Reconcile brings one job's pods, services and status in line with its spec: it observes the
// job, plans every write (plan) and carries the plan out (execute).
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, err error) {
	ctx, end := tracing.Start(ctx, "Reconcile "+r.fw.Kind, r.fw.Kind, req.Namespace, req.Name)
	defer func() { end(err) }()
	job := r.fw.NewJob()
	if err := r.client.Get(ctx, req.NamespacedName, job); err != nil {
		if apierrors.IsNotFound(err) {
			if uid := r.mem.forget(req.NamespacedName); uid != "" {
				r.kids.Forget(uid)
			}
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !ManagedByKiln(job) || job.GetDeletionTimestamp() != nil {
		return reconcile.Result{}, nil
	}
	kids := r.kids.Of(job.GetUID())
	now := r.clock.Now()
	if kids.empty() && !isSuspended(job) {
		// A job that arrived in a burst of submissions creates its pods once the burst is in.
		if again := r.opts.Burst.Hold(job, &r.wakes); again > 0 {
			return reconcile.Result{RequeueAfter: again}, nil
		}
	}
	ok, lapsed := r.mem.satisfied(req.NamespacedName, job.GetUID(), job.GetResourceVersion(), kids, now)
	if lapsed != "" {
		logf.FromContext(ctx).Error(nil, "the cache did not show the job's own writes within "+expectationsTimeout.String()+"; planning from what it shows", "pending", lapsed)
	}
	if !ok {
		return reconcile.Result{RequeueAfter: expectationsRecheck}, nil
	}
	mem := r.mem.of(req.NamespacedName, job.GetUID())
	in, group, err := r.observe(ctx, job, mem, kids, now)
	if err != nil {
		return reconcile.Result{}, err
	}
	p, err := plan(r.fw, r.plugins, job, in)
	if err != nil {
		r.tell.Tell(job, transition.Told{Events: []Event{{Type: corev1.EventTypeWarning, Reason: r.fw.Kind + "FailedValidation", Message: err.Error()}}})
		return reconcile.Result{}, reconcile.TerminalError(err)
	}
	return r.execute(ctx, job, mem, group, p)
}

// validate is what Validate finds wrong with the job's spec, once per generation.
func (r *Reconciler) validate(job framework.Job, mem jobMemory) field.ErrorList {
	if g := job.GetGeneration(); g != 0 && g == mem.validated {
		return mem.invalid
	}
	invalid, _ := Validate(r.fw, job, nil)
	r.mem.update(types.NamespacedName{Namespace: job.GetNamespace(), Name: job.GetName()}, job.GetUID(), func(j *jobMemory) {
		j.validated, j.invalid = job.GetGeneration(), invalid
	})
	return invalid
}

// observe is what a plan decides from besides the job: its children seen now, what the engine
// remembers of it, and its gang group (built by the GroupPlugin) with what the cache shows of it,
// read once for the plan and for execute's sync.
func (r *Reconciler) observe(ctx context.Context, job framework.Job, mem jobMemory, kids Family, now time.Time) (Inputs, gang.Seen, error) {
	in := Inputs{Pods: kids.Pods, Services: kids.Services, Jobs: kids.Jobs, Now: now, Seen: mem.status.since, Carried: mem.carried, Invalid: r.validate(job, mem),
		Refused: mem.refused, RefusedServices: mem.refusedServices, RefusedExtras: mem.refusedExtras, PodConflict: mem.podConflict, Conflict: mem.conflict,
		SecretsCreated: mem.secretsCreated, ExtrasSynced: mem.extras}
	var seen gang.Seen
	if r.gang == nil {
		return in, seen, nil
	}
	if in.Group = r.plugins.group(r.fw, job); in.Group == nil {
		return in, seen, nil
	}
	own(r.fw, in.Group, job)
	// A job that does not run creates no pods: its group is only ever deleted, and not read here.
	if !isFinished(job.GetJobStatus()) && !isSuspended(job) {
		seen = r.gang.Read(ctx, in.Group)
		st, err := r.gang.Observe(in.Group, seen, mem.group)
		if err != nil {
			return in, seen, err
		}
		in.GangWaiting, in.HoldPods = st.Waiting, !st.CreatePods
	}
	return in, seen, nil
}

// statusWait is how long the plan's changed status must wait before it is written: zero when
// it finishes the job, and for a new job's Created (Kubeflow's clients, kubectl and the SDK's
// is_job_created, expect it at once; paced, it waited in the queue behind other jobs' pod
// creation, for seconds in a burst; measured: docs/performance.md, Measurements behind the code).
// Otherwise the write waits countsIntervals from when other changes (replica counts) were first
// seen, and at most conditionIntervals from when a condition turned; changes seen meanwhile join
// the same write. Pods starting one after another thus make one write, and a job's writes are one
// per condition that turns plus the replica counts' while it runs. pending is the job's
// pendingStatus as the reconcile found it.
func (r *Reconciler) statusWait(key types.NamespacedName, job framework.Job, pending pendingStatus, p *Plan, now time.Time) time.Duration {
	old := job.GetJobStatus()
	if r.opts.StatusInterval <= 0 || getCondition(old, kubeflowv1.JobCreated) == nil {
		return 0
	}
	for _, t := range p.Became {
		if t.Type == kubeflowv1.JobSucceeded || t.Type == kubeflowv1.JobFailed {
			return 0
		}
	}
	if pending.since.IsZero() {
		pending = pendingStatus{since: now}
		r.mem.update(key, job.GetUID(), func(j *jobMemory) { j.status = pending })
	}
	due := pending.since.Add(countsIntervals * r.opts.StatusInterval)
	if conditionsTurned(old, &p.Status) || completedGrew(old, &p.Status) {
		if pending.turned.IsZero() {
			pending.turned = now
			r.mem.update(key, job.GetUID(), func(j *jobMemory) { j.status = pending })
		}
		due = minTime(due, pending.turned.Add(conditionIntervals*r.opts.StatusInterval))
	}
	return due.Sub(now)
}

// How many status intervals a change waits, by what changed (see statusWait).
const (
	conditionIntervals = 1
	countsIntervals    = 10
)

// conditionsTurned says whether a condition other than Created appeared or changed status, or
// Created's message changed (why the job's gang waits).
func conditionsTurned(old, now *kubeflowv1.JobStatus) bool {
	for _, c := range now.Conditions {
		if c.Type == kubeflowv1.JobCreated {
			if was := getCondition(old, c.Type); was != nil && was.Message != c.Message {
				return true
			}
			continue
		}
		if was := getCondition(old, c.Type); was == nil || was.Status != c.Status {
			return true
		}
	}
	return false
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func minPositive(a, b time.Duration) time.Duration {
	if a > 0 && a < b {
		return a
	}
	return b
}

// told is what the plan's status write tells: its transitions' events and the transitions the
// job metrics count.
func told(p *Plan) transition.Told {
	t := transition.Told{Events: p.Events, Start: p.Status.StartTime, Completion: p.Status.CompletionTime}
	for _, b := range p.Became {
		switch b.Type {
		case kubeflowv1.JobCreated:
			t.Changes = append(t.Changes, transition.Created)
		case kubeflowv1.JobRunning:
			if b.First {
				t.Changes = append(t.Changes, transition.Running)
			}
		case kubeflowv1.JobRestarting:
			t.Changes = append(t.Changes, transition.Restarted)
		case kubeflowv1.JobSucceeded:
			t.Changes = append(t.Changes, transition.Succeeded)
		case kubeflowv1.JobFailed:
			t.Changes = append(t.Changes, transition.Failed)
		}
	}
	return t
}

// ManagedByKiln reports whether runPolicy.managedBy leaves the job to kiln.
func ManagedByKiln(job framework.Job) bool {
	m := job.GetRunPolicy().ManagedBy
	return m == nil || *m == "" || *m == kubeflowv1.KubeflowJobsController
}

// patchStatus writes the changed status once, guarded by the resourceVersion read (statuspatch).
// The next reconcile waits until the cache shows the write: planning from an older status could,
// say, recreate the pods of a job this write just finished.
func (r *Reconciler) patchStatus(ctx context.Context, key types.NamespacedName, job framework.Job, status kubeflowv1.JobStatus) error {
	read := job.GetResourceVersion()
	ctx, end := tracing.Start(ctx, "patch status", r.fw.Kind, job.GetNamespace(), job.GetName())
	err := r.status.Write(ctx, job, &status)
	end(err)
	if err != nil {
		return fmt.Errorf("writing status of %s %s: %w", r.fw.Kind, job.GetName(), err)
	}
	r.mem.statusWritten(key, job.GetUID(), read, r.clock.Now())
	return nil
}

var _ reconcile.TypedReconciler[reconcile.Request] = &Reconciler{}
