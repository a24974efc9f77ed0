package replicajob

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/stuck"
	"github.com/kiln-ml/kiln/internal/transition"
)

// Plan is everything one reconcile decides, computed without any client call from the job and
// what the reconciler observed: every write it wants. The executor (execute.go) carries it out:
// what the pods need first (group, secrets, extras), then pods and services, then the status,
// its events and metrics, and last the job's deletion.
type Plan struct {
	Status kubeflowv1.JobStatus

	// Group is the job's gang group (a GroupPlugin's), applied before any pod while GroupKeep,
	// deleted otherwise; nil for a job whose pods are placed one by one.
	Group     client.Object
	GroupKeep bool
	// CreateSecrets says the framework's secrets are to be created before the pods (the executor
	// builds them: key material is random, and a plan is pure).
	CreateSecrets bool
	// Extras are the framework's and the ObjectPlugins' objects, to apply (Wanted) or delete
	// before the pods; nil when they are as last synced. ExtrasDigest identifies them as built.
	Extras       []framework.Extra
	ExtrasDigest [sha256.Size]byte

	CreatePods     []*corev1.Pod
	DeletePods     []*corev1.Pod
	CreateServices []*corev1.Service
	DeleteServices []*corev1.Service
	// CreateJobs and DeleteJobs are the batch Jobs of replicas that run as Jobs
	// (Framework.RunsAsJob).
	CreateJobs []*batchv1.Job
	DeleteJobs []*batchv1.Job
	// MarkRestarts are services whose retry history must be written before their failed pod is
	// deleted (see AnnotationRestarts).
	MarkRestarts []restartMark
	// DeleteJob is set when the job's TTL after finishing has expired.
	DeleteJob bool
	// Events are emitted, and Became counted in metrics, once the status write succeeded.
	Events []Event
	// Became lists the conditions that turned True in this reconcile.
	Became []Transition
	// RequeueAfter is when time alone changes something: the active deadline or the TTL.
	RequeueAfter time.Duration
	// Running lists, by replica type, the indexes of the pods seen running (a job that runs).
	Running map[kubeflowv1.ReplicaType][]int
	// Carried are the retry counts of a kind without services whose pods are gone and not yet
	// replaced, by pod name: what the next plan must be given (see AnnotationRestarts).
	Carried map[string]int32
}

// Transition is a condition that turned True; First when the job never had that condition.
type Transition struct {
	Type  kubeflowv1.JobConditionType
	First bool
}

// Event is a Kubernetes event on the job.
type Event = transition.Event

type restartMark struct {
	Service  *corev1.Service
	Restarts int32
	PodUID   string
}

// failedPod is a failed pod seen in this reconcile.
type failedPod struct {
	rtype    kubeflowv1.ReplicaType
	pod      *corev1.Pod
	svc      *corev1.Service
	restarts int32 // the index's retries including this failure
	counted  bool  // its service already counts this failure
}

// planner holds the inputs and the plan under construction.
type planner struct {
	fw      framework.Framework
	plugins plugins
	job     framework.Job
	now     metav1.Time
	seen    metav1.Time
	kids    children
	plan    *Plan
	in      Inputs
	// completed are the indexes, by replica type, whose pod succeeded: in the status read, or now.
	completed map[kubeflowv1.ReplicaType]indexSet
	// budget is how many more pods and services this plan may create (see batchSize); capped
	// says it ran out.
	budget int
	capped bool
	// waiting says which replica types wait for others to be ready (Framework.WaitsFor).
	waiting []string
}

// How many replicas one reconcile of a job creates at most (a replica is its pod, and its
// service for a kind with services): firstBatch, then as many as the job has already (the batch
// Job controller's slow start, doubling while creations succeed), up to maxBatch; one object
// while the apiserver refuses them. A huge job is created over several reconciles, each one
// building no more than maxBatch pods, and other jobs are served between.
const (
	firstBatch = 64
	maxBatch   = 500
)

// batchSize is the creation budget of a plan in objects (see firstBatch); perReplica is 2 for
// a kind with services, else 1.
func batchSize(in Inputs, perReplica int) int {
	if in.Refused != "" || in.RefusedServices != "" {
		return 1
	}
	return min(max(firstBatch*perReplica, len(in.Pods)+len(in.Services)), maxBatch*perReplica)
}

// take spends one creation of the plan's budget; false when it is spent.
func (p *planner) take() bool {
	if p.budget == 0 {
		p.capped = true
		return false
	}
	p.budget--
	return true
}

// Inputs are what a plan decides from besides the job: its children seen now and what the
// reconciler knows of it.
type Inputs struct {
	Pods     []*corev1.Pod
	Services []*corev1.Service
	// Jobs are the batch Jobs of replicas that run as Jobs; Pods include their pods.
	Jobs []*batchv1.Job
	// Now is the time of the reconcile; Seen when the job's status change not yet written was
	// first seen (zero: now): a paced first write still says the job was created and started then.
	Now, Seen time.Time
	// Carried is the previous plan's Carried.
	Carried map[string]int32
	// Group is the job's gang group as its GroupPlugin built it (nil: its pods are placed one by
	// one); GangWaiting says why the gang waits to be placed ("" when it does not); HoldPods keeps
	// the plan from creating pods (the gang's group is not there yet).
	Group       client.Object
	GangWaiting string
	HoldPods    bool
	// Refused and RefusedServices are why the apiserver last refused to create the job's pods
	// and its services ("": it did not); PodConflict names an object of a pod's name that is not
	// the job's ("": none).
	Refused, RefusedServices, PodConflict string
	// RefusedExtras is why the apiserver last refused the job's secrets or extras ("": it did not).
	RefusedExtras string
	// Conflict says which object in the way of the job's extras holds its pods ("": none).
	Conflict string
	// SecretsCreated says this process created the job's secrets; ExtrasSynced is the
	// ExtrasDigest of the extras it last synced (zero: none).
	SecretsCreated bool
	ExtrasSynced   [sha256.Size]byte
	// Invalid is what Validate finds wrong with the job (the reconciler validates each generation
	// once): a job that runs is then failed instead of planned.
	Invalid field.ErrorList
	// CreatedOnly plans only what a new job's first write says: Created, startTime (unless it is
	// suspended) and replica counts of zero, so the reconcile that creates its pods has nothing to
	// add until a pod runs (see createdWriter).
	CreatedOnly bool
}

// plan decides one reconcile of a defaulted job from what it sees now, with the operator's plugins.
func plan(fw framework.Framework, ps plugins, job framework.Job, in Inputs) (*Plan, error) {
	if in.Seen.IsZero() || in.Seen.After(in.Now) {
		in.Seen = in.Now
	}
	p := &planner{
		fw: fw, plugins: ps, job: job, now: metav1.NewTime(in.Now), seen: metav1.NewTime(in.Seen),
		kids: groupChildren(fw, job, in.Pods, in.Services, in.Jobs), in: in,
		plan: &Plan{Status: *job.GetJobStatus().DeepCopy()},
	}
	perReplica := 1
	if fw.HasServices(job) {
		perReplica = 2
	}
	p.budget = batchSize(in, perReplica)
	p.setConditionAt(p.seen, kubeflowv1.JobCreated, corev1.ConditionTrue, "Created", createdMessage(fw, job.GetName()))
	defer p.sayWhyItWaits()
	if in.CreatedOnly {
		if p.plan.Status.StartTime == nil && !isSuspended(job) {
			p.plan.Status.StartTime = &p.now
		}
		p.setReplicaStatuses(framework.Replicas{})
		return p.plan, nil
	}
	invalid := in.Invalid
	switch {
	case isFinished(&p.plan.Status):
		p.finished()
	case len(invalid) > 0:
		// Reachable without the validating webhook, or for a job stored before a rule it breaks
		// (one over its kind's replica limit would take the manager's memory): fail visibly
		// instead of guessing.
		p.finish(kubeflowv1.JobFailed, "FailedValidation", fmt.Sprintf("%s %s is invalid: %v", fw.Kind, job.GetName(), invalid.ToAggregate()))
	case isSuspended(job):
		p.suspend()
	default:
		if err := p.active(); err != nil {
			return nil, err
		}
	}
	if err := p.beforePods(); err != nil {
		return nil, err
	}
	return p.plan, nil
}

func isSuspended(job framework.Job) bool {
	s := job.GetRunPolicy().Suspend
	return s != nil && *s
}

// setCondition records a condition and, when it is a transition worth telling, its event.
func (p *planner) setCondition(t kubeflowv1.JobConditionType, status corev1.ConditionStatus, reason, msg string) {
	p.setConditionAt(p.now, t, status, reason, msg)
}

func (p *planner) setConditionAt(at metav1.Time, t kubeflowv1.JobConditionType, status corev1.ConditionStatus, reason, msg string) {
	p.setConditionReason(at, t, status, p.fw.Kind+reason, msg)
}

// setConditionReason is setConditionAt with the condition's whole reason, not the kind's own.
func (p *planner) setConditionReason(at metav1.Time, t kubeflowv1.JobConditionType, status corev1.ConditionStatus, reason, msg string) {
	c := kubeflowv1.JobCondition{Type: t, Status: status, Reason: reason, Message: msg}
	first := getCondition(&p.plan.Status, t) == nil
	if !setCondition(&p.plan.Status, c, at) {
		return
	}
	if status == corev1.ConditionTrue {
		p.plan.Became = append(p.plan.Became, Transition{Type: t, First: first})
	}
	switch {
	case t == kubeflowv1.JobCreated || t == kubeflowv1.JobRunning:
		// As Kubeflow: no event for Created or Running (reference §3.9); the condition says it.
	case t == kubeflowv1.JobFailed || t == kubeflowv1.JobRestarting:
		p.event(corev1.EventTypeWarning, c.Reason, msg)
	default:
		p.event(corev1.EventTypeNormal, c.Reason, msg)
	}
}

// createdMessage is Kubeflow's message of the Created condition.
func createdMessage(fw framework.Framework, name string) string {
	return fmt.Sprintf("%s %s is created.", fw.Kind, name)
}

// sayWhyItWaits says in the Created condition why a job that runs has no running pods yet: its
// gang waits to be placed, the apiserver refuses its pods (a quota, a policy), or a pod cannot
// start (its image, a missing Secret, the scheduler) — the wide output's Message column shows
// it; otherwise it says what Kubeflow says. What the apiserver refuses is said while the job
// runs too: a refused Service leaves its replica without a name its peers can resolve.
func (p *planner) sayWhyItWaits() {
	c := getCondition(&p.plan.Status, kubeflowv1.JobCreated)
	if c == nil {
		return
	}
	msg := createdMessage(p.fw, p.job.GetName())
	st := &p.plan.Status
	var why []string
	// What the apiserver refuses is said while the job runs too: a replacement pod, a Service or
	// an extra the pods mount may be refused at any time.
	if !isFinished(st) && !isSuspended(p.job) {
		if p.in.RefusedServices != "" {
			why = append(why, "services cannot be created: "+strings.TrimSuffix(p.in.RefusedServices, ".")+"; kiln retries, and a failed replica restarts once its service records the retry")
		}
		if p.in.RefusedExtras != "" {
			why = append(why, "objects the pods need cannot be written: "+strings.TrimSuffix(p.in.RefusedExtras, ".")+"; kiln retries, and the pods wait for what they mount")
		}
		if p.in.Refused != "" {
			why = append(why, "pods cannot be created: "+strings.TrimSuffix(p.in.Refused, ".")+"; kiln retries until the quota or policy allows them")
		}
	}
	if !isFinished(st) && !isSuspended(p.job) && !hasCondition(st, kubeflowv1.JobRunning) {
		if p.in.GangWaiting != "" {
			why = append(why, p.in.GangWaiting)
		}
		if p.in.Conflict != "" {
			why = append(why, strings.TrimSuffix(p.in.Conflict, "."))
		}
		if p.in.PodConflict != "" {
			why = append(why, strings.TrimSuffix(p.in.PodConflict, "."))
		}
		if stuck := p.stuckPod(); stuck != "" {
			why = append(why, stuck)
		}
		if held := p.suspendedJob(); held != "" {
			why = append(why, held)
		}
		why = append(why, p.waiting...)
	}
	if len(why) > 0 {
		msg = strings.TrimSuffix(msg, ".") + "; " + strings.Join(why, "; ") + "."
	}
	if c.Message != msg {
		c.Message, c.LastUpdateTime = msg, p.now
	}
}

// stuckPod is what keeps the first of the job's pods that cannot start (stuck.Pod), in replica
// type and index order, or "".
func (p *planner) stuckPod() string {
	for _, rtype := range slices.Sorted(maps.Keys(p.kids.pods)) {
		pods := p.kids.pods[rtype]
		for _, index := range slices.Sorted(maps.Keys(pods)) {
			if _, why := stuck.Pod(pods[index], "pod "+pods[index].Name); why != "" {
				return why
			}
		}
		jobs := p.kids.jobs[rtype]
		for _, index := range slices.Sorted(maps.Keys(jobs)) {
			for _, pod := range p.kids.jobPods[jobs[index].UID] {
				if _, why := stuck.Pod(pod, "pod "+pod.Name); why != "" {
					return why
				}
			}
		}
	}
	return ""
}

func (p *planner) event(typ, reason, msg string) {
	p.plan.Events = append(p.plan.Events, Event{Type: typ, Reason: reason, Message: msg})
}

// active plans a job that runs: pods and services for every replica index, restarts of failed
// pods, and the verdict of the framework's rules, backoffLimit and activeDeadlineSeconds.
func (p *planner) active() error {
	st := &p.plan.Status
	if c := getCondition(st, kubeflowv1.JobSuspended); c != nil && c.Status == corev1.ConditionTrue {
		p.setCondition(kubeflowv1.JobSuspended, corev1.ConditionFalse, "Resumed", fmt.Sprintf("%s %s is resumed.", p.fw.Kind, p.job.GetName()))
		st.StartTime = &p.now
	}
	if st.StartTime == nil {
		st.StartTime = &p.seen
	}
	p.deleteStrays()
	replicas := framework.Replicas{}
	var seen observed
	for _, rtype := range p.specTypes() {
		count, err := p.replicaType(rtype, &seen)
		if err != nil {
			return err
		}
		replicas[rtype] = count
	}
	p.setReplicaStatuses(replicas)
	p.verdict(replicas, seen)
	if p.capped {
		// The next batch, as soon as the cache shows this one (the expectations hold it until then).
		p.plan.RequeueAfter = minPositive(p.plan.RequeueAfter, replanSoon)
	}
	return nil
}

// observed collects, across replica types, what the verdict needs beyond the counts.
type observed struct {
	failed []failedPod
	// retries sums the retries of every replica index (see AnnotationRestarts).
	retries int32
	// jobRetries are the most retries one replica's batch Job made (Framework.RunsAsJob), and
	// jobFailed the first such Job that failed for good.
	jobRetries int32
	jobFailed  *jobFailure
	// comingBack counts, per type, replicas that were restarted and whose new pod does not run yet.
	comingBack map[kubeflowv1.ReplicaType]int32
}

// specTypes are the replica types of the job's spec, in the framework's fixed order.
func (p *planner) specTypes() []kubeflowv1.ReplicaType {
	specs := p.job.GetReplicaSpecs()
	types := make([]kubeflowv1.ReplicaType, 0, len(specs))
	for _, t := range p.fw.ReplicaTypes {
		if specs[t] != nil {
			types = append(types, t)
		}
	}
	return types
}

// replicaType creates what is missing of one replica type, deletes what is beyond its replicas
// (scale-down), counts its pods and collects its failed ones.
func (p *planner) replicaType(rtype kubeflowv1.ReplicaType, seen *observed) (framework.ReplicaCount, error) {
	spec := p.job.GetReplicaSpecs()[rtype]
	n := int(framework.NumReplicas(spec))
	count := framework.ReplicaCount{Replicas: int32(n)}
	done := completedOf(p.job.GetJobStatus(), rtype, n)
	if done == nil {
		done = indexSet{}
	}
	p.setCompleted(rtype, done)
	for index, pod := range p.kids.pods[rtype] {
		if index >= n {
			p.deletePod(pod)
		}
	}
	for index, svc := range p.kids.services[rtype] {
		if index >= n {
			p.deleteService(svc)
		}
	}
	for index, j := range p.kids.jobs[rtype] {
		if index >= n {
			p.deleteJob(j)
		}
	}
	services, jobs := p.fw.HasServices(p.job), p.fw.JobReplica(p.job, rtype)
	var waits *bool // whether rtype's pods wait for others to be ready; asked once a pod is missing
	// held says whether a missing replica is not created now: held by the gang, by an object in
	// the way of an extra or by replicas it waits to be ready, or left for the next batch.
	held := func() bool {
		if waits == nil {
			w, why := p.waitsForReady(rtype)
			if waits = &w; w {
				p.waiting = append(p.waiting, why)
			}
		}
		return p.in.HoldPods || p.in.Conflict != "" || *waits || !p.take()
	}
	for index := range n {
		svc := p.kids.services[rtype][index]
		if svc == nil && services && p.take() {
			p.plan.CreateServices = append(p.plan.CreateServices, desiredService(p.fw, p.job, rtype, index))
		}
		pod := p.kids.pods[rtype][index]
		if (jobs || p.kids.jobs[rtype][index] != nil) && pod == nil {
			// A pod of its own is a replica made before its type ran as a Job: it goes on as a
			// pod. A Job goes on as the replica's, should its type no longer run as one (a job
			// written at v2beta1, rewritten at v1 without its annotations).
			if err := p.jobReplica(rtype, index, &count, done, seen, held); err != nil {
				return count, err
			}
			continue
		}
		restarts, counted, replaced := serviceRestarts(svc, pod)
		if !services {
			restarts, replaced = p.podRestarts(rtype, index, pod)
		}
		if replaced && (pod == nil || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodPending || pod.Status.Phase == "") {
			seen.comeBack(rtype)
		}
		if pod == nil && done[index] {
			// Its pod succeeded and is gone since (pod GC, a node removed): finished work is
			// never run again.
			count.Succeeded++
			count.Index0Succeeded = count.Index0Succeeded || index == 0
			continue
		}
		if pod == nil {
			seen.retries += restarts
			if held() {
				continue
			}
			desired, err := desiredPod(p.fw, p.plugins, p.job, rtype, index)
			if err != nil {
				return count, err
			}
			if !services && restarts > 0 {
				desired.Annotations = maps.Clone(desired.Annotations)
				if desired.Annotations == nil {
					desired.Annotations = map[string]string{}
				}
				desired.Annotations[AnnotationRestarts] = strconv.Itoa(int(restarts))
			}
			p.plan.CreatePods = append(p.plan.CreatePods, desired)
			continue
		}
		if pod.DeletionTimestamp != nil {
			seen.retries += restarts
			continue
		}
		if !counted {
			restarts += containerRestarts(pod)
		}
		seen.retries += restarts
		switch pod.Status.Phase {
		case corev1.PodRunning:
			count.Active++
			p.running(rtype, index)
		case corev1.PodSucceeded:
			count.Succeeded++
			done[index] = true
			count.Index0Succeeded = count.Index0Succeeded || (index == 0 && exitCode(mainContainer(p.fw, p.job, rtype), pod) == 0)
		case corev1.PodFailed:
			count.Failed++
			seen.failed = append(seen.failed, failedPod{rtype: rtype, pod: pod, svc: svc, restarts: restarts, counted: counted})
		}
	}
	return count, nil
}

// waitsForReady says whether the pods of rtype wait for every pod of another type to be Ready
// (Framework.WaitsFor), which they are not yet, and how many are. A pod of that type that
// finished ends the wait: it will not be ready again, and the waiting pods' own outcome then
// decides (MPI: mpirun fails without that worker).
func (p *planner) waitsForReady(rtype kubeflowv1.ReplicaType) (bool, string) {
	if p.fw.WaitsFor == nil {
		return false, ""
	}
	other, ok := p.fw.WaitsFor(p.job, rtype)
	if !ok {
		return false, ""
	}
	n := int(framework.NumReplicas(p.job.GetReplicaSpecs()[other]))
	done := completedOf(p.job.GetJobStatus(), other, n)
	ready := 0
	for index := range n {
		pod := p.kids.pods[other][index]
		switch {
		case done[index], pod != nil && (pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded):
			return false, ""
		case pod != nil && pod.DeletionTimestamp == nil && stuck.Ready(pod):
			ready++
		}
	}
	if ready == n {
		return false, ""
	}
	return true, fmt.Sprintf("the %s waits for every %s to be ready (%d of %d are)", strings.ToLower(string(rtype)), strings.ToLower(string(other)), ready, n)
}

func (p *planner) running(rtype kubeflowv1.ReplicaType, index int) {
	if p.plan.Running == nil {
		p.plan.Running = map[kubeflowv1.ReplicaType][]int{}
	}
	p.plan.Running[rtype] = append(p.plan.Running[rtype], index)
}

func (p *planner) deleteStrays() {
	for _, pod := range p.kids.strayPods {
		p.deletePod(pod)
	}
	for _, svc := range p.kids.strayServes {
		p.deleteService(svc)
	}
	for _, j := range p.kids.strayJobs {
		p.deleteJob(j)
	}
}

func (p *planner) deletePod(pod *corev1.Pod) {
	if pod.DeletionTimestamp == nil {
		p.plan.DeletePods = append(p.plan.DeletePods, pod)
	}
}

func (p *planner) deleteService(svc *corev1.Service) {
	if svc.DeletionTimestamp == nil {
		p.plan.DeleteServices = append(p.plan.DeleteServices, svc)
	}
}

// setReplicaStatuses rewrites replicaStatuses from the counts seen now, one entry per spec type.
func (p *planner) setReplicaStatuses(replicas framework.Replicas) {
	st := &p.plan.Status
	st.ReplicaStatuses = make(map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaStatus, len(p.job.GetReplicaSpecs()))
	for _, rtype := range p.specTypes() {
		c := replicas[rtype]
		rs := &kubeflowv1.ReplicaStatus{Active: c.Active, Succeeded: c.Succeeded, Failed: c.Failed}
		if done := p.completed[rtype]; len(done) > 0 {
			rs.CompletedIndexes = done.String()
		} else if was := p.job.GetJobStatus().ReplicaStatuses[rtype]; was != nil && p.completed == nil {
			rs.CompletedIndexes = was.CompletedIndexes // not planned now (suspended): kept
		}
		if p.fw.ScaleSelector {
			rs.Selector = typeSelector(p.fw, p.job, rtype)
		}
		st.ReplicaStatuses[rtype] = rs
	}
}

func (p *planner) setCompleted(rtype kubeflowv1.ReplicaType, done indexSet) {
	if p.completed == nil {
		p.completed = map[kubeflowv1.ReplicaType]indexSet{}
	}
	p.completed[rtype] = done
}

func (p *planner) requeueAt(t time.Time) {
	d := t.Sub(p.now.Time)
	if d < time.Second {
		d = time.Second
	}
	if p.plan.RequeueAfter == 0 || d < p.plan.RequeueAfter {
		p.plan.RequeueAfter = d
	}
}
