package serving

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kservev1beta1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1beta1"
	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	"github.com/kiln-ml/kiln/test/testenv"
)

// Ready at generation N means generation N's model serves: after an edit, no status says Ready
// at the new generation until the Deployment's controller rolled the new template out. (The
// status used to be computed from the Deployment read before the apply: the old, finished
// rollout, so Ready stayed True at the new generation while the old model served.)
func TestReadyAtAGenerationMeansItsModelServes(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	i := create(t, newISVC(ns, "gen", nil))
	rollOut(t, ns, "gen-predictor", "s3://models/iris/v1")
	waitStatus(t, i, conditionIs("Ready", metav1.ConditionTrue))
	// Every version of the status from the edit on, as a watch delivers them: a Ready True
	// corrected a moment later is still a lie that kstatus, Flux or Argo may have read.
	w := env.Watch(t, &servingv1alpha1.InferenceServiceList{}, ns)
	edit(t, i, func(s *servingv1alpha1.InferenceServiceSpec) { s.ModelURI = "s3://models/iris/v2" })
	deadline := time.After(testenv.Quiet + 2*time.Second)
	for seen := false; !seen; {
		select {
		case e := <-w.ResultChan():
			fresh, ok := e.Object.(*servingv1alpha1.InferenceService)
			if !ok || fresh.Generation < 2 {
				continue
			}
			c := meta.FindStatusCondition(fresh.Status.Conditions, "Ready")
			if fresh.Status.ObservedGeneration == fresh.Generation && c != nil && c.Status == metav1.ConditionTrue {
				t.Fatalf("Ready %+v at generation %d while v1 still serves", c, fresh.Generation)
			}
		case <-deadline:
			seen = true
		}
	}
	rollOut(t, ns, "gen-predictor", "s3://models/iris/v2")
	waitStatus(t, i, conditionIs("Ready", metav1.ConditionTrue))
}

// A child the apiserver refuses reaches the status, naming the object and what the apiserver
// said, and an event (it used to fail the reconcile before any status was written).
func TestARefusedChildReachesTheStatus(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	i := create(t, newISVC(ns, "badlabel", func(s *servingv1alpha1.InferenceServiceSpec) {
		s.Pod = &servingv1alpha1.PodOptions{Labels: map[string]string{"team": "a b"}}
	}))
	waitStatus(t, i, func(i *servingv1alpha1.InferenceService) error {
		c := meta.FindStatusCondition(i.Status.Conditions, "Ready")
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "Refused" || !strings.Contains(c.Message, "Deployment badlabel-predictor") {
			return fmt.Errorf("Ready %+v, want False, Refused, naming Deployment badlabel-predictor", c)
		}
		return nil
	})
	env.AwaitEvent(t, ns, "badlabel", "", "Refused")
}

// A new InferenceService's Deployment is made before its Service, and its first status comes with
// the Service: no status gives an address no Service answers. Here the namespace's quota refuses
// every Service: the Deployment is made, the status says the Service was refused, and no status
// written on the way gave the address.
func TestNoAddressIsGivenBeforeItsServiceExists(t *testing.T) {
	t.Parallel()
	installKilnRuntimes(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	none := corev1.ResourceList{corev1.ResourceServices: resource.MustParse("0")}
	probe := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	testenv.EnforceQuota(t, env.Client, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-services"},
		Spec: corev1.ResourceQuotaSpec{Hard: none}}, &corev1.ResourceQuotaStatus{Hard: none, Used: none}, probe)

	w := env.Watch(t, &kservev1beta1.InferenceServiceList{}, ns)
	sample := kserveSample(t, "samples/sklearn/v1/sklearn.yaml", ns)
	if err := env.Client.Create(ctx, sample); err != nil {
		t.Fatal(err)
	}
	deployment(t, ns, "sklearn-iris-predictor")
	deadline := time.After(testenv.Timeout)
	for {
		select {
		case ev, open := <-w.ResultChan():
			if !open {
				t.Fatal("the watch of InferenceServices ended before a status said the Service was refused")
			}
			isvc, ok := ev.Object.(*kservev1beta1.InferenceService)
			if !ok {
				t.Fatalf("watch event %s: %T", ev.Type, ev.Object)
			}
			if a := isvc.Status.Address; a != nil {
				t.Fatalf("status gave the address %s while its Service cannot exist: %+v", a.URL, isvc.Status.Conditions)
			}
			if c := meta.FindStatusCondition(isvc.Status.Conditions, "Ready"); c != nil && c.Reason == "Refused" && strings.Contains(c.Message, "Service sklearn-iris-predictor") {
				return
			}
		case <-deadline:
			t.Fatalf("no status said Service sklearn-iris-predictor was refused within %v", testenv.Timeout)
		}
	}
}
