package trainingjob

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

// The manager's informer cache holds only the pods and services kiln labels, without
// managedFields: a cluster full of other pods costs kiln no memory.
func TestCacheHoldsOnlyKilnsObjects(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	foreign := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "not-kilns", Namespace: ns, Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: builder.Image}}},
	}
	if err := env.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	job := create(t, builder.TFJob("cached", ns).Replicas("Worker", 2).Obj())
	waitPods(t, job, 2)
	testenv.Eventually(t, func() error {
		var pods corev1.PodList
		if err := mgr.GetCache().List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(pods.Items) != 2 {
			return fmt.Errorf("cache holds %d pods in %s, want kiln's 2", len(pods.Items), ns)
		}
		for _, p := range pods.Items {
			if p.Name == foreign.Name {
				return fmt.Errorf("cache holds the foreign pod %s", p.Name)
			}
			if len(p.ManagedFields) > 0 {
				return fmt.Errorf("cached pod %s keeps %d managedFields entries", p.Name, len(p.ManagedFields))
			}
		}
		return nil
	})
}

// A job that simply runs is not written to: the status is written only when it changes.
func TestRunningJobIsNotRewritten(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.PyTorchJob("steady", ns).Replicas("Master", 1).Replicas("Worker", 3).Obj())
	runAll(t, waitPods(t, job, 4))
	rv := waitCondition(t, job, kubeflowv1.JobRunning).GetResourceVersion()
	// Let the last pod events settle, then watch.
	testenv.Eventually(t, func() error {
		fresh := get(t, job)
		if fresh.GetJobStatus().ReplicaStatuses["Worker"].Active != 3 {
			return fmt.Errorf("workers not all active yet")
		}
		rv = fresh.GetResourceVersion()
		return nil
	})
	testenv.Consistently(t, func() error {
		if got := get(t, job).GetResourceVersion(); got != rv {
			return fmt.Errorf("a running job was rewritten (resourceVersion %s -> %s)", rv, got)
		}
		return nil
	})
}
