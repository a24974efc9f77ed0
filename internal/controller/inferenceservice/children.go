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

// desired is the plan of isvc, its replicas decided by sc, on a cluster that serves the optional
// APIs have says.
func desired(isvc *servingv1alpha1.InferenceService, sc scaling, have apis, opts Options) plan {
	p := plan{stable: desiredDeployment(isvc, stable, isvc.Spec.ModelURI, opts.FetchImage, sc.stable.replicas)}
	p.want = []client.Object{
		p.stable,
		desiredStableService(isvc, sc, opts.KEDAHTTPInterceptor),
		desiredService(isvc, predictorName(isvc, stable), stable, stable),
	}
	if t := isvc.Spec.Traffic; t != nil {
		p.canary = desiredDeployment(isvc, canary, t.CanaryVersion, opts.FetchImage, sc.canary.replicas)
		p.want = append(p.want, p.canary, desiredService(isvc, predictorName(isvc, canary), canary, canary))
	} else {
		p.drop = append(p.drop,
			&appsv1.Deployment{ObjectMeta: objectMeta(isvc, predictorName(isvc, canary), canary)},
			&corev1.Service{ObjectMeta: objectMeta(isvc, predictorName(isvc, canary), canary)})
	}
	if have.gateway {
		if isvc.Spec.Traffic != nil {
			p.want = append(p.want, desiredHTTPRoute(isvc, isvc.Spec.Traffic.CanaryPercent))
		} else {
			p.drop = append(p.drop, optional(isvc, httpRouteGVK, isvc.Name))
		}
	}
	for _, v := range []struct {
		version string
		scale   versionScale
	}{{stable, sc.stable}, {canary, sc.canary}} {
		if v.scale.hpa {
			p.want = append(p.want, desiredHPA(isvc, v.version, v.scale.hpaMin, v.scale.hpaMax))
		} else {
			p.drop = append(p.drop, &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: objectMeta(isvc, predictorName(isvc, v.version), v.version)})
		}
	}
	if sc.keda {
		p.want = append(p.want, desiredScaledObject(isvc, sc.max, opts.KEDAHTTPScaler), desiredInterceptorRoute(isvc, opts.KEDAHTTPInterceptor))
	} else {
		if have.keda {
			p.drop = append(p.drop, optional(isvc, scaledObjectGVK, predictorName(isvc, stable)))
		}
		if have.httpAddOn {
			p.drop = append(p.drop, optional(isvc, interceptorGVK, isvc.Name))
		}
	}
	if isvc.Spec.NetworkPolicy != nil {
		p.want = append(p.want, desiredNetworkPolicy(isvc, sc, opts.KEDAHTTPInterceptor))
	} else {
		p.drop = append(p.drop, &networkingv1.NetworkPolicy{ObjectMeta: objectMeta(isvc, netpol.Name(isvc.Name), "")})
	}
	if have.monitoring {
		if sm := desiredServiceMonitor(isvc); sm != nil {
			p.want = append(p.want, sm)
		} else {
			p.drop = append(p.drop, optional(isvc, serviceMonitorGVK, isvc.Name))
		}
		p.want = append(p.want, desiredPrometheusRule(isvc))
	}
	return p
}

// Children are every object an InferenceService makes, as the reconciler builds them with opts:
// on a cluster that serves none of the optional APIs, then on one that serves them all (the
// Gateway API with the route accepted, KEDA and its HTTP add-on, the Prometheus operator). The
// admission fuzz has the apiserver check each.
func Children(isvc *servingv1alpha1.InferenceService, opts Options) []client.Object {
	var out []client.Object
	for _, have := range []apis{{}, {gateway: true, keda: true, httpAddOn: true, monitoring: true}} {
		out = append(out, desired(isvc, decide(isvc, have, have.gateway), have, opts.withDefaults()).want...)
	}
	return out
}
