package replicajob

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
)

// ChildEvents hands each event of kiln's pods and services to the queue of the job kind that
// controls the object, through one handler per informer. With a watch per kind, each of the six
// kinds' controllers was woken for every event of every kiln pod, five of them for nothing.
// Updates that change nothing the cache keeps are dropped (see sameButVersion), and the events
// of one job's children are gathered for a batch period before the job is planned again.
//
// It also keeps each job's children, as the events have shown them, for the reconciles to read
// (Of): listing them from the cache copied every pod into the list, on every reconcile. A
// reconcile woken by an event sees the children with that event applied; the cached objects are
// shared, and read only.
type ChildEvents struct {
	cache cache.Cache
	batch time.Duration

	mu       sync.RWMutex
	queues   map[string]workqueue.TypedRateLimitingInterface[reconcile.Request] // by job kind
	regs     []toolscache.ResourceEventHandlerRegistration                      // nil until started
	families map[types.UID]*family                                              // by the controller's UID
}

// family is a job's pods and services, by their UIDs.
type family struct {
	pods     map[types.UID]*corev1.Pod
	services map[types.UID]*corev1.Service
}

// NewChildEvents routes the events of the pods and services in c. A job is planned batch after
// the first event of its children that it has not been planned for, with every event seen by
// then: a job's pods are created, start and finish close together, and each of those events
// alone would plan the whole job again (as the Kubernetes Job controller batches its pods'
// events for a second). 0: at once.
func NewChildEvents(c cache.Cache, batch time.Duration) *ChildEvents {
	return &ChildEvents{cache: c, batch: batch, queues: map[string]workqueue.TypedRateLimitingInterface[reconcile.Request]{}, families: map[types.UID]*family{}}
}

// Of returns the pods and services the job of that UID controls, sorted by name.
func (c *ChildEvents) Of(job types.UID) ([]*corev1.Pod, []*corev1.Service) {
	c.mu.RLock()
	f := c.families[job]
	var pods []*corev1.Pod
	var services []*corev1.Service
	if f != nil {
		pods, services = slices.Collect(maps.Values(f.pods)), slices.Collect(maps.Values(f.services))
	}
	c.mu.RUnlock()
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(services, func(a, b *corev1.Service) int { return strings.Compare(a.Name, b.Name) })
	return pods, services
}

// Source is the source of the controller of kind's jobs: the events of the pods and services
// they control.
func (c *ChildEvents) Source(kind string) source.SyncingSource { return childSource{c, kind} }

type childSource struct {
	events *ChildEvents
	kind   string
}

func (s childSource) String() string { return "pods and services of " + s.kind + " jobs" }

// Start registers the controller's queue and, the first time, the handlers. A kind whose queue
// comes later misses nothing it needs: the first events of an informer are those of the
// objects already there, and each controller reconciles every job of its kind when it starts.
func (s childSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	c := s.events
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queues[s.kind] = q
	if c.regs != nil {
		return nil
	}
	handlers := toolscache.ResourceEventHandlerFuncs{AddFunc: c.add, UpdateFunc: c.update, DeleteFunc: c.delete}
	for _, obj := range []client.Object{&corev1.Pod{}, &corev1.Service{}} {
		inf, err := c.cache.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
		reg, err := inf.AddEventHandler(handlers)
		if err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
		c.regs = append(c.regs, reg)
	}
	return nil
}

// WaitForSync returns once the handlers have seen every object the informers had at their start.
func (s childSource) WaitForSync(ctx context.Context) error {
	s.events.mu.RLock()
	regs := s.events.regs
	s.events.mu.RUnlock()
	synced := make([]toolscache.InformerSynced, len(regs))
	for i, r := range regs {
		synced[i] = r.HasSynced
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("waiting for the pods and services of %s jobs: %w", s.kind, ctx.Err())
	}
	return nil
}

func (c *ChildEvents) add(obj any) {
	if o, ref := jobChild(obj); ref != nil {
		c.keep(o, ref, true)
		c.enqueue(o, ref)
	}
}

func (c *ChildEvents) update(old, new any) {
	o, was := jobChild(old)
	n, ref := jobChild(new)
	if was != nil && (ref == nil || was.UID != ref.UID) {
		// No longer that job's: the job plans again without it.
		c.keep(o, was, false)
		c.enqueue(o, was)
	}
	if ref == nil {
		return
	}
	c.keep(n, ref, true)
	if was != nil && sameButVersion(o, n) {
		return
	}
	c.enqueue(n, ref)
}

func (c *ChildEvents) delete(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if o, ref := jobChild(obj); ref != nil {
		c.keep(o, ref, false)
		c.enqueue(o, ref)
	}
}

// jobChild is obj and its controller, if a kubeflow.org job controls it.
func jobChild(obj any) (client.Object, *metav1.OwnerReference) {
	o, ok := obj.(client.Object)
	if !ok {
		return nil, nil
	}
	ref := metav1.GetControllerOfNoCopy(o)
	if ref == nil || ref.APIVersion != kubeflowv1.GroupVersion.String() {
		return nil, nil
	}
	return o, ref
}

// keep adds o to (or, !there, removes it from) the family of the job ref names.
func (c *ChildEvents) keep(o client.Object, ref *metav1.OwnerReference, there bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.families[ref.UID]
	if f == nil {
		if !there {
			return
		}
		f = &family{pods: map[types.UID]*corev1.Pod{}, services: map[types.UID]*corev1.Service{}}
		c.families[ref.UID] = f
	}
	switch o := o.(type) {
	case *corev1.Pod:
		if there {
			f.pods[o.UID] = o
		} else {
			delete(f.pods, o.UID)
		}
	case *corev1.Service:
		if there {
			f.services[o.UID] = o
		} else {
			delete(f.services, o.UID)
		}
	}
	if len(f.pods) == 0 && len(f.services) == 0 {
		delete(c.families, ref.UID)
	}
}

// enqueue adds the job ref names to its kind's queue, to be planned one batch from now unless
// it is already due sooner.
func (c *ChildEvents) enqueue(o client.Object, ref *metav1.OwnerReference) {
	c.mu.RLock()
	q := c.queues[ref.Kind]
	c.mu.RUnlock()
	if q == nil {
		return
	}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}}
	if c.batch > 0 {
		q.AddAfter(req, c.batch)
	} else {
		q.Add(req)
	}
}

// sameButVersion says whether two versions of a cached pod or service differ only in their
// resourceVersion. Most pod updates change nothing the manager's cache keeps of a pod (its
// binding to a node, its conditions turning True, its containers becoming ready), and
// reconciling the job for them would plan the same thing again. (reflect.DeepEqual:
// equality.Semantic's is much slower on a pod; measured: docs/performance.md, Measurements
// behind the code.)
func sameButVersion(old, new client.Object) bool {
	switch o := old.(type) {
	case *corev1.Pod:
		n, ok := new.(*corev1.Pod)
		return ok && sameMetaButVersion(&o.ObjectMeta, &n.ObjectMeta) && reflect.DeepEqual(&o.Spec, &n.Spec) && reflect.DeepEqual(&o.Status, &n.Status)
	case *corev1.Service:
		n, ok := new.(*corev1.Service)
		return ok && sameMetaButVersion(&o.ObjectMeta, &n.ObjectMeta) && reflect.DeepEqual(&o.Spec, &n.Spec) && reflect.DeepEqual(&o.Status, &n.Status)
	}
	return false
}

// sameMetaButVersion compares a and b but for their resourceVersions, copying the metadata only.
func sameMetaButVersion(a, b *metav1.ObjectMeta) bool {
	x, y := *a, *b
	x.ResourceVersion, y.ResourceVersion = "", ""
	return reflect.DeepEqual(&x, &y)
}
