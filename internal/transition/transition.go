// Package transition tells what a controller's write changed: an event for each transition worth
// telling and the metrics it moves. Each controller works out its Told purely, from the status it
// read and the one it wrote, and tells it once the write succeeded, so a transition is told once,
// never for a status that was not written, and not again after an operator restart.
package transition

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/kiln-ml/kiln/internal/metrics"
)

// Event is a Kubernetes event on the object written.
type Event struct {
	Type, Reason, Message string
}

// Change is a training job's transition that the job metrics (training_operator_jobs_*, kiln_job_*)
// count.
type Change int

const (
	// Created: the job's first status was written.
	Created Change = iota + 1
	// Running: the job runs for the first time (its time to running is observed).
	Running
	// Restarted: the job started restarting failed replicas.
	Restarted
	// Succeeded and Failed: the job finished (how long it ran is observed).
	Succeeded
	Failed
	// Deleted: the job was deleted after its TTL.
	Deleted
)

// Told is what one write tells.
type Told struct {
	Events []Event
	// Changes are a training job's transitions; Start and Completion its written times.
	Changes           []Change
	Start, Completion *metav1.Time
	// Ready, when set, is how long an InferenceService took to become Ready.
	Ready *time.Duration
}

// Event adds an event.
func (t *Told) Event(typ, reason, message string) {
	t.Events = append(t.Events, Event{Type: typ, Reason: reason, Message: message})
}

// Teller tells for the objects of one controller.
type Teller struct {
	Recorder recorder.EventRecorder
	// Framework is the framework label of the job metrics ("tensorflow", "pyjob").
	Framework string
	// Now is the clock of the job metrics' times.
	Now func() time.Time
}

// Tell records told on obj.
func (t Teller) Tell(obj client.Object, told Told) {
	for _, e := range told.Events {
		t.Recorder.Eventf(obj, nil, e.Type, e.Reason, e.Reason, "%s", e.Message)
	}
	ns, fw := obj.GetNamespace(), t.Framework
	for _, c := range told.Changes {
		switch c {
		case Created:
			metrics.JobsCreated.WithLabelValues(ns, fw).Inc()
		case Running:
			metrics.TimeToRunning.WithLabelValues(fw).Observe(metrics.Seconds(t.Now().Sub(obj.GetCreationTimestamp().Time)))
		case Restarted:
			metrics.JobsRestarted.WithLabelValues(ns, fw).Inc()
		case Succeeded, Failed:
			metrics.Finished(ns, fw, c == Succeeded, told.Start, told.Completion)
		case Deleted:
			metrics.JobsDeleted.WithLabelValues(ns, fw).Inc()
		}
	}
	if told.Ready != nil {
		metrics.TimeToReady.Observe(metrics.Seconds(*told.Ready))
	}
}
