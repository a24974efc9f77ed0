package replicajob

import (
	"fmt"
	"slices"
	"sort"
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
	"github.com/kiln-ml/kiln/internal/framework/pytorch"
	"github.com/kiln-ml/kiln/internal/framework/tensorflow"
	"github.com/kiln-ml/kiln/internal/kueue"
	"github.com/kiln-ml/kiln/test/builder"
)

var (
	now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tf  = tensorflow.New(tensorflow.Config{})
	pt  = pytorch.New(pytorch.Config{})
)

// world is a job and the children a reconcile sees.
type world struct {
	fw       framework.Framework
	plugins  plugins
	job      framework.Job
	pods     []*corev1.Pod
	services []*corev1.Service
	jobs     []*batchv1.Job
	// carried is what the reconciler keeps between plans (Plan.Carried).
	carried map[string]int32
}

func newWorld(fw framework.Framework, b *builder.Job) *world {
	job := b.Obj()
	job.SetUID("job-uid")
	Default(fw, job, kubeflowv1.CleanPodPolicyRunning)
	return &world{fw: fw, plugins: pluginsFor(Options{}), job: job}
}

// all gives every replica index its pod (in phase) and service.
func (w *world) all(phase corev1.PodPhase) *world {
	for rtype, spec := range w.job.GetReplicaSpecs() {
		for i := range int(*spec.Replicas) {
			w.pod(rtype, i, phase, 0)
		}
	}
	return w
}

// pod adds (or replaces) the pod of one replica, with its service.
func (w *world) pod(rtype kubeflowv1.ReplicaType, index int, phase corev1.PodPhase, exit int32) *corev1.Pod {
	p, err := desiredPod(w.fw, nil, w.job, rtype, index)
	if err != nil {
		panic(err)
	}
	p.UID = types.UID(fmt.Sprintf("%s-uid-%d", p.Name, len(w.pods)))
	p.Status.Phase = phase
	if phase == corev1.PodSucceeded || phase == corev1.PodFailed {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[defaultContainerIndex(w.fw, &p.Spec)].Name,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit}}}}
	}
	p.Spec = corev1.PodSpec{} // as the manager's cache keeps pods: without their specs
	kept := w.pods[:0]
	for _, old := range w.pods {
		if old.Name != p.Name {
			kept = append(kept, old)
		}
	}
	w.pods = append(kept, p)
	if w.service(p.Name) == nil && w.fw.HasServices(w.job) {
		s := desiredService(w.fw, w.job, rtype, index)
		s.UID = types.UID(s.Name + "-svc-uid")
		w.services = append(w.services, s)
	}
	return p
}

func removeNamed(pods []*corev1.Pod, name string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.Name != name {
			out = append(out, p)
		}
	}
	return out
}

func (w *world) service(name string) *corev1.Service {
	for _, s := range w.services {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// plan plans the world's job, which it must not change: the engine plans the cache's own copy.
func (w *world) plan(t *testing.T) *Plan {
	t.Helper()
	read := w.job.DeepCopyObject()
	p, err := plan(w.fw, w.plugins, w.job, Inputs{Pods: w.pods, Services: w.services, Jobs: w.jobs, Now: now, Carried: w.carried})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(read, w.job); d != "" {
		t.Errorf("plan changed the job it read (-before +after):\n%s", d)
	}
	return p
}

func names[T metav1.Object](objs []T) []string {
	out := []string{}
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	sort.Strings(out)
	return out
}

func last(st kubeflowv1.JobStatus) kubeflowv1.JobCondition {
	if len(st.Conditions) == 0 {
		return kubeflowv1.JobCondition{}
	}
	return st.Conditions[len(st.Conditions)-1]
}

func TestPlanNewJobCreatesEveryPodAndService(t *testing.T) {
	w := newWorld(tf, builder.TFJob("dist", "ns").Replicas("Chief", 1).Replicas("PS", 2).Replicas("Worker", 4))
	p := w.plan(t)
	want := []string{"dist-chief-0", "dist-ps-0", "dist-ps-1", "dist-worker-0", "dist-worker-1", "dist-worker-2", "dist-worker-3"}
	if diff := cmp.Diff(want, names(p.CreatePods)); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, names(p.CreateServices)); diff != "" {
		t.Errorf("services (-want +got):\n%s", diff)
	}
	if p.Status.StartTime == nil || last(p.Status).Type != kubeflowv1.JobCreated {
		t.Errorf("status = %+v, want Created and a start time", p.Status)
	}
}

func TestPlanVerdicts(t *testing.T) {
	tests := []struct {
		name      string
		world     func() *world
		wantType  kubeflowv1.JobConditionType
		wantMsg   string
		wantGone  []string // pods deleted
		wantFresh []string // pods created
	}{{
		name: "TF chief running drives Running",
		world: func() *world {
			return newWorld(tf, builder.TFJob("j", "ns").Replicas("Chief", 1).Replicas("Worker", 2)).all(corev1.PodRunning)
		},
		wantType: kubeflowv1.JobRunning, wantMsg: "TFJob ns/j is running.",
	}, {
		name: "TF worker 0 completing succeeds the job; running pods go (cleanPodPolicy Running)",
		world: func() *world {
			w := newWorld(tf, builder.TFJob("j", "ns").Replicas("PS", 1).Replicas("Worker", 2)).all(corev1.PodRunning)
			w.pod("Worker", 0, corev1.PodSucceeded, 0)
			return w
		},
		wantType: kubeflowv1.JobSucceeded, wantMsg: "TFJob ns/j successfully completed.", wantGone: []string{"j-ps-0", "j-worker-1"},
	}, {
		name: "TF PS failure under Never fails the job",
		world: func() *world {
			w := newWorld(tf, builder.TFJob("j", "ns").Replicas("PS", 1).Replicas("Worker", 1)).all(corev1.PodRunning)
			w.pod("PS", 0, corev1.PodFailed, 1)
			return w
		},
		wantType: kubeflowv1.JobFailed, wantMsg: "TFJob ns/j has failed because 1 PS replica(s) failed.", wantGone: []string{"j-worker-0"},
	}, {
		name: "TF dynamic worker failure is ignored",
		world: func() *world {
			w := newWorld(tf, builder.TFJob("j", "ns").Replicas("Chief", 1).Replicas("Worker", 2).Edit(func(j framework.Job) {
				j.(*kubeflowv1.TFJob).Spec.EnableDynamicWorker = true
			})).all(corev1.PodRunning)
			w.pod("Worker", 1, corev1.PodFailed, 1)
			return w
		},
		wantType: kubeflowv1.JobRunning,
	}, {
		name: "ExitCode 137 recreates the pod",
		world: func() *world {
			w := newWorld(tf, builder.TFJob("j", "ns").Replicas("Worker", 2).RestartPolicy("Worker", kubeflowv1.RestartPolicyExitCode)).all(corev1.PodRunning)
			w.pod("Worker", 1, corev1.PodFailed, 137)
			return w
		},
		wantType: kubeflowv1.JobRestarting, wantMsg: "TFJob j is restarting because 1 Worker replica(s) failed.", wantGone: []string{"j-worker-1"},
	}, {
		name: "ExitCode 2 fails the job",
		world: func() *world {
			w := newWorld(tf, builder.TFJob("j", "ns").Replicas("Worker", 2).RestartPolicy("Worker", kubeflowv1.RestartPolicyExitCode)).all(corev1.PodRunning)
			w.pod("Worker", 1, corev1.PodFailed, 2)
			return w
		},
		wantType: kubeflowv1.JobFailed, wantGone: []string{"j-worker-0"},
	}, {
		name: "PyTorch master success wins over a worker failure seen at the same time",
		world: func() *world {
			w := newWorld(pt, builder.PyTorchJob("j", "ns").Replicas("Master", 1).Replicas("Worker", 1).RestartPolicy("Worker", kubeflowv1.RestartPolicyNever)).all(corev1.PodRunning)
			w.pod("Master", 0, corev1.PodSucceeded, 0)
			w.pod("Worker", 0, corev1.PodFailed, 1)
			return w
		},
		wantType: kubeflowv1.JobSucceeded, wantMsg: "PyTorchJob j is successfully completed.",
	}, {
		name: "backoffLimit 0: the first retryable failure fails the job",
		world: func() *world {
			w := newWorld(pt, builder.PyTorchJob("j", "ns").Replicas("Worker", 2).BackoffLimit(0)).all(corev1.PodRunning)
			w.pod("Worker", 1, corev1.PodFailed, 1)
			return w
		},
		wantType: kubeflowv1.JobFailed, wantMsg: "Job j has failed because it has reached the specified backoff limit", wantGone: []string{"j-worker-0"},
	}, {
		name: "a retry already recorded on the service is not counted twice",
		world: func() *world {
			w := newWorld(pt, builder.PyTorchJob("j", "ns").Replicas("Worker", 2).BackoffLimit(1)).all(corev1.PodRunning)
			failed := w.pod("Worker", 1, corev1.PodFailed, 1)
			w.service("j-worker-1").Annotations = map[string]string{AnnotationRestarts: "1", AnnotationRestartedPod: string(failed.UID)}
			return w
		},
		wantType: kubeflowv1.JobRestarting, wantGone: []string{"j-worker-1"},
	}, {
		name: "deadline passed",
		world: func() *world {
			w := newWorld(tf, builder.TFJob("j", "ns").Replicas("Worker", 1).ActiveDeadlineSeconds(10)).all(corev1.PodRunning)
			w.job.GetJobStatus().StartTime = &metav1.Time{Time: now.Add(-10 * time.Second)}
			return w
		},
		wantType: kubeflowv1.JobFailed, wantMsg: "Job j has failed because it was active longer than specified deadline", wantGone: []string{"j-worker-0"},
	}, {
		name: "a deadline beyond what a Duration holds never comes (it overflowed into the past)",
		world: func() *world {
			w := newWorld(tf, builder.TFJob("j", "ns").Replicas("Worker", 1).ActiveDeadlineSeconds(9_999_999_999)).all(corev1.PodRunning)
			w.job.GetJobStatus().StartTime = &metav1.Time{Time: now.Add(-10 * time.Second)}
			return w
		},
		wantType: kubeflowv1.JobRunning,
	}, {
		name: "scale down deletes the pods beyond replicas",
		world: func() *world {
			w := newWorld(pt, builder.PyTorchJob("j", "ns").Replicas("Worker", 3)).all(corev1.PodRunning)
			w.job.GetReplicaSpecs()["Worker"].Replicas = ptr.To[int32](1)
			return w
		},
		wantType: kubeflowv1.JobRunning, wantGone: []string{"j-worker-1", "j-worker-2"},
	}, {
		name: "a failed pod whose restart was recorded and deleted is recreated and the job stays Restarting",
		world: func() *world {
			w := newWorld(pt, builder.PyTorchJob("j", "ns").Replicas("Master", 1).Replicas("Worker", 1)).all(corev1.PodRunning)
			w.service("j-worker-0").Annotations = map[string]string{AnnotationRestarts: "1", AnnotationRestartedPod: "old-uid"}
			w.pods = removeNamed(w.pods, "j-worker-0")
			return w
		},
		wantType: kubeflowv1.JobRestarting, wantFresh: []string{"j-worker-0"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.world()
			p := w.plan(t)
			got := last(p.Status)
			if got.Type != tc.wantType || got.Status != corev1.ConditionTrue {
				t.Fatalf("last condition = %s=%s (%s), want %s=True; all: %+v", got.Type, got.Status, got.Message, tc.wantType, p.Status.Conditions)
			}
			if tc.wantMsg != "" && got.Message != tc.wantMsg {
				t.Errorf("message = %q, want %q", got.Message, tc.wantMsg)
			}
			deleted := p.DeletePods
			if tc.wantType == kubeflowv1.JobFailed || tc.wantType == kubeflowv1.JobSucceeded {
				deleted = afterTheVerdictIsStored(t, w, p).DeletePods
			}
			if diff := cmp.Diff(append([]string{}, tc.wantGone...), names(deleted)); diff != "" {
				t.Errorf("deleted pods (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(append([]string{}, tc.wantFresh...), names(p.CreatePods)); diff != "" {
				t.Errorf("created pods (-want +got):\n%s", diff)
			}
			if (tc.wantType == kubeflowv1.JobFailed || tc.wantType == kubeflowv1.JobSucceeded) && p.Status.CompletionTime == nil {
				t.Error("finished without a completion time")
			}
		})
	}
}

func TestPlanCleanPodPolicies(t *testing.T) {
	tests := []struct {
		policy kubeflowv1.CleanPodPolicy
		gone   []string
	}{
		{kubeflowv1.CleanPodPolicyAll, []string{"j-ps-0", "j-worker-0", "j-worker-1"}},
		{kubeflowv1.CleanPodPolicyRunning, []string{"j-ps-0", "j-worker-1"}},
		{kubeflowv1.CleanPodPolicyNone, []string{}},
	}
	for _, tc := range tests {
		w := newWorld(tf, builder.TFJob("j", "ns").Replicas("PS", 1).Replicas("Worker", 2).CleanPodPolicy(tc.policy)).all(corev1.PodRunning)
		w.pod("Worker", 0, corev1.PodSucceeded, 0)
		p := afterTheVerdictIsStored(t, w, w.plan(t))
		if diff := cmp.Diff(tc.gone, names(p.DeletePods)); diff != "" {
			t.Errorf("%s: deleted pods (-want +got):\n%s", tc.policy, diff)
		}
		if diff := cmp.Diff(tc.gone, names(p.DeleteServices)); diff != "" {
			t.Errorf("%s: deleted services (-want +got):\n%s", tc.policy, diff)
		}
	}
}

// afterTheVerdictIsStored checks that a plan which finishes the job touches no pod or service,
// stores its status as the write would, and returns the next reconcile's plan: the clean-up.
func afterTheVerdictIsStored(t *testing.T, w *world, finishing *Plan) *Plan {
	t.Helper()
	if n := len(finishing.DeletePods) + len(finishing.DeleteServices) + len(finishing.CreatePods) + len(finishing.CreateServices); n > 0 {
		t.Fatalf("the reconcile that finishes the job writes %d pods and services before its verdict is stored", n)
	}
	*w.job.GetJobStatus() = finishing.Status
	next := w.plan(t)
	if diff := cmp.Diff(finishing.Status, next.Status); diff != "" {
		t.Errorf("the clean-up reconcile changes the stored status (-stored +next):\n%s", diff)
	}
	return next
}

// A finishing job whose status write fails (a conflict, an apiserver restart) must not start
// again: the next reconcile still sees its pods, reaches the same verdict and creates nothing.
func TestPlanFinishedJobNeverRunsAgainWhenItsStatusWriteFails(t *testing.T) {
	w := newWorld(tf, builder.TFJob("j", "ns").Replicas("PS", 1).Replicas("Worker", 2).CleanPodPolicy(kubeflowv1.CleanPodPolicyAll)).all(corev1.PodRunning)
	w.pod("Worker", 0, corev1.PodSucceeded, 0)
	first := w.plan(t)
	// The write failed: the stored status is what it was, the world as the first plan left it.
	for _, gone := range first.DeletePods {
		w.pods = without(w.pods, string(gone.UID))
	}
	again := w.plan(t)
	if got := last(again.Status); got.Type != kubeflowv1.JobSucceeded {
		t.Errorf("after a failed status write the job is %s (%s), want Succeeded again", got.Type, got.Message)
	}
	if len(again.CreatePods) > 0 || len(again.CreateServices) > 0 {
		t.Errorf("after a failed status write the job starts again: creates pods %v, services %v", names(again.CreatePods), len(again.CreateServices))
	}
	if diff := cmp.Diff([]string{"j-ps-0", "j-worker-0", "j-worker-1"}, names(afterTheVerdictIsStored(t, w, again).DeletePods)); diff != "" {
		t.Errorf("clean-up once stored (-want +got):\n%s", diff)
	}
}

func TestPlanTTL(t *testing.T) {
	w := newWorld(tf, builder.TFJob("j", "ns").Replicas("Worker", 1).TTLSecondsAfterFinished(60))
	st := w.job.GetJobStatus()
	st.Conditions = []kubeflowv1.JobCondition{{Type: kubeflowv1.JobSucceeded, Status: corev1.ConditionTrue}}
	st.CompletionTime = &metav1.Time{Time: now.Add(-30 * time.Second)}
	if p := w.plan(t); p.DeleteJob || p.RequeueAfter != 30*time.Second {
		t.Errorf("30s before expiry: DeleteJob %v RequeueAfter %v, want false 30s", p.DeleteJob, p.RequeueAfter)
	}
	st.CompletionTime = &metav1.Time{Time: now.Add(-60 * time.Second)}
	if p := w.plan(t); !p.DeleteJob {
		t.Error("at expiry the job is not deleted")
	}
}

func TestPlanSuspendAndResume(t *testing.T) {
	w := newWorld(tf, builder.TFJob("j", "ns").Replicas("Worker", 2).Suspend(true)).all(corev1.PodRunning)
	setCondition(w.job.GetJobStatus(), kubeflowv1.JobCondition{Type: kubeflowv1.JobRunning, Status: corev1.ConditionTrue, Reason: "TFJobRunning"}, metav1.NewTime(now))
	p := w.plan(t)
	if diff := cmp.Diff([]string{"j-worker-0", "j-worker-1"}, names(p.DeletePods)); diff != "" {
		t.Errorf("suspend deletes (-want +got):\n%s", diff)
	}
	want := []cond{{"Created", "True", "TFJobCreated"}, {"Running", "False", "TFJobSuspended"}, {"Suspended", "True", "TFJobSuspended"}}
	if diff := cmp.Diff(want, conds(&p.Status)); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}

	resumed := newWorld(tf, builder.TFJob("j", "ns").Replicas("Worker", 2).Suspend(false))
	*resumed.job.GetJobStatus() = p.Status
	resumed.job.GetJobStatus().StartTime = &metav1.Time{Time: now.Add(-time.Hour)}
	p = resumed.plan(t)
	if len(p.CreatePods) != 2 || !p.Status.StartTime.Time.Equal(now) {
		t.Errorf("resume: %d pods created, startTime %v; want 2 and reset to now", len(p.CreatePods), p.Status.StartTime)
	}
}

// A job Kueue queues is suspended by Kueue: its Suspended condition says so and names the queue.
func TestPlanSuspendedByKueueSaysSo(t *testing.T) {
	queued := builder.TFJob("j", "ns").Replicas("Worker", 2).Suspend(true).Edit(func(j framework.Job) {
		j.SetLabels(map[string]string{kueue.QueueLabel: "team-a"})
	})
	p := newWorld(tf, queued).plan(t)
	if c := last(p.Status); c.Type != kubeflowv1.JobSuspended || c.Message != "TFJob j is suspended; waiting for Kueue to admit it from LocalQueue team-a." {
		t.Errorf("last condition %s: %q", c.Type, c.Message)
	}
	p = newWorld(tf, builder.TFJob("j", "ns").Replicas("Worker", 2).Suspend(true)).plan(t)
	if c := last(p.Status); c.Message != "TFJob j is suspended." {
		t.Errorf("without a queue: %q", c.Message)
	}
}

// A job that does not run yet says why in its Created condition: a pod that cannot start, pods
// the apiserver refuses; once it runs, Kubeflow's words again.
func TestCreatedSaysWhatKeepsThePods(t *testing.T) {
	w := newWorld(tf, builder.TFJob("j", "ns").Replicas("Worker", 2)).all(corev1.PodPending)
	w.pods[1].Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "tensorflow", State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: `secret "wandb" not found`}}}}
	p, err := plan(w.fw, w.plugins, w.job, Inputs{Pods: w.pods, Services: w.services, Now: now, Refused: `pods "j-worker-1" is forbidden: exceeded quota: team-a`})
	if err != nil {
		t.Fatal(err)
	}
	want := `TFJob j is created; pods cannot be created: pods "j-worker-1" is forbidden: exceeded quota: team-a; kiln retries until the quota or policy allows them; ` +
		`pod j-worker-1 cannot start: container tensorflow is CreateContainerConfigError: secret "wandb" not found; a Secret or ConfigMap it references (env, volumes) is missing: create it.`
	if c := getCondition(&p.Status, kubeflowv1.JobCreated); c.Message != want {
		t.Errorf("Created:\n got %q\nwant %q", c.Message, want)
	}
	running := newWorld(tf, builder.TFJob("j", "ns").Replicas("Worker", 2)).all(corev1.PodRunning)
	if c := getCondition(&running.plan(t).Status, kubeflowv1.JobCreated); c.Message != "TFJob j is created." {
		t.Errorf("Created of a running job: %q", c.Message)
	}
}

func TestDefaultNormalisesTypesAndAddsPorts(t *testing.T) {
	job := builder.TFJob("j", "ns").Replicas("worker", 2).Replicas("ps", 1).Obj()
	job.GetReplicaSpecs()["worker"].Replicas = nil
	Default(tf, job, kubeflowv1.CleanPodPolicyAll)
	specs := job.GetReplicaSpecs()
	if specs["Worker"] == nil || specs["PS"] == nil {
		t.Fatalf("replica types not normalised: %v", specs)
	}
	w := specs["Worker"]
	if *w.Replicas != 1 || w.RestartPolicy != kubeflowv1.RestartPolicyNever {
		t.Errorf("worker defaults: replicas %d restartPolicy %q", *w.Replicas, w.RestartPolicy)
	}
	if diff := cmp.Diff([]corev1.ContainerPort{{Name: "tfjob-port", ContainerPort: 2222}}, w.Template.Spec.Containers[0].Ports); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
	if *job.GetRunPolicy().CleanPodPolicy != kubeflowv1.CleanPodPolicyAll {
		t.Errorf("cleanPodPolicy = %v, want the operator default All", *job.GetRunPolicy().CleanPodPolicy)
	}
}

// A first status write that was paced still says when kiln first saw the job.
func TestPlanStartsAJobWhenFirstSeen(t *testing.T) {
	w := newWorld(tf, builder.TFJob("late", "ns").Replicas("Worker", 1))
	seen := now.Add(-20 * time.Second)
	p, err := plan(w.fw, w.plugins, w.job, Inputs{Pods: w.pods, Services: w.services, Now: now, Seen: seen})
	if err != nil {
		t.Fatal(err)
	}
	if st := p.Status; st.StartTime == nil || !st.StartTime.Time.Equal(seen) || !last(st).LastTransitionTime.Time.Equal(seen) {
		t.Errorf("startTime %v, Created at %v; want both %v", st.StartTime, last(st).LastTransitionTime, seen)
	}
}

// A job whose gang waits says why in its Created condition, creates no pods while they are held,
// and says what Kubeflow says again once the gang is placed.
func TestPlanSaysWhyTheGangWaits(t *testing.T) {
	w := newWorld(tf, builder.TFJob("dist", "ns").Replicas("Worker", 2))
	p, err := plan(w.fw, w.plugins, w.job, Inputs{Now: now, GangWaiting: "waiting for 2 pods to be schedulable together: 0/1 nodes", HoldPods: true})
	if err != nil {
		t.Fatal(err)
	}
	c := getCondition(&p.Status, kubeflowv1.JobCreated)
	if want := "TFJob dist is created; waiting for 2 pods to be schedulable together: 0/1 nodes."; c == nil || c.Message != want {
		t.Fatalf("Created %+v, want message %q", c, want)
	}
	if len(p.CreatePods) != 0 || len(p.CreateServices) != 2 {
		t.Errorf("held: creates %v pods and %v services, want services only", names(p.CreatePods), names(p.CreateServices))
	}
	*w.job.GetJobStatus() = p.Status
	p = w.plan(t)
	if c := getCondition(&p.Status, kubeflowv1.JobCreated); c.Message != "TFJob dist is created." || len(p.CreatePods) != 2 {
		t.Errorf("placed: Created %q and %d pods to create, want Kubeflow's message and 2", c.Message, len(p.CreatePods))
	}
	if !conditionsTurned(w.job.GetJobStatus(), &p.Status) {
		t.Error("a changed Created message must be written like a condition that turned")
	}
}

// The Created writer's plan is the first write of a new job and nothing else: Created, the
// startTime, replica counts of zero, and no pod or service.
func TestCreatedOnlyPlansTheFirstWriteAlone(t *testing.T) {
	job := builder.TFJob("dist", "ns").Replicas("PS", 1).Replicas("Worker", 2).Obj()
	Default(tf, job, "")
	p, err := plan(tf, nil, job, Inputs{Now: now, CreatedOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.CreatePods)+len(p.CreateServices)+len(p.DeletePods)+len(p.DeleteServices) > 0 {
		t.Errorf("plan writes pods or services: %+v", p)
	}
	st := p.Status
	if c := getCondition(&st, kubeflowv1.JobCreated); c == nil || c.Message != "TFJob dist is created." || st.StartTime == nil || !st.StartTime.Time.Equal(now) {
		t.Errorf("status %+v: want Created and startTime %v", st, now)
	}
	if rs := st.ReplicaStatuses; len(rs) != 2 || rs["PS"] == nil || rs["Worker"] == nil || *rs["Worker"] != (kubeflowv1.ReplicaStatus{}) {
		t.Errorf("replicaStatuses %+v: want zero counts of PS and Worker", rs)
	}
}

// A template with an unnamed port (Kubeflow accepts it) gets a Service whose ports all have
// names: the apiserver refuses a Service with two ports and an unnamed one.
func TestServicePortsAreNamed(t *testing.T) {
	job := builder.TFJob("j", "ns").Replicas("Worker", 1).Obj()
	c := &job.GetReplicaSpecs()["Worker"].Template.Spec.Containers[0]
	c.Ports = []corev1.ContainerPort{{ContainerPort: 6006}, {ContainerPort: 6006, Protocol: corev1.ProtocolUDP}, {Name: "metrics", ContainerPort: 6006}}
	Default(tf, job, kubeflowv1.CleanPodPolicyAll)
	got := desiredService(tf, job, "Worker", 0).Spec.Ports
	want := []corev1.ServicePort{
		{Name: "tcp-6006", Port: 6006, Protocol: corev1.ProtocolTCP},
		{Name: "udp-6006", Port: 6006, Protocol: corev1.ProtocolUDP},
		{Name: "tfjob-port", Port: 2222, Protocol: corev1.ProtocolTCP},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("service ports (-want +got):\n%s", d)
	}
}

// A refused Service reaches the status while the job runs, and the failed pod of a replica
// without its Service stays until the Service can record the retry.
func TestRefusedServicesAreSaidAndHoldRestarts(t *testing.T) {
	w := newWorld(tf, builder.TFJob("j", "ns").Replicas("Worker", 2).RestartPolicy("Worker", kubeflowv1.RestartPolicyExitCode).BackoffLimit(1)).all(corev1.PodRunning)
	w.pod("Worker", 1, corev1.PodFailed, 137)
	w.services = w.services[:1] // j-worker-1's is missing
	refused := `services "j-worker-1" is forbidden: exceeded quota: team-a, requested: services=1`
	p, err := plan(w.fw, w.plugins, w.job, Inputs{Pods: w.pods, Services: w.services, Now: now, RefusedServices: refused})
	if err != nil {
		t.Fatal(err)
	}
	if c := getCondition(&p.Status, kubeflowv1.JobCreated); !strings.Contains(c.Message, "services cannot be created: "+refused) {
		t.Errorf("Created: %q, want the refusal", c.Message)
	}
	if got := names(p.DeletePods); len(got) != 0 {
		t.Errorf("deleted %v: the failed pod must wait for its service to record the retry", got)
	}
	if got := names(p.CreateServices); !slices.Equal(got, []string{"j-worker-1"}) {
		t.Errorf("services created: %v", got)
	}
}

// What the apiserver refuses of a running job reaches its status too: the replacement of a failed
// pod, and the objects its pods mount.
func TestRefusalsOfARunningJobAreSaid(t *testing.T) {
	w := newWorld(tf, builder.TFJob("j", "ns").Replicas("Worker", 2)).all(corev1.PodRunning)
	pods := `pods "j-worker-1" is forbidden: exceeded quota: team-a`
	extras := `configmaps "j-config" is forbidden: exceeded quota: team-a`
	p, err := plan(w.fw, w.plugins, w.job, Inputs{Pods: w.pods, Services: w.services, Now: now, Refused: pods, RefusedExtras: extras})
	if err != nil {
		t.Fatal(err)
	}
	if !hasCondition(&p.Status, kubeflowv1.JobRunning) {
		t.Fatalf("not Running: %+v", p.Status.Conditions)
	}
	c := getCondition(&p.Status, kubeflowv1.JobCreated)
	for _, want := range []string{"pods cannot be created: " + pods, "objects the pods need cannot be written: " + extras} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("Created: %q, want %q", c.Message, want)
		}
	}
}

// A large job's replicas (a pod and its service each) are created in batches: 64 first, then as
// many as exist, at most 500 per reconcile, one object while the apiserver refuses them; a job of
// 64 replicas at once.
func TestCreationsComeInBatches(t *testing.T) {
	creations := func(p *Plan) int { return len(p.CreatePods) + len(p.CreateServices) }
	w := newWorld(pt, builder.PyTorchJob("j", "ns").Replicas("Master", 1).Replicas("Worker", 2999))
	p := w.plan(t)
	if got := creations(p); got != 2*firstBatch || p.RequeueAfter == 0 {
		t.Fatalf("first plan creates %d (requeue %v), want %d and a requeue", got, p.RequeueAfter, 2*firstBatch)
	}
	for i := range 100 {
		w.pod("Worker", i, corev1.PodPending, 0) // 200 children
	}
	if got := creations(w.plan(t)); got != 200 {
		t.Errorf("with 200 children the plan creates %d, want 200 (doubling)", got)
	}
	for i := range 1000 {
		w.pod("Worker", i, corev1.PodPending, 0)
	}
	if got := creations(w.plan(t)); got != 2*maxBatch {
		t.Errorf("with 2000 children the plan creates %d, want %d", got, 2*maxBatch)
	}
	p, err := plan(w.fw, w.plugins, w.job, Inputs{Pods: w.pods, Services: w.services, Now: now, Refused: "forbidden: exceeded quota"})
	if err != nil {
		t.Fatal(err)
	}
	if got := creations(p); got != 1 {
		t.Errorf("while refused the plan creates %d, want 1", got)
	}
	small := newWorld(tf, builder.TFJob("j", "ns").Replicas("PS", 1).Replicas("Worker", 63)).plan(t)
	if got := creations(small); got != 128 || small.RequeueAfter != 0 {
		t.Errorf("a job of 64 replicas: %d creations (requeue %v), want all 128 at once", got, small.RequeueAfter)
	}
}

// A name the template gives a port is never taken by one kiln generates for an unnamed port.
func TestServicePortsKeepTheTemplatesNames(t *testing.T) {
	job := builder.TFJob("j", "ns").Replicas("Worker", 1).Obj()
	c := &job.GetReplicaSpecs()["Worker"].Template.Spec.Containers[0]
	c.Ports = []corev1.ContainerPort{{ContainerPort: 6006}, {Name: "tcp-6006", ContainerPort: 7000}}
	Default(tf, job, kubeflowv1.CleanPodPolicyAll)
	got := desiredService(tf, job, "Worker", 0).Spec.Ports
	want := []corev1.ServicePort{
		{Name: "tcp-6006", Port: 7000, Protocol: corev1.ProtocolTCP},
		{Name: "tfjob-port", Port: 2222, Protocol: corev1.ProtocolTCP},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("service ports (-want +got):\n%s", d)
	}
}
