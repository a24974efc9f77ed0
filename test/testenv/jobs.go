package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	"github.com/kiln-ml/kiln/internal/framework"
)

// WaitCondition waits up to timeout until the job's condition ct is True, and returns the job as
// it was then.
func (e *Env) WaitCondition(t testing.TB, job framework.Job, ct kubeflowv1.JobConditionType, timeout time.Duration) framework.Job {
	t.Helper()
	fresh := job.DeepCopyObject().(framework.Job)
	EventuallyWithin(t, timeout, func() error {
		if err := e.Client.Get(context.Background(), client.ObjectKeyFromObject(job), fresh); err != nil {
			return err
		}
		for _, c := range fresh.GetJobStatus().Conditions {
			if c.Type == ct && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("%s has no %s=True condition; conditions: %+v", job.GetName(), ct, fresh.GetJobStatus().Conditions)
	})
	return fresh
}

// Condition is the job's condition of type ct, or a zero condition when it has none.
func Condition(job framework.Job, ct kubeflowv1.JobConditionType) kubeflowv1.JobCondition {
	return StatusCondition(*job.GetJobStatus(), ct)
}

// StatusCondition is the status's condition of type ct (zero when it has none): Condition of a
// job of any version (a v2beta1 MPIJob's).
func StatusCondition(status kubeflowv1.JobStatus, ct kubeflowv1.JobConditionType) kubeflowv1.JobCondition {
	for _, c := range status.Conditions {
		if c.Type == ct {
			return c
		}
	}
	return kubeflowv1.JobCondition{}
}

// WaitPyJobPhase waits up to timeout until the PyJob is in phase, and returns it as it was then.
func (e *Env) WaitPyJobPhase(t testing.TB, key client.ObjectKey, phase trainingv1alpha1.PyJobPhase, timeout time.Duration) *trainingv1alpha1.PyJob {
	t.Helper()
	fresh := &trainingv1alpha1.PyJob{}
	EventuallyWithin(t, timeout, func() error {
		if err := e.Client.Get(context.Background(), key, fresh); err != nil {
			return err
		}
		if fresh.Status.Phase != phase {
			return fmt.Errorf("PyJob %s is %s (%q), want %s", key.Name, fresh.Status.Phase, fresh.Status.Message, phase)
		}
		return nil
	})
	return fresh
}

// AwaitEvent waits for an event of that reason (and type, unless "") about the object named
// involved in ns.
func (e *Env) AwaitEvent(t testing.TB, ns, involved, eventType, reason string) {
	t.Helper()
	Eventually(t, func() error {
		var events corev1.EventList
		if err := e.Client.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, ev := range events.Items {
			if ev.InvolvedObject.Name == involved && ev.Reason == reason && (eventType == "" || ev.Type == eventType) {
				return nil
			}
		}
		return fmt.Errorf("no %s event about %s among %d", reason, involved, len(events.Items))
	})
}
