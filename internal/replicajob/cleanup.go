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

// cleanPods deletes the pods the policy names, with their services, and the batch Jobs whose
// pods it names: under All every one, under Running those not finished (the Job would replace a
// pod deleted alone). A finished Job stays otherwise, with its pod's logs, until its TTL.
func (p *planner) cleanPods(policy kubeflowv1.CleanPodPolicy) {
	if policy == kubeflowv1.CleanPodPolicyNone {
		return
	}
	for _, jobs := range p.kids.jobs {
		for _, j := range jobs {
			if policy == kubeflowv1.CleanPodPolicyAll || jobFinished(j) == nil {
				p.deleteJob(j)
			}
		}
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
