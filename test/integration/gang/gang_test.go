// Package gang checks kiln's gang scheduling against a kube-apiserver that serves Kubernetes'
// own PodGroups, the test playing the scheduler by writing the PodGroup's status.
package gang

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunServingPodGroups(m, &env, func(e *testenv.Env) (stop func(), err error) {
		return e.StartManager(testenv.ManagerOptions()) // --gang-scheduler-name empty: native, served here
	}))
}

func podGroup(t *testing.T, ns, name string) (*schedulingv1beta1.PodGroup, error) {
	t.Helper()
	var pg schedulingv1beta1.PodGroup
	err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &pg)
	return &pg, err
}

// gone says whether a PodGroup is deleted: not found, or deleting (the apiserver protects a
// PodGroup with a finalizer that kube-controller-manager, absent here, removes once its pods are
// gone).
func gone(t *testing.T, ns, name string) error {
	t.Helper()
	pg, err := podGroup(t, ns, name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case pg.DeletionTimestamp != nil:
		return nil
	}
	return fmt.Errorf("PodGroup %s is there (finalizers %v)", name, pg.Finalizers)
}

func created(t *testing.T, job framework.Job) kubeflowv1.JobCondition {
	t.Helper()
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), job); err != nil {
		t.Fatal(err)
	}
	for _, c := range job.GetJobStatus().Conditions {
		if c.Type == kubeflowv1.JobCreated {
			return c
		}
	}
	return kubeflowv1.JobCondition{}
}

// TestJobGetsItsGang: the group exists before the pods and holds them all; the scheduler's
// reason reaches the job's status while the gang waits and leaves it once placed; the group goes
// when the job is suspended or finished.
func TestJobGetsItsGang(t *testing.T) {
	ns := env.Namespace(t)
	job := builder.TFJob("dist", ns).Replicas("PS", 1).Replicas("Worker", 3).Obj()
	job.GetRunPolicy().SchedulingPolicy = &kubeflowv1.SchedulingPolicy{PriorityClass: "high"}
	if err := env.Client.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	// Its priority class does not exist: the PodGroup is refused, and the job says so.
	testenv.Eventually(t, func() error {
		if c := created(t, job); !strings.Contains(c.Message, `its PodGroup was refused: podgroups.scheduling.k8s.io "dist" is forbidden: no PriorityClass with name high was found`) {
			return fmt.Errorf("Created message %q", c.Message)
		}
		return nil
	})
	if pods := env.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: "dist"}); len(pods) != 0 {
		t.Fatalf("%d pods without their group, want none", len(pods))
	}
	high := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}
	if err := env.Client.Create(context.Background(), high); err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	testenv.EventuallyWithin(t, 2*testenv.Timeout, func() error { // the retry backs off
		pods = env.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: "dist"})
		return testenv.Count("pods", len(pods), 4)
	})
	pg, err := podGroup(t, ns, "dist")
	if err != nil {
		t.Fatalf("no PodGroup once the pods exist: %v", err)
	}
	for _, p := range pods {
		if !pg.CreationTimestamp.Time.Before(p.CreationTimestamp.Add(1)) {
			t.Errorf("pod %s created %v, before its group (%v)", p.Name, p.CreationTimestamp, pg.CreationTimestamp)
		}
		if g := p.Spec.SchedulingGroup; g == nil || g.PodGroupName == nil || *g.PodGroupName != "dist" {
			t.Errorf("pod %s is in group %+v, want dist", p.Name, g)
		}
	}
	if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != 4 || pg.Spec.PriorityClassName != "high" || !metav1.IsControlledBy(pg, job) {
		t.Errorf("PodGroup spec %+v owners %v: want a gang of 4, priority high, owned by the job", pg.Spec, pg.OwnerReferences)
	}

	// The scheduler cannot place them together.
	reason := "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
	meta.SetStatusCondition(&pg.Status.Conditions, metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled,
		Status: metav1.ConditionFalse, Reason: schedulingv1beta1.PodGroupReasonUnschedulable, Message: reason})
	if err := env.Client.Status().Update(context.Background(), pg); err != nil {
		t.Fatal(err)
	}
	want := "TFJob dist is created; waiting for 4 pods to be schedulable together: " + reason + "."
	testenv.Eventually(t, func() error {
		if c := created(t, job); c.Message != want {
			return fmt.Errorf("Created message %q, want %q", c.Message, want)
		}
		return nil
	})

	// Placed: the message is Kubeflow's again; running, the job is Running.
	pg, _ = podGroup(t, ns, "dist")
	meta.SetStatusCondition(&pg.Status.Conditions, metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled,
		Status: metav1.ConditionTrue, Reason: "Scheduled", Message: "placed"})
	if err := env.Client.Status().Update(context.Background(), pg); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() error {
		if c := created(t, job); c.Message != "TFJob dist is created." {
			return fmt.Errorf("Created message %q once placed", c.Message)
		}
		return nil
	})
	for i := range pods {
		env.Run(t, &pods[i])
	}
	env.WaitCondition(t, job, kubeflowv1.JobRunning, testenv.Timeout)

	// Suspended, the group goes with the pods; resumed, it comes back first.
	suspend := func(s bool) {
		testenv.Eventually(t, func() error {
			if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), job); err != nil {
				return err
			}
			job.GetRunPolicy().Suspend = ptr.To(s)
			return env.Client.Update(context.Background(), job)
		})
	}
	suspend(true)
	testenv.Eventually(t, func() error { return gone(t, ns, "dist") })
	env.WaitCondition(t, job, kubeflowv1.JobSuspended, testenv.Timeout)
	// Resumed while the old group is still being deleted, the job waits for it to go.
	suspend(false)
	testenv.Eventually(t, func() error {
		if c := created(t, job); !strings.Contains(c.Message, "the PodGroup of its previous run is still being deleted") {
			return fmt.Errorf("Created message %q; conditions %+v", c.Message, job.GetJobStatus().Conditions)
		}
		return nil
	})
	if pods := env.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: "dist"}); len(pods) != 0 {
		t.Errorf("%d pods created while their group is being deleted, want none", len(pods))
	}
	// As kube-controller-manager does once the group's pods are gone.
	pg, _ = podGroup(t, ns, "dist")
	t.Logf("finalizers of the deleted PodGroup: %v", pg.Finalizers)
	pg.Finalizers = nil
	if err := env.Client.Update(context.Background(), pg); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() error {
		_, err := podGroup(t, ns, "dist")
		return err
	})

	// Finished, the group goes.
	testenv.Eventually(t, func() error {
		pods = env.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: "dist"})
		return testenv.Count("pods after resuming", len(pods), 4)
	})
	env.Exit(t, env.Pod(t, ns, "dist-worker-0"), 0)
	env.WaitCondition(t, job, kubeflowv1.JobSucceeded, testenv.Timeout)
	testenv.Eventually(t, func() error { return gone(t, ns, "dist") })
}

// TestSinglePodJobsGetNoGroup: one pod needs no gang (unless the job asks with a schedulingPolicy).
func TestSinglePodJobsGetNoGroup(t *testing.T) {
	ns := env.Namespace(t)
	job := builder.TFJob("solo", ns).Replicas("Worker", 1).Obj()
	if err := env.Client.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() error {
		return testenv.Count("pods", len(env.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: "solo"})), 1)
	})
	if _, err := podGroup(t, ns, "solo"); !apierrors.IsNotFound(err) {
		t.Errorf("PodGroup of a one-pod job: %v, want none", err)
	}
	if p := env.Pod(t, ns, "solo-worker-0"); p.Spec.SchedulingGroup != nil {
		t.Errorf("one-pod job's pod joined group %+v", p.Spec.SchedulingGroup)
	}
}
