package replicajob

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
)

// setCondition applies Kubeflow's condition rules and reports whether anything changed:
//   - once the job has Failed=True nothing changes any more;
//   - the same type with the same status and reason is left alone (message and times kept);
//   - a changed condition moves to the end of the list (the State column shows the last one),
//     keeping its lastTransitionTime when only the reason changed;
//   - Running and Restarting exclude each other; Succeeded and Failed turn Running to False.
func setCondition(st *kubeflowv1.JobStatus, c kubeflowv1.JobCondition, now metav1.Time) bool {
	if hasCondition(st, kubeflowv1.JobFailed) {
		return false
	}
	c.LastUpdateTime, c.LastTransitionTime = now, now
	if old := getCondition(st, c.Type); old != nil {
		if old.Status == c.Status && old.Reason == c.Reason {
			return false
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
	}
	kept := make([]kubeflowv1.JobCondition, 0, len(st.Conditions)+1)
	for _, old := range st.Conditions {
		switch {
		case old.Type == c.Type:
			continue
		case c.Type == kubeflowv1.JobRestarting && old.Type == kubeflowv1.JobRunning,
			c.Type == kubeflowv1.JobRunning && old.Type == kubeflowv1.JobRestarting:
			continue
		case (c.Type == kubeflowv1.JobSucceeded || c.Type == kubeflowv1.JobFailed) &&
			old.Type == kubeflowv1.JobRunning && old.Status == corev1.ConditionTrue:
			old.Status, old.LastUpdateTime, old.LastTransitionTime = corev1.ConditionFalse, now, now
		}
		kept = append(kept, old)
	}
	st.Conditions = append(kept, c)
	return true
}

func getCondition(st *kubeflowv1.JobStatus, t kubeflowv1.JobConditionType) *kubeflowv1.JobCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// hasCondition reports whether the condition of type t is True.
func hasCondition(st *kubeflowv1.JobStatus, t kubeflowv1.JobConditionType) bool {
	c := getCondition(st, t)
	return c != nil && c.Status == corev1.ConditionTrue
}

// isFinished reports whether the job has succeeded or failed.
func isFinished(st *kubeflowv1.JobStatus) bool {
	return hasCondition(st, kubeflowv1.JobSucceeded) || hasCondition(st, kubeflowv1.JobFailed)
}

// sameStatus is equality.Semantic.DeepEqual(*a, *b), written out: it runs at every reconcile,
// where the reflective one was a noticeable share of the reconcile's CPU (measured:
// docs/performance.md, Measurements behind the code).
// TestSameStatusIsSemanticEquality holds it to the reflective one field by field.
func sameStatus(a, b *kubeflowv1.JobStatus) bool {
	if len(a.Conditions) != len(b.Conditions) || len(a.ReplicaStatuses) != len(b.ReplicaStatuses) ||
		!sameTime(a.StartTime, b.StartTime) || !sameTime(a.CompletionTime, b.CompletionTime) || !sameTime(a.LastReconcileTime, b.LastReconcileTime) {
		return false
	}
	for i := range a.Conditions {
		x, y := &a.Conditions[i], &b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message ||
			!x.LastUpdateTime.Equal(&y.LastUpdateTime) || !x.LastTransitionTime.Equal(&y.LastTransitionTime) {
			return false
		}
	}
	for t, x := range a.ReplicaStatuses {
		y, ok := b.ReplicaStatuses[t]
		if !ok || (x == nil) != (y == nil) {
			return false
		}
		if x != nil && (x.Active != y.Active || x.Succeeded != y.Succeeded || x.Failed != y.Failed || x.Selector != y.Selector || x.CompletedIndexes != y.CompletedIndexes ||
			(x.LabelSelector != nil || y.LabelSelector != nil) && !equality.Semantic.DeepEqual(x.LabelSelector, y.LabelSelector)) {
			return false
		}
	}
	return true
}

func sameTime(a, b *metav1.Time) bool { return (a == nil) == (b == nil) && (a == nil || a.Equal(b)) }
