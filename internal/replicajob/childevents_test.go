package replicajob

import (
	"maps"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestChildEventsGoToTheirKindsQueueWhenWhatTheCacheKeepsChanged(t *testing.T) {
	c := NewChildEvents(nil, nil, 0)
	queue := func() workqueue.TypedRateLimitingInterface[reconcile.Request] {
		return workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	}
	tfjobs, pytorchjobs := queue(), queue()
	c.queues["TFJob"], c.queues["PyTorchJob"] = tfjobs, pytorchjobs
	owned := func(kind, apiVersion string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "a", UID: "j", Controller: ptr.To(true)}}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a-worker-0", ResourceVersion: "1", OwnerReferences: owned("TFJob", "kubeflow.org/v1"),
		Labels: map[string]string{"training.kubeflow.org/replica-index": "0"}}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a-worker-0", ResourceVersion: "1", OwnerReferences: owned("TFJob", "kubeflow.org/v1")}}
	next := func(o client.Object, change func(client.Object)) client.Object {
		o = o.DeepCopyObject().(client.Object)
		o.SetResourceVersion("2")
		if change != nil {
			change(o)
		}
		return o
	}
	job := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "a"}}
	cases := []struct {
		name  string
		event func()
		want  workqueue.TypedRateLimitingInterface[reconcile.Request] // nil: no queue
	}{
		{"pod created", func() { c.add(pod) }, tfjobs},
		{"pod: only the resourceVersion", func() { c.update(pod, next(pod, nil)) }, nil},
		{"pod: phase", func() {
			c.update(pod, next(pod, func(o client.Object) { o.(*corev1.Pod).Status.Phase = corev1.PodRunning }))
		}, tfjobs},
		{"pod: deletion", func() { c.update(pod, next(pod, func(o client.Object) { o.SetDeletionTimestamp(&metav1.Time{}) })) }, tfjobs},
		{"pod: a container's restart", func() {
			c.update(pod, next(pod, func(o client.Object) {
				o.(*corev1.Pod).Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "tensorflow", RestartCount: 1}}
			}))
		}, tfjobs},
		{"pod deleted, seen late", func() { c.delete(toolscache.DeletedFinalStateUnknown{Key: "ns/a-worker-0", Obj: pod}) }, tfjobs},
		{"service: only the resourceVersion", func() { c.update(svc, next(svc, nil)) }, nil},
		{"service: retry history", func() {
			c.update(svc, next(svc, func(o client.Object) { o.SetAnnotations(map[string]string{AnnotationRestarts: "1"}) }))
		}, tfjobs},
		{"a PyTorchJob's pod", func() {
			c.add(next(pod, func(o client.Object) { o.SetOwnerReferences(owned("PyTorchJob", "kubeflow.org/v1")) }))
		}, pytorchjobs},
		{"a kind without a controller here", func() {
			c.add(next(pod, func(o client.Object) { o.SetOwnerReferences(owned("XGBoostJob", "kubeflow.org/v1")) }))
		}, nil},
		{"another group's kind of that name", func() {
			c.add(next(pod, func(o client.Object) { o.SetOwnerReferences(owned("TFJob", "example.com/v1")) }))
		}, nil},
		{"no controller", func() { c.add(next(pod, func(o client.Object) { o.SetOwnerReferences(nil) })) }, nil},
		{"pod orphaned: its former job", func() {
			c.update(pod, next(pod, func(o client.Object) { o.SetOwnerReferences(nil) }))
		}, tfjobs},
		{"pod handed to another kind's job", func() {
			c.update(pod, next(pod, func(o client.Object) {
				o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "PyTorchJob", Name: "a", UID: "k", Controller: ptr.To(true)}})
			}))
		}, nil}, // the TFJob it left and the PyTorchJob it joined: both queues, checked below
	}
	for _, tc := range cases {
		tc.event()
		for _, q := range []workqueue.TypedRateLimitingInterface[reconcile.Request]{tfjobs, pytorchjobs} {
			want := 0
			if q == tc.want || tc.name == "pod handed to another kind's job" {
				want = 1
			}
			if q.Len() != want {
				t.Errorf("%s: %d requests in a queue, want %d", tc.name, q.Len(), want)
			}
			for q.Len() > 0 {
				got, _ := q.Get()
				if got != job {
					t.Errorf("%s: enqueued %v, want %v", tc.name, got, job)
				}
				q.Done(got)
				q.Forget(got)
			}
		}
	}
	if pod.ResourceVersion != "1" {
		t.Errorf("the comparison changed the cached pod's resourceVersion to %q", pod.ResourceVersion)
	}
}

func TestChildEventsKeepEachJobsChildren(t *testing.T) {
	c := NewChildEvents(nil, nil, 0)
	owner := func(uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "TFJob", Name: "a", UID: uid, Controller: ptr.To(true)}}
	}
	pod := func(name string, uid types.UID, job types.UID) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid, OwnerReferences: owner(job)}}
	}
	names := func(job types.UID) []string {
		return familyNames(c.Of(job))
	}
	w1, w0 := pod("a-worker-1", "p1", "j"), pod("a-worker-0", "p0", "j")
	c.add(w1)
	c.add(w0)
	c.add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a-worker-0", UID: "s0", OwnerReferences: owner("j")}})
	c.add(pod("other-worker-0", "q0", "k"))
	if got, want := names("j"), []string{"pod/a-worker-0", "pod/a-worker-1", "service/a-worker-0"}; !slices.Equal(got, want) {
		t.Errorf("children %v, want %v", got, want)
	}
	running := w0.DeepCopy()
	running.Status.Phase = corev1.PodRunning
	c.update(w0, running)
	if pods := c.Of("j").Pods; pods[0].Status.Phase != corev1.PodRunning {
		t.Errorf("after an update, a-worker-0 is %q, want the updated pod", pods[0].Status.Phase)
	}
	// The same name again: the old pod's deletion, seen late, leaves its replacement.
	c.add(pod("a-worker-1", "p1b", "j"))
	c.delete(toolscache.DeletedFinalStateUnknown{Key: "ns/a-worker-1", Obj: w1})
	if got, want := names("j"), []string{"pod/a-worker-0", "pod/a-worker-1", "service/a-worker-0"}; !slices.Equal(got, want) {
		t.Errorf("after a replacement, children %v, want %v", got, want)
	}
	// A relist finds the replacement where the informer had the pod it replaced: an update
	// from one to the other, which leaves the replacement only.
	c.update(pod("a-worker-1", "p1b", "j"), pod("a-worker-1", "p1c", "j"))
	if got := c.Of("j").Pods; len(got) != 2 || got[1].UID != "p1c" {
		t.Errorf("after a relist found a-worker-1 replaced, pods %v, want a-worker-0 and a-worker-1 of UID p1c", podUIDs(got))
	}
	orphaned := running.DeepCopy()
	orphaned.OwnerReferences = nil
	c.update(running, orphaned)
	if got, want := names("j"), []string{"pod/a-worker-1", "service/a-worker-0"}; !slices.Equal(got, want) {
		t.Errorf("after a pod's controller went, children %v, want %v", got, want)
	}
	if got := names("k"); !slices.Equal(got, []string{"pod/other-worker-0"}) {
		t.Errorf("the other job's children: %v", got)
	}
	c.delete(pod("other-worker-0", "q0", "k"))
	if _, ok := c.families["k"]; ok {
		t.Error("a job without children is still kept")
	}
}

// familyNames are the kinds and names of what f holds, in its order.
func familyNames(f Family) []string {
	var out []string
	for _, p := range f.Pods {
		out = append(out, "pod/"+p.Name)
	}
	for _, s := range f.Services {
		out = append(out, "service/"+s.Name)
	}
	for _, j := range f.Jobs {
		out = append(out, "job/"+j.Name)
	}
	return out
}

func TestChildEventsKeepBatchJobsAndTheirPodsWithTheJob(t *testing.T) {
	c := NewChildEvents(nil, nil, 0)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	c.queues["MPIJob"] = q
	launcher := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pi-launcher", UID: "l", ResourceVersion: "1",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "MPIJob", Name: "pi", UID: "j", Controller: ptr.To(true)}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pi-launcher-x7k2p", UID: "p", ResourceVersion: "1",
		Labels:          map[string]string{"training.kubeflow.org/replica-type": "launcher", "training.kubeflow.org/replica-index": "0"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "pi-launcher", UID: "l", Controller: ptr.To(true)}}}}
	drain := func() int {
		n := q.Len()
		for range n {
			r, _ := q.Get()
			q.Done(r)
		}
		return n
	}

	c.add(pod) // before its Job: kept, but no job to plan yet
	if n := drain(); n != 0 {
		t.Errorf("a pod of a Job not seen yet queued %d requests", n)
	}
	c.add(launcher)
	if got, want := familyNames(c.Of("j")), []string{"pod/pi-launcher-x7k2p", "job/pi-launcher"}; !slices.Equal(got, want) {
		t.Errorf("the MPIJob's children %v, want %v", got, want)
	}
	drain()
	running := pod.DeepCopy()
	running.ResourceVersion, running.Status.Phase = "2", corev1.PodRunning
	c.update(pod, running)
	if n := drain(); n != 1 {
		t.Errorf("the launcher pod running queued the MPIJob %d times, want once", n)
	}
	if pods := c.Of("j").Pods; len(pods) != 1 || pods[0].Status.Phase != corev1.PodRunning {
		t.Errorf("after the update, the launcher pods are %v", pods)
	}

	// Finished and deleted at once (ttlSecondsAfterFinished: 0): how it ended is kept.
	done := launcher.DeepCopy()
	done.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	c.update(launcher, done)
	c.delete(done)
	c.delete(running)
	jobs := c.Of("j").Jobs
	if len(jobs) != 1 || jobs[0].DeletionTimestamp == nil || jobFinished(jobs[0]) == nil {
		t.Fatalf("a finished Job deleted: kept %v, want it with its conditions and a deletion time", jobs)
	}
	if done.DeletionTimestamp != nil {
		t.Error("keeping the deleted Job changed the informer's object")
	}
	c.Forget("j")
	if len(c.families)+len(c.viaJob)+len(c.parents) != 0 {
		t.Errorf("forgetting the MPIJob left %d families, %d Jobs' pods, %d Jobs' parents", len(c.families), len(c.viaJob), len(c.parents))
	}

	// The MPIJob deleted, forgotten, then its finished Job deleted by the garbage collector:
	// nothing is kept of it.
	c.add(done)
	c.Forget("j")
	c.delete(done)
	if len(c.families)+len(c.viaJob)+len(c.parents) != 0 {
		t.Errorf("a finished Job deleted after its MPIJob was forgotten left %d families, %d Jobs' pods, %d Jobs' parents", len(c.families), len(c.viaJob), len(c.parents))
	}

	// Deleted before it finished: gone, to be made again.
	c.add(launcher)
	c.delete(launcher)
	if f := c.Of("j"); len(f.Jobs) != 0 {
		t.Errorf("a Job deleted before it finished is kept: %v", familyNames(f))
	}

	// A PyJob's pod, which a batch Job controls too, is no replica's: not kept.
	pyjobPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train-abcde", UID: "py", Labels: map[string]string{"training.kiln.dev/pyjob-name": "train"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "t", Controller: ptr.To(true)}}}}
	c.add(pyjobPod)
	if len(c.viaJob) != 0 {
		t.Errorf("a PyJob's pod is kept among the Jobs' pods: %v", c.viaJob)
	}

	// A relist finds the launcher's pod replaced under its name: the replacement is kept, alone,
	// and the MPIJob planned.
	c.add(launcher)
	c.add(running)
	drain()
	replaced := running.DeepCopy()
	replaced.UID = "p2"
	c.update(running, replaced)
	if pods := c.viaJob["l"]; len(pods) != 1 || pods["p2"] == nil {
		t.Errorf("after a relist found the launcher pod replaced, the Job's pods are %v, want p2 only", slices.Collect(maps.Keys(pods)))
	}
	if n := drain(); n != 1 {
		t.Errorf("the launcher pod replaced queued the MPIJob %d times, want once", n)
	}
}

func TestChildEventsOfOneJobWithinABatchPlanItOnce(t *testing.T) {
	const batch = 500 * time.Millisecond
	clk := clocktesting.NewFakeClock(time.Now())
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](),
		workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Clock: clk})
	defer q.ShutDown()
	c := NewChildEvents(nil, nil, batch)
	c.queues["TFJob"] = q
	owner := []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "TFJob", Name: "a", UID: "j", Controller: ptr.To(true)}}
	pod := func(name string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), OwnerReferences: owner},
			Status: corev1.PodStatus{Phase: phase}}
	}
	// waitFor is how many requests the queue holds once its clock's due items have moved in.
	waitFor := func(want int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for q.Len() != want && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if q.Len() != want {
			t.Fatalf("%d requests in the queue, want %d", q.Len(), want)
		}
	}

	c.add(pod("a-worker-0", corev1.PodPending))
	clk.Step(batch / 2)
	c.add(pod("a-worker-1", corev1.PodPending))
	c.update(pod("a-worker-0", corev1.PodPending), pod("a-worker-0", corev1.PodRunning))
	clk.Step(batch/2 - time.Millisecond)
	time.Sleep(20 * time.Millisecond) // time for the queue to move a due request, were one due
	if q.Len() != 0 {
		t.Fatalf("the job was queued %v after its first child's event, before the batch of %v ended", batch-time.Millisecond, batch)
	}
	clk.Step(time.Millisecond)
	waitFor(1)
	got, _ := q.Get()
	if want := (reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "a"}}); got != want {
		t.Errorf("queued %v, want %v", got, want)
	}
	q.Done(got)
	clk.Step(batch)
	time.Sleep(20 * time.Millisecond)
	if q.Len() != 0 {
		t.Errorf("the three events of one batch queued the job %d more times", q.Len())
	}

	// An event after the job was planned starts a new batch.
	c.delete(pod("a-worker-1", corev1.PodPending))
	clk.Step(batch)
	waitFor(1)
}

func podUIDs(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name+"/"+string(p.UID))
	}
	return out
}
