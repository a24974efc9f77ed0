package trainingjob

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

func TestJAXJobEnvAndRules(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.JAXJob("jax", ns).Replicas("Worker", 3).Obj())
	pods := waitPods(t, job, 3)
	want := []string{"PYTHONUNBUFFERED=1", "COORDINATOR_PORT=6666", "COORDINATOR_ADDRESS=jax-worker-0", "NUM_PROCESSES=3", "PROCESS_ID=2"}
	if diff := cmp.Diff(want, envList(pods[2], "jax")); diff != "" {
		t.Errorf("env of jax-worker-2 (-want +got):\n%s", diff)
	}
	if p := pods[0]; p.Spec.RestartPolicy != corev1.RestartPolicyNever || p.Labels[kubeflowv1.LabelJobRole] != "master" ||
		p.Labels["training.kubeflow.org/operator-name"] != "jaxjob-controller" {
		t.Errorf("worker 0: restartPolicy %s, labels %v; want Never, job-role master, operator jaxjob-controller", p.Spec.RestartPolicy, p.Labels)
	}
	if svcs := env.Services(t, ns, map[string]string{kubeflowv1.LabelJobName: "jax"}); len(svcs) != 3 || svcs[0].Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("services %d (first ClusterIP %q), want 3 headless", len(svcs), svcs[0].Spec.ClusterIP)
	}
	runAll(t, pods)
	running := waitCondition(t, job, kubeflowv1.JobRunning)
	if sel := running.GetJobStatus().ReplicaStatuses["Worker"].Selector; sel == "" {
		t.Error("no Worker selector for the scale subresource")
	}
	env.Exit(t, &pods[0], 0)
	env.Exit(t, &pods[1], 0)
	testenv.Consistently(t, func() error {
		if c := lastCondition(get(t, job)); c.Type == kubeflowv1.JobSucceeded {
			return fmt.Errorf("succeeded with a worker still running: every worker must succeed")
		}
		return nil
	})
	env.Exit(t, &pods[2], 0)
	done := waitCondition(t, job, kubeflowv1.JobSucceeded)
	if got := lastCondition(done).Message; got != "JAXJob "+ns+"/jax successfully completed." {
		t.Errorf("Succeeded message = %q", got)
	}

	fail := create(t, builder.JAXJob("jaxfail", ns).Replicas("Worker", 2).Obj())
	pods = waitPods(t, fail, 2)
	runAll(t, pods)
	env.Exit(t, &pods[1], 1)
	failed := waitCondition(t, fail, kubeflowv1.JobFailed)
	if got := lastCondition(failed).Message; got != "JAXJob jaxfail is failed because 1 Worker replica(s) failed." {
		t.Errorf("Failed message = %q", got)
	}
}
