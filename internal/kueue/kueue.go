// Package kueue holds what kiln knows of Kueue: the labels that put a workload in a queue, which
// kiln hands on to the objects Kueue manages, and how kiln says that Kueue holds a job.
package kueue

import "fmt"

// QueueLabel puts a workload in a LocalQueue; PriorityLabel gives it a WorkloadPriorityClass.
const (
	QueueLabel    = "kueue.x-k8s.io/queue-name"
	PriorityLabel = "kueue.x-k8s.io/priority-class"
)

// CopyLabels copies from's queue and priority labels into to.
func CopyLabels(from, to map[string]string) {
	for _, l := range []string{QueueLabel, PriorityLabel} {
		if v, ok := from[l]; ok {
			to[l] = v
		}
	}
}

// Waiting says that a job waits for Kueue, or is "" when labels put it in no queue.
func Waiting(labels map[string]string) string {
	q := labels[QueueLabel]
	if q == "" {
		return ""
	}
	return fmt.Sprintf("waiting for Kueue to admit it from LocalQueue %s", q)
}
