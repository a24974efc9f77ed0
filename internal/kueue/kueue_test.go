package kueue

import "testing"

func TestCopyLabelsAndWaiting(t *testing.T) {
	to := map[string]string{"team": "a"}
	CopyLabels(map[string]string{QueueLabel: "research", PriorityLabel: "high", "other": "x"}, to)
	if len(to) != 3 || to[QueueLabel] != "research" || to[PriorityLabel] != "high" {
		t.Errorf("copied %v: want the queue and priority labels added to team=a", to)
	}
	if got := Waiting(to); got != "waiting for Kueue to admit it from LocalQueue research" {
		t.Errorf("Waiting = %q", got)
	}
	if got := Waiting(map[string]string{"team": "a"}); got != "" {
		t.Errorf("Waiting without a queue = %q, want empty", got)
	}
}
