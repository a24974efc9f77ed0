package events

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

func testRecorder(t *testing.T) *sinkRecorder {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return &sinkRecorder{sink: &Sink{scheme: scheme, host: "host"}, controller: "kiln-test", instance: "kiln-test-host"}
}

// An event is made as client-go's recorder makes it: named after its object and the time, in its
// object's namespace, reported by the controller from this host.
func TestEventIsMadeAsClientGoMakesIt(t *testing.T) {
	r := testRecorder(t)
	now := time.Date(2026, 12, 6, 20, 30, 0, 123456789, time.UTC)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train-0", Namespace: "team", UID: "u1", ResourceVersion: "7"}} // no kind set, as from the cache
	ev, err := r.event(now, pod, nil, nil, corev1.EventTypeWarning, "Failed", "Failed", "exited with code 1")
	if err != nil {
		t.Fatal(err)
	}
	if want := "train-0.18eec42d47bb9d15"; ev.Name != want || ev.Namespace != "team" {
		t.Errorf("event %s/%s, want team/%s", ev.Namespace, ev.Name, want)
	}
	if ev.Regarding.Kind != "Pod" || ev.Regarding.APIVersion != "v1" || ev.Regarding.Name != "train-0" || ev.Regarding.UID != "u1" || ev.Regarding.ResourceVersion != "7" {
		t.Errorf("regarding %+v, want the pod, its kind from the scheme", ev.Regarding)
	}
	if ev.ReportingController != "kiln-test" || ev.ReportingInstance != "kiln-test-host" || ev.Type != "Warning" || ev.Reason != "Failed" ||
		ev.Action != "Failed" || ev.Note != "exited with code 1" || !ev.EventTime.Time.Equal(now) || ev.Related != nil {
		t.Errorf("event %+v", ev)
	}

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	if ev, err := r.event(now, node, nil, nil, corev1.EventTypeNormal, "Seen", "Seen", ""); err != nil || ev.Namespace != metav1.NamespaceDefault {
		t.Errorf("an event about a cluster-scoped object: %v in namespace %q, want %q", err, ev.Namespace, metav1.NamespaceDefault)
	}
	if _, err := r.event(now, pod, nil, nil, "Info", "Seen", "Seen", ""); err == nil {
		t.Error("an event of type Info was made; want Normal or Warning only")
	}
	type unknown struct{ corev1.Pod }
	if _, err := r.event(now, &unknown{}, nil, nil, corev1.EventTypeNormal, "Seen", "Seen", ""); err == nil {
		t.Error("an event about an object of a kind the scheme does not know was made")
	}
}

// A note longer than the apiserver takes is cut, never inside a character.
func TestLongNotesAreCutAtACharacter(t *testing.T) {
	for _, c := range []struct {
		note string
		want int
	}{
		{"short", 5},
		{strings.Repeat("a", NoteLimit), NoteLimit},
		{strings.Repeat("a", NoteLimit+1), NoteLimit},
		{strings.Repeat("a", NoteLimit-1) + "é", NoteLimit - 1}, // é is two bytes: the 1,024th is its second
		{strings.Repeat("€", 400), 1023},                        // three bytes each
	} {
		got := cut(c.note, NoteLimit)
		if len(got) != c.want || !utf8.ValidString(got) || !strings.HasPrefix(c.note, got) {
			t.Errorf("cut of a %d-byte note: %d bytes (valid %v), want %d", len(c.note), len(got), utf8.ValidString(got), c.want)
		}
	}
}
