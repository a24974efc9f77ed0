// Package faults runs kiln through control-plane faults on a local cluster of its own: while 50
// jobs of every kind run, the kube-apiserver is restarted once and etcd once, each down for
// several seconds. kiln must need no restart, lose no job, never give a replica two pods, and
// come back to the memory it had before.
package faults

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/manager"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

var (
	cluster *testenv.Cluster
	// probeAddr serves kiln's /healthz and /readyz.
	probeAddr string
)

func TestMain(m *testing.M) {
	var err error
	if probeAddr, err = devcluster.FreeAddr(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(testenv.RunOnCluster(m, testenv.ClusterSuite{
		Prefix: "kiln-faults-",
		Cluster: devcluster.Options{
			Stages: []string{filepath.Join(testenv.RepoRoot(), "config", "dev", "stages.yaml")},
			Nodes:  4,
		},
		Manager: func(o manager.Options) manager.Options { o.ProbeAddr = probeAddr; return o },
	}, &cluster))
}

const (
	duration = "kiln.dev/simulate-duration"
	// run is how long each job trains: long enough to span both faults.
	run = "45s"
	// down is how long each component stays stopped.
	down = 5 * time.Second
)

// jobsOfEveryKind are 50 jobs, round robin over the six kubeflow.org kinds and PyJob.
func jobsOfEveryKind(ns string) ([]framework.Job, []*trainingv1alpha1.PyJob) {
	var jobs []framework.Job
	var pyjobs []*trainingv1alpha1.PyJob
	for i := range 50 {
		name := fmt.Sprintf("j%02d", i)
		var b *builder.Job
		switch i % 7 {
		case 0:
			b = builder.TFJob(name, ns).Replicas("PS", 1).Replicas("Worker", 2)
		case 1:
			b = builder.PyTorchJob(name, ns).Replicas("Master", 1).Replicas("Worker", 2)
		case 2:
			b = builder.XGBoostJob(name, ns).Replicas("Master", 1).Replicas("Worker", 1)
		case 3:
			b = builder.JAXJob(name, ns).Replicas("Worker", 2)
		case 4:
			b = builder.PaddleJob(name, ns).Replicas("Worker", 2)
		case 5:
			b = builder.MPIJob(name, ns).Replicas("Launcher", 1).Replicas("Worker", 2) // workers serve sshd until the launcher ends
		case 6:
			p := builder.PyJob(name, ns, func(s *trainingv1alpha1.PyJobSpec) {
				s.Workers, s.Resources.Memory = 2, ptr.To(resource.MustParse("1Gi"))
			})
			p.Annotations = map[string]string{duration: run}
			pyjobs = append(pyjobs, p)
			continue
		}
		for rtype := range b.Obj().GetReplicaSpecs() {
			if rtype != "Worker" || i%7 != 5 {
				b.Annotate(rtype, duration, run)
			}
		}
		jobs = append(jobs, b.Obj())
	}
	return jobs, pyjobs
}

// TestJobsSurviveAnAPIServerAndAnEtcdRestart is the fault suite: see the package comment.
func TestJobsSurviveAnAPIServerAndAnEtcdRestart(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t)
	uids := cluster.NewPodUIDs(ns)
	uids.Watch(t)
	jobs, pyjobs := jobsOfEveryKind(ns)
	for _, j := range jobs {
		if err := cluster.Client.Create(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pyjobs {
		if err := cluster.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	testenv.EventuallyWithin(t, 2*time.Minute, func() error { return allRunning(ctx, jobs, pyjobs) })
	before := heapInUse()
	t.Logf("all %d jobs run; kiln's process holds %.1f MiB of heap", len(jobs)+len(pyjobs), mib(before))

	var probes []framework.Job
	for _, component := range []string{"kube-apiserver", "etcd"} {
		start := time.Now()
		if err := cluster.RestartComponent(ctx, component, down); err != nil {
			t.Fatal(err)
		}
		started := time.Now()
		testenv.EventuallyWithin(t, 2*time.Minute, func() error { return cluster.Client.List(ctx, &corev1.NamespaceList{}) })
		back := time.Now()
		// Recovered: kiln turns a new job into pods again, and says it is ready.
		probe := builder.TFJob("probe-"+component, ns).Replicas("Worker", 1).Annotate("Worker", duration, "1s").Obj()
		testenv.EventuallyWithin(t, 2*time.Minute, func() error { return client.IgnoreAlreadyExists(cluster.Client.Create(ctx, probe)) })
		probes = append(probes, probe)
		testenv.EventuallyWithin(t, 2*time.Minute, func() error {
			pods := cluster.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: probe.GetName()})
			if len(pods) == 0 {
				return fmt.Errorf("kiln has not created the probe job's pod yet")
			}
			return healthy()
		})
		t.Logf("%s: stopping it, %s down and starting it took %s; the apiserver answered %s later, and kiln made a new job's pod %s after that",
			component, down, started.Sub(start).Round(100*time.Millisecond), back.Sub(started).Round(100*time.Millisecond), time.Since(back).Round(100*time.Millisecond))
	}
	time.Sleep(5 * time.Second) // relists and retries settle
	after := heapInUse()
	t.Logf("after both faults kiln's process holds %.1f MiB of heap (%.1f MiB before)", mib(after), mib(before))
	if limit := before + before/4 + 16<<20; after > limit {
		t.Errorf("heap %.1f MiB after the faults, %.1f MiB before: want at most %.1f MiB", mib(after), mib(before), mib(limit))
	}

	all := append(slices.Clone(jobs), probes...)
	testenv.EventuallyWithin(t, 4*time.Minute, func() error { return allSucceeded(ctx, all, pyjobs) })
	if twice := uids.Twice(); len(twice) > 0 {
		t.Errorf("replicas that got two pods: %v", twice)
	}
	t.Logf("%d replicas, each with one pod; every job succeeded", uids.Replicas())
	if err := healthy(); err != nil {
		t.Error(err)
	}
}

func allRunning(ctx context.Context, jobs []framework.Job, pyjobs []*trainingv1alpha1.PyJob) error {
	return each(ctx, jobs, pyjobs, kubeflowv1.JobRunning, trainingv1alpha1.PyJobRunning)
}

func allSucceeded(ctx context.Context, jobs []framework.Job, pyjobs []*trainingv1alpha1.PyJob) error {
	return each(ctx, jobs, pyjobs, kubeflowv1.JobSucceeded, trainingv1alpha1.PyJobSucceeded)
}

// each says which job is not yet in the given condition (kubeflow.org) or phase (PyJob).
func each(ctx context.Context, jobs []framework.Job, pyjobs []*trainingv1alpha1.PyJob, ct kubeflowv1.JobConditionType, phase trainingv1alpha1.PyJobPhase) error {
	for _, j := range jobs {
		fresh := j.DeepCopyObject().(framework.Job)
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(j), fresh); err != nil {
			return err
		}
		if c := testenv.Condition(fresh, ct); c.Status != corev1.ConditionTrue {
			return fmt.Errorf("%s %s is not %s: %+v", fresh.GetObjectKind().GroupVersionKind().Kind, j.GetName(), ct, fresh.GetJobStatus().Conditions)
		}
	}
	for _, p := range pyjobs {
		fresh := &trainingv1alpha1.PyJob{}
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(p), fresh); err != nil {
			return err
		}
		if fresh.Status.Phase != phase {
			return fmt.Errorf("PyJob %s is %s (%q), want %s", p.Name, fresh.Status.Phase, fresh.Status.Message, phase)
		}
	}
	return nil
}

// healthy is nil when kiln's /healthz and /readyz answer 200.
func healthy() error {
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get("http://" + probeAddr + path)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("kiln's %s answers %d", path, resp.StatusCode)
		}
	}
	return nil
}

// heapInUse is this process's live heap after a collection: kiln's manager and informers, and
// the test's few objects.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
