package trainjob

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
)

// The deadline counts from the creation or the last resumption, and only while the run may still
// end by it: not while suspended, and not once the TrainJob or its JobSet finished (a JobSet that
// completed before kiln saw the deadline pass keeps its verdict).
func TestDeadlineLeft(t *testing.T) {
	created := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	now := created.Add(10 * time.Second)
	job := func(deadline int64, edit func(*trainerv1alpha1.TrainJob)) *trainerv1alpha1.TrainJob {
		j := &trainerv1alpha1.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "j", CreationTimestamp: metav1.NewTime(created)}}
		j.Spec.ActiveDeadlineSeconds = deadline
		if edit != nil {
			edit(j)
		}
		return j
	}
	condition := func(typ string, s metav1.ConditionStatus, at time.Time) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: "R", LastTransitionTime: metav1.NewTime(at)}
	}
	jobSet := func(conds ...metav1.Condition) *jobsetv1alpha2.JobSet {
		js := &jobsetv1alpha2.JobSet{}
		js.Status.Conditions = conds
		return js
	}
	for _, tc := range []struct {
		name     string
		job      *trainerv1alpha1.TrainJob
		js       *jobsetv1alpha2.JobSet
		wantHas  bool
		wantLeft time.Duration
	}{
		{"passed, its JobSet running", job(5, nil), jobSet(), true, -5 * time.Second},
		{"passed, no JobSet", job(5, nil), nil, true, -5 * time.Second},
		{"to come", job(60, nil), jobSet(), true, 50 * time.Second},
		{"passed, its JobSet completed first", job(5, nil), jobSet(condition(string(jobsetv1alpha2.JobSetCompleted), metav1.ConditionTrue, created)), false, 0},
		{"passed, its JobSet failed first", job(5, nil), jobSet(condition(string(jobsetv1alpha2.JobSetFailed), metav1.ConditionTrue, created)), false, 0},
		{"passed, its JobSet's Completed false", job(5, nil), jobSet(condition(string(jobsetv1alpha2.JobSetCompleted), metav1.ConditionFalse, created)), true, -5 * time.Second},
		{"no deadline", job(0, nil), jobSet(), false, 0},
		{"suspended", job(5, func(j *trainerv1alpha1.TrainJob) { j.Spec.Suspend = ptr.To(true) }), jobSet(), false, 0},
		{"the TrainJob finished", job(5, func(j *trainerv1alpha1.TrainJob) {
			j.Status.Conditions = []metav1.Condition{condition(trainerv1alpha1.TrainJobComplete, metav1.ConditionTrue, created)}
		}), jobSet(), false, 0},
		{"from the resumption", job(5, func(j *trainerv1alpha1.TrainJob) {
			j.Status.Conditions = []metav1.Condition{condition(trainerv1alpha1.TrainJobSuspended, metav1.ConditionFalse, created.Add(8*time.Second))}
		}), jobSet(), true, 3 * time.Second},
		{"resumed now", job(5, func(j *trainerv1alpha1.TrainJob) {
			j.Status.Conditions = []metav1.Condition{condition(trainerv1alpha1.TrainJobSuspended, metav1.ConditionTrue, created)}
		}), jobSet(), true, 5 * time.Second},
	} {
		left, has := deadlineLeft(tc.job, tc.js, now)
		if has != tc.wantHas || (has && left != tc.wantLeft) {
			t.Errorf("%s: left %v, has %v; want %v, %v", tc.name, left, has, tc.wantLeft, tc.wantHas)
		}
	}
}
