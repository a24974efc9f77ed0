package inferenceservice

import (
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
)

// apis says which optional APIs the cluster serves.
type apis struct {
	gateway, keda, monitoring bool
	// httpAddOn: KEDA's HTTP add-on (its InterceptorRoute API), which holds requests while a
	// service scaled to zero starts.
	httpAddOn bool
	// istio: Istio's VirtualService API.
	istio bool
}

// versionScale is how one version's replicas are decided: a fixed count, or an HPA between
// hpaMin and hpaMax (replicas nil), or KEDA (replicas nil, keda).
type versionScale struct {
	replicas       *int32
	hpa            bool
	hpaMin, hpaMax int32
}

// scaling is how many replicas each version runs, who decides, and how traffic is split.
type scaling struct {
	// min and max are the effective replica bounds of the spec (min defaults to 1, max to min).
	min, max       int32
	stable, canary versionScale
	// keda: KEDA scales the stable version from zero, woken by the HTTP add-on's interceptor.
	keda bool
	// zeroUnavailable: minReplicas is 0 but KEDA or its HTTP add-on is not installed (which, it
	// says); one replica runs instead.
	zeroUnavailable string
	// zeroPaused: minReplicas is 0, but a canary runs, and both versions keep a replica.
	zeroPaused bool
	// mode is how the canary's share is enforced ("" without a canary).
	mode servingv1alpha1.TrafficMode
	// meshPending: Istio's API is installed, but the pods are not in the mesh (yet), so the
	// VirtualService splits nothing.
	meshPending bool
	// serves is the version the stable Service selects: "" every version (replica split), or the
	// only one that takes traffic when the split is 0 or 100 percent.
	serves string
}

// decide turns the spec into each version's scaling and the traffic mode, given the installed
// APIs and what enforces the split exactly ("" when nothing does: a route no mesh or gateway
// accepted, or a VirtualService for pods outside the mesh, splits nothing).
func decide(e *endpoint, have apis, exact servingv1alpha1.TrafficMode) scaling {
	lo := int32(1)
	if e.minReplicas != nil {
		lo = *e.minReplicas
	}
	hi := max(lo, 1)
	if e.maxReplicas != nil {
		hi = max(*e.maxReplicas, hi)
	}
	sc := scaling{min: lo, max: hi}
	if e.canary == nil {
		switch {
		case lo == 0 && have.keda && have.httpAddOn:
			sc.keda = true
		case lo == 0:
			sc.zeroUnavailable, sc.stable.replicas = notInstalled(have), ptr.To[int32](1)
		case hi > lo:
			sc.stable = versionScale{hpa: true, hpaMin: lo, hpaMax: hi}
		default:
			sc.stable.replicas = ptr.To(lo)
		}
		return sc
	}
	if lo == 0 {
		sc.zeroPaused, lo = true, 1
	}
	pct := e.canaryPercent
	sc.stable, sc.canary = share(lo, hi, 100-pct), share(lo, hi, pct)
	sc.mode = servingv1alpha1.TrafficReplicaSplit
	if exact != "" {
		sc.mode = exact
		return sc
	}
	sc.meshPending = have.istio
	switch pct {
	case 0:
		sc.serves = stable
	case 100:
		sc.serves = canary
	}
	return sc
}

// share is one version's part of the bounds lo..hi for pct percent of the traffic: rounded up,
// so that the versions together never have less capacity than the spec asks, and at least one
// replica, so that a version in the spec is ready to take its share (even at 0 percent).
func share(lo, hi, pct int32) versionScale {
	part := func(n int32) int32 { return max(1, (n*pct+99)/100) }
	if hi > lo {
		return versionScale{hpa: true, hpaMin: part(lo), hpaMax: max(part(lo), part(hi))}
	}
	return versionScale{replicas: ptr.To(part(lo))}
}

// notInstalled names what scale to zero lacks.
func notInstalled(have apis) string {
	switch {
	case !have.keda && !have.httpAddOn:
		return "neither is installed"
	case !have.keda:
		return "KEDA is not installed"
	}
	return "the HTTP add-on is not installed"
}
