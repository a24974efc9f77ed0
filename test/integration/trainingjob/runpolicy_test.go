package trainingjob

import (
	"context"
	"fmt"
	"k8s.io/utils/ptr"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

func TestActiveDeadlineFailsAJobWhosePodsNeverChange(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	const deadline = 3
	job := create(t, builder.TFJob("deadline", ns).Replicas("Worker", 2).ActiveDeadlineSeconds(deadline).Obj())
	pods := waitPods(t, job, 2)
	runAll(t, pods)
	failed := waitCondition(t, job, kubeflowv1.JobFailed)
	st := failed.GetJobStatus()
	if got := lastCondition(failed).Message; got != "Job deadline has failed because it was active longer than specified deadline" {
		t.Errorf("Failed message = %q", got)
	}
	late := st.CompletionTime.Sub(st.StartTime.Time) - deadline*time.Second
	if late < 0 || late > 2*time.Second {
		t.Errorf("failed %v after the deadline, want within 2s (start %v, completion %v)", late, st.StartTime, st.CompletionTime)
	}
	waitPods(t, job, 0) // cleanPodPolicy Running
}

func TestTTLDeletesAFinishedJob(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.XGBoostJob("ttl", ns).Replicas("Master", 1).TTLSecondsAfterFinished(3).Obj())
	pods := waitPods(t, job, 1)
	env.Exit(t, &pods[0], 0)
	waitCondition(t, job, kubeflowv1.JobSucceeded)
	testenv.Eventually(t, func() error {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), job.DeepCopyObject().(client.Object))
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("job still exists (err %v)", err)
	})
}

func TestSuspendDeletesPodsAndResumeRecreatesThem(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.TFJob("suspend", ns).Replicas("Chief", 1).Replicas("Worker", 2).Obj())
	pods := waitPods(t, job, 3)
	runAll(t, pods)
	running := waitCondition(t, job, kubeflowv1.JobRunning)
	started := running.GetJobStatus().StartTime

	update(t, job, func(j framework.Job) { j.GetRunPolicy().Suspend = ptr.To(true) })
	suspended := waitCondition(t, job, kubeflowv1.JobSuspended)
	waitPods(t, job, 0)
	testenv.Eventually(t, func() error { return testenv.Count("services", len(jobServices(t, job)), 0) })
	var types []string
	for _, c := range suspended.GetJobStatus().Conditions {
		types = append(types, fmt.Sprintf("%s=%s", c.Type, c.Status))
	}
	if fmt.Sprint(types) != "[Created=True Running=False Suspended=True]" {
		t.Errorf("conditions after suspend: %v, want [Created=True Running=False Suspended=True]", types)
	}

	time.Sleep(1100 * time.Millisecond) // startTime has a resolution of one second
	update(t, job, func(j framework.Job) { j.GetRunPolicy().Suspend = ptr.To(false) })
	pods = waitPods(t, job, 3)
	runAll(t, pods)
	resumed := waitCondition(t, job, kubeflowv1.JobRunning)
	if c := conditionOf(resumed, kubeflowv1.JobSuspended); c.Status != corev1.ConditionFalse || c.Reason != "TFJobResumed" {
		t.Errorf("Suspended condition after resume = %+v, want False/TFJobResumed", c)
	}
	if !resumed.GetJobStatus().StartTime.After(started.Time) {
		t.Errorf("startTime %v not reset on resume (was %v)", resumed.GetJobStatus().StartTime, started)
	}
}

func TestSuspendedAtCreationStartsNothing(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.TFJob("born-suspended", ns).Replicas("Worker", 2).Suspend(true).Obj())
	fresh := waitCondition(t, job, kubeflowv1.JobSuspended)
	if fresh.GetJobStatus().StartTime != nil {
		t.Errorf("startTime = %v on a job that never ran", fresh.GetJobStatus().StartTime)
	}
	testenv.Consistently(t, func() error { return testenv.Count("pods", len(jobPods(t, job)), 0) })
}

func TestJobManagedByAnotherControllerIsNeverTouched(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.TFJob("foreign", ns).Replicas("Worker", 2).ManagedBy(kubeflowv1.MultiKueueController).Obj())
	rv := job.GetResourceVersion()
	testenv.Consistently(t, func() error {
		fresh := get(t, job)
		if fresh.GetResourceVersion() != rv {
			return fmt.Errorf("kiln wrote to a job managed by %s: status %+v", kubeflowv1.MultiKueueController, fresh.GetJobStatus())
		}
		return testenv.Count("pods", len(jobPods(t, job)), 0)
	})
}

func conditionOf(job framework.Job, t kubeflowv1.JobConditionType) kubeflowv1.JobCondition {
	for _, c := range job.GetJobStatus().Conditions {
		if c.Type == t {
			return c
		}
	}
	return kubeflowv1.JobCondition{}
}
