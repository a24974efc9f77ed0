package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/framework/pytorch"
	"github.com/kiln-ml/kiln/internal/framework/tensorflow"
	"github.com/kiln-ml/kiln/internal/manager"
	"github.com/kiln-ml/kiln/internal/replicajob"
	"github.com/kiln-ml/kiln/test/testenv"
)

// The namespaces of the workload and of the foreign pods.
const (
	benchNamespace   = "bench"
	foreignNamespace = "foreign"
	// podsPerNode leaves headroom under the fake nodes' 250-pod capacity.
	podsPerNode = 200
)

// Result is what one run measured. Times are seconds from the first create request.
type Result struct {
	// Nodes is the cluster's number of fake nodes; ComponentCPU the CPU seconds its apiserver,
	// scheduler, kwok and etcd used during the run.
	Nodes        int                `json:"nodes"`
	ComponentCPU map[string]float64 `json:"componentCPUSeconds,omitempty"`
	Mode         string             `json:"mode"`
	Round        int                `json:"round"`
	Pods         int                `json:"pods"`
	// Incomplete is set when the run timed out; times not reached are 0.
	Incomplete bool `json:"incomplete,omitempty"`
	// PodsExist: every pod has been seen; AllRunning: every job's pods have all run;
	// AllSucceeded: every job succeeded (kiln: its Succeeded condition; floor: all its pods).
	PodsExist    float64 `json:"podsExistSeconds"`
	AllRunning   float64 `json:"allRunningSeconds"`
	AllSucceeded float64 `json:"allSucceededSeconds"`
	// StatusRunning is when every job's Running condition had been seen (kiln only).
	StatusRunning float64 `json:"statusRunningSeconds,omitempty"`
	// StatusWritesWhileRunning are the job's changes after its Running condition until it
	// succeeded (kiln only): pods that just run should cause none.
	StatusWritesWhileRunning WritesWhileRunning `json:"statusWritesWhileRunning"`
	// StatusWrites counts the jobs by the changes seen to them after their creation, and
	// FirstStatusWrite times each job's creation until the first (kiln only).
	StatusWrites     map[int]int `json:"statusWritesPerJob,omitempty"`
	FirstStatusWrite Percentiles `json:"firstStatusWriteSeconds"`
	// TimeToRunning are percentiles of each job's creation until all its pods run, and
	// DoneAfterRunning of the time from there until it succeeded (for a service: was Ready).
	TimeToRunning    Percentiles `json:"timeToRunningSeconds"`
	DoneAfterRunning Percentiles `json:"doneAfterRunningSeconds"`
	// ServicesExist is when every job's first Service had been seen, and DoneAfterService are
	// percentiles of each job's time from then until it succeeded (serving runs only).
	ServicesExist     float64        `json:"servicesExistSeconds,omitempty"`
	DoneAfterService  Percentiles    `json:"doneAfterServiceSeconds"`
	APIServerRequests map[string]int `json:"apiserverRequests"`
	// Submitted is when the last job's create returned; CreateLatency what each create took, as
	// the submitting client saw it.
	Submitted     float64     `json:"submittedSeconds"`
	CreateLatency Percentiles `json:"createLatencySeconds"`
	// APIServerLatency is the latency of the requests the apiserver served during the run, by
	// "VERB resource[/subresource]"; Load its requests in flight, sampled every second.
	APIServerLatency map[string]Latency `json:"apiserverLatency,omitempty"`
	Load             []LoadPoint        `json:"apiserverLoad,omitempty"`
	// APIServerSeconds are the seconds the apiserver's requests took, by verb and resource:
	// where its time went (webhooks and etcd included), not its CPU.
	APIServerSeconds map[string]float64 `json:"apiserverSecondsByResource"`
	// WebhookSeconds are the seconds the apiserver waited on admission webhooks, by webhook:
	// part of APIServerSeconds.
	WebhookSeconds map[string]float64 `json:"webhookSeconds,omitempty"`
	Manager        *ManagerStats      `json:"manager,omitempty"`
	// Operator is what the operator and JobSet cost in a TrainJob run (trainjob, trainer).
	Operator *OperatorStats `json:"operator,omitempty"`
	Timeline []Point        `json:"timeline"`
}

// Percentiles of a distribution, in seconds.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// WritesWhileRunning is the mean and maximum over jobs.
type WritesWhileRunning struct {
	Mean float64 `json:"mean"`
	Max  int     `json:"max"`
}

// Point is the state of the workload at T seconds.
type Point struct {
	T         float64 `json:"t"`
	Running   int     `json:"running"`
	Succeeded int     `json:"succeeded"`
	// Pods and Services are how many had been seen (Services: of a serving run's jobs).
	Pods     int `json:"pods"`
	Services int `json:"services,omitempty"`
}

// clusters counts the clusters the benchmark made, to name each.
var clusters int

func run(ctx context.Context, mode string, p Params, tools, dir string) (*Result, error) {
	jobs := workload(p)
	pods := 0
	for _, j := range jobs {
		pods += int(framework.TotalReplicas(j.GetReplicaSpecs()))
	}
	cluster, nodes, done, err := newCluster(ctx, mode, p, tools, dir, pods+p.Foreign)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := devcluster.InstallCRDs(ctx, cluster.Client, filepath.Join(testenv.RepoRoot(), "config", "crd", "bases")); err != nil {
		return nil, err
	}
	c, err := client.New(cluster.Config, client.Options{Scheme: manager.Scheme()})
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		return nil, err
	}
	for _, ns := range []string{benchNamespace, foreignNamespace} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return nil, err
		}
	}
	if p.Foreign > 0 {
		t := time.Now()
		if err := createForeign(ctx, c, p.Foreign, nodes, p.Parallelism); err != nil {
			return nil, err
		}
		fmt.Printf("   %d foreign pods created in %s\n", p.Foreign, time.Since(t).Round(100*time.Millisecond))
	}

	var mgr *managerProcess
	if mode == "kiln" {
		kubeconfig, err := kubeconfigAs(ctx, cluster, dir, p.Identity, int32(p.KilnShares))
		if err != nil {
			return nil, err
		}
		if mgr, err = startManager(ctx, cluster, kubeconfig, tools, dir, p.Webhooks, p.Profile > 0, p.ManagerEnv, strings.Fields(p.ManagerArgs)...); err != nil {
			return nil, err
		}
		defer mgr.stop()
	}
	obs, err := observe(ctx, cluster.Config, jobs, mode == "kiln", p.Trace)
	if err != nil {
		return nil, err
	}
	defer obs.stop()
	before, err := apiserverLoad(ctx, kube)
	if err != nil {
		return nil, err
	}
	cpuBefore := componentCPU(cluster)

	user, err := userClient(ctx, cluster, c)
	if err != nil {
		return nil, err
	}
	obs.start()
	t0 := time.Now()
	sampler := sampleLoad(ctx, kube, t0)
	width := p.Parallelism
	if p.Submit == "serial" {
		width = 1
	}
	sub := &submission{}
	defer startProfiles(ctx, kube, p, dir, mode, mgr)()
	switch {
	case mode == "kiln":
		_, sub, err = createJobs(ctx, user, jobs, width, obs)
	case mode == "same" && p.Submit == "serial":
		sub, err = createJobsThenChildren(ctx, user, c, jobs, p.Parallelism, obs)
	case mode == "same":
		err = createJobsAndChildren(ctx, c, jobs, p.Parallelism, obs)
	default:
		err = createChildren(ctx, c, jobs, p.Parallelism, obs)
	}
	if err != nil {
		return nil, err
	}
	res, err := measured(ctx, obs, mode, p, pods, nodes, cluster, kube, before, cpuBefore)
	if err != nil {
		return nil, err
	}
	res.Load = sampler.finish()
	if !sub.last.IsZero() {
		res.Submitted, res.CreateLatency = sub.last.Sub(t0).Seconds(), percentiles(sub.latencies)
	}
	if mgr != nil {
		if res.Manager, err = mgr.stats(pods); err != nil {
			return nil, err
		}
		if p.Profile > 0 {
			mgr.heapProfile()
		}
	}
	fmt.Printf("   pods exist %.1fs, all running %.1fs, all succeeded %.1fs\n", res.PodsExist, res.AllRunning, res.AllSucceeded)
	return res, nil
}

// measured waits until the workload finished (or its time ran out) and is what the run measured:
// its times, and what the cluster's components and the apiserver's requests cost since before.
func measured(ctx context.Context, obs *observer, mode string, p Params, pods, nodes int, cluster *devcluster.Cluster, kube kubernetes.Interface, before load, cpuBefore map[string]float64) (*Result, error) {
	// Generous: on this 2-core machine kube-scheduler alone needs ~40 ms a pod with 20,000 pods.
	timeout := 10*time.Minute + p.Duration*2 + time.Duration(pods)*100*time.Millisecond
	waitErr := obs.wait(ctx, timeout)
	if waitErr != nil {
		fmt.Println("  ", waitErr, "- reporting what was measured")
	}
	res := obs.result(mode)
	res.Incomplete, res.Nodes = waitErr != nil, nodes
	res.ComponentCPU = map[string]float64{}
	for name, after := range componentCPU(cluster) {
		res.ComponentCPU[name] = after - cpuBefore[name]
	}
	after, err := apiserverLoad(ctx, kube)
	if err != nil {
		return nil, err
	}
	res.APIServerRequests, res.APIServerSeconds = diff(after.requests, before.requests), diff(after.seconds, before.seconds)
	res.WebhookSeconds = diff(after.webhooks, before.webhooks)
	res.APIServerLatency = latencies(after.latency, before.latency)
	return res, nil
}

// newCluster starts the run's cluster, of p.Nodes fake nodes or enough for pods; done deletes it.
func newCluster(ctx context.Context, mode string, p Params, tools, dir string, pods int) (_ *devcluster.Cluster, nodes int, done func(), _ error) {
	logs, err := os.Create(filepath.Join(dir, mode+"-cluster.log"))
	if err != nil {
		return nil, 0, nil, err
	}
	nodes = pods/podsPerNode + 2
	if p.Nodes > 0 {
		nodes = p.Nodes
	}
	start := time.Now()
	// A cluster of each run's own name: one re-created under the name just deleted (ROUNDS with
	// one mode) failed its first request, "x509: certificate signed by unknown authority".
	clusters++
	cluster, err := devcluster.Create(ctx, devcluster.Options{
		Name: fmt.Sprintf("kiln-bench-%d-%s-%d", os.Getpid(), mode, clusters), ToolsDir: tools, Log: logs,
		Stages: []string{filepath.Join(testenv.RepoRoot(), "config", "dev", "stages.yaml")},
		Nodes:  nodes, PriorityAndFairness: p.PriorityAndFairness,
	})
	if err != nil {
		logs.Close()
		return nil, 0, nil, err
	}
	fmt.Printf("   cluster with %d nodes ready in %s\n", nodes, time.Since(start).Round(100*time.Millisecond))
	return cluster, nodes, func() {
		if err := cluster.Delete(); err != nil {
			fmt.Fprintln(os.Stderr, "deleting the benchmark cluster:", err)
		}
		logs.Close()
	}, nil
}

// workload is the benchmark's jobs: TFJobs of 1 PS + W Workers, and the PyTorchJob share as
// Master + W Workers; every pod runs D and succeeds (config/dev/stages.yaml).
func workload(p Params) []framework.Job {
	pytorchJobs := int(float64(p.Jobs)*p.PyTorchShare + 0.5)
	jobs := make([]framework.Job, 0, p.Jobs)
	for i := range p.Jobs {
		var job framework.Job
		var lead kubeflowv1.ReplicaType
		var container string
		if i < pytorchJobs {
			job, lead, container = &kubeflowv1.PyTorchJob{}, kubeflowv1.PyTorchJobReplicaTypeMaster, pytorch.ContainerName
		} else {
			job, lead, container = &kubeflowv1.TFJob{}, kubeflowv1.TFJobReplicaTypePS, tensorflow.ContainerName
		}
		job.SetName(fmt.Sprintf("job-%05d", i))
		job.SetNamespace(benchNamespace)
		spec := func(n int) *kubeflowv1.ReplicaSpec {
			replicas := int32(n)
			return &kubeflowv1.ReplicaSpec{Replicas: &replicas, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"kiln.dev/simulate-duration": p.Duration.String()}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: container, Image: "bench/trainer:1"}}},
			}}
		}
		job.SetReplicaSpecs(map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{lead: spec(1), "Worker": spec(p.Workers)})
		jobs = append(jobs, job)
	}
	return jobs
}

// frameworkOf is the framework of a workload job.
func frameworkOf(job framework.Job) framework.Framework {
	if _, ok := job.(*kubeflowv1.PyTorchJob); ok {
		return pytorch.New(pytorch.Config{})
	}
	return tensorflow.New(tensorflow.Config{})
}

// parallel runs do(i) for i < n with at most width in flight; the first error stops it.
func parallel(ctx context.Context, n, width int, do func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(1, width) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := do(ctx, i); err != nil {
					cancel(err)
				}
			}
		}()
	}
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

// submission is how the jobs' creates went: when the last returned, and what each took.
type submission struct {
	last      time.Time
	latencies []float64
	mu        sync.Mutex
}

// create creates obj, as the submitting client, and records what the create took.
func (s *submission) create(ctx context.Context, c client.Client, obj client.Object) error {
	start := time.Now()
	err := c.Create(ctx, obj)
	s.mu.Lock()
	s.latencies = append(s.latencies, time.Since(start).Seconds())
	s.last = time.Now()
	s.mu.Unlock()
	return err
}

// createJobs creates copies of the jobs, width at a time, recording each job's creation time;
// the copies, as created, are returned.
func createJobs(ctx context.Context, c client.Client, jobs []framework.Job, width int, obs *observer) ([]framework.Job, *submission, error) {
	sub := &submission{}
	created := make([]framework.Job, len(jobs))
	for i := range jobs {
		created[i] = jobs[i].DeepCopyObject().(framework.Job)
	}
	err := parallel(ctx, len(jobs), width, func(ctx context.Context, i int) error {
		obs.created(jobs[i].GetName())
		if err := sub.create(ctx, c, created[i]); err != nil {
			return fmt.Errorf("creating %s: %w", jobs[i].GetName(), err)
		}
		return nil
	})
	return created, sub, err
}

// createJobsThenChildren is the same-work floor of a serial submission: every job created by
// user, one at a time, with nothing reconciling them; then, by c, their services and pods exactly
// as kiln builds them, owned by them, width at a time.
func createJobsThenChildren(ctx context.Context, user, c client.Client, jobs []framework.Job, width int, obs *observer) (*submission, error) {
	created, sub, err := createJobs(ctx, user, jobs, 1, obs)
	if err != nil {
		return sub, err
	}
	var objs []client.Object
	for _, job := range created {
		fw := frameworkOf(job)
		replicajob.Default(fw, job, kubeflowv1.CleanPodPolicyRunning)
		pods, services, err := replicajob.Children(fw, job)
		if err != nil {
			return sub, err
		}
		for i := range pods {
			objs = append(objs, services[i], pods[i])
		}
	}
	return sub, parallel(ctx, len(objs), width, func(ctx context.Context, i int) error {
		if err := c.Create(ctx, objs[i]); err != nil {
			return fmt.Errorf("creating %s: %w", objs[i].GetName(), err)
		}
		return nil
	})
}

// createJobsAndChildren is the same-work floor: each job created, then at once its services and
// pods exactly as kiln builds them, owned by it (the job's UID from its creation).
func createJobsAndChildren(ctx context.Context, c client.Client, jobs []framework.Job, width int, obs *observer) error {
	return parallel(ctx, len(jobs), width, func(ctx context.Context, i int) error {
		job := jobs[i].DeepCopyObject().(framework.Job)
		obs.created(job.GetName())
		if err := c.Create(ctx, job); err != nil {
			return fmt.Errorf("creating %s: %w", job.GetName(), err)
		}
		fw := frameworkOf(job)
		replicajob.Default(fw, job, kubeflowv1.CleanPodPolicyRunning)
		pods, services, err := replicajob.Children(fw, job)
		if err != nil {
			return err
		}
		for i := range pods {
			for _, o := range []client.Object{services[i], pods[i]} {
				if err := c.Create(ctx, o); err != nil {
					return fmt.Errorf("creating %s: %w", o.GetName(), err)
				}
			}
		}
		return nil
	})
}

// componentCPU is the CPU seconds the cluster's apiserver, scheduler and kwok have used so far
// (those it cannot read are left out).
func componentCPU(cluster *devcluster.Cluster) map[string]float64 {
	out := map[string]float64{}
	for _, name := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller", "etcd"} {
		if pid, err := cluster.ComponentPID(name); err == nil {
			if s, err := cpuSeconds(pid); err == nil {
				out[name] = s
			}
		}
	}
	return out
}

// cpuSeconds is a process's user and system CPU time, from /proc.
func cpuSeconds(pid int) (float64, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which ends with ")"): utime and stime are the 12th and 13th.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100, nil // USER_HZ is 100 on Linux
}

// createChildren is the floor: each job's services and pods exactly as kiln builds them (without
// the owner reference to a job that does not exist), created directly.
func createChildren(ctx context.Context, c client.Client, jobs []framework.Job, width int, obs *observer) error {
	var objs []client.Object
	var owner []string
	for _, job := range jobs {
		fw := frameworkOf(job)
		j := job.DeepCopyObject().(framework.Job)
		replicajob.Default(fw, j, kubeflowv1.CleanPodPolicyRunning)
		pods, services, err := replicajob.Children(fw, j)
		if err != nil {
			return err
		}
		for i := range pods {
			pods[i].OwnerReferences, services[i].OwnerReferences = nil, nil
			objs, owner = append(objs, services[i], pods[i]), append(owner, job.GetName(), job.GetName())
		}
	}
	return parallel(ctx, len(objs), width, func(ctx context.Context, i int) error {
		if i == 0 || owner[i] != owner[i-1] {
			obs.created(owner[i])
		}
		if err := c.Create(ctx, objs[i]); err != nil {
			return fmt.Errorf("creating %s: %w", objs[i].GetName(), err)
		}
		return nil
	})
}

// createForeign fills the cluster with pods kiln does not own, bound to the fake nodes.
func createForeign(ctx context.Context, c client.Client, n, nodes, width int) error {
	return parallel(ctx, n, width, func(ctx context.Context, i int) error {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("foreign-%05d", i), Namespace: foreignNamespace, Labels: map[string]string{"app": "foreign"}},
			Spec: corev1.PodSpec{
				NodeName:   fmt.Sprintf("kwok-node-%d", i%nodes),
				Containers: []corev1.Container{{Name: "app", Image: "foreign/app:1"}},
			},
		}
		return c.Create(ctx, pod)
	})
}

// load is what the apiserver has served so far: requests by verb, the seconds they took by verb
// and resource (watches and other long-running requests left out), and the seconds it waited on
// each admission webhook.
type load struct {
	requests          map[string]int
	seconds, webhooks map[string]float64
	latency           histograms
}

// startProfiles starts the CPU profiles PROFILE asks for, as the first job is created: the
// manager's (mgr, when kiln runs) and the apiserver's, saved as <mode>-apiserver.pprof in dir;
// wait returns once the apiserver's is saved.
func startProfiles(ctx context.Context, kube kubernetes.Interface, p Params, dir, mode string, mgr *managerProcess) (wait func()) {
	if p.Profile <= 0 {
		return func() {}
	}
	if mgr != nil {
		mgr.profile(p.Profile)
	}
	saved := make(chan struct{})
	go func() {
		defer close(saved)
		body, err := kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(int(p.Profile.Seconds()))).DoRaw(ctx)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, mode+"-apiserver.pprof"), body, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "profiling the apiserver:", err)
		}
	}()
	return func() { <-saved }
}

// apiserverLoad reads the apiserver's load from its metrics.
func apiserverLoad(ctx context.Context, kube kubernetes.Interface) (load, error) {
	families, err := apiserverMetrics(ctx, kube)
	if err != nil {
		return load{}, err
	}
	l := load{requests: map[string]int{}, seconds: map[string]float64{}, webhooks: map[string]float64{}, latency: requestHistograms(families)}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		l.requests[testenv.Label(m, "verb")] += int(m.GetCounter().GetValue())
	}
	for _, m := range families["apiserver_request_duration_seconds"].GetMetric() {
		if verb := testenv.Label(m, "verb"); verb != "WATCH" && verb != "CONNECT" { // long-running: their time is not work
			l.seconds[verb+" "+testenv.Label(m, "resource")] += m.GetHistogram().GetSampleSum()
		}
	}
	for _, m := range families["apiserver_admission_webhook_admission_duration_seconds"].GetMetric() {
		l.webhooks[testenv.Label(m, "name")] += m.GetHistogram().GetSampleSum()
	}
	return l, nil
}

func diff[V int | float64](after, before map[string]V) map[string]V {
	out := map[string]V{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

func percentiles(values []float64) Percentiles {
	if len(values) == 0 {
		return Percentiles{}
	}
	sort.Float64s(values)
	at := func(q float64) float64 { return values[min(len(values)-1, int(q*float64(len(values))))] }
	return Percentiles{P50: at(0.5), P90: at(0.9), P99: at(0.99), Max: values[len(values)-1]}
}
