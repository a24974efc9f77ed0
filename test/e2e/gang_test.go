package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

// gangResource is an extended resource only this test's nodes have and its pods ask for, so the
// other tests neither take its capacity nor land on its nodes.
const (
	gangResource = corev1.ResourceName("kiln.dev/e2e-gang-slot")
	gangTaint    = "kiln.dev/e2e-gang"
)

// addGangNode adds a kwok node, labelled gangTaint=group, with slots of gangResource and as many
// nvidia.com/gpu; it is removed when the test ends.
func addGangNode(t *testing.T, group, name string, slots int64) {
	t.Helper()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods: resource.MustParse("110"), gangResource: *resource.NewQuantity(slots, resource.DecimalSI),
		"nvidia.com/gpu": *resource.NewQuantity(slots, resource.DecimalSI),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"type": "kwok", gangTaint: group}, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: gangTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		Status:     corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	if err := env.Client.Create(context.Background(), node); err != nil {
		t.Fatalf("adding node %s: %v", name, err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
}

// slotJob is a TFJob of n workers each taking one gangResource slot of the nodes of its own
// namespace's test, running an hour.
func slotJob(name, ns string, n int32) *builder.Job {
	return builder.TFJob(name, ns).Replicas("Worker", n).Annotate("Worker", duration, "1h").
		Template("Worker", func(t *corev1.PodTemplateSpec) {
			t.Spec.NodeSelector = map[string]string{gangTaint: ns}
			t.Spec.Tolerations = []corev1.Toleration{{Key: gangTaint, Operator: corev1.TolerationOpExists}}
			t.Spec.Containers[0].Resources.Requests = corev1.ResourceList{gangResource: resource.MustParse("1")}
			t.Spec.Containers[0].Resources.Limits = corev1.ResourceList{gangResource: resource.MustParse("1")}
		})
}

// placed counts a job's pods bound to a node.
func placed(t *testing.T, job framework.Job) (int, int) {
	pods := jobPods(t, job)
	n := 0
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n, len(pods)
}

// A job whose workers cannot all fit stays wholly Pending, says why, and is placed at once when
// room appears; the same job with minAvailable 1 (no gang) is placed in part, which is what
// gang scheduling prevents.
func TestGangIsPlacedAllOrNothing(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	addGangNode(t, ns, ns+"-a", 2)
	addGangNode(t, ns, ns+"-b", 2)

	gang := create(t, slotJob("gang", ns, 5).Obj())
	var pg schedulingv1beta1.PodGroup
	testenv.EventuallyWithin(t, timeout, func() error {
		return env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "gang"}, &pg)
	})
	if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != 5 || !metav1.IsControlledBy(&pg, gang) {
		t.Fatalf("PodGroup %+v owned by %v: want a gang of 5 owned by the job", pg.Spec.SchedulingPolicy, pg.OwnerReferences)
	}
	testenv.EventuallyWithin(t, timeout, func() error {
		if _, n := placed(t, gang); n != 5 {
			return fmt.Errorf("%d pods, want 5", n)
		}
		fresh, err := get(t, gang)
		if err != nil {
			return err
		}
		c := conditionOf(fresh, kubeflowv1.JobCreated)
		if !strings.Contains(c.Message, "waiting for 5 pods to be schedulable together") {
			return fmt.Errorf("Created message %q does not say the gang waits", c.Message)
		}
		t.Logf("Created: %s", c.Message)
		return nil
	})
	testenv.Consistently(t, func() error {
		if n, _ := placed(t, gang); n != 0 {
			return fmt.Errorf("%d of 5 pods placed with room for 4: want none", n)
		}
		return nil
	})

	// Without the gang (minAvailable 1) the same job on the same room is placed in part.
	control := slotJob("control", ns, 5).Obj()
	control.GetRunPolicy().SchedulingPolicy = &kubeflowv1.SchedulingPolicy{MinAvailable: ptr.To[int32](1)}
	create(t, control)
	testenv.EventuallyWithin(t, timeout, func() error {
		if n, total := placed(t, control); n != 4 || total != 5 {
			return fmt.Errorf("control: %d of %d pods placed, want 4 of 5", n, total)
		}
		return nil
	})
	if err := env.Client.Delete(context.Background(), control, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}

	// Room for all five: they are placed together.
	addGangNode(t, ns, ns+"-c", 2)
	start := time.Now()
	testenv.EventuallyWithin(t, timeout, func() error {
		if n, _ := placed(t, gang); n != 5 {
			return fmt.Errorf("%d of 5 pods placed", n)
		}
		return nil
	})
	t.Logf("placed 5 of 5 %s after the third node", time.Since(start).Round(100*time.Millisecond))
	running := waitCondition(t, gang, kubeflowv1.JobRunning)
	if c := conditionOf(running, kubeflowv1.JobCreated); strings.Contains(c.Message, "waiting") {
		t.Errorf("Created still says %q once the gang runs", c.Message)
	}
}

// A distributed PyJob's workers are one gang too: five one-GPU workers with room for four stay
// Pending, the PyJob says why, and they are placed together once there is room.
func TestPyJobGangIsPlacedAllOrNothing(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	addGangNode(t, ns, ns+"-a", 2)
	addGangNode(t, ns, ns+"-b", 2)
	j := newPyJob(t, ns, "gang", "1h", "0", func(s *trainingv1alpha1.PyJobSpec) {
		s.Workers, s.GPU = 5, 1
		s.NodeSelector = map[string]string{gangTaint: ns}
		s.Tolerations = []corev1.Toleration{{Key: gangTaint, Operator: corev1.TolerationOpExists}}
	})
	pods := func() []corev1.Pod { return env.Pods(t, ns, map[string]string{"training.kiln.dev/pyjob-name": "gang"}) }
	testenv.EventuallyWithin(t, timeout, func() error {
		fresh := &trainingv1alpha1.PyJob{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(j), fresh); err != nil {
			return err
		}
		if !strings.Contains(fresh.Status.Message, "waiting for 5 pods to be schedulable together") || fresh.Status.Phase != trainingv1alpha1.PyJobPending {
			return fmt.Errorf("PyJob is %s: %q", fresh.Status.Phase, fresh.Status.Message)
		}
		t.Logf("PyJob: %s %s", fresh.Status.Phase, fresh.Status.Message)
		return testenv.Count("worker pods", len(pods()), 5)
	})
	testenv.Consistently(t, func() error {
		for _, p := range pods() {
			if p.Spec.NodeName != "" {
				return fmt.Errorf("worker %s placed with room for 4 of 5", p.Name)
			}
		}
		return nil
	})
	addGangNode(t, ns, ns+"-c", 2)
	waitPhase(t, j, trainingv1alpha1.PyJobRunning)
	for _, p := range pods() {
		if p.Spec.NodeName == "" {
			t.Errorf("worker %s not placed once running", p.Name)
		}
	}
}
