package addons

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/gang"
	"github.com/kiln-ml/kiln/test/testenv"
)

// schedulerConfig is a second scheduler, named as kiln's scheduler-plugins backend names pods'
// scheduler, whose profile is scheduler-plugins' coscheduling one.
const schedulerConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
clientConnection:
  kubeconfig: %q
profiles:
- schedulerName: %s
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
    queueSort:
      enabled:
      - name: Coscheduling
      disabled:
      - name: "*"
  pluginConfig:
  - name: Coscheduling
    args:
      permitWaitingTimeSeconds: 10
`

// startCoscheduling installs scheduler-plugins' CRDs and starts its scheduler and PodGroup
// controller (which writes the PodGroup's phase kiln reports).
func startCoscheduling(c *testenv.Cluster, dir string) (func(), error) {
	home, err := addonDir(c, "scheduler-plugins", "sigs.k8s.io/scheduler-plugins")
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	if err := devcluster.InstallCRDs(ctx, c.Client, filepath.Join(home, "crds")); err != nil {
		return nil, err
	}
	config := filepath.Join(dir, "coscheduling.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, schedulerConfig, c.Kubeconfig, gang.DefaultSchedulerPluginsName), 0o600); err != nil {
		return nil, err
	}
	scheduler, err := testenv.StartProcess("scheduler-plugins-scheduler", dir, nil,
		filepath.Join(home, "kube-scheduler"), "--config", config, "--secure-port", "0")
	if err != nil {
		return nil, err
	}
	controller, err := testenv.StartProcess("scheduler-plugins-controller", dir, []string{"KUBECONFIG=" + c.Kubeconfig},
		filepath.Join(home, "controller"), "--metricsAddr", "0", "--probeAddr", "0")
	if err != nil {
		return scheduler.Stop, err
	}
	stop := func() { controller.Stop(); scheduler.Stop() }
	// Both must still run once they have had time to read their configuration and the cluster.
	time.Sleep(2 * time.Second)
	for _, p := range []*testenv.Process{scheduler, controller} {
		if err := p.Exited(); err != nil {
			return stop, err
		}
	}
	return stop, nil
}

// addonDir is the folder hack/tools.sh built an add-on into: <tools>/<name>-<the version its tool
// module pins>.
func addonDir(c *testenv.Cluster, name, module string) (string, error) {
	version, err := testenv.ToolVersion(name, module)
	if err != nil {
		return "", err
	}
	return filepath.Join(c.Tools, name+"-"+version), nil
}

// The coscheduling scheduler passes the all-or-nothing scenario with the PodGroups kiln makes for it.
func TestCoschedulingIsPlacedAllOrNothing(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	cluster.AllOrNothing(t, ns, timeout, func(job framework.Job) error {
		pg := &unstructured.Unstructured{}
		pg.SetGroupVersionKind(gang.SchedulerPlugins{}.GroupKind())
		if err := cluster.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: gang.GroupName(job.GetName(), "TFJob")}, pg); err != nil {
			return err
		}
		minMember, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember")
		phase, _, _ := unstructured.NestedString(pg.Object, "status", "phase")
		if minMember != 5 || len(pg.GetOwnerReferences()) != 1 || pg.GetOwnerReferences()[0].UID != job.GetUID() {
			return fmt.Errorf("PodGroup minMember %d owned by %v: want 5, owned by the job", minMember, pg.GetOwnerReferences())
		}
		if phase == "" {
			return fmt.Errorf("PodGroup has no phase yet: scheduler-plugins' controller has not seen it")
		}
		return nil
	})
}
