// Package e2e runs kiln on a local cluster with a real scheduler, garbage collector and
// controller-manager (kwok plays the kubelets and the training, see config/dev/stages.yaml) and
// checks what needs them.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/manager"
	"github.com/kiln-ml/kiln/test/testenv"
)

const clusterPrefix = "kiln-e2e-"

var (
	cluster *devcluster.Cluster
	env     *testenv.Env // helpers (kubelet-free here: kwok plays the kubelet)
	tools   string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	tools = os.Getenv("KILN_TOOLS_DIR")
	if tools == "" {
		fmt.Fprintln(os.Stderr, "KILN_TOOLS_DIR is not set: run `make test-e2e`, or export KILN_TOOLS_DIR=$(bash hack/tools.sh cluster)")
		return 1
	}
	deleteAbandonedClusters()
	ctx := context.Background()
	var err error
	cluster, err = devcluster.Create(ctx, devcluster.Options{
		Name: clusterPrefix + strconv.Itoa(os.Getpid()), ToolsDir: tools,
		Stages: []string{filepath.Join(testenv.RepoRoot(), "config", "dev", "stages.yaml")},
		Nodes:  3, GPUNodes: 2, GPUsPerNode: 8, GangScheduling: true,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer testenv.OnInterrupt(func() {
		if err := cluster.Delete(); err != nil {
			fmt.Fprintln(os.Stderr, "deleting the e2e cluster:", err)
		}
	})()

	if err := devcluster.InstallCRDs(ctx, cluster.Client, filepath.Join(testenv.RepoRoot(), "config", "crd", "bases")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, err := client.New(cluster.Config, client.Options{Scheme: manager.Scheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env = &testenv.Env{Config: cluster.Config, Client: c}
	ctrl.SetLogger(testenv.Logger())
	// Jobs go through kiln's admission webhooks, called by the cluster's apiserver over TLS.
	webhookAddr, err := devcluster.FreeAddr()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opts, err := devcluster.LocalWebhooks(testenv.ManagerOptions(), webhookAddr, time.Minute)
	if err == nil {
		err = env.InstallWebhooks(opts)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, err := manager.New(cluster.Config, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgrCtx, stopMgr := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	defer func() { stopMgr(); <-done }()
	if err := devcluster.WaitForWebhooks(ctx, c, time.Minute); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// deleteAbandonedClusters deletes e2e clusters whose test process is gone (killed before it could
// clean up): their name carries that process's PID.
func deleteAbandonedClusters() {
	dirs, _ := filepath.Glob(filepath.Join(devcluster.DefaultWorkDir(), "clusters", clusterPrefix+"*"))
	for _, d := range dirs {
		name := filepath.Base(d)
		pid, err := strconv.Atoi(strings.TrimPrefix(name, clusterPrefix))
		if err != nil || syscall.Kill(pid, 0) == nil {
			continue
		}
		fmt.Fprintf(os.Stderr, "deleting cluster %s abandoned by process %d\n", name, pid)
		c := &devcluster.Cluster{Name: name}
		_ = c.DeleteIn(devcluster.DefaultWorkDir(), tools)
	}
}

const timeout = time.Minute

func create(t *testing.T, job framework.Job) framework.Job {
	t.Helper()
	if err := env.Client.Create(context.Background(), job); err != nil {
		t.Fatalf("creating %s: %v", job.GetName(), err)
	}
	return job
}

func get(t *testing.T, job framework.Job) (framework.Job, error) {
	fresh := job.DeepCopyObject().(framework.Job)
	err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), fresh)
	return fresh, err
}

func waitCondition(t *testing.T, job framework.Job, ct kubeflowv1.JobConditionType) framework.Job {
	t.Helper()
	return env.WaitCondition(t, job, ct, timeout)
}

func jobPods(t *testing.T, job framework.Job) []corev1.Pod {
	return env.Pods(t, job.GetNamespace(), map[string]string{kubeflowv1.LabelJobName: job.GetName()})
}

func waitPodCount(t *testing.T, job framework.Job, n int) {
	t.Helper()
	testenv.EventuallyWithin(t, timeout, func() error { return testenv.Count("pods", len(jobPods(t, job)), n) })
}

// kubectl runs the cluster's kubectl and returns its output.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(tools, "kubectl"), append([]string{"--kubeconfig", cluster.Kubeconfig}, args...)...)
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
