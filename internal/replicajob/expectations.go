package replicajob

import (
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// expectationsTimeout bounds how long a job waits for the cache to show its own writes; past it
// (say, a pod created and deleted by someone else before the cache saw it) the job goes on.
const expectationsTimeout = 2 * time.Minute

// Expectations are the writes of a job whose effect the informer cache has not shown yet, kept
// in the job's memory (jobMemory.expected). A job is not planned again until the cache reflects
// them: planning from a stale cache could count a replaced pod twice or miss a restart.
// Deterministic names make a second create of the same replica fail with AlreadyExists anyway;
// expectations keep the counting right.
type pending struct {
	// statusBase is the resourceVersion our last status write was based on: while the cache still
	// shows the job at that version, it has not seen the write.
	statusBase string
	since      time.Time
	creates    map[string]bool    // "pod/<name>", "service/<name>" or "job/<name>"
	deletes    map[types.UID]bool // pods, services and batch Jobs
	restarts   map[string]string  // service name -> AnnotationRestartedPod value written
}

// expect records the writes of a plan before they are made.
func (m *memory) expect(key types.NamespacedName, uid types.UID, p *Plan, now time.Time) {
	w := newPending(now)
	for _, pod := range p.CreatePods {
		w.creates["pod/"+pod.Name] = true
	}
	for _, svc := range p.CreateServices {
		w.creates["service/"+svc.Name] = true
	}
	for _, j := range p.CreateJobs {
		w.creates["job/"+j.Name] = true
	}
	for _, j := range p.DeleteJobs {
		w.deletes[j.UID] = true
	}
	for _, pod := range p.DeletePods {
		w.deletes[pod.UID] = true
	}
	for _, svc := range p.DeleteServices {
		w.deletes[svc.UID] = true
	}
	for _, m := range p.MarkRestarts {
		w.restarts[m.Service.Name] = m.PodUID
	}
	if w.empty() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entry(key, uid).expected = w
}

// statusWritten records that the job's status was written on top of resourceVersion base.
func (m *memory) statusWritten(key types.NamespacedName, uid types.UID, base string, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.entry(key, uid)
	if j.expected == nil {
		j.expected = newPending(now)
	}
	j.expected.statusBase = base
	j.status = pendingStatus{}
}

func newPending(now time.Time) *pending {
	return &pending{since: now, creates: map[string]bool{}, deletes: map[types.UID]bool{}, restarts: map[string]string{}}
}

func (w *pending) empty() bool {
	return len(w.creates)+len(w.deletes)+len(w.restarts) == 0 && w.statusBase == ""
}

// failed forgets an expectation whose write did not happen.
func (m *memory) failed(key types.NamespacedName, create string, deleted types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if j := m.jobs[key]; j != nil && j.expected != nil {
		forgetWrite(j.expected, create, deleted)
	}
}

func forgetWrite(w *pending, create string, uid types.UID) {
	if create != "" {
		delete(w.creates, create)
	}
	if uid != "" {
		delete(w.deletes, uid)
	}
}

// satisfied reports whether the cache shows every write recorded for the job (with this UID and
// resourceVersion), given what it controls. Past expectationsTimeout it gives up waiting: lapsed
// then says which writes the cache never showed (for the log: a watch that lost events, or a
// write kiln expects wrongly).
func (m *memory) satisfied(key types.NamespacedName, uid types.UID, rv string, kids Family, now time.Time) (ok bool, lapsed string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.jobs[key]
	if j == nil || j.uid != uid || j.expected == nil {
		return true, ""
	}
	w := j.expected
	if now.Sub(w.since) > expectationsTimeout {
		j.expected = nil
		return true, w.String()
	}
	if w.statusBase != "" && w.statusBase != rv {
		w.statusBase = ""
	}
	seen := map[types.UID]bool{}
	for _, b := range kids.Jobs {
		delete(w.creates, "job/"+b.Name)
		if b.DeletionTimestamp == nil {
			seen[b.UID] = true
		}
	}
	for _, p := range kids.Pods {
		delete(w.creates, "pod/"+p.Name)
		if p.DeletionTimestamp == nil {
			seen[p.UID] = true
		}
	}
	for _, s := range kids.Services {
		delete(w.creates, "service/"+s.Name)
		if s.DeletionTimestamp == nil {
			seen[s.UID] = true
		}
		if uid, ok := w.restarts[s.Name]; ok && s.Annotations[AnnotationRestartedPod] == uid {
			delete(w.restarts, s.Name)
		}
	}
	for uid := range w.deletes {
		if !seen[uid] {
			delete(w.deletes, uid)
		}
	}
	if !w.empty() {
		return false, ""
	}
	j.expected = nil
	return true, ""
}

// String lists the writes still expected, in a fixed order.
func (w *pending) String() string {
	var out []string
	for _, c := range slices.Sorted(maps.Keys(w.creates)) {
		out = append(out, "create "+c)
	}
	for _, uid := range slices.Sorted(maps.Keys(w.deletes)) {
		out = append(out, "delete "+string(uid))
	}
	for _, svc := range slices.Sorted(maps.Keys(w.restarts)) {
		out = append(out, "restart mark on service/"+svc+" for pod "+w.restarts[svc])
	}
	if w.statusBase != "" {
		out = append(out, "status written on resourceVersion "+w.statusBase)
	}
	return strings.Join(out, ", ")
}
