package replicajob

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kiln-ml/kiln/test/builder"
)

// TestStatusWait follows one job through its life, writing the status whenever statusWait
// says so, and checks how long each change waits.
func TestStatusWait(t *testing.T) {
	r := &Reconciler{opts: Options{StatusInterval: time.Second}, mem: newMemory()}
	key := types.NamespacedName{Namespace: "ns", Name: "dist"}
	w := newWorld(tf, builder.TFJob("dist", "ns").Replicas("PS", 1).Replicas("Worker", 2))
	at := func(d time.Duration) time.Time { return now.Add(d) }
	wait := func(when time.Time) time.Duration {
		t.Helper()
		return r.statusWait(key, w.job, r.mem.of(key, w.job.GetUID()).status, w.plan(t), when)
	}
	write := func() {
		t.Helper()
		*w.job.GetJobStatus() = w.plan(t).Status
		r.mem.statusWritten(key, w.job.GetUID(), "", now)
	}
	steps := []struct {
		name string
		do   func()
		when time.Duration
		want time.Duration
	}{
		{"a new job's Created is written at once, with the pods that reconcile created", func() { w.all(corev1.PodPending) }, 0, 0},
		{"after that write, a worker runs: Running waits one interval", func() { write(); w.pod("Worker", 0, corev1.PodRunning, 0) },
			5 * time.Second, time.Second},
		{"pods running meanwhile join that write", func() { w.pod("Worker", 1, corev1.PodRunning, 0) },
			5*time.Second + 500*time.Millisecond, 500 * time.Millisecond},
		{"then it is due", func() {}, 6 * time.Second, 0},
		{"after that write, counts alone wait ten intervals", func() { write(); w.pod("PS", 0, corev1.PodRunning, 0) },
			7 * time.Second, 10 * time.Second},
		{"counts seen meanwhile join the same write", func() { w.pod("Worker", 1, corev1.PodRunning, 0) },
			10 * time.Second, 7 * time.Second},
		{"a worker succeeds: its index is written within an interval (it must never run again)", func() { w.pod("Worker", 1, corev1.PodSucceeded, 0) },
			10 * time.Second, time.Second},
		{"worker 0 succeeds: the job finishes, written at once", func() { w.pod("Worker", 0, corev1.PodSucceeded, 0) },
			11 * time.Second, 0},
	}
	for _, s := range steps {
		s.do()
		if got := wait(at(s.when)); got != s.want {
			t.Fatalf("%s: statusWait at %v = %v, want %v", s.name, s.when, got, s.want)
		}
	}

	r.opts.StatusInterval = 0
	w = newWorld(tf, builder.TFJob("dist", "ns").Replicas("Worker", 1))
	if got := wait(now); got != 0 {
		t.Errorf("StatusInterval 0: statusWait = %v, want 0 (every change at once)", got)
	}
}
