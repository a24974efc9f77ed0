package replicajob

// The verdict policy: whether a job that runs succeeded, failed (a replica failed for good, the
// backoff limit) or restarts, and what ending it writes.

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
)

// verdict decides, in a fixed order, whether the job succeeded, failed, restarts or runs. A job
// stays Restarting until every restarted replica runs again.
func (p *planner) verdict(replicas framework.Replicas, seen observed) {
	rp := p.job.GetRunPolicy()
	specs := p.job.GetReplicaSpecs()
	outcome := p.fw.Outcome(p.job, replicas)
	retries := seen.retries
	var permanent, retry []failedPod
	for _, f := range seen.failed {
		switch {
		case isRetryable(mainContainer(p.fw, p.job, f.rtype), specs[f.rtype].RestartPolicy, f.pod):
			retry = append(retry, f)
			if !f.counted {
				retries++
			}
		case p.fw.IgnoresFailures == nil || !p.fw.IgnoresFailures(p.job, f.rtype):
			permanent = append(permanent, f)
		}
	}
	deadline := p.deadline()
	switch {
	case outcome.Succeeded:
		p.finish(kubeflowv1.JobSucceeded, "Succeeded", outcome.Message)
	case seen.jobFailed != nil:
		p.finishAs(kubeflowv1.JobFailed, seen.jobFailed.reason, seen.jobFailed.message)
	case len(permanent) > 0:
		p.exited(permanent)
		p.finish(kubeflowv1.JobFailed, "Failed", p.failedMessage(permanent[0].rtype, replicas[permanent[0].rtype].Failed))
	case rp.BackoffLimit != nil && retries > *rp.BackoffLimit && seen.jobRetries <= *rp.BackoffLimit:
		// (A batch Job whose own retries are past the limit fails itself, and says why.)
		p.exited(retry)
		p.finish(kubeflowv1.JobFailed, "Failed", fmt.Sprintf("Job %s has failed because it has reached the specified backoff limit", p.job.GetName()))
	case deadline != nil && !p.now.Time.Before(*deadline):
		p.finish(kubeflowv1.JobFailed, "Failed", fmt.Sprintf("Job %s has failed because it was active longer than specified deadline", p.job.GetName()))
	case len(retry) > 0 || len(seen.comingBack) > 0:
		p.exited(retry)
		p.restart(retry)
		restarting := maps.Clone(seen.comingBack)
		if restarting == nil {
			restarting = map[kubeflowv1.ReplicaType]int32{}
		}
		for _, f := range retry {
			restarting[f.rtype]++
		}
		first := p.firstOf(restarting)
		p.setCondition(kubeflowv1.JobRestarting, corev1.ConditionTrue, "Restarting",
			fmt.Sprintf("%s %s is restarting because %d %s replica(s) failed.", p.fw.Kind, p.job.GetName(), restarting[first], first))
	case outcome.Running:
		p.setCondition(kubeflowv1.JobRunning, corev1.ConditionTrue, "Running", outcome.Message)
	}
	if deadline != nil && !isFinished(&p.plan.Status) {
		p.requeueAt(*deadline)
	}
}

// firstOf is the first replica type, in the framework's order, that has a count in m.
func (p *planner) firstOf(m map[kubeflowv1.ReplicaType]int32) kubeflowv1.ReplicaType {
	for _, t := range p.fw.ReplicaTypes {
		if m[t] > 0 {
			return t
		}
	}
	return ""
}

func (p *planner) failedMessage(rtype kubeflowv1.ReplicaType, n int32) string {
	if p.fw.FailedMessage != nil {
		return p.fw.FailedMessage(p.job, rtype, n)
	}
	return fmt.Sprintf("%s %s is failed because %d %s replica(s) failed.", p.fw.Kind, p.job.GetName(), n, rtype)
}

// exited tells, once, the exit code of each failed pod acted upon.
func (p *planner) exited(failed []failedPod) {
	for _, f := range failed {
		if f.counted {
			continue
		}
		p.event(corev1.EventTypeNormal, "ExitedWithCode",
			fmt.Sprintf("Pod: %s.%s exited with code %d", f.pod.Namespace, f.pod.Name, exitCode(mainContainer(p.fw, p.job, f.rtype), f.pod)))
	}
}

// finish ends the job: the terminal condition and the completion time. Nothing is created or
// deleted until that status is stored: should the write fail, the next reconcile must still find
// the pods, or it would see neither a verdict nor pods and start the job again. The write's own
// watch event brings the reconcile that cleans up (finished), honouring the clean-pod policy on
// every terminal path (DECISIONS #4).
func (p *planner) finish(t kubeflowv1.JobConditionType, reason, msg string) {
	p.finishAs(t, p.fw.Kind+reason, msg)
}

// finishAs is finish with the condition's whole reason (one a batch Job gave).
func (p *planner) finishAs(t kubeflowv1.JobConditionType, reason, msg string) {
	p.setConditionReason(p.now, t, corev1.ConditionTrue, reason, msg)
	p.plan.Status.CompletionTime = &p.now
	p.plan.CreatePods, p.plan.CreateServices, p.plan.CreateJobs, p.plan.MarkRestarts = nil, nil, nil, nil
	p.plan.DeletePods, p.plan.DeleteServices, p.plan.DeleteJobs = nil, nil, nil
	p.settle()
}
