package owned

import (
	"crypto/sha256"
	"encoding/json"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Applied remembers, for each object a kit applied, what it applied (a hash) and the object's
// version right after: an apply of the same content to an object nobody changed since would
// change nothing, and is not sent (docs/decisions.md, 19). An object's change shows in its
// generation, for the kinds that keep one (a Deployment: its status updates leave it), else in
// its resourceVersion (a Service). A change of only the labels or annotations of an object with
// a generation goes unseen until the next change of what kiln applies, or a restart.
type Applied struct {
	mu sync.Mutex
	m  map[types.UID]applied
}

type applied struct {
	sum             [sha256.Size]byte
	generation      int64
	resourceVersion string
}

// maxApplied bounds what Applied remembers (objects deleted by the garbage collector are never
// forgotten otherwise): past it, it starts again empty, and the next applies are sent.
const maxApplied = 200_000

// NewApplied returns an empty Applied.
func NewApplied() *Applied { return &Applied{m: map[types.UID]applied{}} }

// sum is the hash of what obj would apply (nil a: none).
func (a *Applied) sum(obj client.Object) [sha256.Size]byte {
	if a == nil {
		return [sha256.Size]byte{}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return [sha256.Size]byte{} // never equal to a recorded sum: applied
	}
	return sha256.Sum256(b)
}

// unchanged says whether applying content sum to existing (the cached object; nil when there is
// none) would change nothing: the kit applied the same to it, and nobody changed it since.
func (a *Applied) unchanged(existing client.Object, sum [sha256.Size]byte) bool {
	if a == nil || existing == nil || sum == ([sha256.Size]byte{}) {
		return false
	}
	a.mu.Lock()
	last, ok := a.m[existing.GetUID()]
	a.mu.Unlock()
	if !ok || last.sum != sum {
		return false
	}
	if last.generation > 0 {
		return existing.GetGeneration() == last.generation
	}
	return existing.GetResourceVersion() == last.resourceVersion
}

// record remembers that content sum was applied, obj being the apply's answer.
func (a *Applied) record(obj client.Object, sum [sha256.Size]byte) {
	if a == nil || obj.GetUID() == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.m) >= maxApplied {
		a.m = map[types.UID]applied{}
	}
	a.m[obj.GetUID()] = applied{sum: sum, generation: obj.GetGeneration(), resourceVersion: obj.GetResourceVersion()}
}

// forget drops what was remembered of obj (deleted).
func (a *Applied) forget(obj client.Object) {
	if a == nil {
		return
	}
	a.mu.Lock()
	delete(a.m, obj.GetUID())
	a.mu.Unlock()
}
