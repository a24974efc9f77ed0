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

	batchv1 "k8s.io/api/batch/v1"
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
//
// The batch Jobs a job controls (Framework.RunsAsJob) are its children too, and so are their
// pods, which the Job controls: an event of such a pod goes to the job that controls its Job.
type ChildEvents struct {
	cache cache.Cache
	jobs  cache.Cache // the batch Jobs; nil: no framework runs replicas as Jobs
	batch time.Duration

	mu       sync.RWMutex
	queues   map[string]workqueue.TypedRateLimitingInterface[reconcile.Request] // by job kind
	regs     []toolscache.ResourceEventHandlerRegistration                      // nil until started
	families map[types.UID]*family                                              // by the controller's UID
	// viaJob are the pods of batch Jobs, by the Job's UID, and parents the controller of each
	// batch Job in a family, by its UID (a pod's event may come before its Job's).
	viaJob  map[types.UID]map[types.UID]*corev1.Pod
	parents map[types.UID]metav1.OwnerReference
}

// family is a job's pods, services and batch Jobs, by their UIDs.
type family struct {
	pods     map[types.UID]*corev1.Pod
	services map[types.UID]*corev1.Service
	jobs     map[types.UID]*batchv1.Job
}

func (f *family) empty() bool { return len(f.pods)+len(f.services)+len(f.jobs) == 0 }

// Family is what a job controls as the events have shown it, each list sorted by name: its
// pods and those of its batch Jobs, its services and its batch Jobs. A batch Job that finished
// and was deleted since (its ttlSecondsAfterFinished) stays, with a deletion time, until the job
// is forgotten: the job's verdict may not have been planned from it yet.
type Family struct {
	Pods     []*corev1.Pod
	Services []*corev1.Service
	Jobs     []*batchv1.Job
}

func (f Family) empty() bool { return len(f.Pods)+len(f.Services)+len(f.Jobs) == 0 }

// NewChildEvents routes the events of the pods and services in c, and of the batch Jobs in jobs
// (nil: none are watched). A job is planned batch after
// the first event of its children that it has not been planned for, with every event seen by
// then: a job's pods are created, start and finish close together, and each of those events
// alone would plan the whole job again (as the Kubernetes Job controller batches its pods'
// events for a second). 0: at once.
func NewChildEvents(c, jobs cache.Cache, batch time.Duration) *ChildEvents {
	return &ChildEvents{cache: c, jobs: jobs, batch: batch, queues: map[string]workqueue.TypedRateLimitingInterface[reconcile.Request]{},
		families: map[types.UID]*family{}, viaJob: map[types.UID]map[types.UID]*corev1.Pod{}, parents: map[types.UID]metav1.OwnerReference{}}
}

// Of returns what the job of that UID controls.
func (c *ChildEvents) Of(job types.UID) Family {
	var out Family
	c.mu.RLock()
	if f := c.families[job]; f != nil {
		out.Pods, out.Services, out.Jobs = slices.Collect(maps.Values(f.pods)), slices.Collect(maps.Values(f.services)), slices.Collect(maps.Values(f.jobs))
		for uid := range f.jobs {
			out.Pods = slices.AppendSeq(out.Pods, maps.Values(c.viaJob[uid]))
		}
	}
	c.mu.RUnlock()
	byName := func(a, b client.Object) int { return strings.Compare(a.GetName(), b.GetName()) }
	slices.SortFunc(out.Pods, func(a, b *corev1.Pod) int { return byName(a, b) })
	slices.SortFunc(out.Services, func(a, b *corev1.Service) int { return byName(a, b) })
	slices.SortFunc(out.Jobs, func(a, b *batchv1.Job) int { return byName(a, b) })
	return out
}

// Forget drops what is kept of the job of that UID, which is gone: the batch Jobs kept since
// their deletion (see Family), and the pods of its Jobs.
func (c *ChildEvents) Forget(job types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.families[job]
	if f == nil {
		return
	}
	for uid := range f.jobs {
		delete(c.viaJob, uid)
		delete(c.parents, uid)
	}
	delete(c.families, job)
}

// Source is the source of the controller of kind's jobs: the events of the pods and services
// they control.
func (c *ChildEvents) Source(kind string) source.SyncingSource { return childSource{c, kind} }

type childSource struct {
	events *ChildEvents
	kind   string
}

func (s childSource) String() string { return "pods, services and batch Jobs of " + s.kind + " jobs" }

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
	caches, objs := []cache.Cache{c.cache, c.cache}, []client.Object{&corev1.Pod{}, &corev1.Service{}}
	if c.jobs != nil {
		caches, objs = append(caches, c.jobs), append(objs, &batchv1.Job{})
	}
	for i, obj := range objs {
		inf, err := caches[i].GetInformer(ctx, obj)
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
		return fmt.Errorf("waiting for the pods, services and batch Jobs of %s jobs: %w", s.kind, ctx.Err())
	}
	return nil
}

func (c *ChildEvents) add(obj any) {
	if pod, job := podOfJob(obj); pod != nil {
		c.keepJobPod(pod, job, true, true)
		return
	}
	if o, ref := jobChild(obj); ref != nil {
		c.keep(o, ref, true)
		c.enqueue(o, ref)
	}
}

func (c *ChildEvents) update(old, new any) {
	if replaced(old, new) {
		// A relist found another object of the name (the informer keys by name): the one it
		// had is gone. Kept, it would stay in its job's family for good, beside its successor.
		c.delete(old)
		c.add(new)
		return
	}
	oldPod, oldJob := podOfJob(old)
	newPod, newJob := podOfJob(new)
	if oldPod != nil && newJob != oldJob {
		c.keepJobPod(oldPod, oldJob, false, true)
	}
	if newPod != nil {
		c.keepJobPod(newPod, newJob, true, oldPod == nil || !sameButVersion(oldPod, newPod))
		return
	}
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

// replaced says whether an update's objects are two objects of one name (their UIDs differ).
func replaced(old, new any) bool {
	o, _ := old.(client.Object)
	n, _ := new.(client.Object)
	return o != nil && n != nil && o.GetUID() != n.GetUID()
}

func (c *ChildEvents) delete(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if pod, job := podOfJob(obj); pod != nil {
		c.keepJobPod(pod, job, false, true)
		return
	}
	if o, ref := jobChild(obj); ref != nil {
		if j, ok := o.(*batchv1.Job); !ok || jobFinished(j) == nil || !c.keepFinished(j, ref) {
			c.keep(o, ref, false)
		}
		c.enqueue(o, ref)
	}
}

// keepFinished keeps a finished batch Job that was deleted, with a deletion time, while its
// job's family is kept (see Family): once the job is forgotten, it is not. It says whether it
// kept it.
func (c *ChildEvents) keepFinished(j *batchv1.Job, ref *metav1.OwnerReference) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.families[ref.UID]
	if f == nil {
		return false
	}
	gone := j.DeepCopy()
	if gone.DeletionTimestamp == nil {
		gone.DeletionTimestamp = &metav1.Time{Time: time.Now()} // that it is set is what counts
	}
	f.jobs[gone.UID] = gone
	return true
}

// podOfJob is obj and the UID of the batch Job that controls it, if obj is a replica's pod (it has
// a replica type) a Job controls: not a PyJob's, whose Jobs are no job's children.
func podOfJob(obj any) (*corev1.Pod, types.UID) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Labels[kubeflowv1.LabelReplicaType] == "" {
		return nil, ""
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.APIVersion != batchv1.SchemeGroupVersion.String() || ref.Kind != "Job" {
		return nil, ""
	}
	return pod, ref.UID
}

// keepJobPod adds pod to (or, !there, removes it from) the pods of the batch Job of that UID,
// and when wake, plans the job that controls the Job, if one is known.
func (c *ChildEvents) keepJobPod(pod *corev1.Pod, job types.UID, there, wake bool) {
	c.mu.Lock()
	pods := c.viaJob[job]
	switch {
	case there && pods == nil:
		pods = map[types.UID]*corev1.Pod{}
		c.viaJob[job] = pods
		fallthrough
	case there:
		pods[pod.UID] = pod
	default:
		delete(pods, pod.UID)
		if len(pods) == 0 {
			delete(c.viaJob, job)
		}
	}
	ref, known := c.parents[job]
	c.mu.Unlock()
	if wake && known {
		c.enqueue(pod, &ref)
	}
}

// jobChild is obj and its controller, if a kubeflow.org job controls it (through any version:
// a launcher Job names its job at the version the job was written at, see desiredJob).
func jobChild(obj any) (client.Object, *metav1.OwnerReference) {
	o, ok := obj.(client.Object)
	if !ok {
		return nil, nil
	}
	ref := metav1.GetControllerOfNoCopy(o)
	if ref == nil || !strings.HasPrefix(ref.APIVersion, kubeflowv1.GroupVersion.Group+"/") {
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
		f = &family{pods: map[types.UID]*corev1.Pod{}, services: map[types.UID]*corev1.Service{}, jobs: map[types.UID]*batchv1.Job{}}
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
	case *batchv1.Job:
		if there {
			f.jobs[o.UID], c.parents[o.UID] = o, *ref
		} else {
			delete(f.jobs, o.UID)
			delete(c.parents, o.UID)
			delete(c.viaJob, o.UID)
		}
	}
	if f.empty() {
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

// sameButVersion says whether two versions of a cached pod, service or Job differ only in their
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
	case *batchv1.Job:
		n, ok := new.(*batchv1.Job)
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
