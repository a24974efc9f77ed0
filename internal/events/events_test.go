package events

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
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
	if ev, err := r.event(now, node, nil, nil, corev1.EventTypeNormal, "Seen", "Seen", ""); err != nil {
		t.Errorf("an event about a cluster-scoped object: %v", err)
	} else if ev.Namespace != metav1.NamespaceDefault {
		t.Errorf("an event about a cluster-scoped object is in namespace %q, want %q", ev.Namespace, metav1.NamespaceDefault)
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

// apiserver answers event writes by their reason, counting the tries of each: Flaky's first
// connection breaks, Busy's first answer is 503, Refused is refused (422), and every other is
// created.
type apiserver struct {
	mu          sync.Mutex
	tries       map[string]int
	contentType string
}

func (a *apiserver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	obj, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	ev, ok := obj.(*eventsv1.Event)
	if err != nil || !ok || r.Method != http.MethodPost || r.URL.Path != "/apis/events.k8s.io/v1/namespaces/team/events" {
		http.Error(w, fmt.Sprintf("unexpected %s %s (%v)", r.Method, r.URL.Path, err), http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	a.tries[ev.Reason]++
	try := a.tries[ev.Reason]
	a.contentType = r.Header.Get("Content-Type")
	a.mu.Unlock()
	status := func(code int, reason metav1.StatusReason) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: int32(code), Reason: reason})
	}
	switch {
	case ev.Reason == "Flaky" && try == 1:
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	case ev.Reason == "Busy" && try == 1:
		status(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable)
	case ev.Reason == "Refused":
		status(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{}`))
	}
}

// A write the apiserver did not answer, or was too busy to take, is tried again; one it refused is
// not. Events told before the sink starts are written, and Flush waits for them all.
func TestWritesAreTriedAgainOnlyWhenTheyMaySucceed(t *testing.T) {
	api := &apiserver{tries: map[string]int{}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	sink, err := NewSink(&rest.Config{Host: srv.URL}, srv.Client(), scheme, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	sink.retryAfter = 10 * time.Millisecond
	rec := sink.Recorder("kiln-test")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "team"}}
	for _, reason := range []string{"Flaky", "Busy", "Refused", "Fine"} {
		rec.Eventf(pod, nil, corev1.EventTypeNormal, reason, reason, "note")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = sink.Start(ctx) }()
	cancel() // as the manager stops its runnables: the writers go on until Flush
	flush, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	sink.Flush(flush)

	api.mu.Lock()
	defer api.mu.Unlock()
	if want := map[string]int{"Flaky": 2, "Busy": 2, "Refused": 1, "Fine": 1}; !maps.Equal(api.tries, want) {
		t.Errorf("tries by event: %v, want %v", api.tries, want)
	}
	if api.contentType != runtime.ContentTypeProtobuf {
		t.Errorf("events sent as %q, want protobuf", api.contentType)
	}
	if n := sink.pending.Load(); n != 0 {
		t.Errorf("%d events left unwritten after Flush", n)
	}
}
