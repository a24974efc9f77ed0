package trainjob

import (
	"reflect"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
	"github.com/kiln-ml/kiln/internal/transition"
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

// kiln's Created and Running say only why a TrainJob cannot be running: Kubeflow's SDK reports a
// TrainJob Running from its pods only while its status has no condition (docs/decisions.md, 28).
func TestKilnConditionsOnlyWhileItCannotRun(t *testing.T) {
	now := time.Date(2026, 12, 8, 12, 0, 0, 0, time.UTC)
	cond := func(typ string, s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: "m", LastTransitionTime: metav1.NewTime(now)}
	}
	jobSet := func(ready int32, edit func(*jobsetv1alpha2.JobSet)) *jobsetv1alpha2.JobSet {
		js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "j"}}
		js.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{{Name: "node", Replicas: 1}}
		js.Status.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: "node", Active: 1, Ready: ready}}
		if edit != nil {
			edit(js)
		}
		return js
	}
	runtimeGone := Problem{Reason: ReasonRuntimeNotFound, Message: "ClusterTrainingRuntime torch-distributed does not exist"}
	type want struct{ typ, status, reason string }
	for _, tc := range []struct {
		name    string
		before  []metav1.Condition
		suspend bool
		o       observed
		want    []want
	}{
		{name: "being made", o: observed{jobSetServed: true}},
		{name: "no runtime", o: observed{jobSetServed: true, problem: runtimeGone},
			want: []want{{"Created", "False", ReasonRuntimeNotFound}}},
		{name: "JobSets not served", o: observed{},
			want: []want{{"Created", "False", ReasonJobSetNotServed}}},
		{name: "the runtime came: being made, said in place of the problem",
			before: []metav1.Condition{cond("Created", metav1.ConditionFalse, ReasonRuntimeNotFound)}, o: observed{jobSetServed: true},
			want: []want{{"Created", "False", reasonCreatingJobSet}}},
		{name: "made: the problem goes",
			before: []metav1.Condition{cond("Created", metav1.ConditionFalse, ReasonRuntimeNotFound)}, o: observed{jobSetServed: true, jobSet: jobSet(0, nil)}},
		{name: "running: what an earlier kiln wrote goes",
			before: []metav1.Condition{cond("Created", metav1.ConditionTrue, reasonJobSetCreated), cond("Running", metav1.ConditionTrue, "JobsReady")},
			o:      observed{jobSetServed: true, jobSet: jobSet(1, nil)}},
		{name: "the gang waits", o: observed{jobSetServed: true, jobSet: jobSet(0, nil), waiting: "2 of 4 pods fit"},
			want: []want{{"Running", "False", "WaitingForGang"}}},
		{name: "the gang placed, pods ready", before: []metav1.Condition{cond("Running", metav1.ConditionFalse, "WaitingForGang")},
			o: observed{jobSetServed: true, jobSet: jobSet(1, nil), waiting: "stale"}},
		{name: "suspended, the runtime gone", suspend: true, o: observed{jobSetServed: true, jobSet: jobSet(0, nil), problem: runtimeGone},
			want: []want{{"Suspended", "True", trainerv1alpha1.TrainJobSuspendedReason}, {"Created", "True", reasonJobSetCreated}}},
		{name: "held for its gang, the runtime gone", o: observed{jobSetServed: true, problem: runtimeGone,
			jobSet: jobSet(0, func(js *jobsetv1alpha2.JobSet) { js.Spec.Suspend = ptr.To(true) })},
			want: []want{{"Created", "True", reasonJobSetCreated}}},
		{name: "running, the runtime gone: nothing to say", o: observed{jobSetServed: true, jobSet: jobSet(1, nil), problem: runtimeGone}},
		{name: "complete", before: []metav1.Condition{cond("Running", metav1.ConditionFalse, "WaitingForGang")},
			o: observed{jobSetServed: true, jobSet: jobSet(0, func(js *jobsetv1alpha2.JobSet) {
				js.Status.Conditions = []metav1.Condition{cond(string(jobsetv1alpha2.JobSetCompleted), metav1.ConditionTrue, "AllJobsCompleted")}
			})},
			want: []want{{"Complete", "True", "AllJobsCompleted"}}},
	} {
		job := &trainerv1alpha1.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "j"}}
		job.Spec.Suspend = ptr.To(tc.suspend)
		job.Status.Conditions = tc.before
		tc.o.now = now
		st := status(job, tc.o)
		var got []want
		for _, c := range st.Conditions {
			got = append(got, want{c.Type, string(c.Status), c.Reason})
		}
		if len(got) != len(tc.want) || (len(got) > 0 && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("%s: conditions %v, want %v", tc.name, got, tc.want)
		}
		if (tc.o.jobSet != nil) != (len(st.JobsStatus) > 0) {
			t.Errorf("%s: jobsStatus %v with JobSet %v", tc.name, st.JobsStatus, tc.o.jobSet != nil)
		}
	}
}

// What a status write tells: the JobSet's creation and its Jobs' pods all ready come from the
// counts, each once; a job counts as created at its first status.
func TestToldFromTheCounts(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "j"}}
	js.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{{Name: "node", Replicas: 1}}
	counts := func(ready int32) []trainerv1alpha1.JobStatus {
		return []trainerv1alpha1.JobStatus{{Name: "node", Active: ptr.To[int32](1), Ready: ptr.To(ready)}}
	}
	job := &trainerv1alpha1.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "j"}}
	reasons := func(tl transition.Told) (out []string) {
		for _, e := range tl.Events {
			out = append(out, e.Reason)
		}
		return out
	}
	made := told(job, trainerv1alpha1.TrainJobStatus{}, trainerv1alpha1.TrainJobStatus{JobsStatus: counts(0)}, js)
	if got := reasons(made); !reflect.DeepEqual(got, []string{reasonJobSetCreated}) || !reflect.DeepEqual(made.Changes, []transition.Change{transition.Created}) {
		t.Errorf("JobSet made: events %v, changes %v", got, made.Changes)
	}
	ready := told(job, trainerv1alpha1.TrainJobStatus{JobsStatus: counts(0)}, trainerv1alpha1.TrainJobStatus{JobsStatus: counts(1)}, js)
	if got := reasons(ready); !reflect.DeepEqual(got, []string{"JobsReady"}) || !reflect.DeepEqual(ready.Changes, []transition.Change{transition.Running}) {
		t.Errorf("pods ready: events %v, changes %v", got, ready.Changes)
	}
	again := told(job, trainerv1alpha1.TrainJobStatus{JobsStatus: counts(1)}, trainerv1alpha1.TrainJobStatus{JobsStatus: counts(1)}, js)
	if len(again.Events) > 0 || len(again.Changes) > 0 {
		t.Errorf("nothing new: events %v, changes %v", reasons(again), again.Changes)
	}
}

// The time to running is observed once per TrainJob: not for a write that completes it, and not
// again when its pods become ready again; a new TrainJob of the same name counts anew.
func TestTheFirstRunIsToldOnce(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "j"}}
	js.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{{Name: "node", Replicas: 1}}
	counts := func(ready, succeeded int32) []trainerv1alpha1.JobStatus {
		return []trainerv1alpha1.JobStatus{{Name: "node", Active: ptr.To(1 - succeeded), Ready: ptr.To(ready), Succeeded: ptr.To(succeeded)}}
	}
	job := &trainerv1alpha1.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", UID: "1"}}
	r := &Reconciler{}
	runs := func(j *trainerv1alpha1.TrainJob, old, st trainerv1alpha1.TrainJobStatus) bool {
		return slices.Contains(r.firstRun(j, told(j, old, st, js)).Changes, transition.Running)
	}
	notReady, ready := trainerv1alpha1.TrainJobStatus{JobsStatus: counts(0, 0)}, trainerv1alpha1.TrainJobStatus{JobsStatus: counts(1, 0)}
	complete := trainerv1alpha1.TrainJobStatus{JobsStatus: counts(0, 1), Conditions: []metav1.Condition{{Type: trainerv1alpha1.TrainJobComplete, Status: metav1.ConditionTrue}}}
	if runs(job, notReady, complete) {
		t.Error("a write that completes the TrainJob told its first run")
	}
	if !runs(job, notReady, ready) {
		t.Error("the first run was not told")
	}
	if runs(job, notReady, ready) {
		t.Error("pods ready again told a first run again")
	}
	again := job.DeepCopy()
	again.UID = "2"
	if !runs(again, notReady, ready) {
		t.Error("a new TrainJob of the same name: its first run was not told")
	}
}
