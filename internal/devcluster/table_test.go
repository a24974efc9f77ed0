package devcluster

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
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
