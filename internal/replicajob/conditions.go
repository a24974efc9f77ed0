package replicajob

import (
	corev1 "k8s.io/api/core/v1"
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
