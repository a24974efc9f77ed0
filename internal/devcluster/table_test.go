package devcluster

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
)

func TestServiceTable(t *testing.T) {
	now := time.Now()
	isvc := func(name string, cond *metav1.Condition, ready, replicas int32) *servingv1alpha1.InferenceService {
		s := &servingv1alpha1.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-5 * time.Second))}}
		s.Status.URL, s.Status.ReadyReplicas, s.Status.Replicas = "http://"+name+".default.svc.cluster.local", ready, replicas
		if cond != nil {
			s.Status.Conditions = []metav1.Condition{*cond}
		}
		return s
	}
	rows := []ServiceRow{
		InferenceServiceRow(isvc("resnet", &metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "CanaryNotReady"}, 5, 6), now),
		InferenceServiceRow(isvc("iris", &metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"}, 1, 1), now),
		InferenceServiceRow(isvc("new", nil, 0, 0), now),
	}
	if !rows[1].Ready || rows[0].Ready || rows[2].Ready {
		t.Errorf("ready = %v %v %v, want only iris", rows[0].Ready, rows[1].Ready, rows[2].Ready)
	}
	got := ServiceTable(rows)
	lines := strings.Split(strings.TrimSpace(got), "\n")
	want := [][]string{
		{"INFERENCESERVICE", "STATE", "READY", "URL", "AGE"},
		{"iris", "Ready", "1/1", "http://iris.default.svc.cluster.local", "5s"},
		{"new", "Pending", "0/0", "http://new.default.svc.cluster.local", "5s"},
		{"resnet", "CanaryNotReady", "5/6", "http://resnet.default.svc.cluster.local", "5s"},
	}
	if len(lines) != len(want) {
		t.Fatalf("table:\n%s", got)
	}
	for i, w := range want {
		if f := strings.Fields(lines[i]); strings.Join(f, " ") != strings.Join(w, " ") {
			t.Errorf("line %d = %q, want %q", i, f, w)
		}
	}
}

// A TrainJob's row says what Kubeflow's SDK would: Created once its JobSet's Jobs are counted,
// Running once each has its pods ready (its status has no condition then), then its verdict.
func TestTrainJobRows(t *testing.T) {
	now := time.Now()
	job := func(counts []trainerv1alpha1.JobStatus, conds ...metav1.Condition) *trainerv1alpha1.TrainJob {
		j := &trainerv1alpha1.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "mnist", CreationTimestamp: metav1.NewTime(now)}}
		j.Status.JobsStatus, j.Status.Conditions = counts, conds
		return j
	}
	node := func(active, ready, succeeded int32) []trainerv1alpha1.JobStatus {
		return []trainerv1alpha1.JobStatus{{Name: "node", Active: ptr.To(active), Ready: ptr.To(ready), Succeeded: ptr.To(succeeded)}}
	}
	for _, tc := range []struct {
		job   *trainerv1alpha1.TrainJob
		state string
	}{
		{job(nil), "Pending"},
		{job(node(1, 0, 0)), "Created"},
		{job(node(1, 1, 0)), "Running"},
		{job(node(1, 1, 0), metav1.Condition{Type: "Suspended", Status: metav1.ConditionFalse}), "Running"},
		{job(node(0, 0, 0), metav1.Condition{Type: "Suspended", Status: metav1.ConditionTrue}), "Suspended"},
		{job(node(0, 0, 1), metav1.Condition{Type: "Complete", Status: metav1.ConditionTrue}), "Complete"},
	} {
		if r := TrainJobRow(tc.job, now); r.State != tc.state {
			t.Errorf("counts %+v conditions %+v: state %s, want %s", tc.job.Status.JobsStatus, tc.job.Status.Conditions, r.State, tc.state)
		}
	}
}
