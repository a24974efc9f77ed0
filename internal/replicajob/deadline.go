package replicajob

// The activeDeadlineSeconds policy.

import (
	"time"
)

// deadline is when activeDeadlineSeconds runs out, if it is set.
func (p *planner) deadline() *time.Time {
	ads := p.job.GetRunPolicy().ActiveDeadlineSeconds
	if ads == nil || p.plan.Status.StartTime == nil {
		return nil
	}
	d := p.plan.Status.StartTime.Add(time.Duration(*ads) * time.Second)
	return &d
}
