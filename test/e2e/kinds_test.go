package e2e

import (
	"testing"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/test/builder"
)

// The kinds added for Kubeflow 1.9 parity run to their verdict on the real cluster.
func TestJAXJobSucceedsAndFails(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ok := create(t, builder.JAXJob("jax", ns).Replicas("Worker", 2).Annotate("Worker", duration, "2s").Obj())
	bad := create(t, builder.JAXJob("jax-bad", ns).Replicas("Worker", 2).Annotate("Worker", duration, "1s").Annotate("Worker", exitCode, "1").Obj())
	waitCondition(t, ok, kubeflowv1.JobSucceeded)
	failed := waitCondition(t, bad, kubeflowv1.JobFailed)
	if c := conditionOf(failed, kubeflowv1.JobFailed); c.Reason != "JAXJobFailed" {
		t.Errorf("Failed condition %+v, want reason JAXJobFailed", c)
	}
}

func TestPaddleJobSucceedsAndFails(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ok := create(t, builder.PaddleJob("paddle", ns).Replicas("Worker", 2).Annotate("Worker", duration, "2s").Obj())
	bad := create(t, builder.PaddleJob("paddle-bad", ns).Replicas("Master", 1).Replicas("Worker", 1).RestartPolicy("Master", kubeflowv1.RestartPolicyNever).
		Annotate("Master", duration, "1s").Annotate("Master", exitCode, "1").Annotate("Worker", duration, "1h").Obj())
	waitCondition(t, ok, kubeflowv1.JobSucceeded)
	failed := waitCondition(t, bad, kubeflowv1.JobFailed)
	if c := conditionOf(failed, kubeflowv1.JobFailed); c.Reason != "PaddleJobFailed" {
		t.Errorf("Failed condition %+v, want reason PaddleJobFailed", c)
	}
}
