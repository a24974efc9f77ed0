package inferenceservice

import (
	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	"k8s.io/utils/ptr"
)

// apis says which optional APIs the cluster serves.
type apis struct {
	gateway, keda, monitoring bool
}

// scaling is how many replicas each version runs and who decides.
type scaling struct {
	// min and max are the effective replica bounds (min defaults to 1, max to min).
	min, max int32
	// stable is the stable Deployment's replicas; nil leaves them to the HPA or KEDA.
	stable *int32
	canary int32
	hpa    bool
	keda   bool
	// noKEDA: minReplicas is 0 but KEDA is not installed; one replica runs instead.
	noKEDA bool
	// traffic is the split in force, nil without a canary.
	traffic *servingv1alpha1.TrafficStatus
}

// decide turns the spec into replica counts and a traffic split, given the installed APIs.
func decide(isvc *servingv1alpha1.InferenceService, have apis) scaling {
	s := isvc.Spec
	lo := int32(1)
	if s.MinReplicas != nil {
		lo = *s.MinReplicas
	}
	hi := max(lo, 1)
	if s.MaxReplicas != nil {
		hi = max(*s.MaxReplicas, hi)
	}
	sc := scaling{min: lo, max: hi}
	switch {
	case lo == 0 && have.keda:
		sc.keda = true
	case lo == 0:
		sc.noKEDA, sc.stable = true, ptr.To[int32](1)
	case hi > lo:
		sc.hpa = true
	default:
		sc.stable = ptr.To(lo)
	}
	if s.Traffic == nil {
		return sc
	}
	pct := s.Traffic.CanaryPercent
	if have.gateway {
		sc.canary = 1
		sc.traffic = &servingv1alpha1.TrafficStatus{Mode: servingv1alpha1.TrafficHTTPRoute, StablePercent: 100 - pct, CanaryPercent: pct}
		return sc
	}
	// Without a router, the stable Service spreads requests over every ready pod: the split is
	// the share of canary pods among lo (at least 1) replicas.
	n := max(lo, 1)
	c := (n*pct + 50) / 100
	switch {
	case pct > 0 && c == 0:
		c = 1
	case pct < 100 && c == n:
		c = n - 1
	}
	if n == 1 && pct > 0 && pct < 100 {
		n, c = 2, 1 // one pod cannot be shared: run one of each
	}
	sc.stable, sc.canary, sc.hpa, sc.keda = ptr.To(n-c), c, false, false
	got := c * 100 / n
	sc.traffic = &servingv1alpha1.TrafficStatus{Mode: servingv1alpha1.TrafficReplicaSplit, StablePercent: 100 - got, CanaryPercent: got}
	return sc
}
