// Package events checks kiln's event sink against a real kube-apiserver: what it writes is
// taken, and read back as kubectl and the Kubeflow SDK read events.
package events

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/events"
	"github.com/kiln-ml/kiln/internal/manager"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env, nil)) }

// newSink is a sink of events to the test's apiserver, as the manager makes it, not started; it
// is flushed when the test ends, its writers stopped before then.
func newSink(t *testing.T) *events.Sink {
	t.Helper()
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := events.NewSink(env.Config, hc, manager.Scheme(), testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sink.Flush(ctx)
	})
	return sink
}

// Events about kiln's kinds are written in protobuf and taken; a note longer than the apiserver
// takes is cut, not refused; each shows in the core/v1 view of events with its reporter.
func TestTheSinkWritesEventsTheApiserverTakes(t *testing.T) {
	sink := newSink(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = sink.Start(ctx) }()

	ns := env.Namespace(t)
	job := builder.TFJob("evented", ns).Replicas("Worker", 1).Obj()
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	rec := sink.Recorder("kiln-tfjob")
	rec.Eventf(job, nil, corev1.EventTypeNormal, "TFJobSucceeded", "TFJobSucceeded", "TFJob %s is successfully completed.", job.GetName())
	long := strings.Repeat("é", events.NoteLimit) // twice the limit, in bytes
	rec.Eventf(job, nil, corev1.EventTypeWarning, "FailedCreatePods", "FailedCreatePods", "%s", long)

	testenv.Eventually(t, func() error {
		var list corev1.EventList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		seen := map[string]corev1.Event{}
		for _, ev := range list.Items {
			seen[ev.Reason] = ev
		}
		done, cutNote := seen["TFJobSucceeded"], seen["FailedCreatePods"]
		if done.Name == "" || cutNote.Name == "" {
			return fmt.Errorf("events %v, want TFJobSucceeded and FailedCreatePods", list.Items)
		}
		if done.InvolvedObject.Kind != kubeflowv1.TFJobKind || done.InvolvedObject.Name != "evented" || done.InvolvedObject.UID != job.GetUID() ||
			done.Message != "TFJob evented is successfully completed." || done.Type != corev1.EventTypeNormal || done.ReportingController != "kiln-tfjob" {
			t.Fatalf("event %+v", done)
		}
		if len(cutNote.Message) != events.NoteLimit || !strings.HasPrefix(long, cutNote.Message) {
			t.Fatalf("the long note came back as %d bytes, want its first %d", len(cutNote.Message), events.NoteLimit)
		}
		return nil
	})
}

// An event the apiserver refuses (its namespace is gone) is dropped at once, and the events after
// it are written.
func TestARefusedEventDoesNotHoldTheOthersUp(t *testing.T) {
	sink := newSink(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := sink.Recorder("kiln-tfjob")
	ns := env.Namespace(t)
	nowhere := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "no-such-namespace"}}
	for range 8 { // more than the sink has writers
		rec.Eventf(nowhere, nil, corev1.EventTypeNormal, "Lost", "Lost", "in a namespace that is not there")
	}
	here := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}}
	rec.Eventf(here, nil, corev1.EventTypeNormal, "Kept", "Kept", "after the refused ones")
	go func() { _ = sink.Start(ctx) }()
	testenv.EventuallyWithin(t, 5*time.Second, func() error { // within 5 s: a refused event is not tried again after 10 s
		var list corev1.EventList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Reason == "Kept" {
				return nil
			}
		}
		return fmt.Errorf("no Kept event among %d", len(list.Items))
	})
}
