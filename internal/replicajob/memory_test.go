package replicajob

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// What the engine remembers belongs to one job: a new job of the same name starts from nothing,
// and forget drops all of it, expectations included.
func TestMemoryIsOneJobsAndForgetDropsAllOfIt(t *testing.T) {
	m := newMemory()
	key := types.NamespacedName{Namespace: "ns", Name: "dist"}
	m.update(key, "a", func(j *jobMemory) { j.refused, j.secretsCreated, j.carried = "quota", true, map[string]int32{"p": 1} })
	m.statusWritten(key, "a", "7", time.Unix(0, 0))
	if got := m.of(key, "a"); got.refused != "quota" || !got.secretsCreated || got.carried["p"] != 1 {
		t.Errorf("memory of job a = %+v", got)
	}
	if ok, _ := m.satisfied(key, "a", "7", Family{}, time.Unix(1, 0)); ok {
		t.Error("satisfied while the cache still shows the job at the version the status was written on")
	}
	if got := m.of(key, "b"); got.refused != "" || got.secretsCreated || got.carried != nil || !satisfied(m, key, "b") {
		t.Errorf("a new job of the same name remembers %+v", got)
	}
	m.update(key, "a", func(*jobMemory) {})
	m.forget(key)
	if got := m.of(key, "a"); got.refused != "" || got.secretsCreated || !satisfied(m, key, "a") {
		t.Errorf("after forget: %+v", got)
	}
}

// satisfied is whether the job of that UID waits for no write of its own at version 7.
func satisfied(m *memory, key types.NamespacedName, uid types.UID) bool {
	ok, _ := m.satisfied(key, uid, "7", Family{}, time.Unix(1, 0))
	return ok
}

// Past the timeout a job waits no more, and what the cache never showed is said.
func TestExpectationsLapseAndSayWhatWasNeverSeen(t *testing.T) {
	m := newMemory()
	key := types.NamespacedName{Namespace: "ns", Name: "dist"}
	start := time.Unix(100, 0)
	m.expect(key, "a", &Plan{
		CreatePods:   []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "dist-worker-1"}}},
		DeletePods:   []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "dist-worker-0", UID: "p0"}}},
		MarkRestarts: []restartMark{{Service: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "dist-worker-0"}}, PodUID: "p0"}},
	}, start)
	m.statusWritten(key, "a", "7", start)
	seen := Family{Pods: []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "dist-worker-0", UID: "p0"}}}}
	if ok, lapsed := m.satisfied(key, "a", "7", seen, start.Add(expectationsTimeout)); ok || lapsed != "" {
		t.Errorf("at the timeout: satisfied %v, lapsed %q; want it to wait still", ok, lapsed)
	}
	ok, lapsed := m.satisfied(key, "a", "7", seen, start.Add(expectationsTimeout+time.Second))
	want := "create pod/dist-worker-1, delete p0, restart mark on service/dist-worker-0 for pod p0, status written on resourceVersion 7"
	if !ok || lapsed != want {
		t.Errorf("past the timeout: satisfied %v, lapsed %q; want true and %q", ok, lapsed, want)
	}
	if ok, lapsed := m.satisfied(key, "a", "7", seen, start.Add(expectationsTimeout+2*time.Second)); !ok || lapsed != "" {
		t.Errorf("after it lapsed: satisfied %v, lapsed %q; want true, nothing said again", ok, lapsed)
	}
}

// An extra deleted while its sync was under way (after the reconcile read the memory, before it
// noted the sync) is synced again: the next plan must not take the digest for done.
func TestExtraDeletedDuringItsSyncIsSyncedAgain(t *testing.T) {
	m := newMemory()
	key := types.NamespacedName{Namespace: "ns", Name: "mpi"}
	digest := [32]byte{1}
	began := m.of(key, "a")
	m.extraLost(key, "a") // the watch saw the ServiceAccount just applied deleted
	m.extrasSynced(key, began, digest, "")
	if got := m.of(key, "a").extras; got == digest {
		t.Fatal("a sync that began before an extra's deletion was taken for the extras' last sync")
	}
	began = m.of(key, "a")
	m.extrasSynced(key, began, digest, "")
	if got := m.of(key, "a").extras; got != digest {
		t.Errorf("a sync with no deletion since it began: extras %x, want %x", got, digest)
	}
	m.extrasSynced(key, m.of(key, "a"), [32]byte{2}, "ConfigMap x is in the way")
	if got := m.of(key, "a"); got.extras != digest || got.conflict == "" {
		t.Errorf("a sync stopped by a conflict: %+v, want the last digest kept and the conflict noted", got)
	}
}
