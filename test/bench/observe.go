package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/manager"
)

// observer times the workload from watches on its pods and its jobs.
type observer struct {
	cache  cache.Cache
	cancel context.CancelFunc
	status bool // finish on the jobs' Succeeded conditions rather than on their pods
	trace  string
	jobOf  func(*corev1.Pod) string // the job a pod is of
	// workload, when set, is the job an object the benchmark creates is of (the serving floor
	// creates Deployments and Services); nil: the object is the job.
	workload func(client.Object) string
	// serviceOf, when set, is the job a Service is of ("" none): the Services are watched too,
	// and when each job's first arrived is timed.
	serviceOf func(*corev1.Service) string

	mu        sync.Mutex
	t0        time.Time
	expected  map[string]int // pods per job
	createdAt map[string]time.Time
	seen      map[string]bool // pods seen
	ran       map[string]bool // pods seen Running or Succeeded
	finished  map[string]bool // pods seen Succeeded
	perJob    map[string]*jobTimes
	counts    struct{ seen, running, succeeded, statusRunning, services int }
	marks     struct{ podsExist, allRunning, allSucceeded, statusRunning, servicesExist time.Time }
	timeline  []Point
	done      chan struct{}
}

type jobTimes struct {
	ran, finished                       int
	runningAt, succeededAt, statusRunAt time.Time
	// version is the job's last resourceVersion seen; writes counts the changes seen after its
	// creation, writesWhileRunning those after its Running condition and before it succeeded;
	// firstWriteAt is when the first change was seen.
	version                    string
	writes, writesWhileRunning int
	firstWriteAt               time.Time
	// serviceAt is when the job's first Service was seen (serviceOf).
	serviceAt time.Time
}

// observe watches the workload; status makes it finish on the jobs' conditions, and every status
// change of the job named trace is printed.
func observe(ctx context.Context, cfg *rest.Config, jobs []framework.Job, status bool, trace string) (*observer, error) {
	expected := map[string]int{}
	for _, j := range jobs {
		expected[j.GetName()] = int(framework.TotalReplicas(j.GetReplicaSpecs()))
	}
	o := newObserver(expected, status, trace, func(p *corev1.Pod) string { return p.Labels[kubeflowv1.LabelJobName] })
	// The jobs are watched in every mode, not only beside kiln: the watch costs the benchmark's
	// process (where the user's client runs) and the apiserver, and a floor spared it was
	// measured doing less than kiln's run.
	return o, o.watch(ctx, cfg, []client.Object{&kubeflowv1.TFJob{}, &kubeflowv1.PyTorchJob{}}, o.job)
}

// newObserver observes jobs of the expected pod counts, jobOf naming a pod's job.
func newObserver(expected map[string]int, status bool, trace string, jobOf func(*corev1.Pod) string) *observer {
	o := &observer{
		status: status, trace: trace, expected: expected, jobOf: jobOf, createdAt: map[string]time.Time{},
		seen: map[string]bool{}, ran: map[string]bool{}, finished: map[string]bool{}, perJob: map[string]*jobTimes{},
		done: make(chan struct{}),
	}
	for name := range expected {
		o.perJob[name] = &jobTimes{}
	}
	return o
}

// watch starts the watches of the benchmark namespace's pods and of the jobs of kinds, whose
// changes go to onJob.
func (o *observer) watch(ctx context.Context, cfg *rest.Config, kinds []client.Object, onJob func(any)) error {
	c, err := cache.New(cfg, cache.Options{Scheme: manager.Scheme(), DefaultNamespaces: map[string]cache.Config{benchNamespace: {}},
		DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return err
	}
	o.cache = c
	ctx, o.cancel = context.WithCancel(ctx)
	handler := func(f func(obj any)) toolscache.ResourceEventHandler {
		return toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) { f(obj) }, UpdateFunc: func(_, obj any) { f(obj) }}
	}
	type watched struct {
		obj client.Object
		on  func(any)
	}
	watch := []watched{{&corev1.Pod{}, o.pod}}
	if o.serviceOf != nil {
		watch = append(watch, watched{&corev1.Service{}, o.service})
	}
	for _, k := range kinds {
		watch = append(watch, watched{k, onJob})
	}
	for _, w := range watch {
		inf, err := c.GetInformer(ctx, w.obj)
		if err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(handler(w.on)); err != nil {
			return err
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("the benchmark's watches did not sync")
	}
	return nil
}

func (o *observer) stop() { o.cancel() }

// start sets time zero and samples the timeline every second.
func (o *observer) start() {
	o.mu.Lock()
	o.t0 = time.Now()
	o.mu.Unlock()
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-o.done:
				o.sample()
				return
			case <-t.C:
				o.sample()
			}
		}
	}()
}

func (o *observer) sample() {
	o.mu.Lock()
	defer o.mu.Unlock()
	succeeded := o.counts.succeeded
	o.timeline = append(o.timeline, Point{T: o.since(time.Now()), Running: o.counts.running - succeeded, Succeeded: succeeded,
		Pods: o.counts.seen, Services: o.counts.services})
}

func (o *observer) since(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return t.Sub(o.t0).Seconds()
}

// workloadOf is the job obj, which the benchmark creates, is or is of.
func (o *observer) workloadOf(obj client.Object) string {
	if o.workload != nil {
		return o.workload(obj)
	}
	return obj.GetName()
}

// created records when the benchmark first asked for something of job.
func (o *observer) created(job string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.createdAt[job]; !ok {
		o.createdAt[job] = time.Now()
	}
}

func (o *observer) pod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	job := o.jobOf(pod)
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	jt := o.perJob[job]
	if jt == nil {
		return
	}
	if !o.seen[pod.Name] {
		o.seen[pod.Name] = true
		if o.counts.seen++; o.counts.seen == o.total() {
			o.marks.podsExist = now
		}
	}
	phase := pod.Status.Phase
	if (phase == corev1.PodRunning || phase == corev1.PodSucceeded) && !o.ran[pod.Name] {
		o.ran[pod.Name] = true
		if jt.ran++; jt.ran == o.expected[job] {
			jt.runningAt = now
			if o.counts.running++; o.counts.running == len(o.expected) {
				o.marks.allRunning = now
			}
		}
	}
	if phase == corev1.PodSucceeded && !o.finished[pod.Name] && !o.status {
		o.finished[pod.Name] = true
		if jt.finished++; jt.finished == o.expected[job] {
			o.succeeded(jt, now)
		}
	}
}

// service notes when each job's first Service arrived.
func (o *observer) service(obj any) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	jt := o.perJob[o.serviceOf(svc)]
	if jt == nil || !jt.serviceAt.IsZero() {
		return
	}
	jt.serviceAt = now
	if o.counts.services++; o.counts.services == len(o.expected) {
		o.marks.servicesExist = now
	}
}

func (o *observer) job(obj any) {
	job, ok := obj.(framework.Job)
	if !ok {
		return
	}
	var running, succeeded bool
	for _, c := range job.GetJobStatus().Conditions {
		running = running || (c.Type == kubeflowv1.JobRunning && c.Status == corev1.ConditionTrue)
		succeeded = succeeded || (c.Type == kubeflowv1.JobSucceeded && c.Status == corev1.ConditionTrue)
	}
	o.jobChanged(job, running, succeeded, func() string {
		st := job.GetJobStatus()
		var conds []string
		for _, c := range st.Conditions {
			conds = append(conds, string(c.Type)+"="+string(c.Status))
		}
		rs := map[string]string{}
		for k, v := range st.ReplicaStatuses {
			rs[string(k)] = fmt.Sprintf("%d/%d/%d", v.Active, v.Succeeded, v.Failed)
		}
		return fmt.Sprintf("%v %v", conds, rs)
	})
}

// jobChanged counts a change of a job (whether it runs, whether it succeeded, and its status
// as a trace prints it).
func (o *observer) jobChanged(job client.Object, running, succeeded bool, trace func() string) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	jt := o.perJob[job.GetName()]
	if jt == nil {
		return
	}
	if o.trace == job.GetName() && job.GetResourceVersion() != jt.version {
		fmt.Printf("   trace %s %.2fs: %s\n", job.GetName(), o.since(now), trace())
	}
	changed := jt.version != "" && job.GetResourceVersion() != jt.version
	jt.version = job.GetResourceVersion()
	if changed {
		if jt.writes++; jt.writes == 1 {
			jt.firstWriteAt = now
		}
	}
	if changed && !jt.statusRunAt.IsZero() && !succeeded {
		jt.writesWhileRunning++
	}
	if running && jt.statusRunAt.IsZero() {
		jt.statusRunAt = now
		if o.counts.statusRunning++; o.counts.statusRunning == len(o.expected) {
			o.marks.statusRunning = now
		}
	}
	if succeeded && jt.succeededAt.IsZero() {
		o.succeeded(jt, now)
	}
}

// succeeded counts a finished job; the caller holds mu.
func (o *observer) succeeded(jt *jobTimes, now time.Time) {
	jt.succeededAt = now
	o.counts.succeeded++
	if o.counts.succeeded == len(o.expected) {
		o.marks.allSucceeded = now
		close(o.done)
	}
}

func (o *observer) total() int {
	n := 0
	for _, e := range o.expected {
		n += e
	}
	return n
}

// wait returns once every job succeeded.
func (o *observer) wait(ctx context.Context, timeout time.Duration) error {
	select {
	case <-o.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(timeout):
		o.mu.Lock()
		defer o.mu.Unlock()
		return fmt.Errorf("not finished after %s: %d of %d pods seen, %d of %d jobs running, %d succeeded",
			timeout, o.counts.seen, o.total(), o.counts.running, len(o.expected), o.counts.succeeded)
	}
}

func (o *observer) result(mode string) *Result {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ttr, firstWrite, afterRunning, afterService []float64
	writes := map[int]int{}
	for name, jt := range o.perJob {
		if !jt.runningAt.IsZero() {
			ttr = append(ttr, jt.runningAt.Sub(o.createdAt[name]).Seconds())
		}
		if !jt.succeededAt.IsZero() && !jt.runningAt.IsZero() {
			afterRunning = append(afterRunning, jt.succeededAt.Sub(jt.runningAt).Seconds())
		}
		if !jt.succeededAt.IsZero() && !jt.serviceAt.IsZero() {
			afterService = append(afterService, jt.succeededAt.Sub(jt.serviceAt).Seconds())
		}
		if o.status {
			writes[jt.writes]++
			if !jt.firstWriteAt.IsZero() {
				firstWrite = append(firstWrite, jt.firstWriteAt.Sub(o.createdAt[name]).Seconds())
			}
		}
	}
	whileRunning := WritesWhileRunning{}
	if o.status {
		for _, jt := range o.perJob {
			whileRunning.Mean += float64(jt.writesWhileRunning) / float64(len(o.perJob))
			whileRunning.Max = max(whileRunning.Max, jt.writesWhileRunning)
		}
	}
	return &Result{
		StatusWritesWhileRunning: whileRunning,
		Mode:                     mode, Pods: o.total(),
		PodsExist: o.since(o.marks.podsExist), AllRunning: o.since(o.marks.allRunning), AllSucceeded: o.since(o.marks.allSucceeded),
		StatusRunning:    o.since(o.marks.statusRunning),
		TimeToRunning:    percentiles(ttr),
		DoneAfterRunning: percentiles(afterRunning),
		ServicesExist:    o.since(o.marks.servicesExist), DoneAfterService: percentiles(afterService),
		StatusWrites: writes, FirstStatusWrite: percentiles(firstWrite),
		Timeline: append([]Point(nil), o.timeline...),
	}
}
