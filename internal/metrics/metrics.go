// Package metrics holds kiln's Prometheus metrics, served on the manager's /metrics with
// controller-runtime's own. Kubeflow's training_operator_jobs_* counters keep their names and
// labels, but count transitions kiln writes itself, so an operator restart re-counts nothing.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	jobLabels = []string{"job_namespace", "framework"}

	// JobsCreated counts jobs kiln saw for the first time (their Created condition).
	JobsCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "training_operator_jobs_created_total", Help: "Training jobs kiln accepted (Created condition written)."}, jobLabels)
	// JobsDeleted counts jobs deleted by ttlSecondsAfterFinished.
	JobsDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "training_operator_jobs_deleted_total", Help: "Training jobs kiln deleted after their TTL."}, jobLabels)
	// JobsSuccessful counts jobs that succeeded.
	JobsSuccessful = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "training_operator_jobs_successful_total", Help: "Training jobs that succeeded."}, jobLabels)
	// JobsFailed counts jobs that failed, on every path (replica failure, backoff, deadline).
	JobsFailed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "training_operator_jobs_failed_total", Help: "Training jobs that failed."}, jobLabels)
	// JobsRestarted counts transitions to Restarting.
	JobsRestarted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "training_operator_jobs_restarted_total", Help: "Times training jobs started restarting failed replicas."}, jobLabels)

	// TimeToRunning is how long jobs took from creation until kiln saw them Running.
	TimeToRunning = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "kiln_job_time_to_running_seconds", Help: "Time from a job's creation until it first ran.",
		Buckets: prometheus.ExponentialBuckets(0.25, 2, 14)}, []string{"framework"})
	// Duration is how long finished jobs ran, from start to completion.
	Duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "kiln_job_duration_seconds", Help: "Time from a job's start until it succeeded or failed.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 18)}, []string{"framework", "outcome"})
	// BurstHold is how long new jobs' pods and first status waited for the burst of submissions
	// the jobs arrived in (internal/burst); its count is how many jobs waited.
	BurstHold = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "kiln_burst_hold_seconds", Help: "Time new jobs' pods and first status waited for the burst of job submissions they arrived in to end.",
		Buckets: prometheus.ExponentialBuckets(0.125, 2, 10)})
	// TimeToReady is how long InferenceServices took to become Ready.
	TimeToReady = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "kiln_inferenceservice_time_to_ready_seconds", Help: "Time until an InferenceService became Ready (from creation, or from when it stopped being ready).",
		Buckets: prometheus.ExponentialBuckets(0.25, 2, 14)})
)

func init() {
	crmetrics.Registry.MustRegister(JobsCreated, JobsDeleted, JobsSuccessful, JobsFailed, JobsRestarted, TimeToRunning, Duration, BurstHold, TimeToReady)
}

// Seconds is d in seconds, never negative (clock skew between the apiserver and kiln).
func Seconds(d time.Duration) float64 { return max(0, d.Seconds()) }

// Finished counts a job that succeeded or failed in its namespace and framework, and observes
// how long it ran when it has both times.
func Finished(namespace, framework string, succeeded bool, start, completion *metav1.Time) {
	counter, outcome := JobsFailed, "failed"
	if succeeded {
		counter, outcome = JobsSuccessful, "succeeded"
	}
	counter.WithLabelValues(namespace, framework).Inc()
	if start != nil && completion != nil {
		Duration.WithLabelValues(framework, outcome).Observe(Seconds(completion.Sub(start.Time)))
	}
}
