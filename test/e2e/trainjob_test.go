package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
	"github.com/kiln-ml/kiln/test/testenv"
)

// simulated is a runtime patch that has kwok run the node pods for 2 seconds and exit with code.
func simulated(code string) []trainerv1alpha1.RuntimePatch {
	return []trainerv1alpha1.RuntimePatch{{Manager: "kiln.dev/e2e", TrainingRuntimeSpec: &trainerv1alpha1.TrainingRuntimeSpecPatch{
		Template: &trainerv1alpha1.JobSetTemplatePatch{Spec: &trainerv1alpha1.JobSetSpecPatch{ReplicatedJobs: []trainerv1alpha1.ReplicatedJobPatch{{
			Name: "node", Template: &trainerv1alpha1.JobTemplatePatch{Spec: &trainerv1alpha1.JobSpecPatch{Template: &trainerv1alpha1.PodTemplatePatch{
				Metadata: &metav1.ObjectMeta{Annotations: map[string]string{"kiln.dev/simulate-duration": "2s", "kiln.dev/simulate-exit-code": code}}}}}}}}}}}}
}

func trainJob(t *testing.T, ns, name, runtime string, nodes int32, code string) *trainerv1alpha1.TrainJob {
	t.Helper()
	j := &trainerv1alpha1.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: trainerv1alpha1.TrainJobSpec{
		RuntimeRef:     trainerv1alpha1.RuntimeRef{Name: runtime},
		Trainer:        &trainerv1alpha1.Trainer{NumNodes: ptr.To(nodes), Image: ptr.To("kiln.dev/trainer:e2e"), Command: []string{"python", "train.py"}},
		RuntimePatches: simulated(code),
	}}
	if err := cluster.Client.Create(context.Background(), j); err != nil {
		t.Fatalf("creating TrainJob %s: %v", name, err)
	}
	return j
}

// awaitTrainJob waits until the TrainJob's condition typ is True and returns the TrainJob.
func awaitTrainJob(t *testing.T, j *trainerv1alpha1.TrainJob, typ string) *trainerv1alpha1.TrainJob {
	t.Helper()
	fresh := &trainerv1alpha1.TrainJob{}
	testenv.EventuallyWithin(t, 2*timeout, func() error {
		if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(j), fresh); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(fresh.Status.Conditions, typ) {
			return fmt.Errorf("TrainJob %s conditions %+v, want %s", j.Name, fresh.Status.Conditions, typ)
		}
		return nil
	})
	return fresh
}

// nodePods are the TrainJob's training pods, found as the Kubeflow SDK finds them.
func nodePods(t *testing.T, j *trainerv1alpha1.TrainJob) []corev1.Pod {
	return cluster.Pods(t, j.Namespace, map[string]string{"jobset.sigs.k8s.io/jobset-name": j.Name, "jobset.sigs.k8s.io/replicatedjob-name": "node"})
}

// A TrainJob of 2 nodes on Trainer's torch-distributed runtime (its manifest unchanged) runs on
// the real JobSet controller: pods found by the SDK's selector, each with its rank, then Complete.
func TestTorchTrainJobOnJobSet(t *testing.T) {
	cluster.InstallTrainerRuntimes(t)
	ns := cluster.Namespace(t)
	seen := statusesSeen(t, ns)
	j := trainJob(t, ns, "mnist", "torch-distributed", 2, "0")
	testenv.EventuallyWithin(t, 2*timeout, func() error { return testenv.Count("node pods", len(nodePods(t, j)), 2) })
	ranks := map[string]bool{}
	for _, p := range nodePods(t, j) {
		c := p.Spec.Containers[0]
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		if c.Name != "node" || env["PET_NNODES"] != "2" || env["PET_MASTER_ADDR"] != "mnist-node-0-0.mnist" || env["PET_MASTER_PORT"] != "29500" {
			t.Errorf("pod %s: container %s env %v", p.Name, c.Name, env)
		}
		ranks[p.Annotations["batch.kubernetes.io/job-completion-index"]] = true
		if p.Spec.Hostname == "" || p.Spec.Subdomain != "mnist" {
			t.Errorf("pod %s: hostname %q subdomain %q, want its JobSet host name under mnist", p.Name, p.Spec.Hostname, p.Spec.Subdomain)
		}
	}
	if !ranks["0"] || !ranks["1"] {
		t.Errorf("completion indexes %v, want 0 and 1", ranks)
	}
	done := awaitTrainJob(t, j, "Complete")
	if s := done.Status.JobsStatus; len(s) != 1 || s[0].Name != "node" || ptr.Deref(s[0].Succeeded, 0) != 1 {
		t.Errorf("jobsStatus %+v, want node with its Job succeeded", s)
	}
	// Kubeflow's SDK reports a TrainJob Running from its pods only while it has no condition: once
	// its JobSet was made (its Jobs counted), a run that nothing held had none until it ended. (Before,
	// kiln may have said it waits for the runtime just installed, which its cache had not seen yet.)
	for _, v := range seen() {
		if len(v.JobsStatus) > 0 && len(v.Conditions) > 0 && !meta.IsStatusConditionTrue(v.Conditions, "Complete") {
			t.Errorf("a version of the TrainJob with its JobSet made had conditions %+v", v.Conditions)
		}
	}
}

// statusesSeen watches the TrainJobs of namespace ns from now on and returns what gives the
// status of every version seen so far.
func statusesSeen(t *testing.T, ns string) func() []trainerv1alpha1.TrainJobStatus {
	w := cluster.Watch(t, &trainerv1alpha1.TrainJobList{}, ns)
	var mu sync.Mutex
	var seen []trainerv1alpha1.TrainJobStatus
	go func() {
		for ev := range w.ResultChan() {
			if j, ok := ev.Object.(*trainerv1alpha1.TrainJob); ok {
				mu.Lock()
				seen = append(seen, j.Status)
				mu.Unlock()
			}
		}
	}()
	return func() []trainerv1alpha1.TrainJobStatus {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// Failing pods fail the TrainJob: a namespaced runtime whose Job does not retry.
func TestFailingTrainJobOnJobSet(t *testing.T) {
	ns := cluster.Namespace(t)
	rt := &trainerv1alpha1.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-retry"}, Spec: trainerv1alpha1.TrainingRuntimeSpec{
		MLPolicy: &trainerv1alpha1.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainerv1alpha1.MLPolicySource{Torch: &trainerv1alpha1.TorchMLPolicySource{}}},
	}}
	rt.Spec.Template.Spec.ReplicatedJobs = nodeJob(0)
	if err := cluster.Client.Create(context.Background(), rt); err != nil {
		t.Fatal(err)
	}
	j := &trainerv1alpha1.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "broken"}, Spec: trainerv1alpha1.TrainJobSpec{
		RuntimeRef:     trainerv1alpha1.RuntimeRef{Name: "no-retry", Kind: ptr.To("TrainingRuntime")},
		RuntimePatches: simulated("1"),
	}}
	if err := cluster.Client.Create(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	failed := awaitTrainJob(t, j, "Failed")
	if c := meta.FindStatusCondition(failed.Status.Conditions, "Failed"); !strings.Contains(c.Reason, "Fail") {
		t.Errorf("Failed %+v, want JobSet's reason", c)
	}
}

// A JAX TrainJob of 3 nodes on Trainer's jax-distributed runtime.
func TestJAXTrainJobOnJobSet(t *testing.T) {
	cluster.InstallTrainerRuntimes(t)
	ns := cluster.Namespace(t)
	j := trainJob(t, ns, "jax", "jax-distributed", 3, "0")
	testenv.EventuallyWithin(t, 2*timeout, func() error { return testenv.Count("node pods", len(nodePods(t, j)), 3) })
	for _, p := range nodePods(t, j) {
		env := map[string]string{}
		for _, e := range p.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		if env["JAX_NUM_PROCESSES"] != "3" || env["JAX_COORDINATOR_ADDRESS"] != "jax-node-0-0.jax:29500" {
			t.Errorf("pod %s env %v", p.Name, env)
		}
	}
	awaitTrainJob(t, j, "Complete")
}

// nodeJob is a runtime's trainer step: one replicated job "node" whose Job retries backoff times.
func nodeJob(backoff int32) []jobsetv1alpha2.ReplicatedJob {
	rj := jobsetv1alpha2.ReplicatedJob{Name: "node"}
	rj.Template.Labels = map[string]string{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
	rj.Template.Spec.BackoffLimit = ptr.To(backoff)
	rj.Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: "node", Image: "kiln.dev/trainer:e2e"}}
	return []jobsetv1alpha2.ReplicatedJob{rj}
}

// Resumed with a patch that JobSet's webhook refuses on a suspended JobSet (a volume): kiln makes
// the JobSet anew, and its pods have the volume.
func TestResumedWithAVolumePatchOnJobSet(t *testing.T) {
	cluster.InstallTrainerRuntimes(t)
	ns := cluster.Namespace(t)
	j := &trainerv1alpha1.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vol"}, Spec: trainerv1alpha1.TrainJobSpec{
		RuntimeRef: trainerv1alpha1.RuntimeRef{Name: "torch-distributed"}, Suspend: ptr.To(true), RuntimePatches: simulated("0"),
	}}
	if err := cluster.Client.Create(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	awaitTrainJob(t, j, "Suspended")
	testenv.EventuallyWithin(t, timeout, func() error {
		fresh := &trainerv1alpha1.TrainJob{}
		if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(j), fresh); err != nil {
			return err
		}
		fresh.Spec.Suspend = ptr.To(false)
		pod := fresh.Spec.RuntimePatches[0].TrainingRuntimeSpec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template
		pod.Spec = &trainerv1alpha1.PodSpecPatch{
			Volumes:    []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Containers: []trainerv1alpha1.ContainerPatch{{Name: "node", VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}}},
		}
		return cluster.Client.Update(context.Background(), fresh)
	})
	testenv.EventuallyWithin(t, 2*timeout, func() error {
		pods := nodePods(t, j)
		if len(pods) != 1 || len(pods[0].Spec.Volumes) == 0 || !slices.ContainsFunc(pods[0].Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "scratch" }) {
			return fmt.Errorf("%d node pods, want one with the patch's volume", len(pods))
		}
		return nil
	})
	awaitTrainJob(t, j, "Complete")
}
