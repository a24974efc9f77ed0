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
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
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
	var samples, crds string
	fs.StringVar(&o.Name, "name", "kiln-dev", "name of the local cluster")
	fs.StringVar(&o.ToolsDir, "tools", os.Getenv("KILN_TOOLS_DIR"), "folder of the binaries hack/tools.sh built (make run passes it)")
	fs.StringVar(&o.WorkDir, "workdir", devcluster.DefaultWorkDir(), "where kwokctl keeps the cluster's state")
	fs.IntVar(&o.Nodes, "nodes", 4, "CPU nodes")
	fs.IntVar(&o.GPUNodes, "gpu-nodes", 2, "nodes with nvidia.com/gpu")
	fs.IntVar(&o.GPUsPerNode, "gpus-per-node", 8, "nvidia.com/gpu per GPU node")
	stages := fs.String("stages", "config/dev/stages.yaml", "kwok stages for simulated training")
	fs.StringVar(&samples, "samples", "config/samples", "sample manifests to apply (file or folder)")
	fs.StringVar(&crds, "crds", "config/crd/bases", "CRD folder")
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
	if err := devcluster.InstallCRDs(ctx, cluster.Client, crds); err != nil {
		return err
	}

	webhookAddr, err := devcluster.FreeAddr()
	if err != nil {
		return err
	}
	opts, err := devcluster.LocalWebhooks(manager.Options{
		MetricsAddr: "0", ProbeAddr: "0", Workers: 4,
		Engine: replicajob.Options{DefaultCleanPodPolicy: kubeflowv1.CleanPodPolicyRunning, Parallelism: 32, StatusInterval: time.Second},
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

	objs, err := devcluster.ReadObjects(samples)
	if err != nil {
		return err
	}
	if err := devcluster.Apply(ctx, cluster.Client, "default", objs); err != nil {
		return err
	}
	fmt.Printf("kiln is running; applied %d samples from %s\n\n", len(objs), samples)

	jobs, err := client.New(cluster.Config, client.Options{Scheme: manager.Scheme()})
	if err != nil {
		return err
	}
	if err := watchSamples(ctx, jobs, len(objs)); err != nil {
		if ctx.Err() != nil {
			return nil // Ctrl-C: the deferred calls tear everything down
		}
		return err
	}
	fmt.Printf("all samples finished (%s after start)\n\n", time.Since(start).Round(100*time.Millisecond))
	abs, _ := filepath.Abs(cluster.Kubeconfig)
	fmt.Printf("The cluster and kiln stay up. Use it with:\n\n  export KUBECONFIG=%s\n  %s get tfjobs,pytorchjobs,xgboostjobs,pyjobs,pods\n\nCtrl-C tears everything down.\n", abs, filepath.Join(o.ToolsDir, "kubectl"))
	select {
	case <-ctx.Done():
	case err := <-mgrDone:
		mgrDone <- err
		return fmt.Errorf("kiln manager stopped: %w", err)
	}
	return nil
}

// watchSamples prints the table whenever it changes until want jobs have finished.
func watchSamples(ctx context.Context, c client.Client, want int) error {
	last := ""
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		rows, err := listJobs(ctx, c)
		if err != nil {
			return err
		}
		finished := 0
		for _, r := range rows {
			if r.Finished {
				finished++
			}
		}
		if key := stateOnly(rows); key != last {
			last = key
			fmt.Printf("%s\n%s\n", time.Now().Format("15:04:05"), devcluster.Table(rows))
		}
		if finished >= want {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// stateOnly is the table without ages, so that it is printed again only when a job changed.
func stateOnly(rows []devcluster.JobRow) string {
	ageless := slices.Clone(rows)
	for i := range ageless {
		ageless[i].Age = 0
	}
	return devcluster.Table(ageless)
}

func listJobs(ctx context.Context, c client.Client) ([]devcluster.JobRow, error) {
	now := time.Now()
	var rows []devcluster.JobRow
	var tf kubeflowv1.TFJobList
	var pt kubeflowv1.PyTorchJobList
	var xgb kubeflowv1.XGBoostJobList
	var py trainingv1alpha1.PyJobList
	for _, l := range []client.ObjectList{&tf, &pt, &xgb, &py} {
		if err := c.List(ctx, l); err != nil {
			return nil, err
		}
	}
	for i := range tf.Items {
		rows = append(rows, devcluster.RowOf("TFJob", &tf.Items[i], now))
	}
	for i := range pt.Items {
		rows = append(rows, devcluster.RowOf("PyTorchJob", &pt.Items[i], now))
	}
	for i := range xgb.Items {
		rows = append(rows, devcluster.RowOf("XGBoostJob", &xgb.Items[i], now))
	}
	for i := range py.Items {
		rows = append(rows, devcluster.PyJobRow(&py.Items[i], now))
	}
	return rows, nil
}
