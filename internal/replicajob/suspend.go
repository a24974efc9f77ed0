package replicajob

// The suspend policy.

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
)

// suspend deletes every pod, service and batch Job (whatever cleanPodPolicy says: that is what
// suspending is for) and reports the job Suspended. A batch Job is made again on resume, from
// the template as it is then (Kueue's admission sets its nodeSelector): a Job's template cannot
// change once it has started.
func (p *planner) suspend() {
	for _, pods := range p.kids.pods {
		for _, pod := range pods {
			p.deletePod(pod)
		}
	}
	for _, svcs := range p.kids.services {
		for _, svc := range svcs {
			p.deleteService(svc)
		}
	}
	for _, jobs := range p.kids.jobs {
		for _, j := range jobs {
			p.deleteJob(j)
		}
	}
	p.deleteStrays()
	msg := fmt.Sprintf("%s %s is suspended.", p.fw.Kind, p.job.GetName())
	if why := p.plugins.whySuspended(p.job); why != "" { // Kueue suspends what it queues
		msg = fmt.Sprintf("%s %s is suspended; %s.", p.fw.Kind, p.job.GetName(), why)
	}
	if hasCondition(&p.plan.Status, kubeflowv1.JobRunning) {
		p.setCondition(kubeflowv1.JobRunning, corev1.ConditionFalse, "Suspended", msg)
	}
	p.setCondition(kubeflowv1.JobSuspended, corev1.ConditionTrue, "Suspended", msg)
	p.setReplicaStatuses(framework.Replicas{})
}
