package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	kservev1beta1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1beta1"
	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/internal/manager"
	"github.com/kiln-ml/kiln/internal/replicajob"
)

// runDev is `kiln dev`: a local cluster, kiln's CRDs and manager, the samples and a live table of
// them; then it keeps everything up until Ctrl-C and tears it all down.
func runDev(args []string) error {
	fs := flag.NewFlagSet("kiln dev", flag.ContinueOnError)
	var o devcluster.Options
	var samplePaths, crds string
	fs.StringVar(&o.Name, "name", "kiln-dev", "name of the local cluster")
	fs.StringVar(&o.ToolsDir, "tools", os.Getenv("KILN_TOOLS_DIR"), "folder of the binaries hack/tools.sh built (make run passes it)")
	fs.StringVar(&o.WorkDir, "workdir", devcluster.DefaultWorkDir(), "where kwokctl keeps the cluster's state")
	fs.IntVar(&o.Nodes, "nodes", 4, "CPU nodes")
	fs.IntVar(&o.GPUNodes, "gpu-nodes", 2, "nodes with nvidia.com/gpu")
	fs.IntVar(&o.GPUsPerNode, "gpus-per-node", 8, "nvidia.com/gpu per GPU node")
	fs.BoolVar(&o.GangScheduling, "gang-scheduling", true, "serve Kubernetes' own PodGroups (feature gate GenericWorkload): kiln then gang-schedules jobs with more than one pod")
	stages := fs.String("stages", "config/dev/stages.yaml", "kwok stages for simulated training")
	fs.StringVar(&samplePaths, "samples", "config/runtimes,config/kserve,config/samples,config/samples/serving,config/samples/kserve", "comma-separated manifests to apply (files or folders): the training and serving runtimes and the samples")
	fs.StringVar(&crds, "crds", "config/crd/bases,config/crd/kserve", "comma-separated CRD folders: kiln's, and KServe's API as kiln serves it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.Stages = []string{*stages}
	ctrl.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel)))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	fmt.Printf("starting local cluster %q (kube-apiserver, etcd, scheduler, controller-manager; kwok nodes)…\n", o.Name)
	cluster, err := devcluster.Create(ctx, o)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("deleting the local cluster…")
		if err := cluster.Delete(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	fmt.Printf("cluster ready in %s; installing CRDs\n", time.Since(start).Round(100*time.Millisecond))
	for _, dir := range splitList(crds) {
		if err := devcluster.InstallCRDs(ctx, cluster.Client, dir); err != nil {
			return err
		}
	}
	// JobSet's controller runs TrainJobs' JobSets; its log goes beside the cluster's.
	stopJobSet, err := cluster.StartJobSet(ctx, filepath.Dir(cluster.Kubeconfig))
	if err != nil {
		return err
	}
	defer stopJobSet()

	webhookAddr, err := devcluster.FreeAddr()
	if err != nil {
		return err
	}
	all, err := manager.Frameworks(manager.Options{})
	if err != nil {
		return err
	}
	opts, err := devcluster.LocalWebhooks(manager.Options{
		Kinds:       manager.KindNames(all), // every kind, KServe's InferenceService too: its CRDs are installed above
		MetricsAddr: "0", ProbeAddr: "0", Workers: 4,
		Engine: replicajob.Options{DefaultCleanPodPolicy: kubeflowv1.CleanPodPolicyRunning, Parallelism: 32, StatusInterval: time.Second, ChildEventBatch: replicajob.DefaultChildEventBatch},
	}, webhookAddr, time.Minute)
	if err != nil {
		return err
	}
	if err := devcluster.InstallWebhooks(ctx, cluster.Client, opts); err != nil {
		return err
	}
	mgr, err := manager.New(cluster.Config, opts)
	if err != nil {
		return err
	}
	mgrDone := make(chan error, 1)
	mgrCtx, stopMgr := context.WithCancel(ctx)
	defer func() { stopMgr(); <-mgrDone }()
	go func() { mgrDone <- mgr.Start(mgrCtx) }()
	if err := devcluster.WaitForWebhooks(ctx, cluster.Client, time.Minute); err != nil {
		return err
	}

	objs, err := devcluster.ReadObjects(splitList(samplePaths)...)
	if err != nil {
		return err
	}
	if err := devcluster.Apply(ctx, cluster.Client, "default", objs); err != nil {
		return err
	}
	fmt.Printf("kiln is running; applied %d samples from %s\n\n", len(objs), samplePaths)

	jobs, err := client.New(cluster.Config, client.Options{Scheme: manager.Scheme()})
	if err != nil {
		return err
	}
	if err := watchSamples(ctx, jobs, objs); err != nil {
		if ctx.Err() != nil {
			return nil // Ctrl-C: the deferred calls tear everything down
		}
		return err
	}
	fmt.Printf("all samples finished: jobs done, InferenceServices Ready (%s after start)\n\n", time.Since(start).Round(100*time.Millisecond))
	abs, _ := filepath.Abs(cluster.Kubeconfig)
	fmt.Print(useIt(abs, o.ToolsDir))
	select {
	case <-ctx.Done():
	case err := <-mgrDone:
		mgrDone <- err
		return fmt.Errorf("kiln manager stopped: %w", err)
	}
	return nil
}

// watchSamples prints the tables whenever they change until every sample job has finished and
// every sample InferenceService is Ready.
func watchSamples(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	frameworks, err := manager.Frameworks(manager.Options{})
	if err != nil {
		return err
	}
	jobKinds := map[string]bool{"PyJob": true, trainerv1alpha1.TrainJobKind: true}
	for _, fw := range frameworks.All() {
		jobKinds[fw.Kind] = true
	}
	wantJobs, wantServices := 0, 0
	for _, o := range objs {
		switch {
		case o.GetKind() == "InferenceService":
			wantServices++
		case jobKinds[o.GetKind()]:
			wantJobs++
		}
	}
	last := ""
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		s, err := listSamples(ctx, c)
		if err != nil {
			return err
		}
		if key := s.withoutAges().String(); key != last {
			last = key
			fmt.Printf("%s\n%s\n", time.Now().Format("15:04:05"), s)
		}
		if s.finished() >= wantJobs && s.ready() >= wantServices {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// samples is what the live tables show: the training jobs and the InferenceServices.
type samples struct {
	jobs     []devcluster.JobRow
	services []devcluster.ServiceRow
}

func (s samples) String() string {
	out := devcluster.Table(s.jobs)
	if len(s.services) > 0 {
		out += "\n" + devcluster.ServiceTable(s.services)
	}
	return out
}

func (s samples) finished() int {
	return count(s.jobs, func(r devcluster.JobRow) bool { return r.Finished })
}

func (s samples) ready() int {
	return count(s.services, func(r devcluster.ServiceRow) bool { return r.Ready })
}

func count[T any](rows []T, ok func(T) bool) int {
	n := 0
	for _, r := range rows {
		if ok(r) {
			n++
		}
	}
	return n
}

// withoutAges is the tables without ages, so that they are printed again only when a sample changed.
func (s samples) withoutAges() samples {
	out := samples{jobs: slices.Clone(s.jobs), services: slices.Clone(s.services)}
	for i := range out.jobs {
		out.jobs[i].Age = 0
	}
	for i := range out.services {
		out.services[i].Age = 0
	}
	return out
}

func listSamples(ctx context.Context, c client.Client) (samples, error) {
	now := time.Now()
	var s samples
	frameworks, err := manager.Frameworks(manager.Options{})
	if err != nil {
		return s, err
	}
	for _, fw := range frameworks.All() {
		list := fw.NewJobList()
		if err := c.List(ctx, list); err != nil {
			return s, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return s, err
		}
		for _, item := range items {
			s.jobs = append(s.jobs, devcluster.RowOf(fw.Kind, item.(kubeflowv1.Job), now))
		}
	}
	var py trainingv1alpha1.PyJobList
	var tj trainerv1alpha1.TrainJobList
	var isvcs servingv1alpha1.InferenceServiceList
	var kserveISVCs kservev1beta1.InferenceServiceList
	for _, l := range []client.ObjectList{&py, &tj, &isvcs, &kserveISVCs} {
		if err := c.List(ctx, l); err != nil {
			return s, err
		}
	}
	for i := range py.Items {
		s.jobs = append(s.jobs, devcluster.PyJobRow(&py.Items[i], now))
	}
	for i := range tj.Items {
		s.jobs = append(s.jobs, devcluster.TrainJobRow(&tj.Items[i], now))
	}
	for i := range isvcs.Items {
		s.services = append(s.services, devcluster.InferenceServiceRow(&isvcs.Items[i], now))
	}
	for i := range kserveISVCs.Items {
		s.services = append(s.services, devcluster.KServeInferenceServiceRow(&kserveISVCs.Items[i], now))
	}
	return s, nil
}

// useIt says how to use the local cluster whose kubeconfig is at kubeconfig: kubectl kiln, through
// the kubectl of toolsDir and the kubectl-kiln make build puts beside this binary (or this
// binary's own commands, without it).
func useIt(kubeconfig, toolsDir string) string {
	kiln, _ := os.Executable()
	bin := filepath.Dir(kiln)
	cmd := "kubectl kiln"
	if _, err := os.Stat(filepath.Join(bin, "kubectl-kiln")); err != nil {
		cmd = kiln
	}
	return fmt.Sprintf(`The cluster and kiln stay up. Use it with:

  export KUBECONFIG=%s PATH=%s:%s:$PATH
  %[4]s get                          # every job and InferenceService, and why each waits
  %[4]s describe pytorch-mnist       # its status, replicas, pods and events
  %[4]s logs pytorch-mnist           # every replica's log, [master-0] [worker-0] ...
  kubectl get pods

Ctrl-C tears everything down.
`, kubeconfig, bin, toolsDir, cmd)
}
