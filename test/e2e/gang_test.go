package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/gang"
	"github.com/kiln-ml/kiln/test/testenv"
)

// A job whose workers cannot all fit stays wholly Pending, says why, and is placed at once when
// room appears; without the gang the same job is placed in part.
func TestGangIsPlacedAllOrNothing(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	cluster.AllOrNothing(t, ns, timeout, func(job framework.Job) error {
		var pg schedulingv1beta1.PodGroup
		if err := cluster.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: gang.GroupName(job.GetName(), "TFJob")}, &pg); err != nil {
			return err
		}
		if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != 5 || !metav1.IsControlledBy(&pg, job) {
			return fmt.Errorf("PodGroup %+v owned by %v: want a gang of 5 owned by the job", pg.Spec.SchedulingPolicy, pg.OwnerReferences)
		}
		return nil
	})
}

// A distributed PyJob's workers are one gang too: five one-GPU workers with room for four stay
// Pending, the PyJob says why, and they are placed together once there is room.
func TestPyJobGangIsPlacedAllOrNothing(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	cluster.AddSlotNode(t, ns, ns+"-a", 2)
	cluster.AddSlotNode(t, ns, ns+"-b", 2)
	j := newPyJob(t, ns, "gang", "1h", "0", func(s *trainingv1alpha1.PyJobSpec) {
		s.Workers, s.GPU = 5, 1
		s.NodeSelector = map[string]string{testenv.SlotTaint: ns}
		s.Tolerations = []corev1.Toleration{{Key: testenv.SlotTaint, Operator: corev1.TolerationOpExists}}
	})
	pods := func() []corev1.Pod {
		return cluster.Pods(t, ns, map[string]string{"training.kiln.dev/pyjob-name": "gang"})
	}
	testenv.EventuallyWithin(t, timeout, func() error {
		fresh := &trainingv1alpha1.PyJob{}
		if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(j), fresh); err != nil {
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
	cluster.AddSlotNode(t, ns, ns+"-c", 2)
	waitPhase(t, j, trainingv1alpha1.PyJobRunning)
	for _, p := range pods() {
		if p.Spec.NodeName == "" {
			t.Errorf("worker %s not placed once running", p.Name)
		}
	}
}
