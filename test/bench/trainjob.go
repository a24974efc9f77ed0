package main

// TrainJobs beside Kubeflow Trainer: the same J TrainJobs of numNodes W on the torch-distributed
// runtime, on the same kind of cluster with the real JobSet controller, run once by kiln and
// once by Kubeflow Trainer v2.3's own controller (built by hack/tools.sh bench, never part of
// kiln). Neither runs admission webhooks. Timed from a watch on the pods and the TrainJobs:
// every pod exists, every TrainJob's pods run, every TrainJob Complete; the operators' CPU and
// peak memory are read from /proc.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/internal/manager"
	"github.com/kiln-ml/kiln/test/testenv"
)

// The TrainJob modes: kiln and Kubeflow Trainer, each with JobSet.
const (
	modeTrainJob = "trainjob"
	modeTrainer  = "trainer"
)

func isTrainJobMode(mode string) bool { return mode == modeTrainJob || mode == modeTrainer }

// OperatorStats is what the operator (kiln or Trainer) and JobSet's controller cost during a
// TrainJob run: CPU seconds from the first TrainJob created to the end, and peak memory.
type OperatorStats struct {
	CPUSeconds float64 `json:"cpuSeconds"`
	PeakRSSMiB float64 `json:"peakRSSMiB"`
	// At the end of the run, what of the resident memory is heap and stacks (anonymous) and what
	// is the program's own file mapped in: a Go program's code and tables count in its RSS.
	AnonRSSMiB       float64 `json:"anonRSSMiB"`
	FileRSSMiB       float64 `json:"fileRSSMiB"`
	JobSetCPUSeconds float64 `json:"jobSetCPUSeconds"`
	JobSetPeakRSSMiB float64 `json:"jobSetPeakRSSMiB"`
}

// trainJobs is the workload: J TrainJobs of W nodes each on torch-distributed, every pod running
// D (config/dev/stages.yaml, through a runtime patch) and succeeding.
func trainJobs(p Params) []*trainerv1alpha1.TrainJob {
	out := make([]*trainerv1alpha1.TrainJob, p.Jobs)
	for i := range out {
		out[i] = &trainerv1alpha1.TrainJob{
			ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: fmt.Sprintf("train-%05d", i)},
			Spec: trainerv1alpha1.TrainJobSpec{
				RuntimeRef: trainerv1alpha1.RuntimeRef{Name: "torch-distributed"},
				Trainer:    &trainerv1alpha1.Trainer{NumNodes: ptr.To(int32(p.Workers)), Command: []string{"torchrun", "train.py"}},
				RuntimePatches: []trainerv1alpha1.RuntimePatch{{Manager: "kiln.dev/bench", TrainingRuntimeSpec: &trainerv1alpha1.TrainingRuntimeSpecPatch{
					Template: &trainerv1alpha1.JobSetTemplatePatch{Spec: &trainerv1alpha1.JobSetSpecPatch{ReplicatedJobs: []trainerv1alpha1.ReplicatedJobPatch{{
						Name: "node", Template: &trainerv1alpha1.JobTemplatePatch{Spec: &trainerv1alpha1.JobSpecPatch{Template: &trainerv1alpha1.PodTemplatePatch{
							Metadata: &metav1.ObjectMeta{Annotations: map[string]string{"kiln.dev/simulate-duration": p.Duration.String()}}}}}}}}}}}},
			},
		}
	}
	return out
}

// runTrainJobs makes one TrainJob run of mode on a cluster of its own.
// With p.Profile, kiln's manager is profiled as in the kiln mode (Trainer's controller serves no
// profile).
func runTrainJobs(ctx context.Context, mode string, p Params, tools, dir string) (*Result, error) {
	jobs := trainJobs(p)
	pods := p.Jobs * p.Workers
	cluster, nodes, done, err := newCluster(ctx, mode, p, tools, dir, pods)
	if err != nil {
		return nil, err
	}
	defer done()
	// The same API for both: kiln's CRDs (Trainer's API among them), the PodGroup CRDs Trainer's
	// gang plugins watch, JobSet, and the default runtimes.
	for _, crds := range []string{filepath.Join(testenv.RepoRoot(), "config", "crd", "bases"), filepath.Join(testenv.RepoRoot(), "test", "testdata", "crds")} {
		if err := devcluster.InstallCRDs(ctx, cluster.Client, crds); err != nil {
			return nil, err
		}
	}
	stopJobSet, jobSetPid, err := startJobSet(ctx, cluster, tools, dir)
	if err != nil {
		return nil, err
	}
	defer stopJobSet()
	c, err := client.New(cluster.Config, client.Options{Scheme: manager.Scheme()})
	if err != nil {
		return nil, err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}); err != nil {
		return nil, err
	}
	runtimes, err := devcluster.ReadObjects(filepath.Join(testenv.RepoRoot(), "config", "runtimes"))
	if err != nil {
		return nil, err
	}
	if err := devcluster.Apply(ctx, cluster.Client, "", runtimes); err != nil {
		return nil, err
	}
	pid, stop, mgr, err := startOperator(ctx, mode == modeTrainJob, cluster, tools, dir, p, nil,
		func() (int, func(), error) { return startTrainer(ctx, cluster, tools, dir) })
	if err != nil {
		return nil, err
	}
	defer stop()
	obs, err := observeTrainJobs(ctx, cluster.Config, jobs)
	if err != nil {
		return nil, err
	}
	defer obs.stop()
	objs := make([]client.Object, len(jobs))
	for i, j := range jobs {
		objs[i] = j
	}
	res, err := measureOperator(ctx, mode, p, dir, c, cluster, nodes, pods, obs, objs, pid, mgr, jobSetPid)
	if err != nil {
		return nil, err
	}
	fmt.Printf("   pods exist %.1fs, all running %.1fs, all Complete %.1fs; operator %.1f CPU-s, %.0f MiB peak; JobSet %.1f CPU-s, %.0f MiB peak\n",
		res.PodsExist, res.AllRunning, res.AllSucceeded, res.Operator.CPUSeconds, res.Operator.PeakRSSMiB, res.Operator.JobSetCPUSeconds, res.Operator.JobSetPeakRSSMiB)
	return res, nil
}

// startOperator starts the run's operator: kiln's manager (with args, no webhooks) when kiln is
// set, else the baseline controller; its process, how to stop it, and the manager (nil for the
// baseline).
func startOperator(ctx context.Context, kiln bool, cluster *devcluster.Cluster, tools, dir string, p Params, args []string,
	baseline func() (int, func(), error)) (int, func(), *managerProcess, error) {
	if !kiln {
		pid, stop, err := baseline()
		return pid, stop, nil, err
	}
	mgr, err := startManager(ctx, cluster, cluster.Kubeconfig, tools, dir, false, p.Profile > 0, p.ManagerEnv, append(args, strings.Fields(p.ManagerArgs)...)...)
	if err != nil {
		return 0, nil, nil, err
	}
	return mgr.cmd.Process.Pid, mgr.stop, mgr, nil
}

// measureOperator creates objs (the workload), obs watching, and measures the run and the
// operator of process pid (kiln's manager when mgr is set, profiled for p.Profile); jobSetPid, when
// not 0, is JobSet's controller, measured too.
func measureOperator(ctx context.Context, mode string, p Params, dir string, c client.Client, cluster *devcluster.Cluster, nodes, pods int, obs *observer,
	objs []client.Object, pid int, mgr *managerProcess, jobSetPid int) (*Result, error) {
	kube, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		return nil, err
	}
	before, err := apiserverLoad(ctx, kube)
	if err != nil {
		return nil, err
	}
	cpuBefore, jobSetBefore := must(cpuSeconds(pid)), must(cpuSeconds(jobSetPid))
	componentsBefore := componentCPU(cluster)

	obs.start()
	defer startProfiles(ctx, kube, p, dir, mode, mgr)()
	err = parallel(ctx, len(objs), p.Parallelism, func(ctx context.Context, i int) error {
		obs.created(obs.workloadOf(objs[i]))
		if err := c.Create(ctx, objs[i].DeepCopyObject().(client.Object)); err != nil {
			return fmt.Errorf("creating %s: %w", objs[i].GetName(), err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	res, err := measured(ctx, obs, mode, p, pods, nodes, cluster, kube, before, componentsBefore)
	if err != nil {
		return nil, err
	}
	res.Operator = &OperatorStats{
		CPUSeconds: must(cpuSeconds(pid)) - cpuBefore, PeakRSSMiB: must(peakRSSMiB(pid)),
		AnonRSSMiB: must(statusMiB(pid, "RssAnon")), FileRSSMiB: must(statusMiB(pid, "RssFile")),
	}
	if jobSetPid != 0 {
		res.Operator.JobSetCPUSeconds, res.Operator.JobSetPeakRSSMiB = must(cpuSeconds(jobSetPid))-jobSetBefore, must(peakRSSMiB(jobSetPid))
	}
	if mgr != nil {
		// kiln's requests and reconciles (read after its CPU: reading them costs some), in
		// result.json and on the progress line.
		if res.Manager, err = mgr.stats(pods); err != nil {
			return nil, err
		}
		fmt.Printf("   kiln: reconciles %v; writes %v\n", res.Manager.Reconciles, res.Manager.Writes)
		if p.Profile > 0 {
			mgr.heapProfile()
		}
	}
	return res, nil
}

// must is v, or 0 when reading /proc failed (the process is gone: it is reported as such).
func must(v float64, err error) float64 {
	if err != nil {
		return 0
	}
	return v
}

// startJobSet runs JobSet's controller beside the cluster, with a client rate as high as the
// operators'.
func startJobSet(ctx context.Context, cluster *devcluster.Cluster, tools, dir string) (func(), int, error) {
	// Its peak memory is compared too: it starts from disk in every run, as the operators do.
	bin, err := devcluster.JobSetBinary(tools)
	if err != nil {
		return nil, 0, err
	}
	if err := dropFromPageCache(bin); err != nil {
		return nil, 0, err
	}
	stop, err := cluster.StartJobSet(ctx, dir)
	if err != nil {
		return nil, 0, err
	}
	return stop, cluster.JobSetPid(), nil
}

// trainerConfig is Trainer's controller as a bench runs it: no certificate management, webhooks
// or leader election (nothing registers its webhooks; kiln runs without its own too), its client
// unthrottled as kiln's is.
const trainerConfig = `apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
health:
  healthProbeBindAddress: %s
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: %d
leaderElection:
  leaderElect: false
certManagement:
  enable: false
clientConnection:
  qps: 100000
  burst: 100000
`

// startTrainer runs Kubeflow Trainer's controller (hack/tools.sh bench built it) until stop.
func startTrainer(ctx context.Context, cluster *devcluster.Cluster, tools, dir string) (int, func(), error) {
	bins, _ := filepath.Glob(filepath.Join(tools, "trainer-*", "trainer-controller-manager"))
	if len(bins) == 0 {
		return 0, nil, fmt.Errorf("no Kubeflow Trainer controller in %s: run `bash hack/tools.sh bench` (make bench with MODES naming trainer does)", tools)
	}
	probe, port, err := controllerAddrs()
	if err != nil {
		return 0, nil, err
	}
	config := filepath.Join(dir, "trainer.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, trainerConfig, probe, port), 0o600); err != nil {
		return 0, nil, err
	}
	return startController(ctx, "trainer", bins[0], []string{"--config", config, "--kubeconfig", cluster.Kubeconfig}, nil, dir, probe)
}

// controllerAddrs are a free address for a baseline controller's probes and a free port for its
// webhook server.
func controllerAddrs() (probe string, port int, _ error) {
	probe, err := devcluster.FreeAddr()
	if err != nil {
		return "", 0, err
	}
	webhook, err := devcluster.FreeAddr()
	if err != nil {
		return "", 0, err
	}
	_, portText, _ := strings.Cut(webhook, ":")
	port, err = strconv.Atoi(portText)
	return probe, port, err
}

// startController runs the baseline controller name (bin with args, env added to ours) beside
// the cluster until stop: a throw-away webhook certificate where controller-runtime looks for one
// ($TMPDIR/k8s-webhook-server/serving-certs), its log in dir/<name>.log; it is started once
// probe's /readyz answers.
func startController(ctx context.Context, name, bin string, args, env []string, dir, probe string) (int, func(), error) {
	tmp := filepath.Join(dir, name+"-tmp")
	certs := filepath.Join(tmp, "k8s-webhook-server", "serving-certs")
	if err := os.MkdirAll(certs, 0o700); err != nil {
		return 0, nil, err
	}
	files, err := devcluster.ServingCert(name, name+"-controller-manager."+name+"-system.svc")
	if err != nil {
		return 0, nil, err
	}
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(certs, f), files[f], 0o600); err != nil {
			return 0, nil, err
		}
	}
	if err := dropFromPageCache(bin); err != nil {
		return 0, nil, err
	}
	logs, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return 0, nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), "TMPDIR="+tmp), env...)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logs.Close()
		return 0, nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); logs.Close() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if resp, err := http.Get("http://" + probe + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return cmd.Process.Pid, stop, nil
			}
		}
		select {
		case err := <-exited:
			return 0, nil, fmt.Errorf("%s's controller exited: %v (see %s)", name, err, logs.Name())
		case <-ctx.Done():
			stop()
			return 0, nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return 0, nil, fmt.Errorf("%s's controller not ready after 2 minutes (see %s)", name, logs.Name())
		}
	}
}

// peakRSSMiB is a process's peak resident memory (VmHWM), from /proc.
func peakRSSMiB(pid int) (float64, error) { return statusMiB(pid, "VmHWM") }

// statusMiB is a memory field of /proc/<pid>/status in MiB: VmHWM (the peak), RssAnon (heap and
// stacks) or RssFile (the pages of the program's own file mapped in).
func statusMiB(pid int, field string) (float64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, field+":") {
			kib, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
			return kib / 1024, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// observeTrainJobs is the observer of a TrainJob run: pods are the TrainJob's by their JobSet's
// name, its status says it runs once its counts do (JobsRun, as Trainer and kiln both write them),
// and it is done at its Complete condition.
func observeTrainJobs(ctx context.Context, cfg *rest.Config, jobs []*trainerv1alpha1.TrainJob) (*observer, error) {
	expected := map[string]int{}
	for _, j := range jobs {
		expected[j.Name] = int(ptr.Deref(j.Spec.Trainer.NumNodes, 1))
	}
	o := newObserver(expected, true, "", func(p *corev1.Pod) string { return p.Labels["jobset.sigs.k8s.io/jobset-name"] })
	return o, o.watch(ctx, cfg, []client.Object{&trainerv1alpha1.TrainJob{}}, func(obj any) {
		if j, ok := obj.(*trainerv1alpha1.TrainJob); ok {
			o.jobChanged(j, trainerv1alpha1.JobsRun(j.Status.JobsStatus),
				meta.IsStatusConditionTrue(j.Status.Conditions, trainerv1alpha1.TrainJobComplete),
				func() string { return fmt.Sprintf("%v", j.Status.Conditions) })
		}
	})
}

// trainJobMarkdown is the TrainJob table: kiln next to Kubeflow Trainer, and their ratio.
func (r *Report) trainJobMarkdown() string {
	kiln, trainer := r.run(modeTrainJob), r.run(modeTrainer)
	p := r.Params
	var b strings.Builder
	fmt.Fprintf(&b, "J=%d TrainJobs of numNodes %d on torch-distributed (%d pods), pods run %s, each run on a fresh cluster with JobSet v0.12's controller, no admission webhooks; %s; %s\n\n",
		p.Jobs, p.Workers, p.Jobs*p.Workers, p.Duration, r.Machine, r.Date.Format("2006-01-02"))
	r.runNotes(&b)
	comparison(&b, trainer, kiln, "Kubeflow Trainer v2.3 + JobSet", "kiln + JobSet", "kiln / Trainer", []comparisonRow{
		{"every pod exists", "s", func(r *Result) float64 { return r.PodsExist }},
		{"every TrainJob's pods run", "s", func(r *Result) float64 { return r.AllRunning }},
		{"every TrainJob Complete", "s", func(r *Result) float64 { return r.AllSucceeded }},
		{"operator CPU (kiln, or Trainer's controller)", "s", op(func(o *OperatorStats) float64 { return o.CPUSeconds })},
		{"operator peak memory", "MiB", op(func(o *OperatorStats) float64 { return o.PeakRSSMiB })},
		{"of it at the end: heap and stacks (RssAnon)", "MiB", op(func(o *OperatorStats) float64 { return o.AnonRSSMiB })},
		{"of it at the end: the program's file (RssFile)", "MiB", op(func(o *OperatorStats) float64 { return o.FileRSSMiB })},
		{"JobSet controller CPU", "s", op(func(o *OperatorStats) float64 { return o.JobSetCPUSeconds })},
		{"JobSet controller peak memory", "MiB", op(func(o *OperatorStats) float64 { return o.JobSetPeakRSSMiB })},
		{"kube-apiserver CPU", "s", func(r *Result) float64 { return r.ComponentCPU["kube-apiserver"] }},
	})
	return b.String()
}

// comparisonRow is a row of a comparison: what it measures, in unit, read from a run.
type comparisonRow struct {
	name, unit string
	get        func(*Result) float64
}

// comparison writes the table of kiln's run beside a baseline controller's (either may be nil),
// each row with kiln's value over the baseline's.
func comparison(b *strings.Builder, baseline, kiln *Result, baseName, kilnName, ratioName string, rows []comparisonRow) {
	fmt.Fprintf(b, "| | %s | %s | %s |\n|---|---|---|---|\n", baseName, kilnName, ratioName)
	for _, r := range rows {
		cells := []string{r.name, "–", "–", "–"}
		if baseline != nil {
			cells[1] = fmt.Sprintf("%.1f %s", r.get(baseline), r.unit)
		}
		if kiln != nil {
			cells[2] = fmt.Sprintf("%.1f %s", r.get(kiln), r.unit)
		}
		if baseline != nil && kiln != nil && r.get(baseline) > 0 {
			cells[3] = fmt.Sprintf("%.2f×", r.get(kiln)/r.get(baseline))
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
}

// op reads a run's operator figure (0 when it has none).
func op(get func(*OperatorStats) float64) func(*Result) float64 {
	return func(r *Result) float64 {
		if r.Operator == nil {
			return 0
		}
		return get(r.Operator)
	}
}
