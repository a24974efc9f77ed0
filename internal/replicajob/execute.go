package replicajob

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kiln-ml/kiln/internal/tracing"
)

// execute carries out a plan's writes to pods and services: restart marks first (a failed pod's
// retry must be recorded before the pod goes), then deletions, then creations, each group
// concurrently. It returns Warning events for what failed, and the errors.
func (r *Reconciler) execute(ctx context.Context, key types.NamespacedName, uid types.UID, p *Plan) ([]Event, error) {
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
			err := r.writes.delete(ctx, o)
			end(err)
			if err != nil {
				r.mem.failed(key, "", o.GetUID())
			}
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				return nil // gone already, or replaced by a newer object of the same name
			}
			return err
		})
		events = append(events, summarize("FailedDelete", "deleting", kind, err)...)
		errs = append(errs, err)
	}
	create := func(kind string, objs []client.Object) {
		err := r.parallel(objs, func(o client.Object) error {
			log.V(4).Info("creating", "kind", kind, "name", o.GetName())
			ctx, end := tracing.Start(ctx, "create "+kind, kind, o.GetNamespace(), o.GetName())
			err := r.writes.create(ctx, o)
			end(err)
			if err != nil {
				r.mem.failed(key, strings.ToLower(kind)+"/"+o.GetName(), "")
			}
			if apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("%s %s already exists and is not controlled by this job: delete or rename it", strings.ToLower(kind), o.GetName())
			}
			return err
		})
		events = append(events, summarize("FailedCreate", "creating", kind, err)...)
		errs = append(errs, err)
		if kind == "Pod" && len(objs) > 0 {
			r.noteRefusal(key, uid, firstOf(err))
		}
	}
	del("Pod", objects(p.DeletePods))
	del("Service", objects(p.DeleteServices))
	create("Service", objects(p.CreateServices))
	create("Pod", objects(p.CreatePods))
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
	return []Event{{corev1.EventTypeWarning, failReason + kind, fmt.Sprintf("Error %s %s: %v", gerund, strings.ToLower(kind), err)}}
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
