package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/test/builder"
)

// Slot nodes are kwok nodes one test adds for itself, with a count of SlotResource its pods ask
// for, so that it knows exactly how many of its pods fit and no other test takes its room or
// lands on its nodes (they carry the SlotTaint taint and a SlotTaint=<group> label).
const (
	SlotResource = corev1.ResourceName("kiln.dev/e2e-gang-slot")
	SlotTaint    = "kiln.dev/e2e-gang"
)

// AddSlotNode adds a slot node to group with slots of SlotResource and as many nvidia.com/gpu;
// it is removed when the test ends.
func (e *Env) AddSlotNode(t testing.TB, group, name string, slots int64) {
	t.Helper()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods: resource.MustParse("110"), SlotResource: *resource.NewQuantity(slots, resource.DecimalSI),
		"nvidia.com/gpu": *resource.NewQuantity(slots, resource.DecimalSI),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"type": "kwok", SlotTaint: group}, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: SlotTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		Status:     corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	if err := e.Client.Create(context.Background(), node); err != nil {
		t.Fatalf("adding node %s: %v", name, err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), node) })
}

// OnSlots makes a pod template go to group's slot nodes and take one slot there.
func OnSlots(group string) func(*corev1.PodTemplateSpec) {
	return func(t *corev1.PodTemplateSpec) {
		t.Spec.NodeSelector = map[string]string{SlotTaint: group}
		t.Spec.Tolerations = []corev1.Toleration{{Key: SlotTaint, Operator: corev1.TolerationOpExists}}
		c := &t.Spec.Containers[0]
		c.Resources.Requests = corev1.ResourceList{SlotResource: resource.MustParse("1")}
		c.Resources.Limits = corev1.ResourceList{SlotResource: resource.MustParse("1")}
	}
}

// SlotJob is a job of n replicas of rtype, each taking one slot of its namespace's slot nodes
// (the namespace is the group), training for run (kwok's kiln.dev/simulate-duration).
func SlotJob(b *builder.Job, rtype kubeflowv1.ReplicaType, n int32, run string) *builder.Job {
	return b.Replicas(rtype, n).Annotate(rtype, "kiln.dev/simulate-duration", run).Template(rtype, OnSlots(b.Obj().GetNamespace()))
}

// Placed counts a job's pods bound to a node, and all its pods.
func (e *Env) Placed(t testing.TB, job framework.Job) (placed, total int) {
	pods := e.Pods(t, job.GetNamespace(), map[string]string{kubeflowv1.LabelJobName: job.GetName()})
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			placed++
		}
	}
	return placed, len(pods)
}

// AllOrNothing is the gang scheduling scenario every scheduler must pass, in namespace ns: a
// TFJob of five workers with slot room for four stays wholly unplaced and says why in its Created
// condition (checkGroup checks the group object kiln made for it); the same job with
// minAvailable 1 — no gang — is placed in part on the same room (so the scenario can fail); once
// a node adds room the five are placed together and the job runs.
func (e *Env) AllOrNothing(t *testing.T, ns string, timeout time.Duration, checkGroup func(job framework.Job) error) {
	e.AddSlotNode(t, ns, ns+"-a", 2)
	e.AddSlotNode(t, ns, ns+"-b", 2)
	gang := SlotJob(builder.TFJob("gang", ns), "Worker", 5, "1h").Obj()
	if err := e.Client.Create(context.Background(), gang); err != nil {
		t.Fatal(err)
	}
	EventuallyWithin(t, timeout, func() error {
		if err := checkGroup(gang); err != nil {
			return err
		}
		if _, n := e.Placed(t, gang); n != 5 {
			return fmt.Errorf("%d pods, want 5", n)
		}
		msg, err := e.createdMessage(gang)
		if err == nil && !strings.Contains(msg, "waiting for 5 pods to be schedulable together") {
			err = fmt.Errorf("Created message %q does not say the gang waits", msg)
		}
		t.Logf("Created: %s", msg)
		return err
	})
	Consistently(t, func() error {
		if n, _ := e.Placed(t, gang); n != 0 {
			return fmt.Errorf("%d of 5 pods placed with room for 4: want none", n)
		}
		return nil
	})

	control := SlotJob(builder.TFJob("control", ns), "Worker", 5, "1h").Obj()
	control.GetRunPolicy().SchedulingPolicy = &kubeflowv1.SchedulingPolicy{MinAvailable: ptr.To[int32](1)}
	if err := e.Client.Create(context.Background(), control); err != nil {
		t.Fatal(err)
	}
	EventuallyWithin(t, timeout, func() error {
		if n, total := e.Placed(t, control); n != 4 || total != 5 {
			return fmt.Errorf("control: %d of %d pods placed, want 4 of 5", n, total)
		}
		return nil
	})
	if err := e.Client.Delete(context.Background(), control, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}

	e.AddSlotNode(t, ns, ns+"-c", 2)
	start := time.Now()
	EventuallyWithin(t, timeout, func() error {
		if n, _ := e.Placed(t, gang); n != 5 {
			return fmt.Errorf("%d of 5 pods placed", n)
		}
		return nil
	})
	t.Logf("placed 5 of 5 %s after the third node", time.Since(start).Round(100*time.Millisecond))
	e.WaitCondition(t, gang, kubeflowv1.JobRunning, timeout)
	if msg, err := e.createdMessage(gang); err != nil || strings.Contains(msg, "waiting") {
		t.Errorf("Created says %q (%v) once the gang runs", msg, err)
	}
}

func (e *Env) createdMessage(job framework.Job) (string, error) {
	fresh := job.DeepCopyObject().(framework.Job)
	if err := e.Client.Get(context.Background(), client.ObjectKeyFromObject(job), fresh); err != nil {
		return "", err
	}
	return Condition(fresh, kubeflowv1.JobCreated).Message, nil
}
