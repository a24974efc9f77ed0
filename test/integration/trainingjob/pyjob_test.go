package trainingjob

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

// A reconcile reads its own creations from the cache before the cache has seen them: creating a
// PyJob's claim, Service and Job must neither fail the reconcile ("not found") nor report a name
// conflict that is not one.
func TestPyJobCreationIgnoresTheCachesLag(t *testing.T) {
	ns := env.Namespace(t)
	before := reconcileErrors(t, "pyjob")
	size := resource.MustParse("1Gi")
	var names []string
	for i := range 5 {
		p := &trainingv1alpha1.PyJob{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lag-%d", i), Namespace: ns},
			Spec: trainingv1alpha1.PyJobSpec{Image: "pytorch/pytorch:2.0", Command: []string{"python", "train.py"}, Workers: 2,
				DatasetPath: "/mnt/dataset", OutputPath: "/mnt/output", Output: &trainingv1alpha1.OutputStorage{Size: &size}},
		}
		if err := env.Client.Create(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		names = append(names, p.Name)
	}
	testenv.Eventually(t, func() error {
		for _, name := range names {
			p := &trainingv1alpha1.PyJob{}
			if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
				return err
			}
			if strings.Contains(p.Status.Message, "already exists") {
				t.Fatalf("%s reports a name conflict with its own object: %s", name, p.Status.Message)
			}
			if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &batchv1.Job{}); err != nil || p.Status.Phase == "" {
				return fmt.Errorf("%s: phase %q, Job: %v", name, p.Status.Phase, err)
			}
		}
		return nil
	})
	if got := reconcileErrors(t, "pyjob") - before; got != 0 {
		t.Errorf("%v PyJob reconciles failed while creating 5 PyJobs; want none", got)
	}
	// Two workers, likely on two nodes, share the claim kiln made: ReadWriteMany.
	claim := &corev1.PersistentVolumeClaim{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "lag-0-output"}, claim); err != nil {
		t.Fatal(err)
	}
	if modes := claim.Spec.AccessModes; len(modes) != 1 || modes[0] != corev1.ReadWriteMany {
		t.Errorf("the output claim of 2 workers is %v, want ReadWriteMany", modes)
	}
}

// reconcileErrors is controller-runtime's count of failed reconciles of a controller so far.
func reconcileErrors(t *testing.T, controller string) float64 {
	return testenv.MetricValue(t, "controller_runtime_reconcile_errors_total", map[string]string{"controller": controller})
}

// A Job of the PyJob's name that someone else made (so not in kiln's cache) is never adopted: the
// PyJob says why it cannot start.
func TestPyJobReportsARealNameConflict(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	foreign := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns}, Spec: batchv1.JobSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}}},
	}}
	if err := env.Client.Create(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	p := &trainingv1alpha1.PyJob{
		ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns},
		Spec:       trainingv1alpha1.PyJobSpec{Image: "pytorch/pytorch:2.0", Command: []string{"python", "train.py"}, DatasetPath: "/mnt/dataset", OutputPath: "/mnt/output"},
	}
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		if !strings.Contains(p.Status.Message, "Job taken already exists and belongs to nothing kiln made, not to PyJob taken") {
			return fmt.Errorf("status message %q", p.Status.Message)
		}
		return nil
	})
}

// A PyJob in a Kueue queue: its batch Job carries the queue and priority labels (Kueue's webhook
// then suspends it until admitted), kiln never resumes a Job Kueue suspended, and the PyJob says
// it is queued. Here the test plays Kueue.
func TestPyJobComposesWithKueue(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	p := &trainingv1alpha1.PyJob{
		ObjectMeta: metav1.ObjectMeta{Name: "queued", Namespace: ns, Labels: map[string]string{
			"kueue.x-k8s.io/queue-name": "team-a", "kueue.x-k8s.io/priority-class": "high"}},
		Spec: trainingv1alpha1.PyJobSpec{Image: "pytorch/pytorch:2.0", Command: []string{"python", "train.py"}, Workers: 2,
			DatasetPath: "/mnt/dataset", OutputPath: "/mnt/output"},
	}
	key, bj := startPyJob(t, p)
	if bj.Labels["kueue.x-k8s.io/queue-name"] != "team-a" || bj.Labels["kueue.x-k8s.io/priority-class"] != "high" {
		t.Errorf("batch Job labels %v: want Kueue's queue and priority", bj.Labels)
	}
	setSuspend := func(s bool) {
		testenv.Eventually(t, func() error {
			if err := env.Client.Get(context.Background(), key, bj); err != nil {
				return err
			}
			bj.Spec.Suspend = &s
			return env.Client.Update(context.Background(), bj)
		})
	}
	suspended := func() bool {
		if err := env.Client.Get(context.Background(), key, bj); err != nil {
			t.Fatal(err)
		}
		return bj.Spec.Suspend != nil && *bj.Spec.Suspend
	}
	setSuspend(true) // Kueue queues it
	testenv.Eventually(t, func() error {
		fresh := &trainingv1alpha1.PyJob{}
		if err := env.Client.Get(context.Background(), key, fresh); err != nil {
			return err
		}
		if fresh.Status.Phase != trainingv1alpha1.PyJobPending || fresh.Status.Message != "waiting for Kueue to admit it from LocalQueue team-a" {
			return fmt.Errorf("PyJob %s: %q", fresh.Status.Phase, fresh.Status.Message)
		}
		return nil
	})
	testenv.Consistently(t, func() error {
		if !suspended() {
			return fmt.Errorf("kiln resumed a Job Kueue suspended")
		}
		return nil
	})
	setSuspend(false) // Kueue admits it
	testenv.Consistently(t, func() error {
		if suspended() {
			return fmt.Errorf("the admitted Job was suspended again")
		}
		return nil
	})
}

// finishBatchJob sets the status the job controller writes when a batch Job ends: complete (all
// workers succeeded) or failed (retries exhausted).
func finishBatchJob(t *testing.T, key client.ObjectKey, succeeded bool) {
	t.Helper()
	testenv.Eventually(t, func() error {
		bj := &batchv1.Job{}
		if err := env.Client.Get(context.Background(), key, bj); err != nil {
			return err
		}
		now := metav1.Now()
		start := metav1.NewTime(now.Add(-time.Minute))
		bj.Status.StartTime = &start
		cond := func(t batchv1.JobConditionType, reason string) batchv1.JobCondition {
			return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: reason, LastProbeTime: now, LastTransitionTime: now}
		}
		if succeeded {
			bj.Status.Succeeded, bj.Status.CompletionTime = *bj.Spec.Completions, &now
			bj.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached"), cond(batchv1.JobComplete, "CompletionsReached")}
		} else {
			bj.Status.Failed = 1
			bj.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobFailureTarget, "BackoffLimitExceeded"), cond(batchv1.JobFailed, "BackoffLimitExceeded")}
		}
		return env.Client.Status().Update(context.Background(), bj)
	})
}

func waitPyJobPhase(t *testing.T, key client.ObjectKey, phase trainingv1alpha1.PyJobPhase) *trainingv1alpha1.PyJob {
	t.Helper()
	return env.WaitPyJobPhase(t, key, phase, testenv.Timeout)
}

// A finished run never trains again: deleting its batch Job (by hand, or a TTL controller) does
// not make kiln create a new one, and the PyJob keeps its verdict.
func TestAFinishedPyJobNeverRunsAgain(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	p := builder.PyJob("done", ns)
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(p)
	finishBatchJob(t, key, true)
	waitPyJobPhase(t, key, trainingv1alpha1.PyJobSucceeded)
	bj := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: ns}}
	if err := env.Client.Delete(context.Background(), bj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	testenv.Consistently(t, func() error {
		if err := env.Client.Get(context.Background(), key, &batchv1.Job{}); err == nil {
			return fmt.Errorf("a new batch Job was created for the finished PyJob")
		}
		fresh := &trainingv1alpha1.PyJob{}
		if err := env.Client.Get(context.Background(), key, fresh); err != nil {
			return err
		}
		if fresh.Status.Phase != trainingv1alpha1.PyJobSucceeded {
			return fmt.Errorf("PyJob is %s (%q) once its batch Job is gone, want Succeeded", fresh.Status.Phase, fresh.Status.Message)
		}
		return nil
	})
}

// A failed run keeps the time it failed as its completionTime, so ttlSecondsAfterFinished runs
// out and deletes it.
func TestAFailedPyJobIsDeletedByItsTTL(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	p := builder.PyJob("failed", ns)
	p.Spec.TTLSecondsAfterFinished = ptr.To[int32](3)
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(p)
	finishBatchJob(t, key, false)
	first := waitPyJobPhase(t, key, trainingv1alpha1.PyJobFailed).Status.CompletionTime
	if first == nil {
		t.Fatal("a failed PyJob has no completionTime")
	}
	testenv.Eventually(t, func() error {
		fresh := &trainingv1alpha1.PyJob{}
		err := env.Client.Get(context.Background(), key, fresh)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil && !fresh.Status.CompletionTime.Equal(first) {
			t.Fatalf("completionTime moved from %v to %v", first, fresh.Status.CompletionTime)
		}
		return fmt.Errorf("the failed PyJob still exists %s after it failed (ttl 3s): %v", time.Since(first.Time).Round(time.Second), err)
	})
}

// A PyJob with a script and no command gets the script's ConfigMap, owned and immutable, and a
// batch Job that runs it: no image build.
func TestPyJobRunsAnInlineScript(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	p := builder.PyJob("inline", ns)
	p.Spec.Command, p.Spec.Script = nil, "import torch\nprint(torch.__version__)\n"
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	cm, bj := &corev1.ConfigMap{}, &batchv1.Job{}
	testenv.Eventually(t, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "inline-script"}, cm); err != nil {
			return err
		}
		return env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), bj)
	})
	if cm.Data["main.py"] != p.Spec.Script || cm.Immutable == nil || !*cm.Immutable || !metav1.IsControlledBy(cm, p) {
		t.Errorf("ConfigMap %v (immutable %v, owners %v): want the script, immutable, owned by the PyJob", cm.Data, cm.Immutable, cm.OwnerReferences)
	}
	c := bj.Spec.Template.Spec.Containers[0]
	if strings.Join(c.Command, " ") != "python /opt/kiln/script/main.py" {
		t.Errorf("the batch Job runs %q, want python /opt/kiln/script/main.py", c.Command)
	}
	// The controller writes the status meanwhile: a conflict is not the answer under test.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh := &trainingv1alpha1.PyJob{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), fresh); err != nil {
			return err
		}
		fresh.Spec.Script = "print('changed')"
		return env.Client.Update(context.Background(), fresh)
	})
	if err == nil || !strings.Contains(err.Error(), "spec.script is immutable") {
		t.Errorf("changing the script: %v, want spec.script is immutable", err)
	}
}

// The fields a batch Job lets change reach the running Job when the PyJob's change.
func TestPyJobEditsReachTheBatchJob(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	p := builder.PyJob("edited", ns)
	key, bj := startPyJob(t, p)
	if *bj.Spec.BackoffLimit != 6 || bj.Spec.ActiveDeadlineSeconds != nil {
		t.Fatalf("new Job: backoffLimit %d, activeDeadlineSeconds %v; want 6 and none", *bj.Spec.BackoffLimit, bj.Spec.ActiveDeadlineSeconds)
	}
	testenv.Eventually(t, func() error {
		fresh := &trainingv1alpha1.PyJob{}
		if err := env.Client.Get(context.Background(), key, fresh); err != nil {
			return err
		}
		fresh.Spec.BackoffLimit, fresh.Spec.ActiveDeadlineSeconds = ptr.To[int32](1), ptr.To[int64](600)
		return env.Client.Update(context.Background(), fresh)
	})
	testenv.Eventually(t, func() error {
		if err := env.Client.Get(context.Background(), key, bj); err != nil {
			return err
		}
		if *bj.Spec.BackoffLimit != 1 || ptr.Deref(bj.Spec.ActiveDeadlineSeconds, 0) != 600 {
			return fmt.Errorf("Job backoffLimit %d, activeDeadlineSeconds %v: want 1 and 600", *bj.Spec.BackoffLimit, bj.Spec.ActiveDeadlineSeconds)
		}
		return nil
	})
}

// reasons lists the reasons of the events about a PyJob, oldest first.
func reasons(t *testing.T, p *trainingv1alpha1.PyJob) []string {
	t.Helper()
	var events eventsv1.EventList
	if err := env.Client.List(context.Background(), &events, client.InNamespace(p.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range events.Items {
		if e.Regarding.Kind == "PyJob" && e.Regarding.Name == p.Name {
			out = append(out, e.Reason)
		}
	}
	return out
}

// A PyJob's transitions are events and move the metrics the kubeflow.org kinds have, under
// framework "pyjob".
func TestPyJobTransitionsAreEventsAndMetrics(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	pyjob := map[string]string{"framework": "pyjob"}
	counted := map[string]string{"framework": "pyjob", "job_namespace": ns}
	toRunning := testenv.MetricValue(t, "kiln_job_time_to_running_seconds", pyjob)
	succeeded := testenv.MetricValue(t, "kiln_job_duration_seconds", map[string]string{"framework": "pyjob", "outcome": "succeeded"})
	p := builder.PyJob("told", ns)
	key, bj := startPyJob(t, p)
	// The batch Job's pod, as its controller and a kubelet would make it.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "told-0", Namespace: ns, Labels: bj.Spec.Template.Labels},
		Spec: bj.Spec.Template.Spec}
	if err := env.Client.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	env.Run(t, pod)
	waitPyJobPhase(t, key, trainingv1alpha1.PyJobRunning)
	finishBatchJob(t, key, true)
	waitPyJobPhase(t, key, trainingv1alpha1.PyJobSucceeded)
	testenv.Eventually(t, func() error {
		got := strings.Join(reasons(t, p), ",")
		for _, want := range []string{"PyJobRunning", "PyJobSucceeded"} {
			if !strings.Contains(got, want) {
				return fmt.Errorf("events %s: want %s", got, want)
			}
		}
		return nil
	})
	for name, want := range map[string]float64{
		"training_operator_jobs_created_total":    1,
		"training_operator_jobs_successful_total": 1,
		"training_operator_jobs_failed_total":     0,
	} {
		if got := testenv.MetricValue(t, name, counted); got != want {
			t.Errorf("%s%v = %v, want %v", name, counted, got, want)
		}
	}
	if got := testenv.MetricValue(t, "kiln_job_time_to_running_seconds", pyjob) - toRunning; got < 1 {
		t.Errorf("time to running observed %v times more, want at least once", got)
	}
	if got := testenv.MetricValue(t, "kiln_job_duration_seconds", map[string]string{"framework": "pyjob", "outcome": "succeeded"}) - succeeded; got < 1 {
		t.Errorf("duration of succeeded runs observed %v times more, want at least once", got)
	}
}

// A PyJob created again under the name of one whose Retain claim is still there mounts that
// claim with its data, and says so in a condition and an event.
func TestARecreatedPyJobSaysItReusesTheOutputClaim(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	size := resource.MustParse("1Gi")
	newJob := func() *trainingv1alpha1.PyJob {
		p := builder.PyJob("again", ns)
		p.Spec.OutputPath, p.Spec.Output = "/mnt/output", &trainingv1alpha1.OutputStorage{Size: &size, ReclaimPolicy: trainingv1alpha1.OutputRetain}
		return p
	}
	first := newJob()
	if err := env.Client.Create(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	claim := client.ObjectKey{Namespace: ns, Name: "again-output"}
	testenv.Eventually(t, func() error { return env.Client.Get(context.Background(), claim, &corev1.PersistentVolumeClaim{}) })
	if c := waitPyJobPhase(t, client.ObjectKeyFromObject(first), trainingv1alpha1.PyJobPending); meta.FindStatusCondition(c.Status.Conditions, "OutputReused") != nil {
		t.Fatalf("the first PyJob says it reuses the claim it created: %+v", c.Status.Conditions)
	}
	if err := env.Client.Delete(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(first), &trainingv1alpha1.PyJob{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the first PyJob is not gone yet: %v", err)
		}
		return nil
	})
	time.Sleep(1100 * time.Millisecond) // creation times have a one-second grain
	second := newJob()
	if err := env.Client.Create(context.Background(), second); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() error {
		fresh := &trainingv1alpha1.PyJob{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(second), fresh); err != nil {
			return err
		}
		c := meta.FindStatusCondition(fresh.Status.Conditions, "OutputReused")
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "output claim again-output was created on") {
			return fmt.Errorf("OutputReused condition %+v", c)
		}
		if !strings.Contains(strings.Join(reasons(t, second), ","), "OutputClaimReused") {
			return fmt.Errorf("no OutputClaimReused event yet: %v", reasons(t, second))
		}
		return nil
	})
}

// A worker whose image cannot be pulled keeps the PyJob Pending with a message that names the
// worker, the reason and the fix (the cache keeps a blocking waiting reason of a pod).
func TestAPyJobWithABadImageSaysWhy(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	p := builder.PyJob("typo", ns)
	key, bj := startPyJob(t, p)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "typo-0", Namespace: ns, Labels: bj.Spec.Template.Labels,
		Annotations: map[string]string{batchv1.JobCompletionIndexAnnotation: "0"}}, Spec: bj.Spec.Template.Spec}
	if err := env.Client.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "trainer", Image: "pytorch/pytorch:2.0",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: `pull access denied for pytorch/pytorh`}}}}}
	if err := env.Client.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() error {
		fresh := &trainingv1alpha1.PyJob{}
		if err := env.Client.Get(context.Background(), key, fresh); err != nil {
			return err
		}
		want := "worker 0 cannot start: container trainer is ErrImagePull: pull access denied for pytorch/pytorh; check the image name"
		if fresh.Status.Phase != trainingv1alpha1.PyJobPending || !strings.Contains(fresh.Status.Message, want) {
			return fmt.Errorf("PyJob %s %q, want Pending: %s", fresh.Status.Phase, fresh.Status.Message, want)
		}
		return nil
	})
}

// startPyJob creates p and waits for its batch Job.
func startPyJob(t *testing.T, p *trainingv1alpha1.PyJob) (client.ObjectKey, *batchv1.Job) {
	t.Helper()
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	key, bj := client.ObjectKeyFromObject(p), &batchv1.Job{}
	testenv.Eventually(t, func() error { return env.Client.Get(context.Background(), key, bj) })
	return key, bj
}
