package restart

import (
	"testing"
	"time"

	"github.com/kiln-ml/kiln/test/testenv"
)

// podUIDs remembers the first UID seen for each pod name of a namespace. Pod names are
// deterministic, so a name whose UID changes is a replica index that got a second pod.
type podUIDs struct {
	ns   string
	seen map[string]string
}

func newPodUIDs(ns string) *podUIDs { return &podUIDs{ns: ns, seen: map[string]string{}} }

// waitFor waits until the namespace has n pods, failing at once on a pod created twice.
func (u *podUIDs) waitFor(t *testing.T, n int) {
	t.Helper()
	testenv.EventuallyWithin(t, time.Minute, func() error {
		pods := env.Pods(t, u.ns, nil)
		for _, p := range pods {
			if uid, ok := u.seen[p.Name]; ok && uid != string(p.UID) {
				t.Fatalf("pod %s was created twice (UIDs %s and %s)", p.Name, uid, p.UID)
			}
			u.seen[p.Name] = string(p.UID)
		}
		return testenv.Count("pods", len(pods), n)
	})
}

// unchanged fails the test for every pod that is no longer the one first seen under its name.
func (u *podUIDs) unchanged(t *testing.T) {
	t.Helper()
	for _, p := range env.Pods(t, u.ns, nil) {
		if u.seen[p.Name] != string(p.UID) {
			t.Errorf("pod %s was recreated", p.Name)
		}
	}
}
