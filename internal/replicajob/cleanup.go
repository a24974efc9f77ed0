package replicajob

// The clean-pod policy of a finished job.

import (
	corev1 "k8s.io/api/core/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
)

// finished cleans up after a job whose terminal status is stored, and applies its TTL.
func (p *planner) finished() {
	if p.plan.Status.CompletionTime == nil {
		p.plan.Status.CompletionTime = &p.now
	}
	p.settle()
	p.cleanPods(*p.job.GetRunPolicy().CleanPodPolicy)
}

// cleanPods deletes the pods the policy names, with their services.
func (p *planner) cleanPods(policy kubeflowv1.CleanPodPolicy) {
	if policy == kubeflowv1.CleanPodPolicyNone {
		return
	}
	for rtype, pods := range p.kids.pods {
		for index, pod := range pods {
			phase := pod.Status.Phase
			if policy == kubeflowv1.CleanPodPolicyAll || phase == corev1.PodRunning || phase == corev1.PodPending || phase == "" {
				p.deletePod(pod)
				if svc := p.kids.services[rtype][index]; svc != nil {
					p.deleteService(svc)
				}
			}
		}
	}
}
