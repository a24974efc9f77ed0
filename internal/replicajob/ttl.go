package replicajob

// The ttlSecondsAfterFinished policy.

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
)

// settle counts a succeeded job's active replicas as succeeded and applies the TTL after finishing.
func (p *planner) settle() {
	st := &p.plan.Status
	if hasCondition(st, kubeflowv1.JobSucceeded) {
		for _, rs := range st.ReplicaStatuses {
			rs.Succeeded += rs.Active
			rs.Active = 0
		}
	}
	if ttl := p.job.GetRunPolicy().TTLSecondsAfterFinished; ttl != nil {
		expiry := st.CompletionTime.Add(time.Duration(*ttl) * time.Second)
		if !p.now.Time.Before(expiry) {
			p.plan.DeleteJob = true
			p.event(corev1.EventTypeNormal, "SuccessfulDeleteJob", fmt.Sprintf("Deleted job: %s", p.job.GetName()))
		} else {
			p.requeueAt(expiry)
		}
	}
}
