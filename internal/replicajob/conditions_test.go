package replicajob

import (
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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

func TestSameStatusIsSemanticEquality(t *testing.T) {
	// sameStatus names every field; a field added to these types must be added to it.
	for typ, fields := range map[reflect.Type]int{
		reflect.TypeFor[kubeflowv1.JobStatus](): 5, reflect.TypeFor[kubeflowv1.JobCondition](): 6, reflect.TypeFor[kubeflowv1.ReplicaStatus](): 6,
	} {
		if typ.NumField() != fields {
			t.Errorf("%s has %d fields, sameStatus compares %d: compare the new ones", typ.Name(), typ.NumField(), fields)
		}
	}
	at := func(s int64) *metav1.Time { return ptr.To(metav1.Unix(s, 0)) }
	base := func() *kubeflowv1.JobStatus {
		return &kubeflowv1.JobStatus{
			Conditions: []kubeflowv1.JobCondition{
				{Type: kubeflowv1.JobCreated, Status: corev1.ConditionTrue, Reason: "Created", Message: "m", LastUpdateTime: *at(1), LastTransitionTime: *at(1)},
				{Type: kubeflowv1.JobRunning, Status: corev1.ConditionTrue, Reason: "Running", LastUpdateTime: *at(2), LastTransitionTime: *at(2)},
			},
			ReplicaStatuses: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaStatus{
				"Worker": {Active: 2, Succeeded: 1, Failed: 1, Selector: "a=b"}, "PS": {Active: 1},
			},
			StartTime: at(1), LastReconcileTime: at(3),
		}
	}
	changes := map[string]func(s *kubeflowv1.JobStatus){
		"nothing": func(s *kubeflowv1.JobStatus) {},
		"a time in another zone": func(s *kubeflowv1.JobStatus) {
			s.StartTime = &metav1.Time{Time: s.StartTime.In(time.FixedZone("X", 3600))}
		},
		"no replica statuses, empty": func(s *kubeflowv1.JobStatus) {
			s.ReplicaStatuses = map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaStatus{}
		},
		"no conditions, empty":      func(s *kubeflowv1.JobStatus) { s.Conditions = []kubeflowv1.JobCondition{} },
		"a condition fewer":         func(s *kubeflowv1.JobStatus) { s.Conditions = s.Conditions[:1] },
		"condition type":            func(s *kubeflowv1.JobStatus) { s.Conditions[1].Type = kubeflowv1.JobRestarting },
		"condition status":          func(s *kubeflowv1.JobStatus) { s.Conditions[1].Status = corev1.ConditionFalse },
		"condition reason":          func(s *kubeflowv1.JobStatus) { s.Conditions[1].Reason = "x" },
		"condition message":         func(s *kubeflowv1.JobStatus) { s.Conditions[0].Message = "x" },
		"condition update time":     func(s *kubeflowv1.JobStatus) { s.Conditions[0].LastUpdateTime = *at(9) },
		"condition transition time": func(s *kubeflowv1.JobStatus) { s.Conditions[1].LastTransitionTime = *at(9) },
		"conditions swapped":        func(s *kubeflowv1.JobStatus) { s.Conditions[0], s.Conditions[1] = s.Conditions[1], s.Conditions[0] },
		"a replica type fewer":      func(s *kubeflowv1.JobStatus) { delete(s.ReplicaStatuses, "PS") },
		"a replica type renamed": func(s *kubeflowv1.JobStatus) {
			s.ReplicaStatuses["Chief"] = s.ReplicaStatuses["PS"]
			delete(s.ReplicaStatuses, "PS")
		},
		"a replica status nil":          func(s *kubeflowv1.JobStatus) { s.ReplicaStatuses["PS"] = nil },
		"active":                        func(s *kubeflowv1.JobStatus) { s.ReplicaStatuses["Worker"].Active++ },
		"succeeded":                     func(s *kubeflowv1.JobStatus) { s.ReplicaStatuses["Worker"].Succeeded++ },
		"failed":                        func(s *kubeflowv1.JobStatus) { s.ReplicaStatuses["Worker"].Failed++ },
		"selector":                      func(s *kubeflowv1.JobStatus) { s.ReplicaStatuses["Worker"].Selector = "a=c" },
		"completed indexes":             func(s *kubeflowv1.JobStatus) { s.ReplicaStatuses["Worker"].CompletedIndexes = "0" },
		"a label selector":              func(s *kubeflowv1.JobStatus) { s.ReplicaStatuses["PS"].LabelSelector = &metav1.LabelSelector{} },
		"start time":                    func(s *kubeflowv1.JobStatus) { s.StartTime = at(9) },
		"no start time":                 func(s *kubeflowv1.JobStatus) { s.StartTime = nil },
		"a completion time":             func(s *kubeflowv1.JobStatus) { s.CompletionTime = at(9) },
		"last reconcile time":           func(s *kubeflowv1.JobStatus) { s.LastReconcileTime = at(9) },
		"a zero time for a missing one": func(s *kubeflowv1.JobStatus) { s.CompletionTime = &metav1.Time{} },
	}
	for name, change := range changes {
		a, b := base(), base()
		change(b)
		for _, pair := range [][2]*kubeflowv1.JobStatus{{a, b}, {b, a}} {
			if got, want := sameStatus(pair[0], pair[1]), equality.Semantic.DeepEqual(*pair[0], *pair[1]); got != want {
				t.Errorf("%s: sameStatus says %v, equality.Semantic.DeepEqual %v", name, got, want)
			}
		}
	}
	// Label selectors that differ only inside.
	a, b := base(), base()
	a.ReplicaStatuses["PS"].LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
	b.ReplicaStatuses["PS"].LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "c"}}
	if sameStatus(a, b) {
		t.Error("statuses whose replica label selectors differ are the same to sameStatus")
	}
}
