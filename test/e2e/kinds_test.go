package e2e

import (
	"testing"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

// The kinds added for Kubeflow 1.9 parity run to their verdict on the real cluster.
func TestJAXJobSucceedsAndFails(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	ok := create(t, builder.JAXJob("jax", ns).Replicas("Worker", 2).Annotate("Worker", duration, "2s").Obj())
	bad := create(t, builder.JAXJob("jax-bad", ns).Replicas("Worker", 2).Annotate("Worker", duration, "1s").Annotate("Worker", exitCode, "1").Obj())
	waitCondition(t, ok, kubeflowv1.JobSucceeded)
	failed := waitCondition(t, bad, kubeflowv1.JobFailed)
	if c := testenv.Condition(failed, kubeflowv1.JobFailed); c.Reason != "JAXJobFailed" {
		t.Errorf("Failed condition %+v, want reason JAXJobFailed", c)
	}
}

func TestPaddleJobSucceedsAndFails(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	ok := create(t, builder.PaddleJob("paddle", ns).Replicas("Worker", 2).Annotate("Worker", duration, "2s").Obj())
	bad := create(t, builder.PaddleJob("paddle-bad", ns).Replicas("Master", 1).Replicas("Worker", 1).RestartPolicy("Master", kubeflowv1.RestartPolicyNever).
		Annotate("Master", duration, "1s").Annotate("Master", exitCode, "1").Annotate("Worker", duration, "1h").Obj())
	waitCondition(t, ok, kubeflowv1.JobSucceeded)
	failed := waitCondition(t, bad, kubeflowv1.JobFailed)
	if c := testenv.Condition(failed, kubeflowv1.JobFailed); c.Reason != "PaddleJobFailed" {
		t.Errorf("Failed condition %+v, want reason PaddleJobFailed", c)
	}
}

// An MPIJob's launcher decides: it succeeds with its workers still running (their sshd never
// exits; cleanPodPolicy Running then removes them), and fails the job when mpirun fails.
func TestMPIJobSucceedsAndFails(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	ok := create(t, builder.MPIJob("pi", ns).Replicas("Launcher", 1).Replicas("Worker", 2).Annotate("Launcher", duration, "3s").Obj())
	bad := create(t, builder.MPIJob("pi-bad", ns).Replicas("Launcher", 1).Replicas("Worker", 1).
		Annotate("Launcher", duration, "1s").Annotate("Launcher", exitCode, "1").Obj())
	done := waitCondition(t, ok, kubeflowv1.JobSucceeded)
	if c := testenv.Condition(done, kubeflowv1.JobSucceeded); c.Message != "MPIJob pi is successfully completed." {
		t.Errorf("Succeeded condition %+v", c)
	}
	failed := waitCondition(t, bad, kubeflowv1.JobFailed)
	if c := testenv.Condition(failed, kubeflowv1.JobFailed); c.Reason != "MPIJobFailed" || c.Message != "MPIJob pi-bad is failed because 1 Launcher replica(s) failed." {
		t.Errorf("Failed condition %+v", c)
	}
	testenv.Eventually(t, func() error {
		pods := cluster.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: "pi", kubeflowv1.LabelReplicaType: "worker"})
		return testenv.Count("running workers of a succeeded MPIJob", len(pods), 0)
	})
}
