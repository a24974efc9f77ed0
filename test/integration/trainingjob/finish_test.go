package trainingjob

import (
	"context"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

// A job whose terminal status cannot be written (here a ValidatingAdmissionPolicy refuses it, as
// a conflict or an apiserver restart would fail the write) keeps its pods until the verdict is
// stored: were they cleaned up first, the next reconcile would find neither a verdict nor pods
// and run the whole job again.
func TestFinishedJobNeverRunsAgainWhenItsStatusWriteFails(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	lift := refuseSucceededStatus(t, ns)
	job := create(t, builder.TFJob("refused", ns).Replicas("PS", 1).Replicas("Worker", 2).CleanPodPolicy(kubeflowv1.CleanPodPolicyAll).Obj())
	pods := waitPods(t, job, 3)
	runAll(t, pods)
	waitCondition(t, job, kubeflowv1.JobRunning)
	want := podUIDsOf(pods)
	env.Exit(t, env.Pod(t, ns, "refused-worker-0"), 0) // worker 0 completing succeeds a TFJob

	testenv.Consistently(t, func() error {
		if got := podUIDsOf(jobPods(t, job)); got != want {
			return fmt.Errorf("pods changed while the verdict was refused: %s, were %s", got, want)
		}
		if c := lastCondition(get(t, job)); c.Type == kubeflowv1.JobSucceeded {
			return fmt.Errorf("Succeeded was stored despite the policy")
		}
		return nil
	})
	lift()
	waitCondition(t, job, kubeflowv1.JobSucceeded)
	waitPods(t, job, 0) // cleanPodPolicy All, once the verdict is stored
}

func podUIDsOf(pods []corev1.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name+"="+string(p.UID))
	}
	return strings.Join(out, ",")
}

// refuseSucceededStatus makes the apiserver refuse, in namespace ns, any TFJob status that says
// Succeeded, and waits until it does; the returned function lifts the refusal.
func refuseSucceededStatus(t *testing.T, ns string) (lift func()) {
	t.Helper()
	ctx := context.Background()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-succeeded-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"kubeflow.org"}, APIVersions: []string{"v1"}, Resources: []string{"tfjobs/status"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!has(object.status.conditions) || !object.status.conditions.exists(c, c.type == 'Succeeded' && c.status == 'True')",
				Message:    "test: Succeeded refused",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns},
			}},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, binding)
		_ = env.Client.Delete(ctx, policy)
	})
	// A job kiln leaves alone probes when the policy is in force.
	probe := create(t, builder.TFJob("probe", ns).Replicas("Worker", 1).ManagedBy("kueue.x-k8s.io/multikueue").Obj())
	testenv.Eventually(t, func() error {
		fresh := get(t, probe)
		fresh.GetJobStatus().Conditions = []kubeflowv1.JobCondition{{Type: kubeflowv1.JobSucceeded, Status: corev1.ConditionTrue, Reason: "Probe",
			LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		err := env.Client.Status().Update(ctx, fresh)
		if err == nil || !strings.Contains(err.Error(), "Succeeded refused") {
			return fmt.Errorf("the policy is not in force yet (status write: %v)", err)
		}
		return nil
	})
	return func() {
		if err := env.Client.Delete(ctx, binding); err != nil {
			t.Fatal(err)
		}
	}
}
