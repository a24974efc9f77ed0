package trainjob

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
	"github.com/kiln-ml/kiln/internal/transition"
)

// observed is what one reconcile found of a TrainJob's world.
type observed struct {
	now time.Time
	// jobSetServed says the cluster serves JobSets; jobSet is the TrainJob's (nil: none).
	jobSetServed bool
	jobSet       *jobsetv1alpha2.JobSet
	// problem keeps kiln from making the JobSet.
	problem Problem
	// deadlinePassed: the run outlived spec.activeDeadlineSeconds.
	deadlinePassed bool
	// waiting is why the gang's pods wait to be placed together ("" when they do not);
	// gangUnwatched says nothing kiln watches tells when that changes.
	waiting       string
	gangUnwatched bool
}

func finished(job *trainerv1alpha1.TrainJob) bool {
	return meta.IsStatusConditionTrue(job.Status.Conditions, trainerv1alpha1.TrainJobComplete) ||
		meta.IsStatusConditionTrue(job.Status.Conditions, trainerv1alpha1.TrainJobFailed)
}

// madeJobSet says kiln has seen the TrainJob's JobSet: its status has the replicated jobs' counts.
func madeJobSet(job *trainerv1alpha1.TrainJob) bool {
	return len(job.Status.JobsStatus) > 0
}

// deadlineLeft is the time left of the run's activeDeadlineSeconds, counted (as Trainer counts
// it) from its creation or its last resumption; has is false without a deadline, while the
// TrainJob is suspended, and once the run finished: a JobSet js that completed or failed
// before kiln saw the deadline pass keeps its verdict, as Trainer's does (it takes the JobSet's
// verdict before it looks at the deadline).
func deadlineLeft(job *trainerv1alpha1.TrainJob, js *jobsetv1alpha2.JobSet, now time.Time) (left time.Duration, has bool) {
	if job.Spec.ActiveDeadlineSeconds <= 0 || ptr.Deref(job.Spec.Suspend, false) || finished(job) || jobSetFinished(js) {
		return 0, false
	}
	start := job.CreationTimestamp.Time
	switch c := meta.FindStatusCondition(job.Status.Conditions, trainerv1alpha1.TrainJobSuspended); {
	case c != nil && c.Status == metav1.ConditionTrue:
		start = now // resumed just now: this reconcile writes Suspended False
	case c != nil:
		start = c.LastTransitionTime.Time
	}
	return start.Add(time.Duration(job.Spec.ActiveDeadlineSeconds) * time.Second).Sub(now), true
}

// status derives the TrainJob's status from what was observed: Trainer's Suspended, Complete and
// Failed, each replicated job's counts, and kiln's Created or Running while one says why the
// TrainJob cannot be running (why).
func status(job *trainerv1alpha1.TrainJob, o observed) trainerv1alpha1.TrainJobStatus {
	st := *job.Status.DeepCopy()
	now := metav1.NewTime(o.now)
	set := func(typ string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg,
			ObservedGeneration: job.Generation, LastTransitionTime: now})
	}
	js := o.jobSet
	if js != nil {
		st.JobsStatus = jobsStatus(js)
	}
	if finished(job) {
		return st // the verdict stands, whatever becomes of the JobSet
	}
	suspended := ptr.Deref(job.Spec.Suspend, false)
	switch {
	case suspended:
		set(trainerv1alpha1.TrainJobSuspended, true, trainerv1alpha1.TrainJobSuspendedReason, "the TrainJob is suspended: its pods are deleted until spec.suspend is false")
	case meta.IsStatusConditionTrue(st.Conditions, trainerv1alpha1.TrainJobSuspended):
		set(trainerv1alpha1.TrainJobSuspended, false, trainerv1alpha1.TrainJobResumedReason, "the TrainJob is resumed")
	}
	failed, failReason, failMsg := verdictFailed(job, o)
	complete, doneReason, doneMsg := verdictComplete(js)
	switch {
	case failed:
		set(trainerv1alpha1.TrainJobFailed, true, failReason, failMsg)
	case complete:
		set(trainerv1alpha1.TrainJobComplete, true, doneReason, doneMsg)
	}
	had := meta.FindStatusCondition(st.Conditions, trainerv1alpha1.TrainJobCreated) != nil
	w := why(job, o, st.JobsStatus, had, suspended, failed || complete)
	for _, typ := range []string{trainerv1alpha1.TrainJobCreated, trainerv1alpha1.TrainJobRunning} {
		if typ != w.typ {
			meta.RemoveStatusCondition(&st.Conditions, typ)
		}
	}
	if w.typ != "" {
		set(w.typ, w.holds, w.reason, w.message)
	}
	return st
}

// explanation is one of kiln's conditions (typ "": none).
type explanation struct {
	typ             string
	holds           bool
	reason, message string
}

// why is kiln's word on why the TrainJob cannot be running, as a condition of its own: Created
// while its JobSet cannot be made (or, suspended, brought in line), Running false while its gang
// waits to be placed. Kubeflow's SDK reports a TrainJob Running only while its status has no
// condition at all, so kiln writes one only where the TrainJob's pods cannot all run, and none
// once they may, or the run ended (docs/decisions.md, 28).
func why(job *trainerv1alpha1.TrainJob, o observed, counts []trainerv1alpha1.JobStatus, had, suspended, ended bool) explanation {
	js := o.jobSet
	switch {
	case ended:
	case js == nil && o.problem.Reason != "":
		return explanation{trainerv1alpha1.TrainJobCreated, false, o.problem.Reason, o.problem.Message}
	case js == nil && !o.jobSetServed:
		return explanation{trainerv1alpha1.TrainJobCreated, false, ReasonJobSetNotServed, "the cluster does not serve JobSets (jobset.x-k8s.io/v1alpha2), which run TrainJobs: install JobSet v0.12 (docs/trainjob.md); kiln starts the TrainJob when it is served"}
	case js == nil && had:
		// Being made: said only in place of what was said before (a status is never emptied).
		return explanation{trainerv1alpha1.TrainJobCreated, false, reasonCreatingJobSet, "creating JobSet " + job.Name}
	case js == nil:
	case o.problem.Reason != "" && (suspended || ptr.Deref(js.Spec.Suspend, false)):
		return explanation{trainerv1alpha1.TrainJobCreated, true, reasonJobSetCreated, "JobSet " + js.Name + " created; now: " + o.problem.Message}
	case o.waiting != "" && !suspended && !allReady(counts, replicatedJobs(js)):
		return explanation{trainerv1alpha1.TrainJobRunning, false, "WaitingForGang", o.waiting}
	}
	return explanation{}
}

// verdictFailed: the runtime is one kiln cannot run, the deadline passed, or the JobSet failed.
func verdictFailed(job *trainerv1alpha1.TrainJob, o observed) (bool, string, string) {
	switch {
	case o.problem.Reason == reasonNotSupported:
		return true, reasonNotSupported, o.problem.Message
	case o.deadlinePassed:
		return true, reasonDeadlineExceeded, fmt.Sprintf("the TrainJob ran longer than spec.activeDeadlineSeconds (%d seconds): its JobSet and pods are deleted", job.Spec.ActiveDeadlineSeconds)
	}
	if c := jobSetCondition(o.jobSet, jobsetv1alpha2.JobSetFailed); c != nil {
		return true, c.Reason, c.Message
	}
	return false, "", ""
}

// jobSetFinished says the JobSet completed or failed (nil: none).
func jobSetFinished(js *jobsetv1alpha2.JobSet) bool {
	return jobSetCondition(js, jobsetv1alpha2.JobSetCompleted) != nil || jobSetCondition(js, jobsetv1alpha2.JobSetFailed) != nil
}

func verdictComplete(js *jobsetv1alpha2.JobSet) (bool, string, string) {
	if c := jobSetCondition(js, jobsetv1alpha2.JobSetCompleted); c != nil {
		return true, c.Reason, c.Message
	}
	return false, "", ""
}

// replicatedJobs is how many Jobs the JobSet js runs (nil: none).
func replicatedJobs(js *jobsetv1alpha2.JobSet) int32 {
	if js == nil {
		return 0
	}
	var n int32
	for _, rj := range js.Spec.ReplicatedJobs {
		n += rj.Replicas
	}
	return n
}

// allReady says the counts have all of the JobSet's jobs Jobs, each with its pods ready or done
// (JobsRun, which the status's readers use, counting the Jobs made so far).
func allReady(counts []trainerv1alpha1.JobStatus, jobs int32) bool {
	var made int32
	for _, s := range counts {
		made += ptr.Deref(s.Active, 0) + ptr.Deref(s.Succeeded, 0)
	}
	return made >= jobs && trainerv1alpha1.JobsRun(counts)
}

func jobSetCondition(js *jobsetv1alpha2.JobSet, t jobsetv1alpha2.JobSetConditionType) *metav1.Condition {
	if js == nil {
		return nil
	}
	if c := meta.FindStatusCondition(js.Status.Conditions, string(t)); c != nil && c.Status == metav1.ConditionTrue {
		return c
	}
	return nil
}

// jobsStatus is each replicated job's counts, in the JobSet's order.
func jobsStatus(js *jobsetv1alpha2.JobSet) []trainerv1alpha1.JobStatus {
	seen := map[string]jobsetv1alpha2.ReplicatedJobStatus{}
	for _, s := range js.Status.ReplicatedJobsStatus {
		seen[s.Name] = s
	}
	var out []trainerv1alpha1.JobStatus
	for _, rj := range js.Spec.ReplicatedJobs {
		s := seen[rj.Name]
		out = append(out, trainerv1alpha1.JobStatus{Name: rj.Name, Ready: ptr.To(s.Ready), Succeeded: ptr.To(s.Succeeded),
			Failed: ptr.To(s.Failed), Active: ptr.To(s.Active), Suspended: ptr.To(s.Suspended)})
	}
	return out
}

// told is what the write of st over old tells: an event per transition and the job metrics. js
// is the TrainJob's JobSet (nil: none): its creation, and all its Jobs' pods ready, are told from
// the counts they bring to the status.
func told(job *trainerv1alpha1.TrainJob, old, st trainerv1alpha1.TrainJobStatus, js *jobsetv1alpha2.JobSet) transition.Told {
	var t transition.Told
	if len(old.Conditions) == 0 && len(old.JobsStatus) == 0 {
		t.Changes = append(t.Changes, transition.Created)
	}
	start := job.CreationTimestamp // the run's time counts from its JobSet's creation
	if js != nil {
		start = js.CreationTimestamp
		if len(old.JobsStatus) == 0 {
			t.Event(corev1.EventTypeNormal, reasonJobSetCreated, fmt.Sprintf("TrainJob %s: JobSet %s created", job.Name, js.Name))
		}
		ended := meta.IsStatusConditionTrue(st.Conditions, trainerv1alpha1.TrainJobComplete) || meta.IsStatusConditionTrue(st.Conditions, trainerv1alpha1.TrainJobFailed)
		if jobs := replicatedJobs(js); !ended && allReady(st.JobsStatus, jobs) && !allReady(old.JobsStatus, jobs) {
			t.Event(corev1.EventTypeNormal, "JobsReady", fmt.Sprintf("TrainJob %s: all %d Jobs of JobSet %s have their pods ready", job.Name, jobs, js.Name))
			t.Changes = append(t.Changes, transition.Running) // the reconciler keeps the first (firstRun)
		}
	}
	for _, c := range st.Conditions {
		was := meta.FindStatusCondition(old.Conditions, c.Type)
		if was != nil && was.Status == c.Status && was.Reason == c.Reason && was.Message == c.Message {
			continue
		}
		typ := corev1.EventTypeNormal
		switch {
		case c.Type == trainerv1alpha1.TrainJobFailed || (c.Type == trainerv1alpha1.TrainJobCreated && c.Status == metav1.ConditionFalse && c.Reason != reasonCreatingJobSet):
			typ = corev1.EventTypeWarning
		case c.Status == metav1.ConditionFalse && c.Type != trainerv1alpha1.TrainJobSuspended:
			continue // a condition going false is told by the one that replaced it
		}
		t.Event(typ, c.Reason, fmt.Sprintf("TrainJob %s: %s", job.Name, c.Message))
		if was != nil && was.Status == c.Status {
			continue // a new message, not a transition
		}
		switch {
		case c.Type == trainerv1alpha1.TrainJobComplete && c.Status == metav1.ConditionTrue:
			t.Changes = append(t.Changes, transition.Succeeded)
		case c.Type == trainerv1alpha1.TrainJobFailed && c.Status == metav1.ConditionTrue:
			t.Changes = append(t.Changes, transition.Failed)
		}
	}
	t.Start = &start
	for _, typ := range []string{trainerv1alpha1.TrainJobComplete, trainerv1alpha1.TrainJobFailed} {
		if c := meta.FindStatusCondition(st.Conditions, typ); c != nil && c.Status == metav1.ConditionTrue {
			t.Completion = &c.LastTransitionTime
		}
	}
	return t
}
