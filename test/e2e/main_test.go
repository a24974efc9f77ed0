// Package e2e runs kiln on a local cluster with a real scheduler, garbage collector and
// controller-manager (kwok plays the kubelets and the training, see config/dev/stages.yaml) and
// checks what needs them.
package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/manager"
	"github.com/kiln-ml/kiln/test/testenv"
)

// cluster is the suite's: its helpers are testenv's (kwok plays the kubelet here).
var cluster *testenv.Cluster

func TestMain(m *testing.M) {
	code := testenv.RunOnCluster(m, testenv.ClusterSuite{
		Prefix: "kiln-e2e-",
		Cluster: devcluster.Options{
			Stages: []string{filepath.Join(testenv.RepoRoot(), "config", "dev", "stages.yaml"), testenv.KubeletStage()},
			Nodes:  3, GPUNodes: 2, GPUsPerNode: 8, GangScheduling: true,
		},
		// KServe's API too, as make run serves it: its CRDs beside kiln's, every kind served.
		Before: func(c *testenv.Cluster) (func(), error) {
			return func() {}, devcluster.InstallCRDs(context.Background(), c.Client, testenv.KServeCRDs())
		},
		Manager: func(o manager.Options) manager.Options {
			all, err := manager.Frameworks(o)
			if err == nil {
				o.Kinds = manager.KindNames(all)
			}
			return o
		},
	}, &cluster)
	if plugin.dir != "" {
		_ = os.RemoveAll(plugin.dir)
	}
	os.Exit(code)
}

const timeout = time.Minute

func create(t *testing.T, job framework.Job) framework.Job {
	t.Helper()
	if err := cluster.Client.Create(context.Background(), job); err != nil {
		t.Fatalf("creating %s: %v", job.GetName(), err)
	}
	return job
}

func get(t *testing.T, job framework.Job) (framework.Job, error) {
	fresh := job.DeepCopyObject().(framework.Job)
	err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(job), fresh)
	return fresh, err
}

func waitCondition(t *testing.T, job framework.Job, ct kubeflowv1.JobConditionType) framework.Job {
	t.Helper()
	return cluster.WaitCondition(t, job, ct, timeout)
}

func jobPods(t *testing.T, job framework.Job) []corev1.Pod {
	return cluster.Pods(t, job.GetNamespace(), map[string]string{kubeflowv1.LabelJobName: job.GetName()})
}

func waitPodCount(t *testing.T, job framework.Job, n int) {
	t.Helper()
	testenv.EventuallyWithin(t, timeout, func() error { return testenv.Count("pods", len(jobPods(t, job)), n) })
}

// kubectl runs the cluster's kubectl and returns its output.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(cluster.Tools, "kubectl"), append([]string{"--kubeconfig", cluster.Kubeconfig}, args...)...)
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
