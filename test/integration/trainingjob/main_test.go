// Package trainingjob runs kiln's manager against the real kube-apiserver and checks the
// kubeflow.org/v1 training jobs end to end, playing the kubelet by writing pod status.
package trainingjob

import (
	"context"
	"fmt"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/test/testenv"
)

var (
	env *testenv.Env
	// mgr is the manager under test, for tests that look into its cache.
	mgr ctrl.Manager
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, func(e *testenv.Env) (stop func(), err error) {
		mgr, stop, err = e.StartManagerFor(testenv.ManagerOptions())
		return stop, err
	}))
}

// create creates a job and returns it.
func create(t *testing.T, job framework.Job) framework.Job {
	t.Helper()
	if err := env.Client.Create(context.Background(), job); err != nil {
		t.Fatalf("creating %s: %v", job.GetName(), err)
	}
	return job
}

// get reads a job afresh.
func get(t *testing.T, job framework.Job) framework.Job {
	t.Helper()
	fresh := job.DeepCopyObject().(framework.Job)
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), fresh); err != nil {
		t.Fatalf("getting %s: %v", job.GetName(), err)
	}
	return fresh
}

// update applies edit to the freshest copy of the job, retrying on conflicts.
func update(t *testing.T, job framework.Job, edit func(framework.Job)) {
	t.Helper()
	testenv.Eventually(t, func() error {
		fresh := get(t, job)
		edit(fresh)
		return env.Client.Update(context.Background(), fresh)
	})
}

// jobPods are the pods of a job by label, as the Kubeflow SDK selects them.
func jobPods(t *testing.T, job framework.Job) []corev1.Pod {
	return env.Pods(t, job.GetNamespace(), map[string]string{kubeflowv1.LabelJobName: job.GetName()})
}

func jobServices(t *testing.T, job framework.Job) []corev1.Service {
	return env.Services(t, job.GetNamespace(), map[string]string{kubeflowv1.LabelJobName: job.GetName()})
}

// waitPods waits until the job has exactly n pods, none terminating, and returns them.
func waitPods(t *testing.T, job framework.Job, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	testenv.Eventually(t, func() error {
		pods = jobPods(t, job)
		for _, p := range pods {
			if p.DeletionTimestamp != nil {
				return fmt.Errorf("pod %s is terminating", p.Name)
			}
		}
		return testenv.Count("pods of "+job.GetName(), len(pods), n)
	})
	return pods
}

// waitCondition waits until the job's condition of type ct is True and returns the job.
func waitCondition(t *testing.T, job framework.Job, ct kubeflowv1.JobConditionType) framework.Job {
	t.Helper()
	return env.WaitCondition(t, job, ct, testenv.Timeout)
}

// runAll marks every pod of the job Running.
func runAll(t *testing.T, pods []corev1.Pod) {
	t.Helper()
	for i := range pods {
		env.Run(t, &pods[i])
	}
}

func envOf(pod corev1.Pod, container string) map[string]string {
	out := map[string]string{}
	for _, c := range pod.Spec.Containers {
		if c.Name == container {
			for _, e := range c.Env {
				out[e.Name] = e.Value
			}
		}
	}
	return out
}

// testenvEventuallyServices waits until the job has n services and returns their names.
func testenvEventuallyServices(t *testing.T, job framework.Job, n int, names *[]string) {
	t.Helper()
	testenv.Eventually(t, func() error {
		svcs := jobServices(t, job)
		*names = (*names)[:0]
		for _, s := range svcs {
			*names = append(*names, s.Name)
		}
		return testenv.Count("services of "+job.GetName(), len(svcs), n)
	})
}

func lastCondition(job framework.Job) kubeflowv1.JobCondition {
	cs := job.GetJobStatus().Conditions
	if len(cs) == 0 {
		return kubeflowv1.JobCondition{}
	}
	return cs[len(cs)-1]
}

func itoa(i int) string { return fmt.Sprint(i) }
