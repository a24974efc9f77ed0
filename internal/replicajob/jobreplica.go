package replicajob

// Replicas that run as batch Jobs (Framework.RunsAsJob): MPI's launcher of a job written at
// mpi-operator's API. The Job retries the replica's pod under the job's backoffLimit; the engine
// makes the Job, reads the replica's state from it and its pods, and deletes it where it would
// delete the pod (suspended, cleaned up, scaled down).

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
)

// jobFailure is a replica's batch Job that failed for good: the job fails with its reason.
type jobFailure struct {
	reason, message string
}

// jobReplica plans replica (rtype, index) of a type that runs as a batch Job: the Job made when
// it is missing (unless held says the replica must wait), and what it shows counted: the retries
// of its pods, its pod running, its verdict. A Job that finished and was deleted since (its TTL)
// still says how it ended (see Family); one deleted before it finished is made again once gone.
func (p *planner) jobReplica(rtype kubeflowv1.ReplicaType, index int, count *framework.ReplicaCount, done indexSet, seen *observed, held func() bool) error {
	j := p.kids.jobs[rtype][index]
	if j == nil {
		if done[index] {
			count.Succeeded++
			count.Index0Succeeded = count.Index0Succeeded || index == 0
			return nil
		}
		if held() {
			return nil
		}
		desired, err := desiredJob(p.fw, p.plugins, p.job, rtype, index)
		if err != nil {
			return err
		}
		p.plan.CreateJobs = append(p.plan.CreateJobs, desired)
		return nil
	}
	end := jobFinished(j)
	if end == nil && j.DeletionTimestamp != nil {
		return nil
	}
	// Its failed pods are the replica's (as mpi-operator counts its launcher's), and they and
	// its pods' in-place restarts (OnFailure) are its retries, as the Job counts them.
	pods := p.kids.jobPods[j.UID]
	retries := j.Status.Failed
	for _, pod := range pods {
		retries += containerRestarts(pod)
	}
	count.Failed += j.Status.Failed
	seen.retries += retries
	seen.jobRetries = max(seen.jobRetries, retries)
	switch {
	case end != nil && end.Type == batchv1.JobComplete:
		count.Succeeded++
		done[index] = true
		count.Index0Succeeded = count.Index0Succeeded || index == 0
	case end != nil:
		if j.Status.Failed == 0 {
			count.Failed++ // stopped at its deadline before its pod ended, say
		}
		if seen.jobFailed == nil {
			seen.jobFailed = p.jobFailed(rtype, j, end, pods)
		}
	case jobEnding(j):
		// Its verdict is coming (its pods terminate first): neither running nor restarting.
	case runningPod(pods):
		count.Active++
		p.running(rtype, index)
	case j.Status.Failed > 0:
		seen.comeBack(rtype) // the Job retries it
	}
	return nil
}

// jobEnding says whether the batch Job has its verdict but not yet its Complete or Failed
// condition: FailureTarget or SuccessCriteriaMet is True.
func jobEnding(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobFailureTarget || c.Type == batchv1.JobSuccessCriteriaMet) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// jobFailed is how the job fails because the batch Job of a replica of rtype did: the Job's
// reason (BackoffLimitExceeded, DeadlineExceeded, PodFailurePolicy), as mpi-operator reports
// its launcher's, and its message with the exit code of the last pod that failed, which is
// also told as an event.
func (p *planner) jobFailed(rtype kubeflowv1.ReplicaType, j *batchv1.Job, end *batchv1.JobCondition, pods []*corev1.Pod) *jobFailure {
	f := &jobFailure{
		reason:  cmp.Or(end.Reason, p.fw.Kind+"Failed"),
		message: cmp.Or(end.Message, fmt.Sprintf("%s %s has failed", p.fw.Kind, p.job.GetName())),
	}
	var last *corev1.Pod
	for _, pod := range pods {
		if pod.Status.Phase == corev1.PodFailed && (last == nil || !pod.CreationTimestamp.Before(&last.CreationTimestamp)) {
			last = pod
		}
	}
	if last != nil {
		code := exitCode(mainContainer(p.fw, p.job, rtype), last)
		f.message = fmt.Sprintf("%s: the %s's last pod %s exited with code %d", f.message, toLower(rtype), last.Name, code)
		p.event(corev1.EventTypeNormal, "ExitedWithCode", fmt.Sprintf("Pod: %s.%s exited with code %d", last.Namespace, last.Name, code))
	}
	return f
}

// jobFinished is the batch Job's Complete or Failed condition when it is True, else nil.
func jobFinished(j *batchv1.Job) *batchv1.JobCondition {
	for i, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

// runningPod says whether one of pods runs.
func runningPod(pods []*corev1.Pod) bool {
	for _, pod := range pods {
		if pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil {
			return true
		}
	}
	return false
}

// suspendedJob says which of the job's batch Jobs something else suspended (kiln never does: a
// Job it would suspend it deletes), "" when none: Kueue, say, queueing a Job it takes for no
// managed job's child. kiln does not resume it.
func (p *planner) suspendedJob() string {
	for _, rtype := range p.specTypes() {
		jobs := p.kids.jobs[rtype]
		for _, index := range slices.Sorted(maps.Keys(jobs)) {
			for _, c := range jobs[index].Status.Conditions {
				if c.Type == batchv1.JobSuspended && c.Status == corev1.ConditionTrue {
					return fmt.Sprintf("the %s's batch Job %s is suspended, not by kiln (%s), and kiln does not resume it", toLower(rtype), jobs[index].Name, cmp.Or(c.Message, c.Reason))
				}
			}
		}
	}
	return ""
}

func (p *planner) deleteJob(j *batchv1.Job) {
	if j.DeletionTimestamp == nil {
		p.plan.DeleteJobs = append(p.plan.DeleteJobs, j)
	}
}
