package owned

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An apply is skipped only when the same content was applied to the object and nobody changed
// it since: its generation, or for a kind without one its resourceVersion, is the apply's answer's.
func TestAnApplyIsSkippedOnlyWhenNothingChanged(t *testing.T) {
	a := NewApplied()
	desired := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns", UID: "u1"}, Spec: appsv1.DeploymentSpec{MinReadySeconds: 1}}
	sum := a.sum(desired)
	answer := desired.DeepCopy()
	answer.Generation, answer.ResourceVersion = 2, "10"
	a.record(answer, sum)
	cached := answer.DeepCopy()
	cached.ResourceVersion = "11" // its controller wrote the status
	if !a.unchanged(cached, sum) {
		t.Error("a Deployment whose status alone changed is applied again")
	}
	cached.Generation = 3 // somebody changed its spec
	if a.unchanged(cached, sum) {
		t.Error("a Deployment changed by somebody else is not applied again")
	}
	changed := desired.DeepCopy()
	changed.Spec.MinReadySeconds = 2
	if a.unchanged(answer, a.sum(changed)) {
		t.Error("new content is not applied")
	}

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", UID: "u2"}}
	sum = a.sum(svc)
	svcAnswer := svc.DeepCopy()
	svcAnswer.ResourceVersion = "20"
	a.record(svcAnswer, sum)
	if !a.unchanged(svcAnswer, sum) {
		t.Error("an unchanged Service is applied again")
	}
	edited := svcAnswer.DeepCopy()
	edited.ResourceVersion = "21"
	if a.unchanged(edited, sum) {
		t.Error("a Service changed by somebody else (no generation: its resourceVersion) is not applied again")
	}
	a.forget(svcAnswer)
	if a.unchanged(svcAnswer, sum) {
		t.Error("a deleted object's apply is remembered")
	}
	var none *Applied
	if none.unchanged(svcAnswer, none.sum(svc)) || a.unchanged(nil, sum) {
		t.Error("without Applied, or without the object, an apply is skipped")
	}
}
