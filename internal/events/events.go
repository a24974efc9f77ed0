// Package events writes kiln's Kubernetes events (events.k8s.io/v1): a Sink, started with the
// manager, and a Recorder per controller. Each event is queued, written once in the background,
// and forgotten.
//
// controller-runtime's recorder (client-go's events broadcaster) keeps every event it wrote for 6
// to 12 minutes, to fold repeats into a series. kiln tells an event only for a transition
// (DECISIONS #8), so there is next to nothing to fold, and at 1,000 TrainJobs those kept events
// were 2.0 MB of the 14.7 MB kiln held. It wrote each event through the typed client, turning
// its options into query parameters by reflection and decoding the answer: recording events was
// 5.7 % of kiln's CPU samples in that burst (docs/performance.md). A Sink sends each event in
// protobuf and reads back its metadata only.
package events

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/client-go/tools/reference"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/kiln-ml/kiln/internal/statuspatch"
)

const (
	// queued is how many events may wait to be written; past it an event is dropped, and logged
	// (client-go's broadcaster drops past 1,000 too).
	queued = 1000
	// writers write events side by side.
	writers = 4
	// tries and retryAfter: an event the apiserver could not be reached for, was too busy to take
	// or failed on (5xx) is tried again after retryAfter (jittered), tries times in all, as
	// client-go does; one it refused (invalid, its namespace being deleted) is not.
	tries      = 12
	retryAfter = 10 * time.Second
	// NoteLimit is the longest note the apiserver takes, in bytes; a longer one is cut.
	NoteLimit = 1024
)

// A Sink only creates events: it writes none twice.
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create

// Sink writes the events of its recorders: a manager Runnable that every replica runs, and that
// the manager stops before its controllers. Its writers go on after that, for the events the
// controllers tell as they stop, until Flush.
type Sink struct {
	client rest.Interface
	scheme *runtime.Scheme
	host   string
	log    logr.Logger
	queue  chan *eventsv1.Event
	// retryAfter is how long a write waits to try again (a test shortens it).
	retryAfter time.Duration

	// pending counts the events queued or being written; dropped, those the full queue refused.
	pending, dropped atomic.Int64
	started          sync.Once
	// stop ends the writers (Flush); writing is their wait group.
	stop    context.CancelFunc
	writing sync.WaitGroup
}

// NewSink writes events through cfg and its HTTP client hc; scheme names the kinds of the
// objects the events are about.
func NewSink(cfg *rest.Config, hc *http.Client, scheme *runtime.Scheme, log logr.Logger) (*Sink, error) {
	c, err := statuspatch.Client(cfg, hc, eventsv1.SchemeGroupVersion, runtime.ContentTypeProtobuf)
	if err != nil {
		return nil, fmt.Errorf("building the client of events: %w", err)
	}
	host, _ := os.Hostname()
	return &Sink{client: c, scheme: scheme, host: host, log: log, queue: make(chan *eventsv1.Event, queued), retryAfter: retryAfter, stop: func() {}}, nil
}

// NeedLeaderElection is false: a replica records events only while it leads, and writes them
// whether it leads or not.
func (s *Sink) NeedLeaderElection() bool { return false }

// Start starts the writers and returns when ctx ends; the writers go on until Flush.
func (s *Sink) Start(ctx context.Context) error {
	s.started.Do(func() {
		var writersCtx context.Context
		writersCtx, s.stop = context.WithCancel(context.WithoutCancel(ctx))
		for range writers {
			s.writing.Go(func() {
				for {
					select {
					case <-writersCtx.Done():
						return
					case ev := <-s.queue:
						s.write(writersCtx, ev)
						s.pending.Add(-1)
					}
				}
			})
		}
	})
	<-ctx.Done()
	return nil
}

// Flush waits, until ctx ends, for the events queued to be written, then stops the writers. The
// manager of kiln's controllers calls it once they have stopped.
func (s *Sink) Flush(ctx context.Context) {
	drained := func(context.Context) (bool, error) { return s.pending.Load() == 0, nil }
	_ = wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, drained)
	s.started.Do(func() {}) // never started: no writer to stop
	s.stop()
	s.writing.Wait()
	if n := s.pending.Load(); n > 0 {
		s.log.Error(nil, "Stopping with events not written; they are lost", "events", n)
	}
}

// write creates ev, trying again while the apiserver cannot be reached or is too busy.
func (s *Sink) write(ctx context.Context, ev *eventsv1.Event) {
	for try := 1; ; try++ {
		err := statuspatch.Send(ctx, s.client.Post().Namespace(ev.Namespace).Resource("events").Body(ev))
		switch {
		case err == nil:
			s.log.V(1).Info(ev.Note, "type", ev.Type, "object", ev.Regarding, "reason", ev.Reason)
			return
		case ctx.Err() != nil:
			return
		case apierrors.IsAlreadyExists(err): // written already: an answer that did not arrive
			return
		case !retried(err):
			s.log.Error(err, "The apiserver refused an event; it is dropped", "object", ev.Regarding, "reason", ev.Reason)
			return
		case try == tries:
			s.log.Error(err, "Writing an event failed; it is dropped after the last try", "object", ev.Regarding, "reason", ev.Reason, "tries", tries)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait.Jitter(s.retryAfter, 0.25)):
		}
	}
}

// retried says whether a write that failed with err may succeed later: the apiserver could not
// be reached (the request never got an answer), was too busy to take it (429) or failed (5xx, a
// proxy's too).
func retried(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == http.StatusTooManyRequests || code >= http.StatusInternalServerError
	}
	var transport *url.Error
	return errors.As(err, &transport)
}

// Recorder is the recorder of events reported by controller (their reportingController, a
// qualified name), from this host (their reportingInstance).
func (s *Sink) Recorder(controller string) recorder.EventRecorder {
	return &sinkRecorder{sink: s, controller: controller, instance: controller + "-" + s.host}
}

type sinkRecorder struct {
	sink                 *Sink
	controller, instance string
}

// Eventf queues an event about regarding.
func (r *sinkRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.AnnotatedEventf(regarding, related, nil, eventtype, reason, action, note, args...)
}

// AnnotatedEventf queues an event about regarding, with annotations.
func (r *sinkRecorder) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	ev, err := r.event(time.Now(), regarding, related, annotations, eventtype, reason, action, fmt.Sprintf(note, args...))
	if err != nil {
		r.sink.log.Error(err, "Not recording an event", "reason", reason)
		return
	}
	r.sink.pending.Add(1)
	select {
	case r.sink.queue <- ev:
	default:
		r.sink.pending.Add(-1)
		if n := r.sink.dropped.Add(1); n&(n-1) == 0 { // the 1st, 2nd, 4th, 8th, … dropped
			r.sink.log.Error(nil, "Too many events waiting to be written; dropped", "object", ev.Regarding, "reason", reason, "waiting", queued, "dropped", n)
		}
	}
}

// event is the event as client-go's recorder makes it, its note cut to NoteLimit.
func (r *sinkRecorder) event(now time.Time, regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string) (*eventsv1.Event, error) {
	if !util.ValidateEventType(eventtype) {
		return nil, fmt.Errorf("event type %q: want %s or %s", eventtype, corev1.EventTypeNormal, corev1.EventTypeWarning)
	}
	ref, err := reference.GetReference(r.sink.scheme, regarding)
	if err != nil {
		return nil, fmt.Errorf("referring to the object the event is about: %w", err)
	}
	var relatedRef *corev1.ObjectReference
	if related != nil {
		relatedRef, _ = reference.GetReference(r.sink.scheme, related) // as client-go: the event without it
	}
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: util.GenerateEventName(ref.Name, now.UnixNano()), Namespace: ns, Annotations: annotations},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: r.controller,
		ReportingInstance:   r.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Related:             relatedRef,
		Note:                cut(note, NoteLimit),
		Type:                eventtype,
	}, nil
}

// cut is s in at most n bytes, cut at a character's start.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
