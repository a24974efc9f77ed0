package replicajob

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
)

type cond struct {
	Type   kubeflowv1.JobConditionType
	Status corev1.ConditionStatus
	Reason string
}

func conds(st *kubeflowv1.JobStatus) []cond {
	var out []cond
	for _, c := range st.Conditions {
		out = append(out, cond{c.Type, c.Status, c.Reason})
	}
	return out
}

func TestSetCondition(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	c := func(t kubeflowv1.JobConditionType, s corev1.ConditionStatus, reason string) kubeflowv1.JobCondition {
		return kubeflowv1.JobCondition{Type: t, Status: s, Reason: reason}
	}
	tests := []struct {
		name    string
		steps   []kubeflowv1.JobCondition
		want    []cond
		changed bool // of the last step
	}{
		{"created then running", []kubeflowv1.JobCondition{c("Created", "True", "R"), c("Running", "True", "R")},
			[]cond{{"Created", "True", "R"}, {"Running", "True", "R"}}, true},
		{"same again is no change", []kubeflowv1.JobCondition{c("Running", "True", "R"), c("Running", "True", "R")},
			[]cond{{"Running", "True", "R"}}, false},
		{"restarting removes running", []kubeflowv1.JobCondition{c("Created", "True", "R"), c("Running", "True", "R"), c("Restarting", "True", "R")},
			[]cond{{"Created", "True", "R"}, {"Restarting", "True", "R"}}, true},
		{"running removes restarting", []kubeflowv1.JobCondition{c("Restarting", "True", "R"), c("Running", "True", "R")},
			[]cond{{"Running", "True", "R"}}, true},
		{"succeeded turns running false", []kubeflowv1.JobCondition{c("Running", "True", "R"), c("Succeeded", "True", "S")},
			[]cond{{"Running", "False", "R"}, {"Succeeded", "True", "S"}}, true},
		{"failed freezes the list", []kubeflowv1.JobCondition{c("Failed", "True", "F"), c("Running", "True", "R")},
			[]cond{{"Failed", "True", "F"}}, false},
		{"a changed condition moves to the end", []kubeflowv1.JobCondition{c("Suspended", "True", "S"), c("Running", "True", "R"), c("Suspended", "False", "Res")},
			[]cond{{"Running", "True", "R"}, {"Suspended", "False", "Res"}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var st kubeflowv1.JobStatus
			var changed bool
			for i, step := range tc.steps {
				now := t0
				if i == len(tc.steps)-1 {
					now = t1
				}
				changed = setCondition(&st, step, now)
			}
			if diff := cmp.Diff(tc.want, conds(&st)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if changed != tc.changed {
				t.Errorf("changed = %v, want %v", changed, tc.changed)
			}
		})
	}
}

func TestSetConditionKeepsTransitionTimeWhenOnlyTheReasonChanges(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	var st kubeflowv1.JobStatus
	setCondition(&st, kubeflowv1.JobCondition{Type: "Running", Status: "True", Reason: "A"}, t0)
	setCondition(&st, kubeflowv1.JobCondition{Type: "Running", Status: "True", Reason: "B"}, t1)
	got := st.Conditions[0]
	if !got.LastTransitionTime.Equal(&t0) || !got.LastUpdateTime.Equal(&t1) {
		t.Errorf("times: transition %v update %v; want transition %v (kept) update %v", got.LastTransitionTime, got.LastUpdateTime, t0, t1)
	}
}
