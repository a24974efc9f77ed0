// Package ttl is ttlSecondsAfterFinished, the rule by which every kiln job kind deletes a finished
// job: the kubeflow.org kinds' runPolicy and the PyJob's spec alike.
package ttl

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Left is how long a job that finished at completion keeps before its TTL of seconds runs out (0
// once it has); has is false for a job with no TTL or that has not finished.
func Left(seconds *int32, completion *metav1.Time, now time.Time) (left time.Duration, has bool) {
	if seconds == nil || completion == nil {
		return 0, false
	}
	return max(0, completion.Add(time.Duration(*seconds)*time.Second).Sub(now)), true
}
