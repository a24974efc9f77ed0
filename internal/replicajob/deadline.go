package replicajob

// The activeDeadlineSeconds policy.

import (
	"math"
	"time"
)

// deadline is when activeDeadlineSeconds runs out, if it is set. One beyond what a
// time.Duration holds (about 292 years; the CRD allows ten, a job stored before that bound may
// have more) never comes: the product would overflow into the past.
func (p *planner) deadline() *time.Time {
	ads := p.job.GetRunPolicy().ActiveDeadlineSeconds
	if ads == nil || p.plan.Status.StartTime == nil || *ads > math.MaxInt64/int64(time.Second) {
		return nil
	}
	d := p.plan.Status.StartTime.Add(time.Duration(*ads) * time.Second)
	return &d
}
