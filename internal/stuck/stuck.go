// Package stuck tells why a pod cannot start or keeps failing to, in words that name the pod,
// the reason and the fix: what a job's status says while it waits.
package stuck

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// fixes are the container waiting reasons that block a pod until someone acts, with what to do.
var fixes = map[string]string{
	"ErrImagePull":               "check the image name and tag, and imagePullSecrets for a private registry",
	"ImagePullBackOff":           "check the image name and tag, and imagePullSecrets for a private registry",
	"InvalidImageName":           "fix the image reference",
	"CrashLoopBackOff":           "the container keeps exiting: read its log (kubectl logs --previous)",
	"CreateContainerConfigError": "a Secret or ConfigMap it references (env, volumes) is missing: create it",
	"CreateContainerError":       "the container runtime could not create the container: see the pod's events",
	"RunContainerError":          "the container runtime could not start the container: see the pod's events",
}

// Blocking says whether a container waiting reason blocks its pod (the cache keeps only these).
func Blocking(reason string) bool { _, ok := fixes[reason]; return ok }

// Ready says whether the pod's Ready condition is true.
func Ready(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Slim is what Pod reads of a container's status: its name, and a waiting reason that blocks it
// with its message. Caches keep that (and what else their readers read), not the whole status;
// the waiting state is s's own, trimmed in place.
func Slim(s corev1.ContainerStatus) corev1.ContainerStatus {
	slim := corev1.ContainerStatus{Name: s.Name}
	if w := s.State.Waiting; w != nil && Blocking(w.Reason) {
		*w = corev1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
		slim.State.Waiting = w
	}
	return slim
}

// Pod says why pod cannot run — the reason (a container's waiting reason, or Unschedulable) and
// a message naming the pod, the reason and the fix — or "", "" when nothing blocks it. name is
// how to call the pod ("worker 1", or its name).
func Pod(pod *corev1.Pod, name string) (reason, message string) {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return "", ""
	}
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range statuses {
			w := cs.State.Waiting
			if w == nil || !Blocking(w.Reason) {
				continue
			}
			msg := strings.TrimSpace(w.Message)
			if msg != "" {
				msg = ": " + msg
			}
			return w.Reason, fmt.Sprintf("%s cannot start: container %s is %s%s; %s", name, cs.Name, w.Reason, msg, fixes[w.Reason])
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Reason, fmt.Sprintf("%s cannot be scheduled: %s", name, c.Message)
		}
	}
	return "", ""
}
