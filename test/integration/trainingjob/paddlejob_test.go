package trainingjob

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/test/builder"
)

func TestPaddleJobEnvAndRules(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	// Parameter-server mode: the Master is the endpoint and drives the job.
	job := create(t, builder.PaddleJob("pd", ns).Replicas("Master", 1).Replicas("Worker", 2).Obj())
	pods := waitPods(t, job, 3)
	master, worker := env.Pod(t, ns, "pd-master-0"), env.Pod(t, ns, "pd-worker-1")
	if diff := cmp.Diff([]string{"PYTHONUNBUFFERED=1", "PADDLE_JOB_ID=pd", "PADDLE_NNODES=3", "POD_IP_DUMMY=", "PADDLE_MASTER=$(POD_IP_DUMMY):36543", "PADDLE_SERVER_NUM=1"},
		envList(*master, "paddle")); diff != "" {
		t.Errorf("env of pd-master-0 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"PYTHONUNBUFFERED=1", "PADDLE_JOB_ID=pd", "PADDLE_NNODES=3", "PADDLE_MASTER=pd-master-0:36543", "PADDLE_TRAINER_NUM=1"},
		envList(*worker, "paddle")); diff != "" {
		t.Errorf("env of pd-worker-1 (-want +got):\n%s", diff)
	}
	if master.Spec.RestartPolicy != corev1.RestartPolicyOnFailure || master.Labels[kubeflowv1.LabelJobRole] != "master" || worker.Labels[kubeflowv1.LabelJobRole] != "" {
		t.Errorf("restartPolicy %s, job-role master %q worker %q; want OnFailure, master, none", master.Spec.RestartPolicy,
			master.Labels[kubeflowv1.LabelJobRole], worker.Labels[kubeflowv1.LabelJobRole])
	}
	runAll(t, pods)
	waitCondition(t, job, kubeflowv1.JobRunning)
	env.Exit(t, master, 0)
	if got := lastCondition(waitCondition(t, job, kubeflowv1.JobSucceeded)).Message; got != "PaddleJob pd is successfully completed." {
		t.Errorf("Succeeded message = %q", got)
	}

	// Collective mode under Never: a failed worker fails the job.
	fail := create(t, builder.PaddleJob("pdfail", ns).Replicas("Worker", 2).RestartPolicy("Worker", kubeflowv1.RestartPolicyNever).Obj())
	pods = waitPods(t, fail, 2)
	if got := envOf(*env.Pod(t, ns, "pdfail-worker-1"), "paddle")["PADDLE_MASTER"]; got != "pdfail-worker-0:36543" {
		t.Errorf("collective PADDLE_MASTER of worker 1 = %q", got)
	}
	runAll(t, pods)
	env.Exit(t, env.Pod(t, ns, "pdfail-worker-1"), 1)
	if got := lastCondition(waitCondition(t, fail, kubeflowv1.JobFailed)).Message; got != "PaddleJob pdfail is failed because 1 Worker replica(s) failed." {
		t.Errorf("Failed message = %q", got)
	}
}
