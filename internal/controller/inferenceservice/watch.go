package inferenceservice

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kiln-ml/kiln/internal/owned"
	"github.com/kiln-ml/kiln/internal/stuck"
)

// The kinds of the optional APIs kiln makes objects of, and the CRD that serves each.
var (
	httpRouteGVK      = schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "HTTPRoute"}
	scaledObjectGVK   = schema.GroupVersionKind{Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledObject"}
	serviceMonitorGVK = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}
	prometheusRuleGVK = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "PrometheusRule"}
	interceptorGVK    = schema.GroupVersionKind{Group: "http.keda.sh", Version: "v1beta1", Kind: "InterceptorRoute"}
	virtualServiceGVK = schema.GroupVersionKind{Group: "networking.istio.io", Version: "v1", Kind: "VirtualService"}

	optionalKinds = map[string]schema.GroupVersionKind{
		"httproutes.gateway.networking.k8s.io":  httpRouteGVK,
		"scaledobjects.keda.sh":                 scaledObjectGVK,
		"servicemonitors.monitoring.coreos.com": serviceMonitorGVK,
		"prometheusrules.monitoring.coreos.com": prometheusRuleGVK,
		"interceptorroutes.http.keda.sh":        interceptorGVK,
		"virtualservices.networking.istio.io":   virtualServiceGVK,
	}
)

// newOwnedCache is the controller's own cache of what an InferenceService makes besides its
// Deployments and HPAs (the manager's cache has those): its Services (their metadata: kiln reads
// no Service's spec), its pods (what troubleOf, inMesh and asPodsSay read, indexed by their
// LabelService value) and its objects of the optional APIs — each selected by LabelService, so
// it holds nothing else of the cluster. The manager's Service and pod caches hold the training
// kinds' children only (their own label), hence a cache of its own. Pods and Services reach it
// without their specs (watchtrim).
func newOwnedCache(mgr ctrl.Manager, namespaces []string, api labels.Requirement) (cache.Cache, error) {
	has, err := labels.NewRequirement(LabelService, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	c, err := owned.NewCache(mgr, namespaces, labels.NewSelector().Add(*has, api),
		map[client.Object]cache.ByObject{&corev1.Pod{}: {Transform: podTroubleOnly}, &corev1.Service{}: {Transform: serviceMetaOnly}},
		corev1.SchemeGroupVersion.WithKind("Pod"), corev1.SchemeGroupVersion.WithKind("Service"))
	if err != nil {
		return nil, err
	}
	// A service's pods are found by their LabelService value, not among every pod of the namespace.
	return c, c.IndexField(context.Background(), &corev1.Pod{}, podsOfService, func(o client.Object) []string {
		return []string{o.GetLabels()[LabelService]}
	})
}

// podsOfService indexes the cached pods by their LabelService value.
const podsOfService = "label:" + LabelService

// podTroubleOnly keeps of a cached pod what troubleOf, inMesh and asPodsSay read: its name,
// labels, templateAnnotations, creation and deletion; its phase, its Ready condition's status, an
// unschedulable PodScheduled condition, and of each container its name, a waiting reason that
// blocks it (stuck.Blocking) and how it last ended. The pod is the informer's freshly decoded
// one, slimmed in place.
func podTroubleOnly(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	pod.ObjectMeta = metav1.ObjectMeta{
		Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
		Labels: pod.Labels, Annotations: keepTemplateAnnotations(pod.Annotations), CreationTimestamp: pod.CreationTimestamp,
		DeletionTimestamp: pod.DeletionTimestamp,
	}
	pod.Spec = corev1.PodSpec{}
	var conditions []corev1.PodCondition
	for _, c := range pod.Status.Conditions {
		switch {
		case c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse:
			conditions = append(conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
		case c.Type == corev1.PodReady:
			conditions = append(conditions, corev1.PodCondition{Type: c.Type, Status: c.Status})
		}
	}
	pod.Status = corev1.PodStatus{Phase: pod.Status.Phase, Conditions: conditions,
		InitContainerStatuses: containersTroubleOnly(pod.Status.InitContainerStatuses),
		ContainerStatuses:     containersTroubleOnly(pod.Status.ContainerStatuses)}
	return pod, nil
}

// keepTemplateAnnotations is of a pod's annotations its templateAnnotations (nil without any).
func keepTemplateAnnotations(in map[string]string) map[string]string {
	var kept map[string]string
	for _, k := range templateAnnotations {
		if v, ok := in[k]; ok {
			if kept == nil {
				kept = make(map[string]string, len(templateAnnotations))
			}
			kept[k] = v
		}
	}
	return kept
}

// containersTroubleOnly keeps, in place, what podTroubleOnly says of each container.
func containersTroubleOnly(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	for i, s := range in {
		slim := stuck.Slim(s)
		slim.State.Terminated, slim.LastTerminationState.Terminated = ended(s.State.Terminated), ended(s.LastTerminationState.Terminated)
		in[i] = slim
	}
	return in
}

// ended is how a container ended, trimmed in place: its exit code, reason and message
// (kiln-fetch's says why).
func ended(t *corev1.ContainerStateTerminated) *corev1.ContainerStateTerminated {
	if t != nil {
		*t = corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Reason: t.Reason, Message: t.Message}
	}
	return t
}

// serviceMetaOnly keeps of a cached Service its metadata: the kit reads its owner, UID and
// version, and nothing reads its spec.
func serviceMetaOnly(obj any) (any, error) {
	if svc, ok := obj.(*corev1.Service); ok {
		svc.ManagedFields, svc.Spec, svc.Status = nil, corev1.ServiceSpec{}, corev1.ServiceStatus{}
	}
	return obj, nil
}

// watches starts the watches of the owned cache's kinds: Services, NetworkPolicies, Ingresses and pods at
// once, the optional kinds once their CRD is installed (sync) and, when it is removed, their
// informer goes.
type watches struct {
	ctrl   controller.Controller
	cache  cache.Cache
	mapper meta.RESTMapper
	owner  handler.EventHandler
	mu     sync.Mutex
	active map[schema.GroupVersionKind]bool
}

func newWatches(mgr ctrl.Manager, c controller.Controller, objects cache.Cache, k apiKind) (*watches, error) {
	w := &watches{ctrl: c, cache: objects, mapper: mgr.GetRESTMapper(), active: map[schema.GroupVersionKind]bool{},
		owner: owned.EnqueueController(k.gvk.GroupKind())}
	for _, o := range []client.Object{&corev1.Service{}, &networkingv1.NetworkPolicy{}, &networkingv1.Ingress{}} {
		if err := c.Watch(source.Kind(objects, o, w.owner)); err != nil {
			return nil, err
		}
	}
	// A pod's trouble (a failed fetch, an image that cannot be pulled) changes no Deployment
	// status: its pods tell. A pod's readiness, and its going, count before its Deployment's
	// status says so (asPodsSay).
	byLabel := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name, ok := k.nameOf(o.GetLabels()[LabelService])
		if !ok {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
	})
	podChanged := predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			was, is := e.ObjectOld.(*corev1.Pod), e.ObjectNew.(*corev1.Pod)
			return podTrouble(was, k.fetch) != podTrouble(is, k.fetch) || stuck.Ready(was) != stuck.Ready(is) ||
				(was.DeletionTimestamp == nil) != (is.DeletionTimestamp == nil)
		},
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	if err := c.Watch(source.Kind(objects, client.Object(&corev1.Pod{}), byLabel, podChanged)); err != nil {
		return nil, err
	}
	return w, nil
}

// sync watches the optional kinds the cluster serves and stops watching those it no longer does.
func (w *watches) sync(ctx context.Context, have apis) error {
	served := map[schema.GroupVersionKind]bool{httpRouteGVK: have.gateway, scaledObjectGVK: have.keda,
		serviceMonitorGVK: have.monitoring, prometheusRuleGVK: have.monitoring, interceptorGVK: have.httpAddOn,
		virtualServiceGVK: have.istio}
	w.mu.Lock()
	defer w.mu.Unlock()
	for gvk, on := range served {
		switch {
		case on && !w.active[gvk]:
			// A CRD just created is served moments later: until then a watch would retry only
			// every 10 s, and the reconcile that needs the kind fails and is retried anyway.
			if _, err := w.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); meta.IsNoMatchError(err) {
				continue
			}
			if err := w.ctrl.Watch(source.Kind(w.cache, client.Object(newOptional(gvk)), w.owner)); err != nil {
				return err
			}
			w.active[gvk] = true
		case !on && w.active[gvk]:
			if err := w.cache.RemoveInformer(ctx, newOptional(gvk)); err != nil {
				return err
			}
			delete(w.active, gvk)
		}
	}
	return nil
}
