package replicajob

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework/mpi"
	"github.com/kiln-ml/kiln/test/builder"
)

// MPI exercises what the engine offers kinds beyond one service per pod named by type and
// index: its own pod names, no services, a framework that decides on one replica type.
func TestPlanMPINamesAndServices(t *testing.T) {
	ssh := newWorld(mpi.New(mpi.Config{}), builder.MPIJob("pi", "ns").Replicas("Launcher", 1).Replicas("Worker", 2))
	p := ssh.plan(t)
	want := []string{"pi-launcher", "pi-worker-0", "pi-worker-1"}
	if diff := cmp.Diff(want, names(p.CreatePods)); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, names(p.CreateServices)); diff != "" {
		t.Errorf("ssh mode services (-want +got):\n%s", diff)
	}
	exec := newWorld(mpi.New(mpi.Config{RemoteStart: kubeflowv1.MPIRemoteStartKubectlExec}), builder.MPIJob("pi", "ns").Replicas("Launcher", 1).Replicas("Worker", 2))
	if p := exec.plan(t); len(p.CreatePods) != 3 || len(p.CreateServices) != 0 {
		t.Errorf("kubectl-exec mode: %d pods and %v services, want 3 pods and no services", len(p.CreatePods), names(p.CreateServices))
	}
}

func TestPlanMPILauncherDecides(t *testing.T) {
	fw := mpi.New(mpi.Config{})
	w := newWorld(fw, builder.MPIJob("pi", "ns").Replicas("Launcher", 1).Replicas("Worker", 3))
	w.pod("Launcher", 0, corev1.PodRunning, 0)
	w.pod("Worker", 0, corev1.PodRunning, 0)
	w.pod("Worker", 1, corev1.PodFailed, 1)
	w.pod("Worker", 2, corev1.PodRunning, 0)
	p := w.plan(t)
	if c := last(p.Status); c.Type != kubeflowv1.JobRunning || c.Message != "MPIJob pi is running." {
		t.Errorf("a worker failed under the launcher: %s %q, want Running: the launcher decides", c.Type, c.Message)
	}
	if diff := cmp.Diff(map[kubeflowv1.ReplicaType][]int{"Launcher": {0}, "Worker": {0, 2}}, p.Running); diff != "" {
		t.Errorf("running (-want +got):\n%s", diff)
	}
	w.pod("Launcher", 0, corev1.PodFailed, 1)
	if c := last(w.plan(t).Status); c.Type != kubeflowv1.JobFailed || c.Message != "MPIJob pi is failed because 1 Launcher replica(s) failed." {
		t.Errorf("launcher failed: %s %q, want Failed", c.Type, c.Message)
	}
	w.pod("Launcher", 0, corev1.PodSucceeded, 0)
	if c := last(w.plan(t).Status); c.Type != kubeflowv1.JobSucceeded || c.Message != "MPIJob pi is successfully completed." {
		t.Errorf("launcher succeeded: %s %q, want Succeeded", c.Type, c.Message)
	}
}
