package trainingjob

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/utils/ptr"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

func TestTFJobCreatesOnePodAndServicePerReplica(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.TFJob("dist", ns).Replicas("Chief", 1).Replicas("PS", 2).Replicas("Worker", 4).Obj())
	pods := waitPods(t, job, 7)
	var svcs []string
	testenvEventuallyServices(t, job, 7, &svcs)

	want := []string{"dist-chief-0", "dist-ps-0", "dist-ps-1", "dist-worker-0", "dist-worker-1", "dist-worker-2", "dist-worker-3"}
	var got []string
	for _, p := range pods {
		got = append(got, p.Name)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pod names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, svcs); diff != "" {
		t.Errorf("service names (-want +got):\n%s", diff)
	}

	fresh := get(t, job)
	yes := true
	wantOwner := []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "TFJob", Name: "dist", UID: fresh.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}}
	for _, p := range pods {
		if diff := cmp.Diff(wantOwner, p.OwnerReferences); diff != "" {
			t.Errorf("%s owner references (-want +got):\n%s", p.Name, diff)
		}
	}

	worker1 := pods[4]
	wantLabels := map[string]string{
		"training.kubeflow.org/operator-name": "tfjob-controller",
		"training.kubeflow.org/job-name":      "dist",
		"training.kubeflow.org/replica-type":  "worker",
		"training.kubeflow.org/replica-index": "1",
	}
	if diff := cmp.Diff(wantLabels, worker1.Labels); diff != "" {
		t.Errorf("worker-1 labels (-want +got):\n%s", diff)
	}
	if got := pods[0].Labels[kubeflowv1.LabelJobRole]; got != "master" {
		t.Errorf("chief-0 job-role label = %q, want master", got)
	}

	wantTFConfig := fmt.Sprintf(`{"cluster":{"chief":["dist-chief-0.%[1]s.svc:2222"],"ps":["dist-ps-0.%[1]s.svc:2222","dist-ps-1.%[1]s.svc:2222"],"worker":["dist-worker-0.%[1]s.svc:2222","dist-worker-1.%[1]s.svc:2222","dist-worker-2.%[1]s.svc:2222","dist-worker-3.%[1]s.svc:2222"]},"task":{"type":"worker","index":1},"environment":"cloud"}`, ns)
	if got := envOf(worker1, "tensorflow")["TF_CONFIG"]; got != wantTFConfig {
		t.Errorf("TF_CONFIG of dist-worker-1:\n got %s\nwant %s", got, wantTFConfig)
	}
	if got := string(worker1.Spec.RestartPolicy); got != "Never" {
		t.Errorf("pod restartPolicy = %q, want Never (TFJob default)", got)
	}

	svc := jobServices(t, job)[4]
	if svc.Spec.ClusterIP != "None" || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 2222 || svc.Spec.Ports[0].Name != "tfjob-port" {
		t.Errorf("service %s: clusterIP %q ports %+v, want headless with tfjob-port 2222", svc.Name, svc.Spec.ClusterIP, svc.Spec.Ports)
	}
	if diff := cmp.Diff(wantLabels, svc.Spec.Selector); diff != "" {
		t.Errorf("service selector (-want +got):\n%s", diff)
	}

	// Pods pending for a while: the first status write is paced until they run, yet the start
	// time is when kiln first saw the job (the Kubeflow SDK and activeDeadlineSeconds count from it).
	time.Sleep(3 * time.Second)
	runAll(t, pods)
	running := waitCondition(t, job, kubeflowv1.JobRunning)
	st := running.GetJobStatus()
	if st.StartTime == nil || st.StartTime.Sub(job.GetCreationTimestamp().Time) > 2*time.Second {
		t.Errorf("startTime %v, want within 2s of the job's creation %v", st.StartTime, job.GetCreationTimestamp())
	}
}

func TestSingleWorkerTFJobGetsNoTFConfig(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.TFJob("local", ns).Replicas("Worker", 1).Obj())
	pods := waitPods(t, job, 1)
	if v, ok := envOf(pods[0], "tensorflow")["TF_CONFIG"]; ok {
		t.Errorf("single-worker TFJob got TF_CONFIG=%s, want none", v)
	}
}

// Template labels and annotations reach the pods; kiln's labels win over the template's.
func TestTemplateLabelsAndAnnotationsReachThePods(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.TFJob("meta", ns).Replicas("Worker", 2).Template("Worker", func(t *corev1.PodTemplateSpec) {
		t.Labels = map[string]string{"team": "vision", kubeflowv1.LabelReplicaIndex: "spoofed"}
		t.Annotations = map[string]string{"kiln.dev/simulate-duration": "5s"}
	}).Obj())
	pods := waitPods(t, job, 2)
	p := pods[1]
	if p.Labels["team"] != "vision" || p.Labels[kubeflowv1.LabelReplicaIndex] != "1" {
		t.Errorf("labels = %v, want team=vision and replica-index=1", p.Labels)
	}
	if p.Annotations["kiln.dev/simulate-duration"] != "5s" {
		t.Errorf("annotations = %v, want the template's", p.Annotations)
	}
}

// Kubeflow lets an update add or remove replica types (the SDK's update_job may): the engine
// creates the new type's pods and services and deletes those of a type that is gone.
func TestReplicaTypesAddedAndRemovedOnUpdate(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.TFJob("grow", ns).Replicas("Worker", 2).Obj())
	runAll(t, waitPods(t, job, 2))
	update(t, job, func(j framework.Job) {
		ps := j.GetReplicaSpecs()["Worker"].DeepCopy()
		ps.Replicas = ptr.To[int32](1)
		j.GetReplicaSpecs()["PS"] = ps
	})
	if pods := waitPods(t, job, 3); !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Name == "grow-ps-0" }) {
		t.Errorf("no pod grow-ps-0 after PS was added: %v", pods)
	}
	update(t, job, func(j framework.Job) { delete(j.GetReplicaSpecs(), "PS") })
	waitPods(t, job, 2)
	testenv.Eventually(t, func() error {
		return testenv.Count("services", len(env.Services(t, ns, map[string]string{kubeflowv1.LabelJobName: "grow"})), 2)
	})
}

// A new job shows Created within about a second, its pods still pending, as Kubeflow's clients
// expect right after creating it (kubectl's State column, the SDK's is_job_created).
func TestCreatedIsWrittenWithinASecond(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.TFJob("fresh", ns).Replicas("Worker", 2).Obj())
	created := get(t, job).GetCreationTimestamp()
	waitPods(t, job, 2) // and they stay pending
	testenv.EventuallyWithin(t, 3*time.Second, func() error {
		st := get(t, job).GetJobStatus()
		if c := lastCondition(get(t, job)); c.Type != kubeflowv1.JobCreated || c.Status != corev1.ConditionTrue {
			return fmt.Errorf("conditions %+v, want Created", st.Conditions)
		}
		if st.StartTime == nil || st.StartTime.Sub(created.Time) > 2*time.Second {
			return fmt.Errorf("startTime %v, created %v", st.StartTime, created)
		}
		return nil
	})
}
