// Package addons runs kiln on a local cluster beside the add-ons it composes with, each the real
// program built by hack/tools.sh (set addons): scheduler-plugins' second scheduler with the
// Coscheduling plugin and its PodGroup controller, kiln running with
// --gang-scheduler-name=scheduler-plugins; Kueue, queueing kiln's jobs; and KEDA's operator,
// scaling InferenceServices from zero (beside a stand-in for its HTTP add-on's scaler).
package addons

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/internal/gang"
	"github.com/kiln-ml/kiln/internal/manager"
	"github.com/kiln-ml/kiln/test/testenv"
)

var cluster *testenv.Cluster

const timeout = time.Minute

func TestMain(m *testing.M) {
	os.Exit(testenv.RunOnCluster(m, testenv.ClusterSuite{
		Prefix: "kiln-addons-",
		Cluster: devcluster.Options{
			Stages: []string{filepath.Join(testenv.RepoRoot(), "config", "dev", "stages.yaml")},
			Nodes:  2,
		},
		Before: startAddons,
		Manager: func(o manager.Options) manager.Options {
			o.GangSchedulerName, o.Serving.KEDAHTTPScaler = gang.NameSchedulerPlugins, kedaScaler
			return o
		},
	}, &cluster))
}

// startAddons starts scheduler-plugins, Kueue and KEDA; kiln starts after them, so it finds the
// coscheduling PodGroup API served.
func startAddons(c *testenv.Cluster) (func(), error) {
	dir, err := os.MkdirTemp("", "kiln-addons-")
	if err != nil {
		return nil, err
	}
	var stops []func()
	stop := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		if os.Getenv("KILN_TEST_KEEP_LOGS") == "" {
			_ = os.RemoveAll(dir)
		}
	}
	for _, start := range []func(*testenv.Cluster, string) (func(), error){startCoscheduling, startKueue, startKEDA} {
		s, err := start(c, dir)
		if s != nil {
			stops = append(stops, s)
		}
		if err != nil {
			return stop, err
		}
	}
	return stop, nil
}
