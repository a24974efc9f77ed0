package pyjob

import (
	"fmt"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	"github.com/kiln-ml/kiln/internal/kueue"
	"github.com/kiln-ml/kiln/internal/stuck"
)

// observed is what a reconcile found of a PyJob's world: its batch Job (nil: none yet) and
// pods; problem, what keeps kiln from running it (a name taken by someone else's object, a child
// the apiserver refuses);
// waiting, why its workers' gang is not placed yet; reusedClaim, an earlier run's output claim
// it mounts.
type observed struct {
	job         *batchv1.Job
	pods        []corev1.Pod
	problem     problem
	waiting     string
	reusedClaim *corev1.PersistentVolumeClaim
	// refused is why the batch Job's controller cannot create the workers (a quota, a policy).
	refused string
	// lost says the batch Job started and is gone before its verdict was recorded (runLost).
	lost bool
}

// ConditionPodsRefused says the cluster refuses to create the run's workers (a quota, an
// admission policy): someone must act.
const ConditionPodsRefused = "PodsRefused"

// ConditionOutputReused says the PyJob mounts an output claim, with its data, that was created
// for an earlier PyJob of the same name (reclaimPolicy Retain keeps it).
const ConditionOutputReused = "OutputReused"

// status derives the PyJob's status from what was observed now.
func status(job *trainingv1alpha1.PyJob, o observed, now metav1.Time) trainingv1alpha1.PyJobStatus {
	st := *job.Status.DeepCopy()
	st.ObservedGeneration = job.Generation
	st.OutputClaimName = OutputClaimName(job)
	if c := o.reusedClaim; c != nil {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: ConditionOutputReused, Status: metav1.ConditionTrue,
			Reason: "ClaimOfAnEarlierRun", ObservedGeneration: job.Generation, LastTransitionTime: now, Message: fmt.Sprintf(
				"output claim %s was created on %s, before this PyJob, and is mounted with its data (a resumed run finds its checkpoints there); delete it before creating the PyJob to start afresh",
				c.Name, c.CreationTimestamp.UTC().Format(time.RFC3339))})
	}
	bj := o.job
	if bj == nil && finished(job) {
		return st // its verdict stands when its batch Job is gone
	}
	phase, reason, msg := trainingv1alpha1.PyJobPending, "Creating", "creating the batch Job"
	if bj != nil {
		st.Workers = trainingv1alpha1.WorkerCounts{Active: bj.Status.Active, Succeeded: bj.Status.Succeeded, Failed: bj.Status.Failed}
		if bj.Status.Ready != nil {
			st.Workers.Ready = *bj.Status.Ready
		}
		st.StartTime = bj.Status.StartTime
		if bj.Status.CompletionTime != nil {
			st.CompletionTime = bj.Status.CompletionTime
		} else if c := jobCondition(bj, batchv1.JobFailed); c != nil && st.CompletionTime == nil {
			// A batch Job sets completionTime on success only; a failed run finished when it failed.
			t := c.LastTransitionTime
			if t.IsZero() {
				t = now
			}
			st.CompletionTime = &t
		}
		phase, reason, msg = phaseOf(job, bj, o.pods)
	}
	if o.lost {
		phase, reason, msg = lostVerdict(job, o.pods)
	}
	if o.waiting != "" && phase == trainingv1alpha1.PyJobPending {
		phase, reason, msg = trainingv1alpha1.PyJobPending, "WaitingForGang", o.waiting
	}
	refused := metav1.Condition{Type: ConditionPodsRefused, Status: metav1.ConditionFalse, Reason: "NotRefused", ObservedGeneration: job.Generation, LastTransitionTime: now}
	if o.refused != "" && (phase == trainingv1alpha1.PyJobPending || phase == trainingv1alpha1.PyJobRunning) {
		why := "the batch Job cannot create workers: " + strings.TrimSuffix(o.refused, ".") + "; it retries until the quota or policy allows them, or the PyJob asks for less"
		refused.Status, refused.Reason, refused.Message = metav1.ConditionTrue, "FailedCreate", why
		if phase == trainingv1alpha1.PyJobPending {
			reason, msg = "PodsRefused", why
		} else {
			msg += "; " + why
		}
	}
	meta.SetStatusCondition(&st.Conditions, refused)
	if o.problem.reason != "" {
		phase, reason, msg = trainingv1alpha1.PyJobPending, o.problem.reason, o.problem.message
	}
	if (phase == trainingv1alpha1.PyJobFailed || phase == trainingv1alpha1.PyJobSucceeded) && st.CompletionTime == nil {
		st.CompletionTime = &now
	}
	st.Phase, st.Message = phase, msg
	for _, t := range []trainingv1alpha1.PyJobPhase{trainingv1alpha1.PyJobRunning, trainingv1alpha1.PyJobSucceeded, trainingv1alpha1.PyJobFailed, trainingv1alpha1.PyJobSuspended} {
		c := metav1.Condition{Type: string(t), Status: metav1.ConditionFalse, Reason: "Not" + string(t), ObservedGeneration: job.Generation, LastTransitionTime: now}
		if t == phase {
			c.Status, c.Reason, c.Message = metav1.ConditionTrue, reason, msg
		}
		meta.SetStatusCondition(&st.Conditions, c)
	}
	return st
}

// lostVerdict is how a run whose batch Job is gone ended, as far as its pods still tell: succeeded
// when every worker's pod did, otherwise failed, saying that its end is unknown — never run again.
func lostVerdict(job *trainingv1alpha1.PyJob, pods []corev1.Pod) (trainingv1alpha1.PyJobPhase, string, string) {
	var succeeded int32
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded {
			succeeded++
		}
	}
	if succeeded >= job.Spec.Workers {
		return trainingv1alpha1.PyJobSucceeded, "Completed", fmt.Sprintf("the batch Job %s is gone; its %d succeeded worker pod(s) say the run completed", job.Name, succeeded)
	}
	return trainingv1alpha1.PyJobFailed, "BatchJobGone", fmt.Sprintf(
		"the batch Job %s started and was deleted before kiln saw how it ended, and no pod shows it (%d of %d workers succeeded): kiln does not run it again; delete and re-create the PyJob to run it again",
		job.Name, succeeded, job.Spec.Workers)
}

func phaseOf(job *trainingv1alpha1.PyJob, bj *batchv1.Job, pods []corev1.Pod) (trainingv1alpha1.PyJobPhase, string, string) {
	if c := jobCondition(bj, batchv1.JobComplete); c != nil {
		if job.Spec.Workers == 1 {
			return trainingv1alpha1.PyJobSucceeded, "Completed", "the worker completed"
		}
		return trainingv1alpha1.PyJobSucceeded, "Completed", fmt.Sprintf("all %d workers completed", job.Spec.Workers)
	}
	if c := jobCondition(bj, batchv1.JobFailed); c != nil {
		msg := fmt.Sprintf("%s: %s", c.Reason, c.Message)
		if exits := exitCodes(pods); exits != "" {
			msg = exits + "; " + msg
		}
		return trainingv1alpha1.PyJobFailed, c.Reason, msg
	}
	if bj.Spec.Suspend != nil && *bj.Spec.Suspend {
		if queued(bj) && (job.Spec.Suspend == nil || !*job.Spec.Suspend) {
			return trainingv1alpha1.PyJobPending, "Queued", kueue.Waiting(bj.Labels)
		}
		return trainingv1alpha1.PyJobSuspended, "Suspended", "suspended: set spec.suspend to false to run"
	}
	running := 0
	var blocked, why string
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running++
		}
		if r, msg := stuck.Pod(&p, "worker "+workerOf(p)); blocked == "" && r != "" {
			blocked, why = r, msg
		}
	}
	if running > 0 {
		msg := fmt.Sprintf("%d of %d workers running", running, job.Spec.Workers)
		if why != "" {
			msg += "; " + why
		}
		return trainingv1alpha1.PyJobRunning, "Running", msg
	}
	if blocked != "" {
		return trainingv1alpha1.PyJobPending, blocked, why
	}
	return trainingv1alpha1.PyJobPending, "Starting", "waiting for the workers to start"
}

func jobCondition(bj *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range bj.Status.Conditions {
		if c := &bj.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// exitCodes tells how the failed workers ended, e.g. "worker 1 exited with code 1 (Error)".
func exitCodes(pods []corev1.Pod) string {
	var out []string
	for _, p := range pods {
		if p.Status.Phase != corev1.PodFailed {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; cs.Name == ContainerName && t != nil {
				out = append(out, fmt.Sprintf("worker %s exited with code %d (%s)", workerOf(p), t.ExitCode, t.Reason))
			}
		}
	}
	sort.Strings(out)
	if len(out) > 3 {
		out = append(out[:3], fmt.Sprintf("and %d more", len(out)-3))
	}
	return strings.Join(out, ", ")
}

func workerOf(p corev1.Pod) string {
	if i, ok := p.Annotations[completionIndexAnnotation]; ok {
		return i
	}
	return p.Name
}
