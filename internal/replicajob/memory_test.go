package replicajob

import (
	"testing"
	"time"

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
	if m.satisfied(key, "a", "7", Family{}, time.Unix(1, 0)) {
		t.Error("satisfied while the cache still shows the job at the version the status was written on")
	}
	if got := m.of(key, "b"); got.refused != "" || got.secretsCreated || got.carried != nil || !m.satisfied(key, "b", "7", Family{}, time.Unix(1, 0)) {
		t.Errorf("a new job of the same name remembers %+v", got)
	}
	m.update(key, "a", func(*jobMemory) {})
	m.forget(key)
	if got := m.of(key, "a"); got.refused != "" || got.secretsCreated || !m.satisfied(key, "a", "7", Family{}, time.Unix(1, 0)) {
		t.Errorf("after forget: %+v", got)
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
