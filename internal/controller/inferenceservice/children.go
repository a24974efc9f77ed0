package inferenceservice

import (
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	"github.com/kiln-ml/kiln/internal/netpol"
)

// plan is what an InferenceService needs on the cluster: the objects to apply, in order, those
// the spec no longer wants, and the versions' Deployments among the first (canary nil without a
// canary).
type plan struct {
	want, drop     []client.Object
	stable, canary *appsv1.Deployment
}

// desired is the plan of endpoint e, its replicas decided by sc, on a cluster that serves the
// optional APIs have says.
func desired(e *endpoint, sc scaling, have apis, opts Options) plan {
	p := plan{stable: desiredDeployment(e, stable, sc.stable.replicas)}
	p.want = []client.Object{p.stable, desiredStableService(e, sc, opts.KEDAHTTPInterceptor)}
	if predictorName(e, stable) != e.address { // the stable version's own Service, a split's backend
		p.want = append(p.want, desiredService(e, predictorName(e, stable), stable, stable))
	}
	if e.canary != nil {
		p.canary = desiredDeployment(e, canary, sc.canary.replicas)
		p.want = append(p.want, p.canary, desiredService(e, predictorName(e, canary), canary, canary))
	} else {
		p.drop = append(p.drop,
			&appsv1.Deployment{ObjectMeta: objectMeta(e, predictorName(e, canary), canary)},
			&corev1.Service{ObjectMeta: objectMeta(e, predictorName(e, canary), canary)})
	}
	if have.istio {
		if e.canary != nil && sc.mode != servingv1alpha1.TrafficHTTPRoute {
			p.want = append(p.want, desiredVirtualService(e))
		} else {
			p.drop = append(p.drop, optional(e, virtualServiceGVK, e.name))
		}
	}
	for _, name := range e.retired {
		if name == predictorName(e, stable) || name == predictorName(e, canary) { // the spec's, or dropped above
			continue
		}
		m := objectMeta(e, name, canary)
		p.drop = append(p.drop, &appsv1.Deployment{ObjectMeta: m}, &corev1.Service{ObjectMeta: m}, &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: m})
		if have.keda {
			p.drop = append(p.drop, optional(e, scaledObjectGVK, name))
		}
	}
	if have.gateway {
		if e.canary != nil {
			p.want = append(p.want, desiredHTTPRoute(e))
		} else {
			p.drop = append(p.drop, optional(e, httpRouteGVK, e.name))
		}
	}
	for _, v := range []struct {
		version string
		scale   versionScale
	}{{stable, sc.stable}, {canary, sc.canary}} {
		if v.scale.hpa {
			p.want = append(p.want, desiredHPA(e, v.version, v.scale.hpaMin, v.scale.hpaMax))
		} else {
			p.drop = append(p.drop, &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: objectMeta(e, predictorName(e, v.version), v.version)})
		}
	}
	if sc.keda {
		p.want = append(p.want, desiredScaledObject(e, sc.max, opts.KEDAHTTPScaler), desiredInterceptorRoute(e, opts.KEDAHTTPInterceptor))
	} else {
		if have.keda {
			p.drop = append(p.drop, optional(e, scaledObjectGVK, predictorName(e, stable)))
		}
		if have.httpAddOn {
			p.drop = append(p.drop, optional(e, interceptorGVK, e.name))
		}
	}
	switch {
	case e.ingress != nil:
		p.want = append(p.want, desiredIngress(e))
	case e.dropIngress != "":
		p.drop = append(p.drop, &networkingv1.Ingress{ObjectMeta: objectMeta(e, e.dropIngress, "")})
	}
	if e.netpol {
		p.want = append(p.want, desiredNetworkPolicy(e, sc, opts.KEDAHTTPInterceptor))
	} else {
		p.drop = append(p.drop, &networkingv1.NetworkPolicy{ObjectMeta: objectMeta(e, netpol.Name(e.name), "")})
	}
	if have.monitoring {
		if sm := desiredServiceMonitor(e); sm != nil {
			p.want = append(p.want, sm)
		} else {
			p.drop = append(p.drop, optional(e, serviceMonitorGVK, e.name))
		}
		p.want = append(p.want, desiredPrometheusRule(e))
	}
	return p
}

// Children are every object an InferenceService makes, as the reconciler builds them with opts:
// on a cluster that serves none of the optional APIs, then on one that serves them all (the
// Gateway API with the route accepted, KEDA and its HTTP add-on, the Prometheus operator). The
// admission fuzz has the apiserver check each.
func Children(isvc *servingv1alpha1.InferenceService, opts Options) []client.Object {
	var out []client.Object
	opts = opts.withDefaults()
	e := fromKiln(isvc, opts.FetchImage)
	for _, have := range []apis{{}, {gateway: true, keda: true, httpAddOn: true, monitoring: true}, {istio: true}} {
		out = append(out, desired(&e, decide(&e, have, exactOn(have)), have, opts).want...)
	}
	return out
}

// exactOn is what splits a canary exactly on a cluster that serves the optional APIs have says,
// its route accepted or its pods in the mesh.
func exactOn(have apis) servingv1alpha1.TrafficMode {
	switch {
	case have.gateway:
		return servingv1alpha1.TrafficHTTPRoute
	case have.istio:
		return servingv1alpha1.TrafficVirtualService
	}
	return ""
}
