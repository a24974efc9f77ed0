package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

// In a namespace that enforces Pod Security "restricted" (the apiserver's own PodSecurity
// admission), a job of every kind, a PyJob and an InferenceService whose own containers comply
// get every pod admitted: what kiln adds (PyTorch's wait for the master, the model fetch) complies
// too. A pod that does not comply is refused there, so the check is real.
func TestEveryKindRunsWherePodSecurityIsRestricted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := cluster.Namespace(t)
	namespace := &corev1.Namespace{}
	testenv.Eventually(t, func() error {
		if err := cluster.Client.Get(ctx, client.ObjectKey{Name: ns}, namespace); err != nil {
			return err
		}
		namespace.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
		return cluster.Client.Update(ctx, namespace)
	})
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "as-written", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: builder.Image}}}}
	// PodSecurity admission reads the namespace's labels from the apiserver's informer, which
	// learns of the update a moment later: until it refuses the bare pod (a dry run, which
	// makes nothing), pods of the jobs below could be admitted unchecked.
	testenv.Eventually(t, func() error {
		err := cluster.Client.Create(ctx, bare.DeepCopy(), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
			return fmt.Errorf("a pod without a securityContext: %v; want it refused by PodSecurity", err)
		}
		return nil
	})

	jobs := []struct {
		job  *builder.Job
		pods int
	}{
		{builder.TFJob("tf", ns).Replicas("Worker", 2), 2},
		{builder.PyTorchJob("torch", ns).Replicas("Master", 1).Replicas("Worker", 2), 3},
		{builder.XGBoostJob("xgb", ns).Replicas("Master", 1).Replicas("Worker", 1), 2},
		{builder.JAXJob("jax", ns).Replicas("Worker", 2), 2},
		{builder.PaddleJob("paddle", ns).Replicas("Worker", 2), 2},
		{builder.MPIJob("mpi", ns).Replicas("Launcher", 1).Replicas("Worker", 1), 2},
	}
	for _, j := range jobs {
		create(t, j.job.Restricted().Obj())
	}
	py := builder.PyJob("py", ns, func(s *trainingv1alpha1.PyJobSpec) {
		s.Workers, s.SecurityContext, s.ContainerSecurityContext = 2, builder.RestrictedPod(), builder.RestrictedContainer()
	})
	isvc := &servingv1alpha1.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: "served", Namespace: ns},
		Spec: servingv1alpha1.InferenceServiceSpec{ModelURI: "s3://models/iris/", Framework: servingv1alpha1.FrameworkSKLearn,
			Pod: &servingv1alpha1.PodOptions{SecurityContext: builder.RestrictedPod(), ContainerSecurityContext: builder.RestrictedContainer()}}}
	for _, o := range []client.Object{py, isvc} {
		if err := cluster.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, j := range jobs {
		testenv.EventuallyWithin(t, timeout, func() error {
			return testenv.Count(j.job.Obj().GetName()+"'s pods", len(jobPods(t, j.job.Obj())), j.pods)
		})
	}
	for selector, want := range map[string]int{"training.kiln.dev/pyjob-name=py": 2, "serving.kiln.dev/inferenceservice=served": 1} {
		key, value, _ := strings.Cut(selector, "=")
		testenv.EventuallyWithin(t, timeout, func() error {
			return testenv.Count(selector+" pods", len(cluster.Pods(t, ns, map[string]string{key: value})), want)
		})
	}
	// The pods kiln made carry its own containers, admitted with them.
	if worker := cluster.Pod(t, ns, "torch-worker-0"); len(worker.Spec.InitContainers) == 0 || worker.Spec.InitContainers[0].Name != "init-pytorch" {
		t.Errorf("pod torch-worker-0 has init containers %v, want init-pytorch", worker.Spec.InitContainers)
	}
	served := cluster.Pods(t, ns, map[string]string{"serving.kiln.dev/inferenceservice": "served"})
	if len(served[0].Spec.InitContainers) != 1 || served[0].Spec.InitContainers[0].Name != "model-fetch" {
		t.Errorf("the InferenceService's pod has init containers %v, want model-fetch", served[0].Spec.InitContainers)
	}
}
