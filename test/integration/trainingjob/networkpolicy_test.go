package trainingjob

import (
	"context"
	"fmt"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

// policy waits for the NetworkPolicy name in ns and returns it.
func policy(t *testing.T, ns, name string) *networkingv1.NetworkPolicy {
	t.Helper()
	np := &networkingv1.NetworkPolicy{}
	env.Await(t, ns, name, np)
	return np
}

// A job annotated kiln.dev/network-policy: isolated gets a NetworkPolicy fencing its pods (each
// other, DNS, and the egress it lists), owned by it; "none" removes it; a job that says nothing
// gets none.
func TestIsolatedJobsGetANetworkPolicy(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	isolated := builder.TFJob("fenced", ns).Replicas("Worker", 2).Edit(func(j framework.Job) {
		j.SetAnnotations(map[string]string{"kiln.dev/network-policy": "isolated", "kiln.dev/network-policy-egress": "10.20.0.0/16:9000"})
	}).Obj()
	open := builder.TFJob("open", ns).Replicas("Worker", 1).Obj()
	create(t, isolated)
	create(t, open)
	np := policy(t, ns, "fenced-network-policy")
	sel := np.Spec.PodSelector.MatchLabels
	if sel[kubeflowv1.LabelJobName] != "fenced" || len(np.Spec.Ingress) != 1 || len(np.Spec.Egress) != 3 ||
		np.Spec.Egress[2].To[0].IPBlock.CIDR != "10.20.0.0/16" || !metav1.IsControlledBy(np, isolated) {
		t.Errorf("NetworkPolicy %+v", np.Spec)
	}
	// The policy selects the job's pods.
	testenv.Eventually(t, func() error { return testenv.Count("fenced's pods", len(env.Pods(t, ns, sel)), 2) })
	testenv.Consistently(t, func() error {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "open-network-policy"}, &networkingv1.NetworkPolicy{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("a job that chose no policy has one (%v)", err)
		}
		return nil
	})
	testenv.Eventually(t, func() error {
		fresh := &kubeflowv1.TFJob{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(isolated), fresh); err != nil {
			return err
		}
		fresh.Annotations["kiln.dev/network-policy"] = "none"
		return env.Client.Update(ctx, fresh)
	})
	testenv.Eventually(t, func() error {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fenced-network-policy"}, &networkingv1.NetworkPolicy{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("the policy stays after the job chose none (%v)", err)
		}
		return nil
	})
}

// An isolated PyJob's workers are fenced likewise.
func TestIsolatedPyJobGetsANetworkPolicy(t *testing.T) {
	ns := env.Namespace(t)
	job := builder.PyJob("fenced-run", ns, func(s *trainingv1alpha1.PyJobSpec) { s.Workers = 2 })
	job.Annotations = map[string]string{"kiln.dev/network-policy": "isolated"}
	if err := env.Client.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	np := policy(t, ns, "fenced-run-network-policy")
	if np.Spec.PodSelector.MatchLabels["training.kiln.dev/pyjob-name"] != "fenced-run" || len(np.Spec.Egress) != 2 || !metav1.IsControlledBy(np, job) {
		t.Errorf("NetworkPolicy %+v", np.Spec)
	}
}
