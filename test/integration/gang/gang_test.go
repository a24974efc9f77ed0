// Package gang checks kiln's gang scheduling against a kube-apiserver that serves Kubernetes'
// own PodGroups, the test playing the scheduler by writing the PodGroup's status.
package gang

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

var env *testenv.Env

// TestMain runs three managers on one control plane, each for its own kinds: the default
// (native PodGroups, served here) for TFJobs and PyJobs, Volcano's for XGBoostJobs and
// scheduler-plugins' (scheduler "coscheduler") for JAXJobs, with those projects' PodGroup CRDs.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunServingPodGroups(m, &env, func(e *testenv.Env) (stop func(), err error) {
		dir := filepath.Join(testenv.RepoRoot(), "test", "testdata", "crds")
		if _, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{ErrorIfPathMissing: true, Paths: []string{
			filepath.Join(dir, "scheduling.volcano.sh_podgroups.yaml"), filepath.Join(dir, "scheduling.x-k8s.io_podgroups.yaml"),
		}}); err != nil {
			return nil, err
		}
		if err := e.InstallJobSetCRD(); err != nil {
			return nil, err
		}
		var stops []func()
		stopAll := func() {
			for _, s := range stops {
				s()
			}
		}
		for _, c := range []struct {
			kinds []string
			gang  string
		}{{[]string{"tfjob", "pyjob"}, ""}, {[]string{"xgboostjob"}, "volcano"}, {[]string{"jaxjob", "trainjob"}, "coscheduler"}} {
			o := testenv.ManagerOptions()
			o.Kinds, o.GangSchedulerName = c.kinds, c.gang
			stop, err := e.StartManager(o)
			if err != nil {
				stopAll()
				return nil, err
			}
			stops = append(stops, stop)
		}
		return stopAll, nil
	}))
}

func podGroup(t *testing.T, ns, name string) (*schedulingv1beta1.PodGroup, error) {
	t.Helper()
	var pg schedulingv1beta1.PodGroup
	err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &pg)
	return &pg, err
}

// gone says whether the native PodGroup ns/name is deleted (goneGroup).
func gone(t *testing.T, ns, name string) error {
	t.Helper()
	return goneGroup(t, &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
}

// goneGroup says whether the group of group's name (of any scheduler's kind) is deleted: not
// found, or deleting (the apiserver protects a native PodGroup with a finalizer that
// kube-controller-manager, absent here, removes once its pods are gone).
func goneGroup(t *testing.T, group client.Object) error {
	t.Helper()
	switch err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(group), group); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case group.GetDeletionTimestamp() != nil:
		return nil
	}
	return fmt.Errorf("group %s is there (finalizers %v)", group.GetName(), group.GetFinalizers())
}

func created(t *testing.T, job framework.Job) kubeflowv1.JobCondition {
	t.Helper()
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), job); err != nil {
		t.Fatal(err)
	}
	for _, c := range job.GetJobStatus().Conditions {
		if c.Type == kubeflowv1.JobCreated {
			return c
		}
	}
	return kubeflowv1.JobCondition{}
}

// TestJobGetsItsGang: the group exists before the pods and holds them all; the scheduler's
// reason reaches the job's status while the gang waits and leaves it once placed; the group goes
// when the job is suspended or finished.
func TestJobGetsItsGang(t *testing.T) {
	ns := env.Namespace(t)
	job := builder.TFJob("dist", ns).Replicas("PS", 1).Replicas("Worker", 3).Obj()
	job.GetRunPolicy().SchedulingPolicy = &kubeflowv1.SchedulingPolicy{PriorityClass: "high"}
	if err := env.Client.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	// Its priority class does not exist: the PodGroup is refused, and the job says so.
	testenv.Eventually(t, func() error {
		if c := created(t, job); !strings.Contains(c.Message, `its PodGroup was refused: podgroups.scheduling.k8s.io "dist-tfjob" is forbidden: no PriorityClass with name high was found`) {
			return fmt.Errorf("Created message %q", c.Message)
		}
		return nil
	})
	if pods := env.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: "dist"}); len(pods) != 0 {
		t.Fatalf("%d pods without their group, want none", len(pods))
	}
	high := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}
	if err := env.Client.Create(context.Background(), high); err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	testenv.EventuallyWithin(t, 2*testenv.Timeout, func() error { // the retry backs off
		pods = env.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: "dist"})
		return testenv.Count("pods", len(pods), 4)
	})
	pg, err := podGroup(t, ns, "dist-tfjob")
	if err != nil {
		t.Fatalf("no PodGroup once the pods exist: %v", err)
	}
	for _, p := range pods {
		if !pg.CreationTimestamp.Time.Before(p.CreationTimestamp.Add(1)) {
			t.Errorf("pod %s created %v, before its group (%v)", p.Name, p.CreationTimestamp, pg.CreationTimestamp)
		}
		if g := p.Spec.SchedulingGroup; g == nil || g.PodGroupName == nil || *g.PodGroupName != "dist-tfjob" {
			t.Errorf("pod %s is in group %+v, want dist", p.Name, g)
		}
	}
	if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != 4 || pg.Spec.PriorityClassName != "high" || !metav1.IsControlledBy(pg, job) {
		t.Errorf("PodGroup spec %+v owners %v: want a gang of 4, priority high, owned by the job", pg.Spec, pg.OwnerReferences)
	}

	// The scheduler cannot place them together.
	reason := "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
	meta.SetStatusCondition(&pg.Status.Conditions, metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled,
		Status: metav1.ConditionFalse, Reason: schedulingv1beta1.PodGroupReasonUnschedulable, Message: reason})
	if err := env.Client.Status().Update(context.Background(), pg); err != nil {
		t.Fatal(err)
	}
	want := "TFJob dist is created; waiting for 4 pods to be schedulable together: " + reason + "."
	testenv.Eventually(t, func() error {
		if c := created(t, job); c.Message != want {
			return fmt.Errorf("Created message %q, want %q", c.Message, want)
		}
		return nil
	})

	// Placed: the message is Kubeflow's again; running, the job is Running.
	pg, _ = podGroup(t, ns, "dist-tfjob")
	meta.SetStatusCondition(&pg.Status.Conditions, metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled,
		Status: metav1.ConditionTrue, Reason: "Scheduled", Message: "placed"})
	if err := env.Client.Status().Update(context.Background(), pg); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() error {
		if c := created(t, job); c.Message != "TFJob dist is created." {
			return fmt.Errorf("Created message %q once placed", c.Message)
		}
		return nil
	})
	for i := range pods {
		env.Run(t, &pods[i])
	}
	env.WaitCondition(t, job, kubeflowv1.JobRunning, testenv.Timeout)

	// Suspended, the group goes with the pods; resumed, it comes back first.
	suspend := func(s bool) {
		testenv.Eventually(t, func() error {
			if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), job); err != nil {
				return err
			}
			job.GetRunPolicy().Suspend = ptr.To(s)
			return env.Client.Update(context.Background(), job)
		})
	}
	suspend(true)
	testenv.Eventually(t, func() error { return gone(t, ns, "dist-tfjob") })
	env.WaitCondition(t, job, kubeflowv1.JobSuspended, testenv.Timeout)
	// Resumed while the old group is still being deleted, the job waits for it to go.
	suspend(false)
	testenv.Eventually(t, func() error {
		if c := created(t, job); !strings.Contains(c.Message, "the PodGroup of its previous run is still being deleted") {
			return fmt.Errorf("Created message %q; conditions %+v", c.Message, job.GetJobStatus().Conditions)
		}
		return nil
	})
	if pods := env.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: "dist"}); len(pods) != 0 {
		t.Errorf("%d pods created while their group is being deleted, want none", len(pods))
	}
	// As kube-controller-manager does once the group's pods are gone.
	pg, _ = podGroup(t, ns, "dist-tfjob")
	t.Logf("finalizers of the deleted PodGroup: %v", pg.Finalizers)
	pg.Finalizers = nil
	if err := env.Client.Update(context.Background(), pg); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() error {
		_, err := podGroup(t, ns, "dist-tfjob")
		return err
	})

	// Finished, the group goes.
	testenv.Eventually(t, func() error {
		pods = env.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: "dist"})
		return testenv.Count("pods after resuming", len(pods), 4)
	})
	env.Exit(t, env.Pod(t, ns, "dist-worker-0"), 0)
	env.WaitCondition(t, job, kubeflowv1.JobSucceeded, testenv.Timeout)
	testenv.Eventually(t, func() error { return gone(t, ns, "dist-tfjob") })
}

// TestSinglePodJobsGetNoGroup: one pod needs no gang (unless the job asks with a schedulingPolicy).
func TestSinglePodJobsGetNoGroup(t *testing.T) {
	ns := env.Namespace(t)
	job := builder.TFJob("solo", ns).Replicas("Worker", 1).Obj()
	if err := env.Client.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() error {
		return testenv.Count("pods", len(env.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: "solo"})), 1)
	})
	if _, err := podGroup(t, ns, "solo-tfjob"); !apierrors.IsNotFound(err) {
		t.Errorf("PodGroup of a one-pod job: %v, want none", err)
	}
	if p := env.Pod(t, ns, "solo-worker-0"); p.Spec.SchedulingGroup != nil {
		t.Errorf("one-pod job's pod joined group %+v", p.Spec.SchedulingGroup)
	}
}

func unstructuredGroup(t *testing.T, apiVersion, ns, name string) (*unstructured.Unstructured, error) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind("PodGroup")
	err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, u)
	return u, err
}

// TestVolcanoGroupIsKubeflowsAndAdmittedFirst: Volcano's schema takes the group kiln builds as
// Kubeflow does; the pods come once Volcano admitted it, joined to it as Volcano expects.
func TestVolcanoGroupIsKubeflowsAndAdmittedFirst(t *testing.T) {
	ns := env.Namespace(t)
	job := builder.XGBoostJob("xgb", ns).Replicas("Master", 1).Replicas("Worker", 2).Obj()
	if err := env.Client.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	var pg *unstructured.Unstructured
	testenv.Eventually(t, func() error {
		var err error
		pg, err = unstructuredGroup(t, "scheduling.volcano.sh/v1beta1", ns, "xgb-xgboostjob")
		return err
	})
	spec, _, _ := unstructured.NestedMap(pg.Object, "spec")
	if spec["minMember"] != int64(3) || spec["queue"] != "default" || !metav1.IsControlledBy(pg, job) {
		t.Errorf("Volcano PodGroup spec %v owners %v: want minMember 3, queue default, owned by the job", spec, pg.GetOwnerReferences())
	}
	want := "XGBoostJob xgb is created; waiting for 3 pods to be schedulable together: Volcano has not admitted the PodGroup to queue default yet."
	testenv.Eventually(t, func() error {
		if c := created(t, job); c.Message != want {
			return fmt.Errorf("Created message %q, want %q", c.Message, want)
		}
		return nil
	})
	if pods := env.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: "xgb"}); len(pods) != 0 {
		t.Fatalf("%d pods before Volcano admitted the group, want none (as Kubeflow)", len(pods))
	}
	// Volcano admits it (on the group as it is now: kiln may have written it meanwhile).
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		if pg, err = unstructuredGroup(t, "scheduling.volcano.sh/v1beta1", ns, "xgb-xgboostjob"); err != nil {
			return err
		}
		if err := unstructured.SetNestedField(pg.Object, "Inqueue", "status", "phase"); err != nil {
			return err
		}
		return env.Client.Update(context.Background(), pg)
	}); err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	testenv.Eventually(t, func() error {
		pods = env.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: "xgb"})
		return testenv.Count("pods once admitted", len(pods), 3)
	})
	for _, p := range pods {
		task := p.Labels[kubeflowv1.LabelReplicaType]
		if p.Spec.SchedulerName != "volcano" || p.Annotations["scheduling.k8s.io/group-name"] != "xgb-xgboostjob" || p.Annotations["volcano.sh/task-spec"] != task {
			t.Errorf("pod %s: scheduler %q, annotations %v: want volcano, group-name xgb-xgboostjob, task-spec %s", p.Name, p.Spec.SchedulerName, p.Annotations, task)
		}
	}
}

// TestSchedulerPluginsGroupJoinsItsPods: scheduler-plugins' schema takes the group; the pods go
// to the named scheduler with the group label at once (its Permit barrier holds them), and the
// group's phase says why the job waits.
func TestSchedulerPluginsGroupJoinsItsPods(t *testing.T) {
	ns := env.Namespace(t)
	job := builder.JAXJob("jax", ns).Replicas("Worker", 3).Obj()
	job.GetRunPolicy().SchedulingPolicy = &kubeflowv1.SchedulingPolicy{ScheduleTimeoutSeconds: ptr.To[int32](120)}
	if err := env.Client.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	testenv.Eventually(t, func() error {
		pods = env.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: "jax"})
		return testenv.Count("pods", len(pods), 3)
	})
	for _, p := range pods {
		if p.Spec.SchedulerName != "coscheduler" || p.Labels["scheduling.x-k8s.io/pod-group"] != "jax-jaxjob" {
			t.Errorf("pod %s: scheduler %q, labels %v", p.Name, p.Spec.SchedulerName, p.Labels)
		}
	}
	pg, err := unstructuredGroup(t, "scheduling.x-k8s.io/v1alpha1", ns, "jax-jaxjob")
	if err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(pg.Object, "spec")
	if spec["minMember"] != int64(3) || spec["scheduleTimeoutSeconds"] != int64(120) {
		t.Errorf("PodGroup spec %v: want minMember 3, scheduleTimeoutSeconds 120", spec)
	}
	if err := unstructured.SetNestedField(pg.Object, "Scheduling", "status", "phase"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Status().Update(context.Background(), pg); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() error {
		if c := created(t, job); c.Message != "JAXJob jax is created; waiting for 3 pods to be schedulable together: PodGroup phase Scheduling." {
			return fmt.Errorf("Created message %q", c.Message)
		}
		return nil
	})
}

// TestJobsOfTwoKindsWithOneNameHaveAGroupEach: a TFJob and a PyJob may share a name; each gets
// a group of its own, and suspending one leaves the other's. (On a single group per name the
// second job's apply was refused, and the first to go deleted the group under the other.)
func TestJobsOfTwoKindsWithOneNameHaveAGroupEach(t *testing.T) {
	ns := env.Namespace(t)
	tf := builder.TFJob("twin", ns).Replicas("Worker", 2).Obj()
	if err := env.Client.Create(context.Background(), tf); err != nil {
		t.Fatal(err)
	}
	py := &trainingv1alpha1.PyJob{ObjectMeta: metav1.ObjectMeta{Name: "twin", Namespace: ns},
		Spec: trainingv1alpha1.PyJobSpec{Image: "pytorch/pytorch:2.0", Command: []string{"python", "train.py"}, Workers: 2,
			DatasetPath: "/mnt/dataset", OutputPath: "/mnt/output"}}
	if err := env.Client.Create(context.Background(), py); err != nil {
		t.Fatal(err)
	}
	// groupOf is the live PodGroup the job controls.
	groupOf := func(job client.Object) (*schedulingv1beta1.PodGroup, error) {
		var list schedulingv1beta1.PodGroupList
		if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		for i, pg := range list.Items {
			if metav1.IsControlledBy(&pg, job) && pg.DeletionTimestamp == nil {
				return &list.Items[i], nil
			}
		}
		return nil, fmt.Errorf("no PodGroup of %T %s among %d", job, job.GetName(), len(list.Items))
	}
	for _, job := range []client.Object{tf, py} {
		testenv.Eventually(t, func() error { _, err := groupOf(job); return err })
	}
	testenv.Eventually(t, func() error {
		return testenv.Count("pods of TFJob twin", len(env.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: "twin"})), 2)
	})
	testenv.Eventually(t, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(tf), tf); err != nil {
			return err
		}
		tf.GetRunPolicy().Suspend = ptr.To(true)
		return env.Client.Update(context.Background(), tf)
	})
	testenv.Eventually(t, func() error {
		if _, err := groupOf(tf); err == nil {
			return fmt.Errorf("the suspended TFJob's PodGroup is still there")
		}
		return nil
	})
	testenv.Consistently(t, func() error { _, err := groupOf(py); return err })
}

// A TrainJob whose runtime asks for a gang (podGroupPolicy) gets a group of every pod of its
// JobSet from kiln's gang scheduler, and its pods join it; while the group waits, the TrainJob
// says why.
func TestTrainJobGetsItsGangFromPodGroupPolicy(t *testing.T) {
	ns := env.Namespace(t)
	rt := &trainerv1alpha1.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gang-torch"}}
	rt.Spec.MLPolicy = &trainerv1alpha1.MLPolicy{NumNodes: ptr.To[int32](3), MLPolicySource: trainerv1alpha1.MLPolicySource{Torch: &trainerv1alpha1.TorchMLPolicySource{}}}
	rt.Spec.PodGroupPolicy = &trainerv1alpha1.PodGroupPolicy{PodGroupPolicySource: trainerv1alpha1.PodGroupPolicySource{
		Coscheduling: &trainerv1alpha1.CoschedulingPodGroupPolicySource{ScheduleTimeoutSeconds: ptr.To[int32](90)}}}
	rj := jobsetv1alpha2.ReplicatedJob{Name: "node"}
	rj.Template.Labels = map[string]string{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
	rj.Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: "node", Image: "pytorch/pytorch:2.0",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}
	rt.Spec.Template.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{rj}
	job := &trainerv1alpha1.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gangjob"},
		Spec: trainerv1alpha1.TrainJobSpec{RuntimeRef: trainerv1alpha1.RuntimeRef{Name: "gang-torch", Kind: ptr.To("TrainingRuntime")}}}
	for _, o := range []client.Object{rt, job} {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	var pg *unstructured.Unstructured
	testenv.Eventually(t, func() (err error) {
		pg, err = unstructuredGroup(t, "scheduling.x-k8s.io/v1alpha1", ns, "gangjob-trainjob")
		return err
	})
	spec, _, _ := unstructured.NestedMap(pg.Object, "spec")
	cpu, _, _ := unstructured.NestedString(pg.Object, "spec", "minResources", "cpu")
	if spec["minMember"] != int64(3) || spec["scheduleTimeoutSeconds"] != int64(90) || cpu != "6" {
		t.Errorf("PodGroup spec %v: want minMember 3, scheduleTimeoutSeconds 90, 6 CPUs", spec)
	}
	js := &jobsetv1alpha2.JobSet{}
	env.Await(t, ns, "gangjob", js)
	pod := js.Spec.ReplicatedJobs[0].Template.Spec.Template
	if pod.Spec.SchedulerName != "coscheduler" || pod.Labels["scheduling.x-k8s.io/pod-group"] != "gangjob-trainjob" {
		t.Errorf("JobSet pods: scheduler %q, labels %v", pod.Spec.SchedulerName, pod.Labels)
	}
	if err := unstructured.SetNestedField(pg.Object, "Scheduling", "status", "phase"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Status().Update(context.Background(), pg); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() error {
		fresh := &trainerv1alpha1.TrainJob{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), fresh); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(fresh.Status.Conditions, "Running"); c == nil || c.Reason != "WaitingForGang" || !strings.Contains(c.Message, "waiting for 3 pods to be schedulable together") {
			return fmt.Errorf("Running %+v, want the gang's wait", c)
		}
		return nil
	})
	// The run completes (as JobSet's controller would say): once the TrainJob is Complete, its
	// group goes.
	testenv.Eventually(t, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(js), js); err != nil {
			return err
		}
		meta.SetStatusCondition(&js.Status.Conditions, metav1.Condition{Type: string(jobsetv1alpha2.JobSetCompleted), Status: metav1.ConditionTrue, Reason: "AllJobsCompleted", Message: "jobset completed successfully"})
		return env.Client.Status().Update(context.Background(), js)
	})
	testenv.Eventually(t, func() error { return goneGroup(t, pg) })
}
