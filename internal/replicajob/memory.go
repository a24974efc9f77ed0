package replicajob

import (
	"crypto/sha256"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-ml/kiln/internal/gang"
)

// memory is everything the engine remembers of its jobs between reconciles, beyond what the
// cluster shows: one entry per job, dropped by forget when the job is gone. An entry belongs to
// one job (its UID): a new job of the same name starts from nothing. None of it needs to survive a
// restart: a restarted kiln syncs every job's extras and secrets once, writes pending statuses at
// once, and waits for no earlier write.
type memory struct {
	mu   sync.Mutex
	jobs map[types.NamespacedName]*jobMemory
}

// jobMemory is what the engine remembers of one job.
type jobMemory struct {
	uid types.UID
	// expected are the writes the cache has not shown yet (expectations.go); nil: none.
	expected *pending
	// status is when the job's unwritten status change was first seen, and when a condition among
	// it first turned (statusWait).
	status pendingStatus
	// group is what was last written of the job's gang group (gang.Keeper).
	group gang.Synced
	// extras is the Plan.ExtrasDigest of the extras last synced; zero: never. extrasLost counts
	// the deletions of the job's extras seen (extraDeleted): a sync records its digest only if
	// none was seen since its reconcile began, so an extra deleted while it was being applied is
	// applied again.
	extras     [sha256.Size]byte
	extrasLost uint64
	// secretsCreated says this process created the job's secrets (createSecrets).
	secretsCreated bool
	// carried is the last Plan.Carried: retry counts of kinds without services between a failed
	// pod's deletion and its replacement's creation (see AnnotationRestarts).
	carried map[string]int32
	// refused and refusedServices are why the apiserver last refused to create the job's pods
	// and services (a quota, an admission policy), until a creation succeeds: the next plan says
	// it in the status.
	refused, refusedServices string
	// refusedExtras is why the apiserver last refused the job's secrets or extras (a quota, a
	// policy), until they are written: the next plan says it in the status.
	refusedExtras string
	// podConflict names an object of a pod's name that is not the job's, until a creation succeeds.
	podConflict string
	// conflict names the object in the way of the job's extras, until they are synced: the next
	// plan holds the pods (they would mount that object) and says why.
	conflict string
	// validated is the generation whose spec invalid holds the errors of (0: none validated):
	// a spec is validated once, not at every reconcile (TFJob's check builds a TF_CONFIG).
	validated int64
	invalid   field.ErrorList
}

// pendingStatus is when a job's unwritten status change was first seen, and when a condition
// among it first turned.
type pendingStatus struct {
	since, turned time.Time
}

func newMemory() *memory { return &memory{jobs: map[types.NamespacedName]*jobMemory{}} }

// of is a copy of what is remembered of the job of that UID (zero: nothing).
func (m *memory) of(key types.NamespacedName, uid types.UID) jobMemory {
	m.mu.Lock()
	defer m.mu.Unlock()
	if j := m.jobs[key]; j != nil && j.uid == uid {
		c := *j
		c.expected = nil // expectations are read through their own methods
		return c
	}
	return jobMemory{uid: uid}
}

// update changes what is remembered of the job of that UID (starting from nothing for a new job).
func (m *memory) update(key types.NamespacedName, uid types.UID, change func(*jobMemory)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	change(m.entry(key, uid))
}

// entry is the job's entry, made anew for a job of another UID; m.mu is held.
func (m *memory) entry(key types.NamespacedName, uid types.UID) *jobMemory {
	j := m.jobs[key]
	if j == nil || j.uid != uid {
		j = &jobMemory{uid: uid}
		m.jobs[key] = j
	}
	return j
}

// extraLost notes that one of the job's extras was deleted: its extras are synced again.
func (m *memory) extraLost(key types.NamespacedName, uid types.UID) {
	m.update(key, uid, func(j *jobMemory) { j.extras, j.extrasLost = [sha256.Size]byte{}, j.extrasLost+1 })
}

// extrasSynced notes the sync of the extras of digest planned from was (the memory the
// reconcile began with), or the conflict that stopped it: the digest is kept only if no extra
// was deleted since, for the sync may have applied one just before its deletion.
func (m *memory) extrasSynced(key types.NamespacedName, was jobMemory, digest [sha256.Size]byte, conflict string) {
	m.update(key, was.uid, func(j *jobMemory) {
		if j.conflict = conflict; conflict == "" && j.extrasLost == was.extrasLost {
			j.extras = digest
		}
	})
}

// forget drops everything remembered of a job that is gone, and returns the UID it had.
func (m *memory) forget(key types.NamespacedName) (uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if j := m.jobs[key]; j != nil {
		uid = j.uid
	}
	delete(m.jobs, key)
	return uid
}
