package testenv

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
)

// PodUIDs remembers every pod UID seen per replica of a namespace: a kubeflow.org pod by its
// name (deterministic: job, type, index), a batch Job's pod (PyJob) by its Job and completion
// index. A replica with two UIDs got a second pod.
type PodUIDs struct {
	env  *Env
	ns   string
	mu   sync.Mutex
	seen map[string]map[string]bool
}

// NewPodUIDs watches nothing yet: call Observe, or Watch.
func (e *Env) NewPodUIDs(ns string) *PodUIDs {
	return &PodUIDs{env: e, ns: ns, seen: map[string]map[string]bool{}}
}

// Observe records the namespace's pods as they are now, and returns how many there are.
func (u *PodUIDs) Observe(t testing.TB) int {
	pods := u.env.Pods(t, u.ns, nil)
	u.record(pods)
	return len(pods)
}

// Watch observes the namespace every 200 ms, through apiserver outages, until the test ends.
func (u *PodUIDs) Watch(t testing.TB) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var pods corev1.PodList
			if err := u.env.Client.List(ctx, &pods, client.InNamespace(u.ns)); err == nil {
				u.record(pods.Items)
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
}

func (u *PodUIDs) record(pods []corev1.Pod) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, p := range pods {
		k := replicaKey(p)
		if u.seen[k] == nil {
			u.seen[k] = map[string]bool{}
		}
		u.seen[k][string(p.UID)] = true
	}
}

// Twice lists the replicas that had more than one pod, with how many.
func (u *PodUIDs) Twice() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for k, uids := range u.seen {
		if len(uids) > 1 {
			out = append(out, fmt.Sprintf("%s (%d pods)", k, len(uids)))
		}
	}
	sort.Strings(out)
	return out
}

// Replicas is how many replicas had a pod.
func (u *PodUIDs) Replicas() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.seen)
}

// WaitFor waits until the namespace has n pods, failing at once on a replica that got a second.
func (u *PodUIDs) WaitFor(t testing.TB, n int) {
	t.Helper()
	EventuallyWithin(t, time.Minute, func() error {
		got := u.Observe(t)
		if twice := u.Twice(); len(twice) > 0 {
			t.Fatalf("replicas created twice: %v", twice)
		}
		return Count("pods", got, n)
	})
}

func replicaKey(p corev1.Pod) string {
	if job := p.Labels[batchv1.JobNameLabel]; job != "" && p.Labels[kubeflowv1.LabelReplicaType] == "" {
		return "Job " + job + " index " + p.Annotations[batchv1.JobCompletionIndexAnnotation]
	}
	return "pod " + p.Name
}

// Unchanged observes the namespace once more and fails the test for every replica that had more
// than one pod.
func (u *PodUIDs) Unchanged(t testing.TB) {
	t.Helper()
	u.Observe(t)
	if twice := u.Twice(); len(twice) > 0 {
		t.Errorf("replicas created twice: %v", twice)
	}
}
