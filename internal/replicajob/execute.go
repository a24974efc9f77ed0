package replicajob

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/gang"
	"github.com/kiln-ml/kiln/internal/owned"
	"github.com/kiln-ml/kiln/internal/tracing"
	"github.com/kiln-ml/kiln/internal/transition"
)

// execute carries out every write of a plan, in order: what the pods need (the gang group, the
// secrets, the extras), then the pods and services, then the status with its events and metrics,
// and last the job's deletion once its TTL ran out. A write that fails is retried by the next
// reconcile; one that holds the pods (a group or extra in the way) drops their creation.
// group is the job's gang group as observe read it.
func (r *Reconciler) execute(ctx context.Context, job framework.Job, mem jobMemory, group gang.Seen, p *Plan) (reconcile.Result, error) {
	key := types.NamespacedName{Namespace: job.GetNamespace(), Name: job.GetName()}
	held, writeErr := r.beforePods(ctx, job, mem, group, p)
	if len(p.Carried) > 0 || mem.carried != nil {
		r.mem.update(key, job.GetUID(), func(j *jobMemory) { j.carried = p.Carried })
	}
	failed, err := r.writeChildren(ctx, job, p, mem.refusedServices != "")
	writeErr = errors.Join(writeErr, err)
	// What held or failed is told at once, whatever becomes of the status write.
	r.tell.Tell(job, transition.Told{Events: append(held, failed...)})
	if res, done, err := r.writeStatus(ctx, key, job, mem, p); done {
		return res, errors.Join(writeErr, err)
	}
	if p.DeleteJob {
		deleted, err := r.kit.DeleteParent(ctx, job)
		if deleted {
			r.tell.Tell(job, transition.Told{Changes: []transition.Change{transition.Deleted}})
		}
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: p.RequeueAfter}, writeErr
}

// beforePods writes what the job's pods need before they are created: the gang group, the
// secrets and the extras. Should a secret or extra fail, the pods are still created (the kubelet
// waits for their volumes) and the error retries the reconcile. A group the apiserver refuses, or
// an object in the way of an extra, holds the pods instead (they would not be placed, or would
// mount that object); the engine remembers it, so the next plan says why the job waits.
// It returns the Warning event of a new hold.
func (r *Reconciler) beforePods(ctx context.Context, job framework.Job, mem jobMemory, group gang.Seen, p *Plan) (events []Event, _ error) {
	key := types.NamespacedName{Namespace: job.GetNamespace(), Name: job.GetName()}
	var errs []error
	if p.Group != nil && r.gang != nil {
		// The group's changes are watched and plan the job again, but for a group in the way.
		synced := mem.group
		st, err := r.gang.Sync(ctx, p.Group, p.GroupKeep, group, &synced)
		if synced != mem.group {
			r.mem.update(key, job.GetUID(), func(j *jobMemory) { j.group = synced })
		}
		if p.GroupKeep && !st.CreatePods {
			if len(p.CreatePods) > 0 {
				p.RequeueAfter = minPositive(p.RequeueAfter, replanSoon) // the next plan says why
			}
			p.CreatePods = nil
		}
		if st.Recheck {
			p.RequeueAfter = minPositive(p.RequeueAfter, conflictRecheck)
		}
		errs = append(errs, err)
	}
	var refusals []error // of the secrets and extras: said in the status
	if p.CreateSecrets {
		err := r.createSecrets(ctx, job)
		if err == nil {
			r.mem.update(key, job.GetUID(), func(j *jobMemory) { j.secretsCreated = true })
		}
		if owned.Refused(err) {
			refusals = append(refusals, err)
		}
		errs = append(errs, err)
	}
	if p.Extras != nil {
		err := r.syncExtras(ctx, job, p.Extras)
		conflict := ""
		if c := owned.AsConflict(err); c != nil {
			conflict, err = c.Error(), nil
			p.CreatePods = nil
			p.RequeueAfter = minPositive(p.RequeueAfter, conflictRecheck)
			if mem.conflict != conflict {
				events = append(events, Event{Type: corev1.EventTypeWarning, Reason: "ErrResourceExists", Message: conflict})
				p.RequeueAfter = replanSoon // the next plan says it in the status
			}
		}
		if err == nil {
			r.mem.extrasSynced(key, mem, p.ExtrasDigest, conflict)
			if mem.conflict != "" && conflict == "" {
				p.RequeueAfter = replanSoon // the way is clear: the next plan creates the pods
			}
		}
		if owned.Refused(err) {
			refusals = append(refusals, err)
		}
		errs = append(errs, err)
	}
	if (p.CreateSecrets || p.Extras != nil) && r.noteExtrasRefusal(key, job.GetUID(), mem.refusedExtras, errors.Join(refusals...)) {
		p.RequeueAfter = replanSoon // the next plan says it in the status, or that it ended
	}
	return events, errors.Join(errs...)
}

// How soon a job whose extras or group hold its pods looks again: conflictRecheck while they do
// (nothing kiln watches tells when the object in the way goes), replanSoon once the hold began or
// ended (the next plan says so, or creates the pods).
const (
	conflictRecheck = 10 * time.Second
	replanSoon      = 100 * time.Millisecond
)

// writeStatus writes the plan's status when it changed and its pacing lets it (statusWait), then
// records the transitions' events and metrics; done says the reconcile ends here (the write is
// paced, failed, or was made meanwhile by another writer).
func (r *Reconciler) writeStatus(ctx context.Context, key types.NamespacedName, job framework.Job, mem jobMemory, p *Plan) (_ reconcile.Result, done bool, _ error) {
	now := r.clock.Now()
	changed := !sameStatus(job.GetJobStatus(), &p.Status)
	if !changed {
		r.mem.update(key, job.GetUID(), func(j *jobMemory) { j.status = pendingStatus{} })
	} else if wait := r.statusWait(key, job, mem.status, p, now); wait > 0 {
		// Not yet: the next reconcile plans again and writes what is true then, with its
		// transitions' events and metrics.
		return reconcile.Result{RequeueAfter: minPositive(p.RequeueAfter, wait)}, true, nil
	}
	if changed {
		if err := r.patchStatus(ctx, key, job, p.Status); err != nil {
			if apierrors.IsConflict(err) {
				// Written meanwhile (the createdWriter, a user): that write's event plans again.
				logf.FromContext(ctx).V(4).Info("status written meanwhile; planning again", "error", err.Error())
				return reconcile.Result{}, true, nil
			}
			return reconcile.Result{}, true, err
		}
	}
	r.tell.Tell(job, told(p))
	return reconcile.Result{}, false, nil
}

// writeChildren carries out a plan's writes to pods, services and batch Jobs: restart marks
// first (a failed pod's retry must be recorded before the pod goes), then deletions, then
// creations, each group concurrently. It returns Warning events for what failed, and the
// errors. servicesRefused says the job's services were refused last time.
func (r *Reconciler) writeChildren(ctx context.Context, job framework.Job, p *Plan, servicesRefused bool) ([]Event, error) {
	key, uid := types.NamespacedName{Namespace: job.GetNamespace(), Name: job.GetName()}, job.GetUID()
	r.mem.expect(key, uid, p, r.clock.Now())
	var errs []error
	for _, m := range p.MarkRestarts {
		if err := r.markRestart(ctx, m); err != nil {
			errs = append(errs, err)
			// Without the mark the pod's failure would be forgotten: keep the pod for the next try.
			p.DeletePods = without(p.DeletePods, m.PodUID)
			r.mem.failed(key, "", types.UID(m.PodUID))
		}
	}
	var events []Event
	log := logf.FromContext(ctx)
	del := func(kind string, objs []client.Object) {
		err := r.parallel(objs, func(o client.Object) error {
			log.V(4).Info("deleting", "kind", kind, "name", o.GetName(), "uid", o.GetUID())
			ctx, end := tracing.Start(ctx, "delete "+kind, kind, o.GetNamespace(), o.GetName())
			err := r.kit.DeleteWatched(ctx, job, o)
			end(err)
			if err != nil {
				r.mem.failed(key, "", o.GetUID())
			}
			return err
		})
		events = append(events, summarize("FailedDelete", "deleting", kind, err)...)
		errs = append(errs, err)
	}
	create := func(kind string, objs []client.Object) error {
		err := r.parallel(objs, func(o client.Object) error {
			log.V(4).Info("creating", "kind", kind, "name", o.GetName())
			ctx, end := tracing.Start(ctx, "create "+kind, kind, o.GetNamespace(), o.GetName())
			err := r.kit.CreateWatched(ctx, job, o)
			end(err)
			if err != nil {
				r.mem.failed(key, strings.ToLower(kind)+"/"+o.GetName(), "")
			}
			return err
		})
		events = append(events, summarize("FailedCreate", "creating", kind, err)...)
		errs = append(errs, err)
		return err
	}
	del("Job", objects(p.DeleteJobs))
	del("Pod", objects(p.DeletePods))
	del("Service", objects(p.DeleteServices))
	if err := create("Service", objects(p.CreateServices)); len(p.CreateServices) > 0 || servicesRefused {
		r.noteServiceRefusal(key, uid, firstOf(err)) // none to create: no refusal stands (a scale-down, say)
	}
	podsErr := create("Pod", objects(p.CreatePods))
	if jobsErr := create("Job", objects(p.CreateJobs)); len(p.CreatePods)+len(p.CreateJobs) > 0 {
		r.noteRefusal(key, uid, firstOf(errors.Join(podsErr, jobsErr)))
	}
	return events, errors.Join(errs...)
}

func (r *Reconciler) markRestart(ctx context.Context, m restartMark) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:%q}}}`,
		AnnotationRestarts, strconv.Itoa(int(m.Restarts)), AnnotationRestartedPod, m.PodUID)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: m.Service.Name, Namespace: m.Service.Namespace}}
	ctx, end := tracing.Start(ctx, "patch Service", "Service", svc.Namespace, svc.Name)
	err := r.client.Patch(ctx, svc, client.RawPatch(types.MergePatchType, []byte(patch)))
	end(err)
	if err != nil {
		return fmt.Errorf("recording the restart of pod %s on service %s: %w", m.Service.Name, m.Service.Name, err)
	}
	return nil
}

// parallel runs fn on every object with at most Options.Parallelism calls in flight and returns
// the joined errors.
func (r *Reconciler) parallel(objs []client.Object, fn func(client.Object) error) error {
	if len(objs) == 0 {
		return nil
	}
	errs := make([]error, len(objs))
	sem := make(chan struct{}, max(1, r.opts.Parallelism))
	var wg sync.WaitGroup
	for i, o := range objs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = fn(o)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// summarize reports a failed batch as a Warning event. Successful creations and deletions are
// logged (V(4)), not evented: events are writes too, and kiln keeps them for transitions and
// trouble (DECISIONS #8).
func summarize(failReason, gerund, kind string, err error) []Event {
	if err == nil {
		return nil
	}
	return []Event{{Type: corev1.EventTypeWarning, Reason: failReason + kind, Message: fmt.Sprintf("Error %s %s: %v", gerund, strings.ToLower(kind), err)}}
}

func objects[T client.Object](in []T) []client.Object {
	out := make([]client.Object, len(in))
	for i, o := range in {
		out[i] = o
	}
	return out
}

func without(pods []*corev1.Pod, uid string) []*corev1.Pod {
	out := pods[:0:0]
	for _, p := range pods {
		if string(p.UID) != uid {
			out = append(out, p)
		}
	}
	return out
}

// firstOf is the first of joined errors (one pod's refusal says what refused them all).
func firstOf(err error) error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			if e != nil {
				return e
			}
		}
	}
	return err
}
