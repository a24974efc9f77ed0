package trainingjob

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

// waitReplaced waits until pod name exists again with a UID other than old and returns it.
func waitReplaced(t *testing.T, ns, name string, old types.UID) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	testenv.Eventually(t, func() error {
		pods := env.Pods(t, ns, nil)
		for i := range pods {
			if pods[i].Name == name && pods[i].UID != old && pods[i].DeletionTimestamp == nil {
				pod = &pods[i]
				return nil
			}
		}
		return fmt.Errorf("pod %s has not been recreated", name)
	})
	return pod
}

func TestExitCodeRetryableCodeRecreatesThePod(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.TFJob("retry", ns).Replicas("Worker", 2).RestartPolicy("Worker", kubeflowv1.RestartPolicyExitCode).Obj())
	pods := waitPods(t, job, 2)
	runAll(t, pods)
	waitCondition(t, job, kubeflowv1.JobRunning)
	old := pods[1].UID
	env.Exit(t, &pods[1], 130)
	restarting := waitCondition(t, job, kubeflowv1.JobRestarting)
	if got := lastCondition(restarting).Message; got != "TFJob retry is restarting because 1 Worker replica(s) failed." {
		t.Errorf("Restarting message = %q", got)
	}
	fresh := waitReplaced(t, ns, "retry-worker-1", old)
	if fresh.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("recreated pod restartPolicy = %q, want Never (kiln restarts ExitCode pods itself)", fresh.Spec.RestartPolicy)
	}
	env.Run(t, fresh)
	back := waitCondition(t, job, kubeflowv1.JobRunning)
	for _, c := range back.GetJobStatus().Conditions {
		if c.Type == kubeflowv1.JobRestarting {
			t.Errorf("Restarting condition still present once running again: %+v", back.GetJobStatus().Conditions)
		}
	}
}

func TestExitCodePermanentCodeFailsTheJob(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.TFJob("noretry", ns).Replicas("Worker", 2).RestartPolicy("Worker", kubeflowv1.RestartPolicyExitCode).Obj())
	pods := waitPods(t, job, 2)
	runAll(t, pods)
	env.Exit(t, &pods[1], 1)
	failed := waitCondition(t, job, kubeflowv1.JobFailed)
	want := fmt.Sprintf("TFJob %s/noretry has failed because 1 Worker replica(s) failed.", ns)
	if c := lastCondition(failed); c.Reason != "TFJobFailed" || c.Message != want {
		t.Errorf("Failed condition = %+v, want reason TFJobFailed message %q", c, want)
	}
	// The failed pod stays for its logs; worker-0, still running, goes (cleanPodPolicy Running).
	testenv.Eventually(t, func() error {
		pods := jobPods(t, job)
		if len(pods) != 1 || pods[0].Name != "noretry-worker-1" {
			return fmt.Errorf("pods left: %d, want only the failed noretry-worker-1", len(pods))
		}
		return nil
	})
}

func TestOnFailurePodFailureRecreatesThePod(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.PyTorchJob("onfail", ns).Replicas("Master", 1).Replicas("Worker", 1).Obj())
	pods := waitPods(t, job, 2)
	runAll(t, pods)
	old := pods[1].UID
	env.Exit(t, &pods[1], 1) // a pod-level failure (evicted, OOM): the kubelet gave up on it
	waitCondition(t, job, kubeflowv1.JobRestarting)
	waitReplaced(t, ns, "onfail-worker-0", old)
}

func TestBackoffLimitFailsTheJobAndHonoursCleanPodPolicy(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.PyTorchJob("backoff", ns).Replicas("Worker", 2).BackoffLimit(1).
		CleanPodPolicy(kubeflowv1.CleanPodPolicyNone).Obj())
	pods := waitPods(t, job, 2)
	runAll(t, pods)
	old := pods[1].UID
	env.Exit(t, &pods[1], 1) // first failure: one retry allowed
	retried := waitReplaced(t, ns, "backoff-worker-1", old)
	env.Run(t, retried)
	env.Exit(t, retried, 1) // second failure: past the limit
	failed := waitCondition(t, job, kubeflowv1.JobFailed)
	if got := lastCondition(failed).Message; got != "Job backoff has failed because it has reached the specified backoff limit" {
		t.Errorf("Failed message = %q", got)
	}
	// cleanPodPolicy None: nothing is deleted, the running worker-0 included.
	testenv.Consistently(t, func() error { return testenv.Count("pods", len(jobPods(t, job)), 2) })
}

func TestBackoffLimitCountsInPlaceRestarts(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.PyTorchJob("inplace", ns).Replicas("Worker", 2).BackoffLimit(2).Obj())
	pods := waitPods(t, job, 2)
	runAll(t, pods)
	waitCondition(t, job, kubeflowv1.JobRunning)
	env.RestartInPlace(t, &pods[0], 3)
	waitCondition(t, job, kubeflowv1.JobFailed)
	// cleanPodPolicy Running (the default): the running pods go.
	waitPods(t, job, 0)
}

func TestTFJobSuccessRules(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	chief := create(t, builder.TFJob("chief", ns).Replicas("Chief", 1).Replicas("Worker", 2).Obj())
	pods := waitPods(t, chief, 3)
	runAll(t, pods)
	env.Exit(t, &pods[0], 0)
	done := waitCondition(t, chief, kubeflowv1.JobSucceeded)
	if got, want := lastCondition(done).Message, fmt.Sprintf("TFJob %s/chief successfully completed.", ns); got != want {
		t.Errorf("Succeeded message = %q, want %q", got, want)
	}

	// Without a chief, worker 0 completing ends the job (successPolicy "").
	w0 := create(t, builder.TFJob("worker0", ns).Replicas("PS", 1).Replicas("Worker", 2).Obj())
	pods = waitPods(t, w0, 3)
	runAll(t, pods)
	env.Exit(t, &pods[1], 0)
	waitCondition(t, w0, kubeflowv1.JobSucceeded)

	// With successPolicy AllWorkers every worker must complete.
	all := create(t, builder.TFJob("allworkers", ns).Replicas("Worker", 2).Edit(func(j framework.Job) {
		p := kubeflowv1.SuccessPolicyAllWorkers
		j.(*kubeflowv1.TFJob).Spec.SuccessPolicy = &p
	}).Obj())
	pods = waitPods(t, all, 2)
	runAll(t, pods)
	env.Exit(t, &pods[0], 0)
	testenv.Consistently(t, func() error {
		if c := lastCondition(get(t, all)); c.Type == kubeflowv1.JobSucceeded {
			return fmt.Errorf("AllWorkers job succeeded with one worker still running")
		}
		return nil
	})
	env.Exit(t, &pods[1], 0)
	waitCondition(t, all, kubeflowv1.JobSucceeded)
}

func TestTFJobPSFailureFailsTheJob(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.TFJob("psfail", ns).Replicas("PS", 1).Replicas("Worker", 1).Obj())
	pods := waitPods(t, job, 2)
	runAll(t, pods)
	env.Exit(t, &pods[0], 1)
	failed := waitCondition(t, job, kubeflowv1.JobFailed)
	if got, want := lastCondition(failed).Message, fmt.Sprintf("TFJob %s/psfail has failed because 1 PS replica(s) failed.", ns); got != want {
		t.Errorf("Failed message = %q, want %q", got, want)
	}
}
