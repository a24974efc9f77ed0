package inferenceservice

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	"github.com/kiln-ml/kiln/internal/metrics"
	"github.com/kiln-ml/kiln/internal/stuck"
	"github.com/kiln-ml/kiln/internal/tracing"
	"github.com/kiln-ml/kiln/internal/version"
)

// +kubebuilder:rbac:groups=serving.kiln.dev,resources=inferenceservices,verbs=get;list;watch
// +kubebuilder:rbac:groups=serving.kiln.dev,resources=inferenceservices/status,verbs=get;patch
// +kubebuilder:rbac:groups=serving.kiln.dev,resources=inferenceservices/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes,verbs=get;create;patch;delete
// +kubebuilder:rbac:groups=keda.sh,resources=scaledobjects,verbs=get;create;patch;delete
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors;prometheusrules,verbs=get;create;patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// FieldManager owns every field kiln applies.
const FieldManager = "kiln"

// DefaultPrometheusAddress is the default of Options.PrometheusAddress.
const DefaultPrometheusAddress = "http://prometheus-operated.monitoring.svc:9090"

// Options are the operator-level settings of the controller.
type Options struct {
	// FetchImage runs /kiln-fetch in the init container that downloads http(s)/s3/gs models.
	FetchImage string
	// PrometheusAddress is the server KEDA queries for request rates.
	PrometheusAddress string
}

var crdKind = apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")

// optionalCRDs are the CRDs whose arrival or removal changes what kiln creates.
var optionalCRDs = map[string]bool{
	"httproutes.gateway.networking.k8s.io": true, "scaledobjects.keda.sh": true,
	"servicemonitors.monitoring.coreos.com": true, "prometheusrules.monitoring.coreos.com": true,
}

// Reconciler reconciles InferenceServices.
type Reconciler struct {
	client client.Client
	reader client.Reader // uncached: services and optional kinds are not in the cache
	clock  clock.PassiveClock
	opts   Options
}

// NewReconciler returns the InferenceService reconciler.
func NewReconciler(c client.Client, reader client.Reader, clk clock.PassiveClock, opts Options) *Reconciler {
	if opts.FetchImage == "" {
		opts.FetchImage = version.Image()
	}
	if opts.PrometheusAddress == "" {
		opts.PrometheusAddress = DefaultPrometheusAddress
	}
	return &Reconciler{client: c, reader: reader, clock: clk, opts: opts}
}

// SetupWithManager watches InferenceServices, the Deployments and HPAs they own, and (metadata
// only) the CRDs of the optional APIs: installing or removing one re-reconciles every service.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(crdKind)
	return ctrl.NewControllerManagedBy(mgr).
		Named("inferenceservice").
		For(&servingv1alpha1.InferenceService{}).
		Owns(&appsv1.Deployment{}).
		Owns(&autoscalingv2.HorizontalPodAutoscaler{}).
		WatchesMetadata(crd, handler.EnqueueRequestsFromMapFunc(r.optionalAPIChanged),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return optionalCRDs[o.GetName()] }))).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, workers)}).
		Complete(r)
}

// optionalAPIChanged re-reconciles every service when an optional API comes or goes.
func (r *Reconciler) optionalAPIChanged(ctx context.Context, _ client.Object) []reconcile.Request {
	var list servingv1alpha1.InferenceServiceList
	if err := r.client.List(ctx, &list); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&i)})
	}
	return reqs
}

// Reconcile applies everything the InferenceService needs, removes what it no longer needs and
// writes the status.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, err error) {
	ctx, end := tracing.Start(ctx, "Reconcile InferenceService", tracing.Object("InferenceService", req.Namespace, req.Name)...)
	defer func() { end(err) }()
	isvc := &servingv1alpha1.InferenceService{}
	if err := r.client.Get(ctx, req.NamespacedName, isvc); err != nil || isvc.DeletionTimestamp != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	have := r.installed(ctx)
	sc := decide(isvc, have)
	if err := r.applyAll(ctx, isvc, sc, have); err != nil {
		return reconcile.Result{}, err
	}
	stableDep, err := r.deployment(ctx, isvc, stable)
	if err != nil {
		return reconcile.Result{}, err
	}
	canaryDep, err := r.deployment(ctx, isvc, canary)
	if err != nil {
		return reconcile.Result{}, err
	}
	var why trouble
	if stableDep != nil && (stableDep.Status.ReadyReplicas == 0 || !rolloutOf(stableDep).complete) {
		if why, err = r.troubleOf(ctx, isvc); err != nil {
			return reconcile.Result{}, err
		}
	}
	st := status(isvc, sc, stableDep, canaryDep, why, metav1.NewTime(r.clock.Now()))
	// Pods failing to start change no Deployment status: look again while none is ready.
	var result reconcile.Result
	if !meta.IsStatusConditionTrue(st.Conditions, Ready) {
		result.RequeueAfter = notReadyRecheck
	}
	if equality.Semantic.DeepEqual(st, isvc.Status) {
		return result, nil
	}
	base := isvc.DeepCopy()
	isvc.Status = st
	if err := r.client.Status().Patch(ctx, isvc, client.MergeFrom(base)); err != nil {
		return reconcile.Result{}, err
	}
	recordReady(base, st)
	return result, nil
}

// notReadyRecheck is how often a predictor with no ready replica is looked at again.
const notReadyRecheck = 10 * time.Second

// trouble is why the predictor's pods do not become ready, when they say.
type trouble struct{ reason, message string }

// troubleOf reads the stable version's pods from the apiserver (they are not cached; this runs
// only while none is ready or a change rolls out) and says what keeps the first of them from starting: the model fetch
// failing (its termination message, which kiln-fetch writes without secrets), or a container or
// the scheduler (stuck.Pod).
func (r *Reconciler) troubleOf(ctx context.Context, isvc *servingv1alpha1.InferenceService) (trouble, error) {
	var pods corev1.PodList
	if err := r.reader.List(ctx, &pods, client.InNamespace(isvc.Namespace), client.MatchingLabels(selector(isvc, stable))); err != nil {
		return trouble{}, err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		for _, cs := range p.Status.InitContainerStatuses {
			if cs.Name != fetchContainer {
				continue
			}
			t := cs.State.Terminated
			if t == nil {
				t = cs.LastTerminationState.Terminated
			}
			if t != nil && t.ExitCode != 0 {
				msg := strings.TrimSpace(t.Message)
				if msg == "" {
					msg = fmt.Sprintf("exit code %d", t.ExitCode)
				}
				return trouble{"ModelFetchFailed", fmt.Sprintf("fetching the model failed in pod %s: %s", p.Name, msg)}, nil
			}
		}
		if reason, msg := stuck.Pod(p, "pod "+p.Name); reason != "" {
			return trouble{reason, msg}, nil
		}
	}
	return trouble{}, nil
}

// recordReady observes how long the service took to become Ready: from its creation, or from
// when it stopped being ready.
func recordReady(old *servingv1alpha1.InferenceService, st servingv1alpha1.InferenceServiceStatus) {
	now := meta.FindStatusCondition(st.Conditions, Ready)
	before := meta.FindStatusCondition(old.Status.Conditions, Ready)
	if now == nil || now.Status != metav1.ConditionTrue || (before != nil && before.Status == metav1.ConditionTrue) {
		return
	}
	since := old.CreationTimestamp.Time
	if before != nil {
		since = before.LastTransitionTime.Time
	}
	metrics.TimeToReady.Observe(metrics.Seconds(now.LastTransitionTime.Sub(since)))
}

// applyAll server-side applies the desired objects and deletes those the spec dropped.
func (r *Reconciler) applyAll(ctx context.Context, isvc *servingv1alpha1.InferenceService, sc scaling, have apis) error {
	want := []client.Object{
		desiredDeployment(isvc, stable, isvc.Spec.ModelURI, r.opts.FetchImage, sc.stable),
		desiredService(isvc, isvc.Name, ""),
		desiredService(isvc, predictorName(isvc, stable), stable),
	}
	var drop []client.Object
	canaryObjs := []client.Object{
		&appsv1.Deployment{ObjectMeta: objectMeta(isvc, predictorName(isvc, canary), canary)},
		&corev1.Service{ObjectMeta: objectMeta(isvc, predictorName(isvc, canary), canary)},
	}
	if t := isvc.Spec.Traffic; t != nil {
		want = append(want,
			desiredDeployment(isvc, canary, t.CanaryVersion, r.opts.FetchImage, &sc.canary),
			desiredService(isvc, predictorName(isvc, canary), canary))
	} else {
		drop = append(drop, canaryObjs...)
	}
	if have.gateway {
		if isvc.Spec.Traffic != nil {
			want = append(want, desiredHTTPRoute(isvc, isvc.Spec.Traffic.CanaryPercent))
		} else {
			drop = append(drop, optional(isvc, "gateway.networking.k8s.io/v1", "HTTPRoute", isvc.Name))
		}
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: objectMeta(isvc, predictorName(isvc, stable), stable)}
	if sc.hpa {
		want = append(want, desiredHPA(isvc, sc.min, sc.max))
	} else {
		drop = append(drop, hpa)
	}
	if sc.keda {
		want = append(want, desiredScaledObject(isvc, sc.max, r.opts.PrometheusAddress))
	} else if have.keda {
		drop = append(drop, optional(isvc, "keda.sh/v1alpha1", "ScaledObject", predictorName(isvc, stable)))
	}
	if have.monitoring {
		want = append(want, desiredServiceMonitor(isvc), desiredPrometheusRule(isvc))
	}
	for _, o := range want {
		if err := r.client.Patch(ctx, o, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil { //nolint:staticcheck // typed and unstructured apply alike
			return fmt.Errorf("applying %s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
	for _, o := range drop {
		if err := r.deleteOwned(ctx, isvc, o); err != nil {
			return err
		}
	}
	return nil
}

func optional(isvc *servingv1alpha1.InferenceService, apiVersion, kind, name string) client.Object {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(isvc.Namespace)
	u.SetName(name)
	return u
}

// deleteOwned deletes o if it exists and this InferenceService controls it.
func (r *Reconciler) deleteOwned(ctx context.Context, isvc *servingv1alpha1.InferenceService, o client.Object) error {
	err := r.reader.Get(ctx, client.ObjectKeyFromObject(o), o)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !metav1.IsControlledBy(o, isvc) {
		return nil
	}
	return client.IgnoreNotFound(r.client.Delete(ctx, o, client.Preconditions{UID: ptr.To(o.GetUID())}))
}

func (r *Reconciler) deployment(ctx context.Context, isvc *servingv1alpha1.InferenceService, version string) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: isvc.Namespace, Name: predictorName(isvc, version)}, d)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return d, err
}

// installed says which optional APIs the cluster has, from the CRD metadata the controller
// watches (a cache lookup; asking the RESTMapper would re-list the API groups on every miss). An
// apply that runs before a new CRD is served fails and is retried.
func (r *Reconciler) installed(ctx context.Context) apis {
	has := func(name string) bool {
		crd := &metav1.PartialObjectMetadata{}
		crd.SetGroupVersionKind(crdKind)
		return r.client.Get(ctx, client.ObjectKey{Name: name}, crd) == nil
	}
	return apis{
		gateway:    has("httproutes.gateway.networking.k8s.io"),
		keda:       has("scaledobjects.keda.sh"),
		monitoring: has("servicemonitors.monitoring.coreos.com") && has("prometheusrules.monitoring.coreos.com"),
	}
}
