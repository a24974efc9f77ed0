package replicajob

// The ttlSecondsAfterFinished policy.

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/ttl"
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
	switch left, has := ttl.Left(p.job.GetRunPolicy().TTLSecondsAfterFinished, st.CompletionTime, p.now.Time); {
	case has && left == 0:
		p.plan.DeleteJob = true
		p.event(corev1.EventTypeNormal, "SuccessfulDeleteJob", fmt.Sprintf("Deleted job: %s", p.job.GetName()))
	case has:
		p.requeueAt(p.now.Add(left))
	}
}
