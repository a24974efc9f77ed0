package trainingjob

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

// A template with an unnamed port, which Kubeflow accepts: the headless Services name it, so the
// apiserver takes them, and the job runs.
func TestTFJobWithAnUnnamedPortRuns(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	b := builder.TFJob("board", ns).Replicas("Worker", 2)
	j := b.Obj()
	j.GetReplicaSpecs()["Worker"].Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 6006}}
	job := create(t, j)
	var names []string
	testenvEventuallyServices(t, job, 2, &names)
	for _, svc := range jobServices(t, job) {
		var got []string
		for _, p := range svc.Spec.Ports {
			got = append(got, fmt.Sprintf("%s=%d", p.Name, p.Port))
		}
		if d := cmp.Diff([]string{"tcp-6006=6006", "tfjob-port=2222"}, got); d != "" {
			t.Errorf("service %s ports (-want +got):\n%s", svc.Name, d)
		}
	}
	runAll(t, waitPods(t, job, 2))
	waitCondition(t, job, kubeflowv1.JobRunning)
}

// A job of many replicas is created in batches, and all of them come.
func TestLargeJobIsCreatedInBatches(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.PyTorchJob("wide", ns).Replicas("Master", 1).Replicas("Worker", 299).Obj())
	testenv.EventuallyWithin(t, 3*testenv.Timeout, func() error {
		return testenv.Count("pods of wide", len(jobPods(t, job)), 300)
	})
	var names []string
	testenvEventuallyServices(t, job, 300, &names)
}

// A Service the apiserver refuses (here a quota) reaches the job's status while the job runs.
func TestRefusedServicesReachTheStatus(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "two-services", Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceServices: resource.MustParse("1")}}}
	// envtest runs no quota controller: write the usage it would.
	used := corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourceServices: resource.MustParse("1")}}
	probe := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "quota-probe"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	testenv.EnforceQuota(t, env.Client, quota, &used, probe)
	job := create(t, builder.TFJob("quota", ns).Replicas("Worker", 2).Obj())
	runAll(t, waitPods(t, job, 2))
	testenv.Eventually(t, func() error {
		for _, c := range get(t, job).GetJobStatus().Conditions {
			if c.Type == kubeflowv1.JobCreated && strings.Contains(c.Message, "services cannot be created") && strings.Contains(c.Message, "exceeded quota") {
				return nil
			}
		}
		return fmt.Errorf("no Created condition names the refused services: %+v", get(t, job).GetJobStatus().Conditions)
	})
}

// An MPIJob whose hostfile ConfigMap the apiserver refuses (a quota) says so in its status: its
// pods would wait for the volume without a word.
func TestRefusedExtrasReachTheStatus(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-configmaps", Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceConfigMaps: resource.MustParse("0")}}}
	// envtest runs no quota controller: write the usage it would.
	used := corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourceConfigMaps: resource.MustParse("0")}}
	testenv.EnforceQuota(t, env.Client, quota, &used, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "quota-probe"}})
	job := create(t, builder.MPIJob("hostfile", ns).Replicas("Launcher", 1).Replicas("Worker", 2).Obj())
	testenv.Eventually(t, func() error {
		for _, c := range get(t, job).GetJobStatus().Conditions {
			if c.Type == kubeflowv1.JobCreated && strings.Contains(c.Message, "objects the pods need cannot be written") && strings.Contains(c.Message, `configmaps "hostfile-config" is forbidden: exceeded quota`) {
				return nil
			}
		}
		return fmt.Errorf("no Created condition names the refused ConfigMap: %+v", get(t, job).GetJobStatus().Conditions)
	})
}
