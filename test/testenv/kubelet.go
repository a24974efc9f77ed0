package testenv

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The envtest control plane has no kubelet: these helpers write pod status as one would.

// Run marks a pod Running with every container running.
func (e *Env) Run(t testing.TB, pod *corev1.Pod) {
	t.Helper()
	e.setStatus(t, pod, corev1.PodRunning, func(c corev1.Container) corev1.ContainerState {
		return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
	})
}

// Ready runs a pod's containers and marks the pod Ready, as the kubelet does once they pass
// their readiness probes.
func (e *Env) Ready(t testing.TB, pod *corev1.Pod) {
	t.Helper()
	e.Run(t, pod)
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	if err := e.Client.Status().Update(context.Background(), pod); err != nil {
		t.Fatalf("marking pod %s ready: %v", pod.Name, err)
	}
}

// Exit terminates a pod's containers with code: the pod Succeeds on 0, Fails otherwise.
func (e *Env) Exit(t testing.TB, pod *corev1.Pod, code int32) {
	t.Helper()
	phase := corev1.PodSucceeded
	if code != 0 {
		phase = corev1.PodFailed
	}
	e.setStatus(t, pod, phase, func(c corev1.Container) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Completed", FinishedAt: metav1.Now()}}
	})
}

// RestartInPlace records n in-place container restarts on a running pod, as the kubelet does
// under restartPolicy OnFailure.
func (e *Env) RestartInPlace(t testing.TB, pod *corev1.Pod, n int32) {
	t.Helper()
	e.setStatus(t, pod, corev1.PodRunning, func(c corev1.Container) corev1.ContainerState {
		return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
	}, func(s *corev1.ContainerStatus) { s.RestartCount = n })
}

// setStatus writes the status on the freshest copy of the pod, retrying on conflicts, and leaves
// that copy in *pod. A pod that is gone is left alone, as a kubelet would.
func (e *Env) setStatus(t testing.TB, pod *corev1.Pod, phase corev1.PodPhase, state func(corev1.Container) corev1.ContainerState, extra ...func(*corev1.ContainerStatus)) {
	t.Helper()
	Eventually(t, func() error {
		p := &corev1.Pod{}
		if err := e.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), p); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		setContainerStatuses(p, phase, state, extra...)
		if err := e.Client.Status().Update(context.Background(), p); err != nil {
			return fmt.Errorf("writing status of pod %s: %w", pod.Name, err)
		}
		*pod = *p
		return nil
	})
}

func setContainerStatuses(p *corev1.Pod, phase corev1.PodPhase, state func(corev1.Container) corev1.ContainerState, extra ...func(*corev1.ContainerStatus)) {
	p.Status.Phase = phase
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		s := corev1.ContainerStatus{Name: c.Name, Image: c.Image, State: state(c), Ready: phase == corev1.PodRunning}
		for _, f := range extra {
			f(&s)
		}
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, s)
	}
}

// Pods lists the pods in ns with the given labels, sorted by name.
func (e *Env) Pods(t testing.TB, ns string, labels map[string]string) []corev1.Pod {
	t.Helper()
	var l corev1.PodList
	if err := e.Client.List(context.Background(), &l, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
		t.Fatalf("listing pods: %v", err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items
}

// Services lists the services in ns with the given labels, sorted by name.
func (e *Env) Services(t testing.TB, ns string, labels map[string]string) []corev1.Service {
	t.Helper()
	var l corev1.ServiceList
	if err := e.Client.List(context.Background(), &l, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
		t.Fatalf("listing services: %v", err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items
}

// Await waits until the object ns/name exists and reads it into obj.
func (e *Env) Await(t testing.TB, ns, name string, obj client.Object) {
	t.Helper()
	Eventually(t, func() error {
		return e.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	})
}

// Pod gets one pod by name.
func (e *Env) Pod(t testing.TB, ns, name string) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := e.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
		t.Fatalf("getting pod %s: %v", name, err)
	}
	return &p
}

// Eventually retries check until it returns nil, failing the test with its last error after Timeout.
func Eventually(t testing.TB, check func() error) {
	t.Helper()
	EventuallyWithin(t, Timeout, check)
}

// EventuallyWithin is Eventually with its own timeout.
func EventuallyWithin(t testing.TB, timeout time.Duration, check func() error) {
	t.Helper()
	EventuallyExplained(t, timeout, check, nil)
}

// EventuallyExplained is EventuallyWithin that, should check still fail, also says what explain
// finds then (the state of the objects involved; read once, not at every try).
func EventuallyExplained(t testing.TB, timeout time.Duration, check func() error, explain func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			if explain == nil {
				t.Fatalf("still failing after %s: %v", timeout, err)
			}
			t.Errorf("still failing after %s: %v", timeout, err) // said before explain runs, which may fail too
			t.Fatal(explain())
		}
		time.Sleep(Interval)
	}
}

// Consistently checks that check keeps returning nil for Quiet.
func Consistently(t testing.TB, check func() error) {
	t.Helper()
	deadline := time.Now().Add(Quiet)
	for time.Now().Before(deadline) {
		if err := check(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(Interval)
	}
}

// Count returns an error unless got == want.
func Count(what string, got, want int) error {
	if got != want {
		return fmt.Errorf("%s: got %d, want %d", what, got, want)
	}
	return nil
}
