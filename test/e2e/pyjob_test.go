package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	"github.com/kiln-ml/kiln/internal/controller/pyjob"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

// newPyJob is a PyJob whose pods run for run (kiln.dev/simulate-duration) and exit with code.
// The PyJob is deleted when the test ends, so that its pods free their GPUs for the other tests.
func newPyJob(t *testing.T, ns, name, run, code string, edit func(*trainingv1alpha1.PyJobSpec)) *trainingv1alpha1.PyJob {
	j := builder.PyJob(name, ns, func(s *trainingv1alpha1.PyJobSpec) {
		s.DatasetPath, s.OutputPath = "/mnt/dataset", "/mnt/output"
		s.Resources = trainingv1alpha1.Resources{CPU: ptr.To(resource.MustParse("1")), Memory: ptr.To(resource.MustParse("1Gi"))}
	})
	j.Annotations = map[string]string{duration: run, exitCode: code}
	if edit != nil {
		edit(&j.Spec)
	}
	if err := cluster.Client.Create(context.Background(), j); err != nil {
		t.Fatalf("creating PyJob %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cluster.Client.Delete(context.Background(), j, client.PropagationPolicy(metav1.DeletePropagationForeground))
	})
	return j
}

func waitPhase(t *testing.T, j *trainingv1alpha1.PyJob, phase trainingv1alpha1.PyJobPhase) *trainingv1alpha1.PyJob {
	t.Helper()
	return cluster.WaitPyJobPhase(t, client.ObjectKeyFromObject(j), phase, timeout)
}

func TestPyJobSucceeds(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	j := newPyJob(t, ns, "bert", "2s", "0", func(s *trainingv1alpha1.PyJobSpec) { s.GPU = 1 })
	done := waitPhase(t, j, trainingv1alpha1.PyJobSucceeded)
	if done.Status.StartTime == nil || done.Status.CompletionTime == nil || done.Status.ObservedGeneration != done.Generation {
		t.Errorf("status %+v: want start and completion times and observedGeneration", done.Status)
	}
	var bj batchv1.Job
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "bert"}, &bj); err != nil {
		t.Fatal(err)
	}
	c := bj.Spec.Template.Spec.Containers[0]
	if got := c.Resources.Limits["nvidia.com/gpu"]; got.Value() != 1 {
		t.Errorf("nvidia.com/gpu limit = %v, want 1", got.String())
	}
	// Its /dev/shm is memory-backed, half of the worker's 1Gi.
	var volume, mounted bool
	for _, v := range bj.Spec.Template.Spec.Volumes {
		volume = volume || (v.Name == "dshm" && v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory && v.EmptyDir.SizeLimit.String() == "512Mi")
	}
	for _, m := range c.VolumeMounts {
		mounted = mounted || (m.Name == "dshm" && m.MountPath == "/dev/shm")
	}
	if !volume || !mounted {
		t.Errorf("volumes %+v, mounts %+v: want a memory-backed volume of 512Mi at /dev/shm", bj.Spec.Template.Spec.Volumes, c.VolumeMounts)
	}
}

func TestPyJobFailureNamesTheExitCode(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	j := newPyJob(t, ns, "broken", "1s", "3", func(s *trainingv1alpha1.PyJobSpec) { s.BackoffLimit = ptr.To[int32](0) })
	failed := waitPhase(t, j, trainingv1alpha1.PyJobFailed)
	if !strings.Contains(failed.Status.Message, "exited with code 3") {
		t.Errorf("message %q does not name the exit code", failed.Status.Message)
	}
}

func TestDistributedPyJobIsAnIndexedJobWithRanks(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	j := newPyJob(t, ns, "dist", "1h", "0", func(s *trainingv1alpha1.PyJobSpec) { s.Workers = 4; s.GPU = 1 })
	waitPhase(t, j, trainingv1alpha1.PyJobRunning)
	var pods []corev1.Pod
	testenv.EventuallyWithin(t, timeout, func() error {
		pods = cluster.Pods(t, ns, map[string]string{pyjob.LabelPyJob: "dist"})
		return testenv.Count("pods", len(pods), 4)
	})
	indexes := map[string]bool{}
	for _, p := range pods {
		indexes[p.Annotations["batch.kubernetes.io/job-completion-index"]] = true
		if p.Spec.Subdomain != "dist" || !strings.HasPrefix(p.Spec.Hostname, "dist-") {
			t.Errorf("pod %s hostname %q subdomain %q: want dist-<i>.dist", p.Name, p.Spec.Hostname, p.Spec.Subdomain)
		}
		e := map[string]corev1.EnvVar{}
		for _, v := range p.Spec.Containers[0].Env {
			e[v.Name] = v
		}
		if e["MASTER_ADDR"].Value != "dist-0.dist" || e["WORLD_SIZE"].Value != "4" || e["MASTER_PORT"].Value != "29500" || e["NPROC_PER_NODE"].Value != "1" {
			t.Errorf("pod %s env MASTER_ADDR=%s WORLD_SIZE=%s MASTER_PORT=%s NPROC_PER_NODE=%s", p.Name,
				e["MASTER_ADDR"].Value, e["WORLD_SIZE"].Value, e["MASTER_PORT"].Value, e["NPROC_PER_NODE"].Value)
		}
		if r := e["RANK"].ValueFrom; r == nil || r.FieldRef.FieldPath != "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
			t.Errorf("pod %s RANK = %+v, want the completion index", p.Name, e["RANK"])
		}
	}
	if len(indexes) != 4 {
		t.Errorf("completion indexes %v, want 0..3", indexes)
	}
	var svc corev1.Service
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "dist"}, &svc); err != nil || svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("headless service dist: %v %+v", err, svc.Spec)
	}
}

func TestPyJobOutputClaimIsCreatedBoundAndOwned(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	class := "kiln-manual-" + ns
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + ns},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:              class,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + ns}},
		},
	}
	if err := cluster.Client.Create(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), pv) })
	j := newPyJob(t, ns, "stored", "1h", "0", func(s *trainingv1alpha1.PyJobSpec) {
		s.Output = &trainingv1alpha1.OutputStorage{Size: ptr.To(resource.MustParse("1Gi")), StorageClassName: &class, ReclaimPolicy: trainingv1alpha1.OutputDelete}
	})
	running := waitPhase(t, j, trainingv1alpha1.PyJobRunning)
	if running.Status.OutputClaimName != "stored-output" {
		t.Errorf("outputClaimName = %q", running.Status.OutputClaimName)
	}
	var pvc corev1.PersistentVolumeClaim
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "stored-output"}, &pvc); err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || !metav1.IsControlledBy(&pvc, running) {
		t.Errorf("claim phase %s, owners %+v: want Bound and owned by the PyJob", pvc.Status.Phase, pvc.OwnerReferences)
	}

	// Deleting the PyJob removes what kiln created; the claim goes too (reclaimPolicy Delete).
	if err := cluster.Client.Delete(context.Background(), running, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyWithin(t, timeout, func() error {
		for _, o := range []client.Object{&batchv1.Job{}, &corev1.PersistentVolumeClaim{}} {
			name := map[bool]string{true: "stored", false: "stored-output"}[fmt.Sprintf("%T", o) == "*v1.Job"]
			if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, o); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T %s still there (%v)", o, name, err)
			}
		}
		return testenv.Count("pods", len(cluster.Pods(t, ns, map[string]string{pyjob.LabelPyJob: "stored"})), 0)
	})
}

func TestPyJobRetainedOutputOutlivesThePyJob(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	j := newPyJob(t, ns, "keep", "1s", "0", func(s *trainingv1alpha1.PyJobSpec) {
		s.Output = &trainingv1alpha1.OutputStorage{Size: ptr.To(resource.MustParse("1Gi")), StorageClassName: ptr.To("none"), ReclaimPolicy: trainingv1alpha1.OutputRetain}
	})
	var pvc corev1.PersistentVolumeClaim
	testenv.EventuallyWithin(t, timeout, func() error {
		return cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "keep-output"}, &pvc)
	})
	if err := cluster.Client.Delete(context.Background(), j, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyWithin(t, timeout, func() error {
		if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "keep"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Job keep still there (%v)", err)
		}
		return nil
	})
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "keep-output"}, &pvc); err != nil || pvc.DeletionTimestamp != nil {
		t.Errorf("the retained claim went with the PyJob: %v", err)
	}
}

func TestPyJobAskingForTooManyGPUsSaysWhy(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	j := newPyJob(t, ns, "greedy", "1h", "0", func(s *trainingv1alpha1.PyJobSpec) { s.GPU = 64 })
	testenv.EventuallyWithin(t, timeout, func() error {
		fresh := &trainingv1alpha1.PyJob{}
		if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(j), fresh); err != nil {
			return err
		}
		if fresh.Status.Phase != trainingv1alpha1.PyJobPending || !strings.Contains(fresh.Status.Message, "Insufficient nvidia.com/gpu") {
			return fmt.Errorf("phase %s message %q, want Pending with the scheduler's reason", fresh.Status.Phase, fresh.Status.Message)
		}
		return nil
	})
}

// A script and another vendor's GPUs: the inline script runs from its ConfigMap on a node whose
// amd.com/gpu is behind a NoSchedule taint, which the workers tolerate without being told.
func TestPyJobScriptRunsOnATaintedAMDNode(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourcePods: resource.MustParse("110"), "amd.com/gpu": resource.MustParse("4")}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-mi300", Labels: map[string]string{"type": "kwok", "e2e-amd": ns}, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "amd.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}},
		Status:     corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	if err := cluster.Client.Create(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), node) })
	j := newPyJob(t, ns, "hello", "2s", "0", func(s *trainingv1alpha1.PyJobSpec) {
		s.Command, s.Script = nil, "import torch\nprint(torch.cuda.device_count())\n"
		s.GPU, s.GPUResource = 2, "amd.com/gpu"
		s.NodeSelector = map[string]string{"e2e-amd": ns}
	})
	waitPhase(t, j, trainingv1alpha1.PyJobSucceeded)
	pods := cluster.Pods(t, ns, map[string]string{"training.kiln.dev/pyjob-name": "hello"})
	if len(pods) != 1 || pods[0].Spec.NodeName != node.Name {
		t.Fatalf("pods %v: want one, on %s", len(pods), node.Name)
	}
	var cm corev1.ConfigMap
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "hello-script"}, &cm); err != nil {
		t.Fatalf("the script's ConfigMap: %v", err)
	}
}

// A quota that refuses the workers: the PyJob stays Pending and says so, naming the quota, in its
// message, a PodsRefused condition and a Warning event.
func TestPyJobRefusedByAQuotaSaysWhy(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	refuseAllPods(t, ns)
	j := newPyJob(t, ns, "refused", "1s", "0", nil)
	testenv.EventuallyWithin(t, timeout, func() error {
		fresh := &trainingv1alpha1.PyJob{}
		if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(j), fresh); err != nil {
			return err
		}
		c := meta.FindStatusCondition(fresh.Status.Conditions, "PodsRefused")
		if fresh.Status.Phase != trainingv1alpha1.PyJobPending || !strings.Contains(fresh.Status.Message, "exceeded quota: no-pods") ||
			c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("PyJob %s %q, PodsRefused %+v", fresh.Status.Phase, fresh.Status.Message, c)
		}
		t.Logf("PyJob: %s %s", fresh.Status.Phase, fresh.Status.Message)
		var events eventsv1.EventList
		if err := cluster.Client.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == "refused" && e.Reason == "FailedCreatePods" {
				return nil
			}
		}
		return fmt.Errorf("no FailedCreatePods event on the PyJob yet")
	})
}

// refuseAllPods adds ResourceQuota no-pods to ns, and returns once the apiserver enforces it: no
// pod may be created there.
func refuseAllPods(t *testing.T, ns string) {
	t.Helper()
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-pods", Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "quota-probe"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "probe"}}}}
	testenv.EnforceQuota(t, cluster.Client, quota, nil, probe)
}
