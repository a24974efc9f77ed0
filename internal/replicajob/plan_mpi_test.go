package replicajob

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/framework/mpi"
	"github.com/kiln-ml/kiln/test/builder"
)

// MPI exercises what the engine offers kinds beyond one service per pod named by type and
// index: its own pod names, no services, a framework that decides on one replica type.
func TestPlanMPINamesAndServices(t *testing.T) {
	ssh := newWorld(mpi.New(mpi.Config{}), builder.MPIJob("pi", "ns").Replicas("Launcher", 1).Replicas("Worker", 2))
	p := ssh.plan(t)
	want := []string{"pi-launcher", "pi-worker-0", "pi-worker-1"}
	if diff := cmp.Diff(want, names(p.CreatePods)); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, names(p.CreateServices)); diff != "" {
		t.Errorf("ssh mode services (-want +got):\n%s", diff)
	}
	exec := newWorld(mpi.New(mpi.Config{RemoteStart: kubeflowv1.MPIRemoteStartKubectlExec}), builder.MPIJob("pi", "ns").Replicas("Launcher", 1).Replicas("Worker", 2))
	if p := exec.plan(t); len(p.CreatePods) != 3 || len(p.CreateServices) != 0 {
		t.Errorf("kubectl-exec mode: %d pods and %v services, want 3 pods and no services", len(p.CreatePods), names(p.CreateServices))
	}
}

func TestPlanMPILauncherDecides(t *testing.T) {
	fw := mpi.New(mpi.Config{})
	w := newWorld(fw, builder.MPIJob("pi", "ns").Replicas("Launcher", 1).Replicas("Worker", 3))
	w.pod("Launcher", 0, corev1.PodRunning, 0)
	w.pod("Worker", 0, corev1.PodRunning, 0)
	w.pod("Worker", 1, corev1.PodFailed, 1)
	w.pod("Worker", 2, corev1.PodRunning, 0)
	p := w.plan(t)
	if c := last(p.Status); c.Type != kubeflowv1.JobRunning || c.Message != "MPIJob pi is running." {
		t.Errorf("a worker failed under the launcher: %s %q, want Running: the launcher decides", c.Type, c.Message)
	}
	if diff := cmp.Diff(map[kubeflowv1.ReplicaType][]int{"Launcher": {0}, "Worker": {0, 2}}, p.Running); diff != "" {
		t.Errorf("running (-want +got):\n%s", diff)
	}
	w.pod("Launcher", 0, corev1.PodFailed, 1)
	if c := last(w.plan(t).Status); c.Type != kubeflowv1.JobFailed || c.Message != "MPIJob pi is failed because 1 Launcher replica(s) failed." {
		t.Errorf("launcher failed: %s %q, want Failed", c.Type, c.Message)
	}
	w.pod("Launcher", 0, corev1.PodSucceeded, 0)
	if c := last(w.plan(t).Status); c.Type != kubeflowv1.JobSucceeded || c.Message != "MPIJob pi is successfully completed." {
		t.Errorf("launcher succeeded: %s %q, want Succeeded", c.Type, c.Message)
	}
}

// A kind without services keeps a replica's retries on its pod: the replacement of a failed pod
// is created carrying the count, which the reconciler keeps meanwhile, so backoffLimit holds.
func TestPlanRetriesWithoutServicesReachTheBackoffLimit(t *testing.T) {
	fw := mpi.New(mpi.Config{RemoteStart: kubeflowv1.MPIRemoteStartKubectlExec})
	w := newWorld(fw, builder.MPIJob("pi", "ns").Replicas("Launcher", 1).Replicas("Worker", 1).
		RestartPolicy("Launcher", kubeflowv1.RestartPolicyExitCode).BackoffLimit(2))
	w.pod("Worker", 0, corev1.PodRunning, 0)
	w.pod("Launcher", 0, corev1.PodRunning, 0)
	var carrying map[string]string // the annotations of the launcher now running
	for attempt := int32(1); attempt <= 2; attempt++ {
		w.pod("Launcher", 0, corev1.PodFailed, 137).Annotations = carrying // killed: retryable
		p := w.plan(t)
		if c := last(p.Status); c.Type != kubeflowv1.JobRestarting || len(p.DeletePods) != 1 {
			t.Fatalf("attempt %d: %s, deletes %v; want Restarting and the launcher deleted", attempt, c.Type, names(p.DeletePods))
		}
		if p.Carried["pi-launcher"] != attempt {
			t.Fatalf("attempt %d: carried %v, want pi-launcher=%d", attempt, p.Carried, attempt)
		}
		// The failed pod is gone; the next plan creates its replacement with the count.
		w.pods, w.carried = removeNamed(w.pods, "pi-launcher"), p.Carried
		p = w.plan(t)
		if len(p.CreatePods) != 1 || p.CreatePods[0].Annotations[AnnotationRestarts] != itoa(attempt) {
			t.Fatalf("attempt %d: creates %v, want pi-launcher carrying %d retries", attempt, names(p.CreatePods), attempt)
		}
		if c := last(p.Status); c.Type != kubeflowv1.JobRestarting {
			t.Errorf("attempt %d: replacement not running yet: %s, want still Restarting", attempt, c.Type)
		}
		carrying = p.CreatePods[0].Annotations
		w.pod("Launcher", 0, corev1.PodRunning, 0).Annotations = carrying
		w.carried = w.plan(t).Carried
		if len(w.carried) != 0 {
			t.Errorf("attempt %d: still carried %v once the replacement exists", attempt, w.carried)
		}
	}
	w.pod("Launcher", 0, corev1.PodFailed, 137).Annotations = carrying
	if c := last(w.plan(t).Status); c.Type != kubeflowv1.JobFailed || !strings.Contains(c.Message, "backoff limit") {
		t.Errorf("third kill with backoffLimit 2: %s %q, want Failed by the backoff limit", c.Type, c.Message)
	}
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// Under WaitForWorkersReady (mpi-operator's launcherCreationPolicy), the launcher is created
// once every worker's pod is Ready, not before.
func TestPlanMPILauncherWaitsForReadyWorkers(t *testing.T) {
	job := builder.MPIJob("pi", "ns").Replicas("Launcher", 1).Replicas("Worker", 2).Edit(func(j framework.Job) {
		j.SetAnnotations(map[string]string{kubeflowv1.AnnotationMPILauncherCreationPolicy: kubeflowv1.LauncherCreationWaitForWorkersReady})
	})
	w := newWorld(mpi.New(mpi.Config{}), job)
	first := w.plan(t).CreatePods
	if diff := cmp.Diff([]string{"pi-worker-0", "pi-worker-1"}, names(first)); diff != "" {
		t.Errorf("pods of a new job (-want +got):\n%s", diff)
	}
	for _, p := range first {
		if p.Annotations[AnnotationReadinessAwaited] != "true" {
			t.Errorf("worker %s is not marked awaited: the cache would not keep its Ready condition", p.Name)
		}
	}
	ready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
	w.pod("Worker", 0, corev1.PodRunning, 0).Status.Conditions = []corev1.PodCondition{ready}
	w.pod("Worker", 1, corev1.PodRunning, 0)
	p := w.plan(t)
	if len(p.CreatePods) != 0 {
		t.Errorf("one worker ready: creates %v, want nothing", names(p.CreatePods))
	}
	if c := getCondition(&p.Status, kubeflowv1.JobCreated); c == nil || !strings.Contains(c.Message, "the launcher waits for every worker to be ready (1 of 2 are)") {
		t.Errorf("Created condition %+v: want it to say the launcher waits for the workers", c)
	}
	w.pod("Worker", 1, corev1.PodRunning, 0).Status.Conditions = []corev1.PodCondition{ready}
	if diff := cmp.Diff([]string{"pi-launcher"}, names(w.plan(t).CreatePods)); diff != "" {
		t.Errorf("every worker ready: pods (-want +got):\n%s", diff)
	}
}

// A worker that failed before the launcher exists is never ready again: the launcher is created
// (and mpirun decides) rather than waiting forever. A gang holds the workers only: the launcher,
// created later, would keep it from ever being placed.
func TestPlanMPILauncherWaitEnds(t *testing.T) {
	job := builder.MPIJob("pi", "ns").Replicas("Launcher", 1).Replicas("Worker", 2).Edit(func(j framework.Job) {
		j.SetAnnotations(map[string]string{kubeflowv1.AnnotationMPILauncherCreationPolicy: kubeflowv1.LauncherCreationWaitForWorkersReady})
	})
	fw := mpi.New(mpi.Config{})
	w := newWorld(fw, job)
	w.pod("Worker", 0, corev1.PodRunning, 0)
	w.pod("Worker", 1, corev1.PodFailed, 1)
	if diff := cmp.Diff([]string{"pi-launcher"}, names(w.plan(t).CreatePods)); diff != "" {
		t.Errorf("a worker failed before the launcher: pods (-want +got):\n%s", diff)
	}
	if g := group(fw, w.job); g.MinMember != 2 {
		t.Errorf("gang of a launcher that waits: %d members, want the two workers", g.MinMember)
	}
}

// A job written at v2beta1 has one Service of its name, an extra: the engine never takes it for a
// stray replica service, and applies it again whenever the cache lacks it, though the extras'
// digest says they were synced (its deletion is seen as a child's event, not as an extra's).
func TestPlanMPIJobServiceIsAnExtra(t *testing.T) {
	w := newWorld(mpi.New(mpi.Config{}), builder.MPIJob("pi", "ns").Replicas("Launcher", 1).Replicas("Worker", 2))
	w.job.SetAnnotations(map[string]string{kubeflowv1.AnnotationAPIVersion: kubeflowv1.APIVersionV2beta1})
	w.all(corev1.PodRunning)
	in := Inputs{Pods: w.pods, Services: w.services, Now: now}
	p, err := plan(w.fw, w.plugins, w.job, in)
	if err != nil {
		t.Fatal(err)
	}
	var svc *corev1.Service
	for _, e := range p.Extras {
		if s, ok := e.Object.(*corev1.Service); ok && e.Wanted {
			svc = s
		}
	}
	if len(p.CreateJobs)+len(p.CreatePods) != 0 {
		t.Errorf("a launcher pod made before the launcher ran as a Job: creates Jobs %v and pods %v, want it to go on as a pod", names(p.CreateJobs), names(p.CreatePods))
	}
	if len(w.services) != 0 || len(p.CreateServices) != 0 || svc == nil || svc.Name != "pi" {
		t.Fatalf("services per pod %v and %v, the job's %v: want only the job's, pi, as an extra", names(w.services), names(p.CreateServices), svc)
	}
	in.ExtrasSynced = p.ExtrasDigest
	if again, err := plan(w.fw, w.plugins, w.job, in); err != nil || again.Extras == nil {
		t.Errorf("synced, and the cache has no Service pi: extras %v (%v), want them applied again", again.Extras, err)
	}
	seen := svc.DeepCopy()
	seen.UID = "pi-svc-uid"
	in.Services = []*corev1.Service{seen}
	third, err := plan(w.fw, w.plugins, w.job, in)
	if err != nil {
		t.Fatal(err)
	}
	if third.Extras != nil || len(third.DeleteServices) != 0 {
		t.Errorf("the cache has the job's Service: extras %d planned, services %v deleted; want neither", len(third.Extras), names(third.DeleteServices))
	}
}

// Written at v2beta1, the launcher is a batch Job, as mpi-operator's: the engine makes it with
// the job's run policies, reads the launcher's state from the Job and its pods, ends the job as
// the Job ends, and deletes it where it would delete the launcher's pod.
func TestPlanV2beta1LauncherIsABatchJob(t *testing.T) {
	w := newWorld(mpi.New(mpi.Config{}), builder.MPIJob("pi", "ns").Replicas("Launcher", 1).Replicas("Worker", 2).
		RestartPolicy("Launcher", kubeflowv1.RestartPolicyExitCode).BackoffLimit(3).ActiveDeadlineSeconds(600).TTLSecondsAfterFinished(0))
	w.job.SetAnnotations(map[string]string{kubeflowv1.AnnotationAPIVersion: kubeflowv1.APIVersionV2beta1})
	p := w.plan(t)
	if diff := cmp.Diff([]string{"pi-worker-0", "pi-worker-1"}, names(p.CreatePods)); diff != "" || len(p.CreateJobs) != 1 {
		t.Fatalf("pods (-want +got):\n%s\nand Jobs %v, want the launcher's Job", diff, names(p.CreateJobs))
	}
	desired := p.CreateJobs[0]
	spec, pod := desired.Spec, desired.Spec.Template.Spec
	if desired.Name != "pi-launcher" || desired.Labels[kubeflowv1.LabelReplicaType] != "launcher" || desired.Labels[kubeflowv1.LabelReplicaIndex] != "0" ||
		desired.OwnerReferences[0].Kind != "MPIJob" || desired.OwnerReferences[0].APIVersion != "kubeflow.org/v2beta1" || !*desired.OwnerReferences[0].Controller {
		t.Errorf("the launcher Job is %s with labels %v, owned by %v", desired.Name, desired.Labels, desired.OwnerReferences)
	}
	if *spec.BackoffLimit != 3 || *spec.ActiveDeadlineSeconds != 600 || *spec.TTLSecondsAfterFinished != 0 || *spec.PodReplacementPolicy != batchv1.Failed || spec.Suspend != nil {
		t.Errorf("the launcher Job's run policies: backoffLimit %d, deadline %d, TTL %d, replacement %s, suspend %v",
			*spec.BackoffLimit, *spec.ActiveDeadlineSeconds, *spec.TTLSecondsAfterFinished, *spec.PodReplacementPolicy, spec.Suspend)
	}
	if pod.RestartPolicy != corev1.RestartPolicyNever || pod.Hostname != "pi-launcher" || pod.Subdomain != "pi" || spec.Template.Labels[kubeflowv1.LabelJobName] != "pi" {
		t.Errorf("the launcher's template: restart %s, hostname %s.%s, labels %v", pod.RestartPolicy, pod.Hostname, pod.Subdomain, spec.Template.Labels)
	}
	rule := spec.PodFailurePolicy.Rules[0]
	if rule.Action != batchv1.PodFailurePolicyActionFailJob || *rule.OnExitCodes.ContainerName != pod.Containers[0].Name ||
		len(rule.OnExitCodes.Values) != 127 || rule.OnExitCodes.Values[0] != 1 || rule.OnExitCodes.Values[126] != 127 {
		t.Errorf("ExitCode's pod failure policy: %+v", rule)
	}

	// The Job exists, its pod pending: the workers run, the job does not yet.
	w.pod("Worker", 0, corev1.PodRunning, 0)
	w.pod("Worker", 1, corev1.PodRunning, 0)
	job := desired.DeepCopy()
	job.UID, job.Spec = "launcher-job-uid", batchv1.JobSpec{}
	w.jobs = []*batchv1.Job{job}
	launcherPod := func(name string, phase corev1.PodPhase, exit int32) *corev1.Pod {
		created := metav1.NewTime(now.Add(time.Duration(name[len(name)-1]) * time.Second)) // pi-launcher-b after pi-launcher-a
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name), Labels: desired.Spec.Template.Labels, CreationTimestamp: created,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
			Status: corev1.PodStatus{Phase: phase}}
		if phase == corev1.PodFailed {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: pod.Containers[0].Name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit}}}}
		}
		return p
	}
	workers := w.pods
	w.pods = append(workers, launcherPod("pi-launcher-a", corev1.PodPending, 0))
	p = w.plan(t)
	if len(p.CreateJobs)+len(p.CreatePods)+len(p.DeletePods) != 0 || hasCondition(&p.Status, kubeflowv1.JobRunning) {
		t.Errorf("launcher pending: creates %v %v, deletes %v, conditions %v", names(p.CreateJobs), names(p.CreatePods), names(p.DeletePods), p.Status.Conditions)
	}
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue, Reason: "JobSuspended", Message: "Job suspended"}}
	if c := getCondition(&w.plan(t).Status, kubeflowv1.JobCreated); !strings.Contains(c.Message, "the launcher's batch Job pi-launcher is suspended, not by kiln (Job suspended)") {
		t.Errorf("the launcher Job suspended by another: Created says %q", c.Message)
	}
	job.Status.Conditions = nil
	w.pods = append(workers, launcherPod("pi-launcher-a", corev1.PodRunning, 0))
	p = w.plan(t)
	if c := last(p.Status); c.Type != kubeflowv1.JobRunning || c.Reason != "MPIJobRunning" || p.Status.ReplicaStatuses["Launcher"].Active != 1 {
		t.Errorf("launcher running: %s %s, launcher %+v", c.Type, c.Reason, p.Status.ReplicaStatuses["Launcher"])
	}

	// Killed, and retried by the Job: Restarting until its new pod runs; the retry counts.
	job.Status.Failed = 1
	w.pods = append(workers, launcherPod("pi-launcher-a", corev1.PodFailed, 137), launcherPod("pi-launcher-b", corev1.PodPending, 0))
	p = w.plan(t)
	if c := last(p.Status); c.Type != kubeflowv1.JobRestarting || len(p.DeletePods)+len(p.CreateJobs) != 0 {
		t.Errorf("launcher retried by its Job: %s, deletes %v, creates %v; want Restarting and nothing written", c.Type, names(p.DeletePods), names(p.CreateJobs))
	}
	// Its own retries past the limit, before the Job says it failed: the Job's verdict is awaited,
	// and while it terminates its pods (FailureTarget) the job does not say Restarting.
	job.Status.Failed = 4
	if p := w.plan(t); isFinished(&p.Status) {
		t.Errorf("the Job's retries past backoffLimit: %v, want the Job's own verdict awaited", last(p.Status))
	}
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue}}
	if c := last(w.plan(t).Status); c.Type == kubeflowv1.JobRestarting || c.Type == kubeflowv1.JobFailed {
		t.Errorf("the Job failing (FailureTarget): %s, want no new condition until it has failed", c.Type)
	}
	// In-place restarts (OnFailure) are retries too, as the Job counts them.
	job.Status = batchv1.JobStatus{Failed: 1}
	restarted := launcherPod("pi-launcher-b", corev1.PodRunning, 0)
	restarted.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: pod.Containers[0].Name, RestartCount: 2}}
	w.pods = append(workers, launcherPod("pi-launcher-a", corev1.PodFailed, 137), restarted)
	w.job.(*kubeflowv1.MPIJob).Spec.RunPolicy.BackoffLimit = ptr.To[int32](2)
	if p := w.plan(t); isFinished(&p.Status) {
		t.Errorf("3 retries of the Job itself, backoffLimit 2: %v, want the Job's verdict awaited", last(p.Status))
	}
	w.job.(*kubeflowv1.MPIJob).Spec.RunPolicy.BackoffLimit = ptr.To[int32](3)
	job.Status.Failed = 4
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}
	w.pods = append(workers, launcherPod("pi-launcher-a", corev1.PodFailed, 137), launcherPod("pi-launcher-b", corev1.PodFailed, 1))
	p = w.plan(t)
	want := "Job has reached the specified backoff limit: the launcher's last pod pi-launcher-b exited with code 1"
	if c := last(p.Status); c.Type != kubeflowv1.JobFailed || c.Reason != "BackoffLimitExceeded" || c.Message != want {
		t.Errorf("the Job failed: %s %s %q, want Failed BackoffLimitExceeded %q", c.Type, c.Reason, c.Message, want)
	}
	// Stored: the running workers go (cleanPodPolicy Running); the finished Job stays.
	p = afterTheVerdictIsStored(t, w, p)
	if diff := cmp.Diff([]string{"pi-worker-0", "pi-worker-1"}, names(p.DeletePods)); diff != "" || len(p.DeleteJobs) != 0 {
		t.Errorf("cleaned up: pods (-want +got):\n%s\nJobs %v", diff, names(p.DeleteJobs))
	}

	// Succeeded, and deleted at once by its TTL: the job succeeds from what was kept of it.
	w.job.GetJobStatus().Conditions, w.job.GetJobStatus().CompletionTime = nil, nil
	job.Status = batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}
	job.DeletionTimestamp = &metav1.Time{Time: now}
	w.pods = workers
	if c := last(w.plan(t).Status); c.Type != kubeflowv1.JobSucceeded {
		t.Errorf("the Job completed and was deleted: %s, want Succeeded", c.Type)
	}

	// A Job deleted before it finished is made again once gone; suspended, the Job goes.
	job.Status = batchv1.JobStatus{}
	if p := w.plan(t); len(p.CreateJobs) != 0 || isFinished(&p.Status) {
		t.Errorf("the Job going: creates %v, status %v; want to wait for it", names(p.CreateJobs), last(p.Status))
	}
	job.DeletionTimestamp = nil
	w.job.(*kubeflowv1.MPIJob).Spec.RunPolicy.Suspend = ptr.To(true)
	if p := w.plan(t); len(p.DeleteJobs) != 1 || len(p.DeletePods) != 2 {
		t.Errorf("suspended: deletes Jobs %v and pods %v, want the launcher's Job and the workers", names(p.DeleteJobs), names(p.DeletePods))
	}
}
