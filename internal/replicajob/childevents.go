package replicajob

import (
	"context"
	"fmt"
	"reflect"
	"sync"

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
// Updates that change nothing the cache keeps are dropped (see sameButVersion).
type ChildEvents struct {
	cache cache.Cache

	mu     sync.RWMutex
	queues map[string]workqueue.TypedRateLimitingInterface[reconcile.Request] // by job kind
	regs   []toolscache.ResourceEventHandlerRegistration                      // nil until started
}

// NewChildEvents routes the events of the pods and services in c.
func NewChildEvents(c cache.Cache) *ChildEvents {
	return &ChildEvents{cache: c, queues: map[string]workqueue.TypedRateLimitingInterface[reconcile.Request]{}}
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

func (c *ChildEvents) add(obj any) { c.enqueue(obj) }

func (c *ChildEvents) update(old, new any) {
	o, ok1 := old.(client.Object)
	n, ok2 := new.(client.Object)
	if ok1 && ok2 && sameButVersion(o, n) {
		return
	}
	c.enqueue(new)
}

func (c *ChildEvents) delete(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	c.enqueue(obj)
}

// enqueue adds the job controlling obj to its kind's queue.
func (c *ChildEvents) enqueue(obj any) {
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	ref := metav1.GetControllerOfNoCopy(o)
	if ref == nil || ref.APIVersion != kubeflowv1.GroupVersion.String() {
		return
	}
	c.mu.RLock()
	q := c.queues[ref.Kind]
	c.mu.RUnlock()
	if q != nil {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}})
	}
}

// sameButVersion says whether two versions of a cached pod or service differ only in their
// resourceVersion. Most pod updates change nothing the manager's cache keeps of a pod (its
// binding to a node, its conditions turning True, its containers becoming ready), and
// reconciling the job for them would plan the same thing again. (reflect.DeepEqual:
// equality.Semantic's is four times slower on a pod.)
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
