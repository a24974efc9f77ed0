package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/internal/manager"
)

// ClusterSuite is an end-to-end suite's local cluster (devcluster: real apiserver, scheduler,
// controller-manager, kwok nodes) with kiln's CRDs, webhooks and manager, and JobSet's controller
// (which runs TrainJobs' JobSets).
type ClusterSuite struct {
	// Prefix names the suite's clusters Prefix<PID>, so a later run can delete those of a killed one.
	Prefix string
	// Cluster is the cluster to create; its Name and ToolsDir are filled in.
	Cluster devcluster.Options
	// Before runs once kiln's CRDs are installed, before kiln starts (add-ons kiln should find at
	// start go here). Its stop function runs after the tests, on failure and on interrupt too.
	Before func(*Cluster) (stop func(), err error)
	// Manager, when set, changes the options kiln runs with.
	Manager func(manager.Options) manager.Options
}

// Cluster is a suite's running cluster.
type Cluster struct {
	// Env's client knows kiln's kinds; it has no control plane of its own to stop.
	*Env
	// Kubeconfig is the path of the cluster's kubeconfig file.
	Kubeconfig string
	// Tools is the folder hack/tools.sh built the binaries into ($KILN_TOOLS_DIR).
	Tools string
	dev   *devcluster.Cluster
}

// RestartComponent stops one of the cluster's processes (kube-apiserver, etcd, …) for down and
// starts it again as it was (devcluster.Cluster.RestartComponent).
func (c *Cluster) RestartComponent(ctx context.Context, name string, down time.Duration) error {
	return c.dev.RestartComponent(ctx, name, down)
}

// RunOnCluster creates the suite's cluster, starts kiln on it, runs the tests and stops everything
// it started, whatever the outcome (on Ctrl-C too). *out is set before the tests run.
func RunOnCluster(m *testing.M, s ClusterSuite, out **Cluster) int {
	tools := os.Getenv("KILN_TOOLS_DIR")
	if tools == "" {
		fmt.Fprintln(os.Stderr, "KILN_TOOLS_DIR is not set: run `make test-e2e`, or export KILN_TOOLS_DIR=$(bash hack/tools.sh cluster addons)")
		return 1
	}
	ctrl.SetLogger(Logger())
	deleteAbandonedClusters(s.Prefix, tools)
	var teardown stack
	defer OnInterrupt(teardown.run)()
	if err := startCluster(s, tools, &teardown, out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func startCluster(s ClusterSuite, tools string, teardown *stack, out **Cluster) error {
	ctx := context.Background()
	o := s.Cluster
	o.Name, o.ToolsDir = s.Prefix+strconv.Itoa(os.Getpid()), tools
	dc, err := devcluster.Create(ctx, o)
	if err != nil {
		return err
	}
	teardown.push(func() {
		if err := dc.Delete(); err != nil {
			fmt.Fprintf(os.Stderr, "deleting cluster %s: %v\n", dc.Name, err)
		}
	})
	if err := devcluster.InstallCRDs(ctx, dc.Client, filepath.Join(RepoRoot(), "config", "crd", "bases")); err != nil {
		return err
	}
	// JobSet's controller runs TrainJobs' JobSets, as a cluster kiln is installed in has it.
	logs, err := os.MkdirTemp("", s.Prefix+"jobset-")
	if err != nil {
		return err
	}
	teardown.push(func() {
		if os.Getenv("KILN_TEST_KEEP_LOGS") == "" {
			_ = os.RemoveAll(logs)
		}
	})
	stopJobSet, err := dc.StartJobSet(ctx, logs)
	if err != nil {
		return err
	}
	teardown.push(stopJobSet)
	c, err := client.New(dc.Config, client.Options{Scheme: manager.Scheme()})
	if err != nil {
		return err
	}
	cl := &Cluster{Env: &Env{Config: dc.Config, Client: c}, Kubeconfig: dc.Kubeconfig, Tools: tools, dev: dc}
	*out = cl
	if s.Before != nil {
		stop, err := s.Before(cl)
		if stop != nil {
			teardown.push(stop)
		}
		if err != nil {
			return err
		}
	}
	// Jobs go through kiln's admission webhooks, called by the cluster's apiserver over TLS.
	webhookAddr, err := devcluster.FreeAddr()
	if err != nil {
		return err
	}
	opts, err := devcluster.LocalWebhooks(ManagerOptions(), webhookAddr, time.Minute)
	if err != nil {
		return err
	}
	if s.Manager != nil {
		opts = s.Manager(opts)
	}
	if err := cl.InstallWebhooks(opts); err != nil {
		return err
	}
	stop, err := cl.StartManager(opts)
	if err != nil {
		return err
	}
	teardown.push(stop)
	return devcluster.WaitForWebhooks(ctx, c, time.Minute)
}

// stack is teardown work, done last-in first-out, once, from the test or the interrupt handler.
type stack struct {
	mu    sync.Mutex
	funcs []func()
}

func (s *stack) push(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.funcs = append(s.funcs, f)
}

func (s *stack) run() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.funcs) - 1; i >= 0; i-- {
		s.funcs[i]()
	}
	s.funcs = nil
}

// deleteAbandonedClusters deletes the clusters named prefix<PID> whose test process is gone
// (killed before it could clean up).
func deleteAbandonedClusters(prefix, tools string) {
	dirs, _ := filepath.Glob(filepath.Join(devcluster.DefaultWorkDir(), "clusters", prefix+"*"))
	for _, d := range dirs {
		name := filepath.Base(d)
		pid, err := strconv.Atoi(strings.TrimPrefix(name, prefix))
		if err != nil || syscall.Kill(pid, 0) == nil {
			continue
		}
		fmt.Fprintf(os.Stderr, "deleting cluster %s abandoned by process %d\n", name, pid)
		c := &devcluster.Cluster{Name: name}
		_ = c.DeleteIn(devcluster.DefaultWorkDir(), tools)
	}
}
