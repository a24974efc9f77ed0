package trainingjob

import (
	"k8s.io/utils/ptr"
	"testing"

	"context"
	"fmt"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

// envList is a container's environment as NAME=value lines, in order.
func envList(pod corev1.Pod, container string) []string {
	var out []string
	for _, c := range pod.Spec.Containers {
		if c.Name == container {
			for _, e := range c.Env {
				out = append(out, e.Name+"="+e.Value)
			}
		}
	}
	return out
}

func TestPyTorchJobWithMasterEnv(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.PyTorchJob("pt", ns).Replicas("Master", 1).Replicas("Worker", 2).Obj())
	pods := waitPods(t, job, 3)
	want := map[string][]string{
		"pt-master-0": {"PYTHONUNBUFFERED=1", "MASTER_PORT=23456", "PET_MASTER_PORT=23456", "MASTER_ADDR=pt-master-0", "PET_MASTER_ADDR=pt-master-0",
			"WORLD_SIZE=3", "RANK=0", "PET_NODE_RANK=0", "PET_NPROC_PER_NODE=auto", "PET_NNODES=3"},
		"pt-worker-1": {"PYTHONUNBUFFERED=1", "MASTER_PORT=23456", "PET_MASTER_PORT=23456", "MASTER_ADDR=pt-master-0", "PET_MASTER_ADDR=pt-master-0",
			"WORLD_SIZE=3", "RANK=2", "PET_NODE_RANK=2", "PET_NPROC_PER_NODE=auto", "PET_NNODES=3"},
	}
	for _, p := range pods {
		if w, ok := want[p.Name]; ok {
			if diff := cmp.Diff(w, envList(p, "pytorch")); diff != "" {
				t.Errorf("env of %s (-want +got):\n%s", p.Name, diff)
			}
		}
	}
	worker := pods[2]
	if len(worker.Spec.InitContainers) != 1 || worker.Spec.InitContainers[0].Name != "init-pytorch" {
		t.Errorf("worker init containers = %+v, want init-pytorch waiting for the master", worker.Spec.InitContainers)
	}
	if len(pods[0].Spec.InitContainers) != 0 {
		t.Errorf("master has init containers %+v, want none", pods[0].Spec.InitContainers)
	}
	if got := string(worker.Spec.RestartPolicy); got != "OnFailure" {
		t.Errorf("pod restartPolicy = %q, want OnFailure (PyTorchJob default)", got)
	}
}

func TestPyTorchJobWithoutMasterWorkerZeroIsMaster(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.PyTorchJob("nomaster", ns).Replicas("Worker", 2).Obj())
	pods := waitPods(t, job, 2)
	want := []string{"PYTHONUNBUFFERED=1", "MASTER_PORT=23456", "PET_MASTER_PORT=23456", "MASTER_ADDR=nomaster-worker-0", "PET_MASTER_ADDR=nomaster-worker-0",
		"WORLD_SIZE=2", "RANK=1", "PET_NODE_RANK=1", "PET_NPROC_PER_NODE=auto", "PET_NNODES=2"}
	if diff := cmp.Diff(want, envList(pods[1], "pytorch")); diff != "" {
		t.Errorf("env of nomaster-worker-1 (-want +got):\n%s", diff)
	}
	if pods[0].Labels[kubeflowv1.LabelJobRole] != "master" || pods[1].Labels[kubeflowv1.LabelJobRole] != "" {
		t.Errorf("job-role labels: worker-0 %q, worker-1 %q; want master on worker-0 only",
			pods[0].Labels[kubeflowv1.LabelJobRole], pods[1].Labels[kubeflowv1.LabelJobRole])
	}
}

func TestElasticPyTorchJobEnv(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	backend := kubeflowv1.RDZVBackend("c10d")
	job := create(t, builder.PyTorchJob("elastic", ns).Replicas("Worker", 1).Edit(func(j framework.Job) {
		j.(*kubeflowv1.PyTorchJob).Spec.ElasticPolicy = &kubeflowv1.ElasticPolicy{
			RDZVBackend: &backend, MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](3), MaxRestarts: ptr.To[int32](3),
		}
	}).Obj())
	pods := waitPods(t, job, 1)
	want := []string{"PYTHONUNBUFFERED=1", "MASTER_PORT=23456", "PET_MASTER_PORT=23456", "MASTER_ADDR=elastic-worker-0", "PET_MASTER_ADDR=elastic-worker-0",
		"WORLD_SIZE=1", "RANK=0", "PET_NODE_RANK=0", "PET_NPROC_PER_NODE=auto",
		"PET_RDZV_ENDPOINT=elastic-worker-0:23456", "PET_RDZV_BACKEND=c10d", "PET_NNODES=1:3", "PET_MAX_RESTARTS=3"}
	if diff := cmp.Diff(want, envList(pods[0], "pytorch")); diff != "" {
		t.Errorf("env of elastic-worker-0 (-want +got):\n%s", diff)
	}
	// Elastic success rule: any worker that succeeds ends the job.
	env.Exit(t, &pods[0], 0)
	waitCondition(t, job, kubeflowv1.JobSucceeded)
}

func TestPyTorchJobMasterSuccessEndsTheJob(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.PyTorchJob("ptok", ns).Replicas("Master", 1).Replicas("Worker", 2).Obj())
	pods := waitPods(t, job, 3)
	runAll(t, pods)
	running := waitCondition(t, job, kubeflowv1.JobRunning)
	if got := lastCondition(running).Message; got != "PyTorchJob ptok is running." {
		t.Errorf("Running message = %q", got)
	}
	env.Exit(t, &pods[0], 0)
	done := waitCondition(t, job, kubeflowv1.JobSucceeded)
	c := lastCondition(done)
	if c.Reason != "PyTorchJobSucceeded" || c.Message != "PyTorchJob ptok is successfully completed." {
		t.Errorf("Succeeded condition = %+v", c)
	}
	if done.GetJobStatus().CompletionTime == nil {
		t.Error("completionTime is not set")
	}
	// cleanPodPolicy Running (the default): the running workers go, the master stays.
	waitPods(t, job, 1)
}

func TestPyTorchJobWorkerFailureUnderNeverFailsTheJob(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.PyTorchJob("ptfail", ns).Replicas("Master", 1).Replicas("Worker", 2).
		RestartPolicy("Worker", kubeflowv1.RestartPolicyNever).Obj())
	pods := waitPods(t, job, 3)
	runAll(t, pods)
	waitCondition(t, job, kubeflowv1.JobRunning)
	env.Exit(t, &pods[2], 1)
	failed := waitCondition(t, job, kubeflowv1.JobFailed)
	if got := lastCondition(failed).Message; got != "PyTorchJob ptfail is failed because 1 Worker replica(s) failed." {
		t.Errorf("Failed message = %q", got)
	}
}

func TestPyTorchJobScalesWorkers(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.PyTorchJob("scale", ns).Replicas("Master", 1).Replicas("Worker", 2).Obj())
	waitPods(t, job, 3)
	for _, n := range []int32{4, 1} {
		update(t, job, func(j framework.Job) { j.GetReplicaSpecs()["Worker"].Replicas = ptr.To(n) })
		pods := waitPods(t, job, int(n)+1)
		var names []string
		testenvEventuallyServices(t, job, int(n)+1, &names)
		if last := pods[len(pods)-1].Name; last != "scale-worker-"+itoa(int(n)-1) {
			t.Errorf("after scaling to %d workers the last pod is %s", n, last)
		}
	}
}

func TestXGBoostJobEnvAndRules(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.XGBoostJob("xgb", ns).Replicas("Master", 1).Replicas("Worker", 2).Obj())
	pods := waitPods(t, job, 3)
	want := []string{"MASTER_PORT=9999", "MASTER_ADDR=xgb-master-0", "WORLD_SIZE=3", "RANK=2", "PYTHONUNBUFFERED=1",
		"WORKER_PORT=9999", "WORKER_ADDRS=xgb-worker-0,xgb-worker-1"}
	if diff := cmp.Diff(want, envList(pods[2], "xgboost")); diff != "" {
		t.Errorf("env of xgb-worker-1 (-want +got):\n%s", diff)
	}
	runAll(t, pods)
	waitCondition(t, job, kubeflowv1.JobRunning)
	env.Exit(t, &pods[0], 0)
	done := waitCondition(t, job, kubeflowv1.JobSucceeded)
	if got := lastCondition(done).Message; got != "XGBoostJob xgb is successfully completed." {
		t.Errorf("Succeeded message = %q", got)
	}

	fail := create(t, builder.XGBoostJob("xgbfail", ns).Replicas("Master", 1).Replicas("Worker", 1).Obj())
	pods = waitPods(t, fail, 2)
	runAll(t, pods)
	env.Exit(t, &pods[1], 2)
	failed := waitCondition(t, fail, kubeflowv1.JobFailed)
	if got := lastCondition(failed).Message; got != "XGBoostJob xgbfail is failed because 1 Worker replica(s) failed." {
		t.Errorf("Failed message = %q", got)
	}
}

// elasticPolicy.metrics gives the job an HPA scaling its workers through the scale subresource,
// owned by the job, kept in step with the spec and removed while the job is suspended.
func TestElasticPyTorchJobMetricsMakeAnHPA(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	cpu := autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)},
	}}
	job := create(t, builder.PyTorchJob("scaled", ns).Replicas("Worker", 2).Edit(func(j framework.Job) {
		j.(*kubeflowv1.PyTorchJob).Spec.ElasticPolicy = &kubeflowv1.ElasticPolicy{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](4), Metrics: []autoscalingv2.MetricSpec{cpu}}
	}).Obj())
	hpa := func() (*autoscalingv2.HorizontalPodAutoscaler, error) {
		h := &autoscalingv2.HorizontalPodAutoscaler{}
		return h, env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "scaled"}, h)
	}
	testenv.Eventually(t, func() error {
		h, err := hpa()
		if err != nil {
			return err
		}
		ref := h.Spec.ScaleTargetRef
		switch {
		case ref.APIVersion != "kubeflow.org/v1" || ref.Kind != "PyTorchJob" || ref.Name != "scaled":
			return fmt.Errorf("scaleTargetRef %+v", ref)
		case ptr.Deref(h.Spec.MinReplicas, 0) != 1 || h.Spec.MaxReplicas != 4 || len(h.Spec.Metrics) != 1:
			return fmt.Errorf("min %v max %d metrics %v", h.Spec.MinReplicas, h.Spec.MaxReplicas, h.Spec.Metrics)
		case !metav1.IsControlledBy(h, job):
			return fmt.Errorf("not controlled by the job: %v", h.OwnerReferences)
		}
		return nil
	})
	update(t, job, func(j framework.Job) { j.(*kubeflowv1.PyTorchJob).Spec.ElasticPolicy.MaxReplicas = ptr.To[int32](6) })
	testenv.Eventually(t, func() error {
		h, err := hpa()
		if err != nil || h.Spec.MaxReplicas != 6 {
			return fmt.Errorf("maxReplicas not followed: %v %v", h.Spec.MaxReplicas, err)
		}
		return nil
	})
	update(t, job, func(j framework.Job) { j.GetRunPolicy().Suspend = ptr.To(true) })
	testenv.Eventually(t, func() error {
		if _, err := hpa(); !apierrors.IsNotFound(err) {
			return fmt.Errorf("HPA still there while suspended (%v)", err)
		}
		return nil
	})
}
