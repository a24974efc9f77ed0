package inferenceservice

// KServe's InferenceService (serving.kserve.io/v1beta1), compiled for the engine: the predictor as
// KServe's Standard mode builds it (internal/kserve), under KServe's names and labels.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	kservev1alpha1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1alpha1"
	kservev1beta1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1beta1"
	"github.com/kiln-ml/kiln/internal/kserve"
	"github.com/kiln-ml/kiln/internal/kueue"
	"github.com/kiln-ml/kiln/internal/modeluri"
	"github.com/kiln-ml/kiln/internal/transition"
)

// kserveID is LabelService's value on a KServe InferenceService's objects: its name, and .kserve,
// which no kiln InferenceService's name has, so that neither selects the other's pods.
func kserveID(name string) string { return name + kserveIDSuffix }

const (
	kserveIDSuffix = ".kserve"
	// apiKServe is LabelAPI's value on what KServe's InferenceServices make.
	apiKServe = "kserve"
)

// kserveMount is KServe's: the model in kserve-container, fetched by storage-initializer into
// kserve-provision-location.
var kserveMount = modelMount{container: kserve.ContainerName, volume: "kserve-provision-location", fetch: "storage-initializer"}

// kserveDefaultPort is the serving port of a kserve-container that declares none.
const kserveDefaultPort = 8080

// fromKServe compiles KServe's InferenceService isvc, whose predictor p kserve.Build built: one
// version, <name>-predictor, its Deployment selecting app=isvc.<name>-predictor and its Service
// the address; the model fetched by kiln-fetch (fetchImage) as storage-initializer.
func fromKServe(isvc *kservev1beta1.InferenceService, p kserve.Predictor, fetchImage string) endpoint {
	ext := isvc.Spec.Predictor.ComponentExtensionSpec
	e := kserveNamed(isvc)
	e.runtime, e.annotations = p.Runtime, p.Annotations
	e.labels = union(p.Labels, e.labels)
	e.startupTimeout = DefaultStartupTimeoutSeconds
	kueue.CopyLabels(isvc.Labels, e.queue)
	e.stable, e.port = kserveVersion(p, fetchImage)
	if port, path := p.Annotations["prometheus.kserve.io/port"], p.Annotations["prometheus.kserve.io/path"]; path != "" {
		n, _ := strconv.Atoi(port)
		e.metrics = promEndpoint{port: int32(n), path: path}
	}
	// Replicas: minReplicas (default 1) to maxReplicas (0: minReplicas); KServe's HPA never
	// scales below one, and autoscalerClass none fixes the count at minReplicas.
	lo := max(ptr.Deref(ext.MinReplicas, 1), 1)
	hi := max(ext.MaxReplicas, lo)
	if isvc.Annotations[kserveAutoscalerClass] == "none" {
		hi = lo
	}
	e.minReplicas, e.maxReplicas = &lo, &hi
	e.hpaMetrics = kserveMetrics(ext)
	if a := ext.AutoScaling; a != nil {
		e.hpaBehavior = a.Behavior
	}
	e.strategy = ext.DeploymentStrategy
	return e
}

// kserveVersion is the pods of predictor p and the port they serve on (the server's first, else
// 8080), the model fetched by fetchImage's kiln-fetch as storage-initializer. The pods' revision
// annotation is a hash of the rest of their template. The pods are built on p.Pod itself, which
// Build made for this alone.
func kserveVersion(p kserve.Predictor, fetchImage string) (versionPods, int32) {
	port := int32(kserveDefaultPort)
	pod := p.Pod
	i := slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == kserve.ContainerName })
	if i >= 0 {
		server := &pod.Containers[i]
		if len(server.Ports) > 0 {
			port = server.Ports[0].ContainerPort
		}
		// As KServe: a server without a readiness probe is ready once its port opens.
		if server.ReadinessProbe == nil {
			server.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}},
				TimeoutSeconds: 1, PeriodSeconds: 10, FailureThreshold: 3}
		}
	}
	if p.StorageURI != "" {
		mountModel(&pod, kserveMount, p.StorageURI, fetchImage, nil)
	}
	t := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(p.Labels), Annotations: map[string]string{modelURIAnnotation: modeluri.Redact(p.StorageURI)}},
		Spec:       pod,
	}
	t.Annotations[revisionAnnotation] = revisionOf(t)
	return versionPods{model: modeluri.Redact(p.StorageURI), template: t}, port
}

// kserveNamed is the endpoint of isvc as far as its names go, all that deleting what it made
// needs: its owner, names, id and labels.
func kserveNamed(isvc *kservev1beta1.InferenceService) endpoint {
	name := kserve.PredictorName(isvc.Name, isvc.Spec.Predictor.Name)
	return endpoint{
		parent: isvc, name: isvc.Name, namespace: isvc.Namespace, address: name, base: name, id: kserveID(isvc.Name),
		owner: metav1.OwnerReference{APIVersion: kservev1beta1.GroupVersion.String(), Kind: "InferenceService",
			Name: isvc.Name, UID: isvc.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)},
		deploymentSelector: kserve.Selector,
		labels:             map[string]string{LabelAPI: apiKServe},
		mount:              kserveMount,
		queue:              map[string]string{},
		retired:            retiredPredictors(isvc),
		dropIngress:        ingressMade(isvc),
	}
}

// kserveAutoscalerClass picks the autoscaler: hpa (the default), none, keda or external.
const kserveAutoscalerClass = "serving.kserve.io/autoscalerClass"

// kserveMetrics are the HPA's metrics, as KServe sets them: autoScaling's resource metrics, else
// scaleMetric (cpu by default) at scaleTarget (a utilization, 80% by default; memory only with a
// target).
func kserveMetrics(ext kservev1beta1.ComponentExtensionSpec) []autoscalingv2.MetricSpec {
	if a := ext.AutoScaling; a != nil && len(a.Metrics) > 0 {
		var out []autoscalingv2.MetricSpec
		for _, m := range a.Metrics {
			if m.Type != "Resource" || m.Resource == nil {
				continue
			}
			t := m.Resource.Target
			target := autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(ptr.Deref(t.AverageUtilization, 80))}
			switch {
			case t.Type == "AverageValue" && t.AverageValue != nil:
				target = autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: t.AverageValue}
			case t.Type == "Value" && t.Value != nil:
				target = autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: t.Value}
			}
			out = append(out, resourceMetric(corev1.ResourceName(m.Resource.Name), target))
		}
		return out
	}
	utilization := autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(ptr.Deref(ext.ScaleTarget, 80))}
	switch ptr.Deref(ext.ScaleMetric, "cpu") {
	case "cpu":
		return []autoscalingv2.MetricSpec{resourceMetric(corev1.ResourceCPU, utilization)}
	case "memory":
		if ext.ScaleTarget != nil {
			return []autoscalingv2.MetricSpec{resourceMetric(corev1.ResourceMemory, utilization)}
		}
	}
	return nil
}

// kserveAPI is KServe's InferenceService, its predictor served on the ServingRuntimes and
// ClusterServingRuntimes the cache holds.
type kserveAPI struct {
	// client reads from the cache, and takes KServe's finalizer off (releaseKServesFinalizer).
	client client.Client
	// reader reads the apiserver: a Deployment's pod template, which the cache does not keep.
	reader     client.Reader
	fetchImage string
	// ingressDomain, when set, exposes the services through Ingresses of ingressClass.
	ingressDomain, ingressClass string
}

// ingressMade is the name of the Ingress the status says kiln made for isvc ("" for none).
func ingressMade(isvc *kservev1beta1.InferenceService) string {
	if c := meta.FindStatusCondition(isvc.Status.Conditions, kservev1beta1.ConditionIngressReady); c != nil && strings.HasPrefix(c.Reason, "Ingress") {
		return isvc.Name
	}
	return ""
}

// Deployment modes: kiln serves Standard (RawDeployment is its old name).
const kserveDeploymentMode = "serving.kserve.io/deploymentMode"

func (k kserveAPI) read(ctx context.Context, key client.ObjectKey) (client.Object, *endpoint, error) {
	isvc := &kservev1beta1.InferenceService{}
	if err := k.client.Get(ctx, key, isvc); err != nil {
		return nil, nil, client.IgnoreNotFound(err)
	}
	if isvc.DeletionTimestamp != nil {
		return nil, nil, k.releaseKServesFinalizer(ctx, isvc)
	}
	named := kserveNamed(isvc)
	if strings.EqualFold(isvc.Annotations[kserveStop], "true") {
		named.stopped = true
		return isvc, &named, nil
	}
	if why := notServed(isvc); why != nil {
		return isvc, &named, why
	}
	// The runtimes are the cache's own, not copies (the manager's cache hands them out read-only):
	// kserve.Build only reads them.
	var srs kservev1alpha1.ServingRuntimeList
	if err := k.client.List(ctx, &srs, client.InNamespace(isvc.Namespace)); err != nil {
		return nil, nil, err
	}
	var csrs kservev1alpha1.ClusterServingRuntimeList
	if err := k.client.List(ctx, &csrs); err != nil {
		return nil, nil, err
	}
	namespaced, cluster := kserve.Namespaced(srs.Items), kserve.Clustered(csrs.Items)
	p, err := kserve.Build(isvc, &isvc.Spec.Predictor, namespaced, cluster)
	if err != nil {
		return asRefused(isvc, &named, err)
	}
	e := fromKServe(isvc, p, k.fetchImage)
	e.ingress = k.ingressOf(isvc, e.address)
	if err := k.withCanary(ctx, isvc, &e, namespaced, cluster); err != nil {
		return asRefused(isvc, &named, err)
	}
	return isvc, &e, nil
}

// asRefused is what read returns for err: a *refused, with the object and its names, when a
// *kserve.Failure or *refused says why the spec cannot run, else err alone.
func asRefused(isvc *kservev1beta1.InferenceService, named *endpoint, err error) (client.Object, *endpoint, error) {
	if why := refusalOf(err, ""); why != nil {
		return isvc, named, why
	}
	return nil, nil, err
}

// refusalOf is the *refused err is or the *refused of the *kserve.Failure it is, its message after
// the field at (when given); nil for any other error.
func refusalOf(err error, at string) *refused {
	var failure *kserve.Failure
	var why *refused
	switch {
	case errors.As(err, &failure):
		why = &refused{string(failure.Reason), failure.Message}
	case errors.As(err, &why):
	default:
		return nil
	}
	if at != "" {
		why = &refused{why.reason, at + ": " + why.message}
	}
	return why
}

// kserveFinalizer is the finalizer KServe's controller puts on every InferenceService, and takes
// off once it has cleaned up after one being deleted.
const kserveFinalizer = "inferenceservice.finalizers"

// releaseKServesFinalizer takes KServe's finalizer off an InferenceService being deleted, as
// KServe's controller would: one that KServe served before kiln would otherwise never go. What
// kiln made goes with it (owner references); another finalizer is left to its own controller.
func (k kserveAPI) releaseKServesFinalizer(ctx context.Context, isvc *kservev1beta1.InferenceService) error {
	i := slices.Index(isvc.Finalizers, kserveFinalizer)
	if i < 0 {
		return nil
	}
	at := fmt.Sprintf("/metadata/finalizers/%d", i)
	patch := fmt.Sprintf(`[{"op":"test","path":%q,"value":%q},{"op":"remove","path":%q}]`, at, kserveFinalizer, at)
	if err := k.client.Patch(ctx, isvc, client.RawPatch(types.JSONPatchType, []byte(patch))); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("taking KServe's finalizer off InferenceService %s, being deleted: %w", isvc.Name, err)
	}
	return nil
}

// kserveVisibility cluster-local on an InferenceService keeps it inside the cluster: no Ingress.
const kserveVisibility = "networking.kserve.io/visibility"

// ingressOf is the Ingress that exposes isvc, whose address is the Service named address, as
// KServe's Standard mode makes it: hosts <name>-<namespace>.<domain> and
// <address>-<namespace>.<domain>; nil without a domain or for a cluster-local service.
func (k kserveAPI) ingressOf(isvc *kservev1beta1.InferenceService, address string) *ingress {
	if k.ingressDomain == "" || isvc.Labels[kserveVisibility] == "cluster-local" {
		return nil
	}
	host := func(name string) string { return name + "-" + isvc.Namespace + "." + k.ingressDomain }
	return &ingress{name: isvc.Name, class: k.ingressClass, hosts: []string{host(isvc.Name), host(address)}}
}

// ingressAdmitted says whether Ingress in (seen: nil when absent) has an address from an
// ingress controller: only then do requests from outside reach the address.
func ingressAdmitted(in *ingress, seen *networkingv1.Ingress, address string) (bool, string, string) {
	class := "the cluster's default class"
	if in.class != "" {
		class = "class " + in.class
	}
	switch {
	case seen == nil:
		return false, "IngressNotCreated", "Ingress " + in.name + " does not exist yet"
	case len(seen.Status.LoadBalancer.Ingress) == 0:
		return false, "IngressNotAdmitted", fmt.Sprintf("Ingress %s has no address: no ingress controller of %s has admitted it (clients in the cluster call %s)", in.name, class, address)
	}
	return true, "IngressAdmitted", fmt.Sprintf("Ingress %s routes http://%s to %s", in.name, in.hosts[0], address)
}

// reasonModeNotServed: the deployment mode is not Standard.
const reasonModeNotServed = "DeploymentModeNotServed"

// kserveStop set to true stops an InferenceService: what it made is deleted, and the status says
// Stopped.
const kserveStop = "serving.kserve.io/stop"

// notServed is why kiln cannot serve the InferenceService as asked, when a part of KServe it
// asks for is one kiln does not run (yet): it makes nothing rather than something else.
func notServed(isvc *kservev1beta1.InferenceService) *refused {
	p := isvc.Spec.Predictor
	switch mode := isvc.Annotations[kserveDeploymentMode]; mode {
	case "", "Standard", "RawDeployment":
	default:
		return &refused{reasonModeNotServed, fmt.Sprintf(
			"%s: %s mode is not served: kiln serves KServe's Standard mode; set the annotation to Standard (or remove it)", kserveDeploymentMode, mode)}
	}
	switch class := isvc.Annotations[kserveAutoscalerClass]; class {
	case "", "hpa", "none":
	default:
		return &refused{"AutoscalerClassNotServed", fmt.Sprintf(
			"%s: %s is not served by kiln: use hpa (the default) or none", kserveAutoscalerClass, class)}
	}
	if isvc.Annotations[kserveAutoscalerClass] == "hpa" { // as KServe's webhook, for the HPA it names
		if m := p.ScaleMetric; m != nil && *m != "cpu" && *m != "memory" {
			return &refused{string(kservev1beta1.InvalidPredictorSpec), fmt.Sprintf("spec.predictor.scaleMetric: an HPA scales on cpu or memory, not %s", *m)}
		}
		if a := p.AutoScaling; a != nil {
			for i, m := range a.Metrics {
				if m.Type != "Resource" {
					return &refused{string(kservev1beta1.InvalidPredictorSpec), fmt.Sprintf(
						"spec.predictor.autoScaling.metrics[%d]: an HPA scales on Resource metrics, not %s (KServe's keda class, which kiln does not serve)", i, m.Type)}
				}
			}
		}
	}
	switch {
	case len(isvc.Spec.Canary) > 1:
		return &refused{string(kservev1beta1.InvalidPredictorSpec), fmt.Sprintf(
			"spec.canary has %d canaries: kiln runs one canary beside the predictor; keep one (the others can follow it)", len(isvc.Spec.Canary))}
	case len(isvc.Spec.Canary) == 1 && p.CanaryTrafficPercent != nil:
		return &refused{string(kservev1beta1.InvalidPredictorSpec),
			"spec.predictor.canaryTrafficPercent and spec.canary both ask for a canary: give one (spec.canary names its canary; canaryTrafficPercent splits the rolled-out predictor from the spec's)"}
	}
	return predictorNotServed(&p, "spec.predictor")
}

// predictorNotServed is why kiln cannot serve predictor p (at the field at) as asked, when it
// asks for a part of KServe kiln does not run.
func predictorNotServed(p *kservev1beta1.PredictorSpec, at string) *refused {
	// One framework field beside model serves the framework field (kserve.ModelOf), as KServe's
	// defaulting webhook makes it; two framework fields its validation refuses.
	if impls := kserve.Frameworks(p); len(impls) > 1 {
		if p.Model != nil {
			impls = append(impls, "model")
		}
		return &refused{string(kservev1beta1.InvalidPredictorSpec), fmt.Sprintf(
			"%s: give one of the framework fields or model, not %s", at, strings.Join(impls, " and "))}
	}
	not := func(field, what string) *refused {
		return &refused{string(kservev1beta1.InvalidPredictorSpec), fmt.Sprintf("%s.%s: kiln does not run %s; remove it to serve the model", at, field, what)}
	}
	switch m := kserve.ModelOf(p); {
	case p.Logger != nil:
		return not("logger", "KServe's request logger (its agent sidecar)")
	case p.Batcher != nil:
		return not("batcher", "KServe's request batcher (its agent sidecar)")
	case len(p.StorageUris) > 0:
		return not("storageUris", "more than one model per predictor")
	case m != nil && m.Storage != nil:
		return not("storage", "KServe's storage-config Secret; give the model's storageUri")
	case m != nil && m.Confidential != nil && m.Confidential.Enabled:
		return not("confidential", "confidential containers")
	}
	return nil
}

func (kserveAPI) kind() apiKind {
	isKServe, _ := labels.NewRequirement(LabelAPI, selection.Equals, []string{apiKServe})
	return apiKind{
		name:   "kserve-inferenceservice",
		object: func() client.Object { return &kservev1beta1.InferenceService{} },
		list:   func() client.ObjectList { return &kservev1beta1.InferenceServiceList{} },
		gvk:    kservev1beta1.GroupVersion.WithKind("InferenceService"),
		owns:   *isKServe,
		fetch:  kserveMount.fetch,
		nameOf: func(id string) (string, bool) { return strings.CutSuffix(id, kserveIDSuffix) },
		// A runtime that comes, goes or changes may change every model that could run on it: the
		// InferenceServices of its namespace, or of every namespace for a cluster runtime.
		watch: func(b *builder.Builder, r *Reconciler) *builder.Builder {
			return b.Watches(&kservev1alpha1.ServingRuntime{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				return r.every(ctx, client.InNamespace(o.GetNamespace()))
			})).Watches(&kservev1alpha1.ClusterServingRuntime{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
				return r.every(ctx)
			}))
		},
	}
}

// +kubebuilder:rbac:groups=serving.kserve.io,resources=inferenceservices,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=serving.kserve.io,resources=inferenceservices/status,verbs=get;patch
// +kubebuilder:rbac:groups=serving.kserve.io,resources=inferenceservices/finalizers,verbs=update
// +kubebuilder:rbac:groups=serving.kserve.io,resources=servingruntimes;clusterservingruntimes,verbs=get;list;watch

// NewKServeReconciler returns the reconciler of KServe's InferenceServices (serving.kserve.io), on
// the engine kiln's own InferenceServices run on.
func NewKServeReconciler(c client.Client, reader client.Reader, rec recorder.EventRecorder, clk clock.PassiveClock, opts Options) *Reconciler {
	r := NewReconciler(c, reader, rec, clk, opts)
	r.api = kserveAPI{client: c, reader: reader, fetchImage: r.opts.FetchImage, ingressDomain: r.opts.KServeIngressDomain, ingressClass: r.opts.KServeIngressClass}
	return r
}

func (kserveAPI) status(obj client.Object, e *endpoint, seen observed) (any, transition.Told) {
	isvc := obj.(*kservev1beta1.InferenceService)
	st := kserveStatus(isvc, e, seen)
	if equality.Semantic.DeepEqual(st, isvc.Status) {
		return nil, transition.Told{}
	}
	return &st, toldOf(isvc.CreationTimestamp, isvc.Status.Conditions, st.Conditions, seen.why)
}

// kserveStatus is the status KServe's clients read, from what the engine saw: PredictorReady
// from the predictor's Deployment and pods, IngressReady (kiln makes no Ingress: the service is
// called inside the cluster), Ready both and the rollout complete, the model's state, the runtime.
func kserveStatus(isvc *kservev1beta1.InferenceService, e *endpoint, seen observed) kservev1beta1.InferenceServiceStatus {
	st := *isvc.Status.DeepCopy()
	st.ObservedGeneration = isvc.Generation
	st.DeploymentMode = "Standard"
	set := func(t string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: isvc.Generation, LastTransitionTime: seen.now})
	}
	if seen.stopped || (seen.refused != nil && seen.stable == nil) { // nothing runs: no address, runtime or model to speak of
		was := st
		st = kservev1beta1.InferenceServiceStatus{ObservedGeneration: isvc.Generation, DeploymentMode: st.DeploymentMode, Conditions: st.Conditions}
		if !seen.stopped {
			// Refused, nothing deleted: what an earlier spec made (a predictor under its former
			// name, a canary) is remembered, to go once a spec runs (retiredPredictors).
			st.Components, st.CanaryStatuses = was.Components, was.CanaryStatuses
		}
	}
	if seen.stopped {
		msg := kserveStop + " is true: the predictor's objects are deleted; remove the annotation to serve again"
		set(kservev1beta1.ConditionStopped, true, "Stopped", msg)
		for _, c := range []string{kservev1beta1.ConditionPredictorReady, kservev1beta1.ConditionIngressReady, kservev1beta1.ConditionReady} {
			set(c, false, "Stopped", msg)
		}
		meta.RemoveStatusCondition(&st.Conditions, kservev1beta1.ConditionCanaryPredictorReady)
		return st
	}
	set(kservev1beta1.ConditionStopped, false, "NotStopped", "")
	if r := seen.refused; r != nil && seen.stable != nil {
		return kserveHeld(st, e, seen, set)
	}
	if r := seen.refused; r != nil {
		meta.RemoveStatusCondition(&st.Conditions, kservev1beta1.ConditionCanaryPredictorReady)
		if r.reason == reasonModeNotServed {
			st.DeploymentMode = ""
		}
		meta.RemoveStatusCondition(&st.Conditions, kservev1beta1.ConditionPredictorReady) // IngressReady stays: whether kiln made an Ingress (ingressMade)
		set(kservev1beta1.ConditionPredictorReady, false, r.reason, r.message)
		set(kservev1beta1.ConditionReady, false, r.reason, r.message)
		st.ModelStatus = kservev1beta1.ModelStatus{TransitionStatus: kservev1beta1.InvalidSpec,
			ModelRevisionStates: &kservev1beta1.ModelRevisionStates{ActiveModelState: kservev1beta1.Pending, TargetModelState: kservev1beta1.FailedToLoad},
			LastFailureInfo:     &kservev1beta1.FailureInfo{Reason: failureReason(r.reason), Message: r.message}}
		return st
	}
	st.ServingRuntimeName, st.ClusterServingRuntimeName = "", ""
	if rt := e.runtime; rt != nil && rt.Cluster {
		st.ClusterServingRuntimeName = rt.Name
	} else if rt != nil {
		st.ServingRuntimeName = rt.Name
	}
	address := "http://" + serviceHost(e)
	st.Address = &kservev1beta1.Addressable{URL: address}
	ok, reason, msg := predictorReady(seen.stable, false, address, seen.why)
	set(kservev1beta1.ConditionPredictorReady, ok, reason, msg)
	url, predictorURL := address, address
	ingressOK, ingressReason, ingressMsg := true, "ClusterLocal", "kiln makes no Ingress (the manager's --kserve-ingress-domain is not set, or the InferenceService is labelled "+
		kserveVisibility+": cluster-local): clients in the cluster call "+address
	if in := e.ingress; in != nil {
		url, predictorURL = "http://"+in.hosts[0], "http://"+in.hosts[1]
		ingressOK, ingressReason, ingressMsg = ingressAdmitted(in, seen.ingress, address)
	}
	if seen.why.blocks() { // the address may be another's object
		st.Address = nil
		ingressOK, ingressReason, ingressMsg = false, seen.why.reason, seen.why.message
	}
	set(kservev1beta1.ConditionIngressReady, ingressOK, ingressReason, ingressMsg)
	ready, readyReason, readyMsg := ok, reason, msg
	rollout := rolloutOf(seen.stable)
	if ok && !rollout.complete {
		active := ""
		if seen.stable != nil {
			active = seen.stable.Spec.Template.Annotations[modelURIAnnotation]
		}
		ready, readyReason, readyMsg = false, rollout.reason, rollout.message(active, e.stable.model, seen.why)
	}
	component := kservev1beta1.ComponentStatusSpec{Address: st.Address}
	canaryOK, canaryMsg := kserveRevisions(isvc, &st, &component, e, seen, set)
	if ready && !canaryOK && e.canaryName == "" {
		// canaryTrafficPercent's canary is the new model: Ready waits for it as for a rollout.
		// spec.canary's is beside the model, and Ready does not wait for it, as in KServe (its
		// Ready is PredictorReady and IngressReady).
		ready, readyReason, readyMsg = false, "CanaryNotReady", predictorName(e, canary)+": "+canaryMsg
	}
	if ready && !ingressOK {
		ready, readyReason, readyMsg = false, ingressReason, ingressMsg
	}
	if seen.why.blocks() {
		ready, readyReason, readyMsg = false, seen.why.reason, seen.why.message
	}
	if ready {
		readyReason, readyMsg = "Ready", "serving at "+url
	}
	set(kservev1beta1.ConditionReady, ready, readyReason, readyMsg)
	// The url is given while the predictor answers there, through a rollout too (KServe gives it
	// from its first reconcile on; kiln once a pod is ready and the route admitted).
	st.URL = ""
	if ok && ingressOK && !seen.why.blocks() {
		st.URL, component.URL = url, predictorURL
	}
	st.Components = map[string]kservev1beta1.ComponentStatusSpec{kservePredictor: component}
	st.ModelStatus = modelStatus(seen, ready)
	return st
}

// kserveHeld is the status of an InferenceService whose spec cannot run while what it made before
// serves on (Reconciler.hold): its address, url, runtime and revisions as they were written;
// PredictorReady as its Deployment is now; Ready False with why the spec is not served; the model
// of the last spec served, the one asked for failed, as KServe has it (InvalidSpec).
func kserveHeld(st kservev1beta1.InferenceServiceStatus, e *endpoint, seen observed, set func(string, bool, string, string)) kservev1beta1.InferenceServiceStatus {
	r := seen.refused
	if r.reason == reasonModeNotServed {
		st.DeploymentMode = ""
	}
	ok, reason, msg := predictorReady(seen.stable, false, "http://"+serviceHost(e), trouble{})
	set(kservev1beta1.ConditionPredictorReady, ok, reason, msg)
	serves := "no pod of Deployment " + seen.stable.Name + ", which it made before, is ready"
	active := kservev1beta1.Pending
	if ok {
		serves, active = "Deployment "+seen.stable.Name+", which it made before, serves on", kservev1beta1.Loaded
	}
	set(kservev1beta1.ConditionReady, false, r.reason, r.message+"; kiln changes nothing until the spec can be served: "+serves)
	st.ModelStatus.TransitionStatus = kservev1beta1.InvalidSpec
	st.ModelStatus.ModelRevisionStates = &kservev1beta1.ModelRevisionStates{ActiveModelState: active, TargetModelState: kservev1beta1.FailedToLoad}
	st.ModelStatus.LastFailureInfo = &kservev1beta1.FailureInfo{Reason: failureReason(r.reason), Message: r.message}
	return st
}

// modelStatus is the model's state: loaded once ready, failed when its fetch failed, else loading.
func modelStatus(seen observed, ready bool) kservev1beta1.ModelStatus {
	var copies int32
	if seen.stable != nil {
		copies = seen.stable.Status.ReadyReplicas
	}
	m := kservev1beta1.ModelStatus{ModelCopies: &kservev1beta1.ModelCopies{TotalCopies: copies}}
	switch {
	case ready:
		m.TransitionStatus = kservev1beta1.UpToDate
		m.ModelRevisionStates = &kservev1beta1.ModelRevisionStates{ActiveModelState: kservev1beta1.Loaded, TargetModelState: kservev1beta1.Loaded}
	case seen.why.reason == reasonModelFetchFailed:
		m.TransitionStatus = kservev1beta1.BlockedByFailedLoad
		m.ModelRevisionStates = &kservev1beta1.ModelRevisionStates{ActiveModelState: kservev1beta1.FailedToLoad, TargetModelState: kservev1beta1.FailedToLoad}
		m.LastFailureInfo = &kservev1beta1.FailureInfo{Reason: kservev1beta1.ModelLoadFailed, Message: seen.why.message, Location: kserveMount.fetch}
	default:
		m.TransitionStatus = kservev1beta1.InProgress
		m.ModelRevisionStates = &kservev1beta1.ModelRevisionStates{ActiveModelState: kservev1beta1.Pending, TargetModelState: kservev1beta1.Loading}
	}
	return m
}

// failureReason is a refusal's reason as KServe's FailureReason enum has it.
func failureReason(reason string) kservev1beta1.FailureReason {
	switch r := kservev1beta1.FailureReason(reason); r {
	case kservev1beta1.RuntimeDisabled, kservev1beta1.NoSupportingRuntime, kservev1beta1.RuntimeNotRecognized, kservev1beta1.InvalidPredictorSpec:
		return r
	}
	return kservev1beta1.InvalidPredictorSpec
}
