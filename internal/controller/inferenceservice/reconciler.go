package inferenceservice

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	servingv1beta1 "github.com/kiln-ml/kiln/api/serving/v1beta1"
	"github.com/kiln-ml/kiln/internal/conversion"
	"github.com/kiln-ml/kiln/internal/modeluri"
	"github.com/kiln-ml/kiln/internal/owned"
	"github.com/kiln-ml/kiln/internal/statuspatch"
	"github.com/kiln-ml/kiln/internal/stuck"
	"github.com/kiln-ml/kiln/internal/tracing"
	"github.com/kiln-ml/kiln/internal/transition"
	"github.com/kiln-ml/kiln/internal/version"
)

// +kubebuilder:rbac:groups=serving.kiln.dev,resources=inferenceservices,verbs=get;list;watch
// +kubebuilder:rbac:groups=serving.kiln.dev,resources=inferenceservices/status,verbs=get;patch
// +kubebuilder:rbac:groups=serving.kiln.dev,resources=inferenceservices/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies;ingresses,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=keda.sh,resources=scaledobjects,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=http.keda.sh,resources=interceptorroutes,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors;prometheusrules,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=networking.istio.io,resources=virtualservices,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// FieldManager owns every field kiln applies.
const FieldManager = "kiln"

// The KEDA HTTP add-on's Services as its chart installs them: Options' defaults.
const (
	DefaultKEDAHTTPScaler      = "keda-add-ons-http-external-scaler.keda:9090"
	DefaultKEDAHTTPInterceptor = "keda-add-ons-http-interceptor-proxy.keda:8080"
)

// Options are the operator-level settings of the controller.
type Options struct {
	// FetchImage runs /kiln-fetch in the init container that downloads http(s)/s3/gs models.
	FetchImage string
	// KEDAHTTPScaler is the HTTP add-on's external scaler (host:port), which KEDA asks whether
	// a service scaled to zero has requests waiting.
	KEDAHTTPScaler string
	// KEDAHTTPInterceptor is the HTTP add-on's interceptor proxy Service
	// (<name>.<namespace>:<port>), which holds requests while a service scaled to zero starts.
	KEDAHTTPInterceptor string
	// Namespaces limits what the controller watches (the manager's); empty means all.
	Namespaces []string
	// KServeIngressDomain, when set, exposes each KServe InferenceService outside the cluster
	// through an Ingress for <name>-<namespace>.<domain>, as KServe's ingressDomain; of
	// KServeIngressClass (the cluster's default class when empty).
	KServeIngressDomain, KServeIngressClass string
}

// withDefaults fills the options left empty.
func (o Options) withDefaults() Options {
	if o.FetchImage == "" {
		o.FetchImage = version.Image()
	}
	if o.KEDAHTTPScaler == "" {
		o.KEDAHTTPScaler = DefaultKEDAHTTPScaler
	}
	if o.KEDAHTTPInterceptor == "" {
		o.KEDAHTTPInterceptor = DefaultKEDAHTTPInterceptor
	}
	return o
}

var crdKind = apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")

// Reconciler reconciles InferenceServices.
type Reconciler struct {
	client client.Client
	// owned caches the Services, pods and optional-API objects of InferenceServices (newOwnedCache).
	owned   cache.Cache
	watches *watches
	// kit applies and deletes what the service needs, never what it does not control; it reads
	// the apiserver only for a same-named object no cache holds (one without kiln's label).
	kit    owned.Kit
	status *statuspatch.Writer // set up with the manager
	// tell records the events and metrics of what was written.
	tell  transition.Teller
	clock clock.PassiveClock
	opts  Options
	// api is the InferenceService API this reconciler serves.
	api api
}

// NewReconciler returns the InferenceService reconciler.
func NewReconciler(c client.Client, reader client.Reader, rec recorder.EventRecorder, clk clock.PassiveClock, opts Options) *Reconciler {
	r := &Reconciler{client: c, tell: transition.Teller{Recorder: rec, Now: clk.Now}, clock: clk, opts: opts.withDefaults()}
	r.api = kilnAPI{client: c, fetchImage: r.opts.FetchImage}
	r.kit = owned.Kit{Client: c, Reader: reader, FieldOwner: FieldManager, ParentKind: "InferenceService", Cached: r.cacheOf, Applied: owned.NewApplied(),
		WholeAnswers: true} // applyAll returns the Deployments as answered: their status, the replicas an autoscaler keeps
	return r
}

// SetupWithManager watches InferenceServices, every kind they own (Deployments and HPAs in the
// manager's cache, the rest in the controller's own, optional kinds once their CRD is there), the
// pods' trouble, readiness and going, and (metadata only) the CRDs of the optional APIs:
// installing or removing one re-reconciles every service.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	k := r.api.kind()
	ownedCache, err := newOwnedCache(mgr, r.opts.Namespaces, k.owns)
	if err != nil {
		return err
	}
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(crdKind)
	b := ctrl.NewControllerManagedBy(mgr).
		Named(k.name).
		For(k.object()).
		Watches(&appsv1.Deployment{}, owned.EnqueueController(k.gvk.GroupKind())).
		Watches(&autoscalingv2.HorizontalPodAutoscaler{}, owned.EnqueueController(k.gvk.GroupKind())).
		WatchesMetadata(crd, handler.EnqueueRequestsFromMapFunc(r.optionalAPIChanged),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { _, ok := optionalKinds[o.GetName()]; return ok }))).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, workers)})
	if k.watch != nil {
		b = k.watch(b, r)
	}
	c, err := b.Build(r)
	if err != nil {
		return err
	}
	r.owned = ownedCache
	if r.status, err = statuspatch.NewWriter(mgr.GetConfig(), mgr.GetHTTPClient(), mgr.GetRESTMapper(), k.gvk); err != nil {
		return err
	}
	r.watches, err = newWatches(mgr, c, ownedCache, k)
	return err
}

// optionalAPIChanged re-reconciles every service when an optional API comes or goes.
func (r *Reconciler) optionalAPIChanged(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.every(ctx)
}

// every is a request for every object of the API, of the namespaces opts limit.
func (r *Reconciler) every(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	list := r.api.kind().list()
	if err := r.client.List(ctx, list, opts...); err != nil {
		return nil
	}
	items, _ := meta.ExtractList(list)
	reqs := make([]reconcile.Request, 0, len(items))
	for _, i := range items {
		if o, ok := i.(client.Object); ok {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		}
	}
	return reqs
}

// Reconcile applies everything the InferenceService needs, removes what it no longer needs and
// writes the status. Every read is from a cache but two: a look for a same-named object before
// kiln creates one (for the first object an owned.Kit.ApplyAll writes, its create looks), and the
// managed fields of an object kiln created, before its first apply.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, err error) {
	ctx, end := tracing.Start(ctx, "Reconcile InferenceService", "InferenceService", req.Namespace, req.Name)
	defer func() { end(err) }()
	parent, e, err := r.api.read(ctx, req.NamespacedName)
	var why *refused
	if parent == nil || (err != nil && !errors.As(err, &why)) {
		return reconcile.Result{}, err
	}
	have := r.installed(ctx)
	if err := r.watches.sync(ctx, have); err != nil {
		return reconcile.Result{}, err
	}
	if e.stopped { // nothing may run: what was made goes, the status says why
		return reconcile.Result{}, r.clear(ctx, parent, e, have, observed{stopped: true, now: metav1.NewTime(r.clock.Now())})
	}
	if why != nil {
		return reconcile.Result{}, r.hold(ctx, parent, e, why)
	}
	exact, err := r.exactSplit(ctx, e, have)
	if err != nil {
		return reconcile.Result{}, err
	}
	sc := decide(e, have, exact)
	wakes := false
	if sc.keda {
		if wakes, err = r.interceptorRouteReady(ctx, e); err != nil {
			return reconcile.Result{}, err
		}
	}
	stableDep, err := r.deployment(ctx, e, stable)
	if err != nil {
		return reconcile.Result{}, err
	}
	canaryDep, err := r.deployment(ctx, e, canary)
	if err != nil {
		return reconcile.Result{}, err
	}
	// The Deployments as the apply answered: a spec change shows as a generation their
	// controller has not observed yet, so Ready never speaks of the previous model.
	stableDep, canaryDep, servicesNext, applyErr := r.applyAll(ctx, e, sc, have, stableDep, canaryDep)
	if servicesNext && applyErr == nil {
		return reconcile.Result{}, nil // the Deployment's arrival reconciles it again
	}
	// The pods are read only where they may say more than the Deployments' status.
	var stablePods []corev1.Pod
	if stableDep != nil && (lagging(stableDep) || !serving(stableDep)) {
		if stablePods, err = r.podsOf(ctx, e, stable); err != nil {
			return reconcile.Result{}, err
		}
		stableDep = asPodsSay(stableDep, stablePods)
	}
	if lagging(canaryDep) {
		canaryPods, err := r.podsOf(ctx, e, canary)
		if err != nil {
			return reconcile.Result{}, err
		}
		canaryDep = asPodsSay(canaryDep, canaryPods)
	}
	trouble := troubleOf(e, stableDep, stablePods, applyErr)
	seen := observed{sc: sc, stable: stableDep, canary: canaryDep, why: trouble, wakes: wakes, interceptor: r.opts.KEDAHTTPInterceptor, now: metav1.NewTime(r.clock.Now())}
	if e.ingress != nil {
		if seen.ingress, err = r.ingressOf(ctx, e); err != nil {
			return reconcile.Result{}, err
		}
	}
	if err := r.writeStatus(ctx, parent, e, seen); err != nil {
		if errors.Is(err, errStale) {
			return reconcile.Result{}, applyErr // a newer version is on its way, and reconciles again
		}
		return reconcile.Result{}, err
	}
	if owned.AsConflict(applyErr) != nil {
		return reconcile.Result{RequeueAfter: conflictRecheck}, nil
	}
	return reconcile.Result{}, applyErr
}

// api is an InferenceService API the engine serves: how to read an object of it, compile it to
// an endpoint and say its status.
type api interface {
	// read is the object key names, from the cache, and its endpoint; a nil object when it is gone
	// or going; a *refused error (with the object, and the endpoint as far as its names go) when
	// nothing of it can run.
	read(ctx context.Context, key client.ObjectKey) (client.Object, *endpoint, error)
	// status is the object's status after what this reconcile observed, and what writing it tells;
	// nil when it has not changed.
	status(obj client.Object, e *endpoint, seen observed) (any, transition.Told)
	kind() apiKind
}

// apiKind is how the controller of an API is set up.
type apiKind struct {
	// name is the controller's.
	name string
	// object and list are empty objects of the API's stored version, which the controller
	// watches; gvk is the kind whose status it writes.
	object func() client.Object
	list   func() client.ObjectList
	gvk    schema.GroupVersionKind
	// owns selects, with LabelService, the objects of this API in the controller's own cache.
	owns labels.Requirement
	// fetch is the model fetch's container, whose failures a pod's trouble tells.
	fetch string
	// nameOf is the name of the object a LabelService value belongs to; false if none of this API.
	nameOf func(id string) (string, bool)
	// watch adds the API's own watches to the controller of r.
	watch func(b *builder.Builder, r *Reconciler) *builder.Builder
}

// observed is what a reconcile saw of an endpoint: how its replicas are decided, its versions'
// Deployments (nil when absent), what keeps its pods from serving, whether requests wake it from
// zero (and the interceptor that holds them), and when.
type observed struct {
	sc             scaling
	stable, canary *appsv1.Deployment
	why            trouble
	// refused, when set, is why the spec cannot run (and the rest is zero but stable: the
	// Deployment made before, which serves on).
	refused *refused
	// stopped: the endpoint was stopped, what it made deleted (and the rest is zero).
	stopped bool
	// ingress is the endpoint's Ingress (nil when it has none, or none exists yet).
	ingress     *networkingv1.Ingress
	wakes       bool
	interceptor string
	now         metav1.Time
}

// kilnAPI is kiln's own InferenceService, read at its hub version.
type kilnAPI struct {
	client     client.Reader
	fetchImage string
}

func (k kilnAPI) read(ctx context.Context, key client.ObjectKey) (client.Object, *endpoint, error) {
	isvc := &servingv1alpha1.InferenceService{}
	if err := conversion.ReadHub(ctx, k.client, key, &servingv1beta1.InferenceService{}, isvc); err != nil || isvc.DeletionTimestamp != nil {
		return nil, nil, client.IgnoreNotFound(err)
	}
	e := fromKiln(isvc, k.fetchImage)
	return isvc, &e, nil
}

func (kilnAPI) kind() apiKind {
	notKServe, _ := labels.NewRequirement(LabelAPI, selection.DoesNotExist, nil)
	return apiKind{
		name:   "inferenceservice",
		object: func() client.Object { return &servingv1beta1.InferenceService{} }, // the stored version: once every object is stored at it, no read waits for the conversion webhook
		list:   func() client.ObjectList { return &servingv1beta1.InferenceServiceList{} },
		gvk:    servingv1beta1.GroupVersion.WithKind("InferenceService"),
		owns:   *notKServe,
		fetch:  kilnMount.fetch,
		nameOf: func(id string) (string, bool) { return id, true },
	}
}

func (kilnAPI) status(obj client.Object, e *endpoint, seen observed) (any, transition.Told) {
	isvc := obj.(*servingv1alpha1.InferenceService)
	st := status(isvc, e, seen.sc, seen.stable, seen.canary, seen.why, seen.wakes, seen.interceptor, seen.now)
	if equality.Semantic.DeepEqual(st, isvc.Status) {
		return nil, transition.Told{}
	}
	return &st, told(isvc, st, seen.why)
}

// clear deletes everything the endpoint could have made (of what the parent controls: its names
// are enough) and writes the status of what was seen.
func (r *Reconciler) clear(ctx context.Context, parent client.Object, e *endpoint, have apis, seen observed) error {
	p := desired(e, decide(e, have, ""), have, r.opts)
	for _, o := range append(p.want, p.drop...) {
		if err := r.kit.Delete(ctx, parent, o); err != nil {
			return err
		}
	}
	return r.settle(ctx, parent, e, seen)
}

// hold changes nothing of what the endpoint made when its spec cannot run (its runtime deleted or
// disabled, a runtime's name mistyped, a part kiln does not run): the model it served serves on,
// as KServe leaves it, and the status says why the spec is not served. One that made nothing
// gets nothing.
func (r *Reconciler) hold(ctx context.Context, parent client.Object, e *endpoint, why *refused) error {
	stableDep, err := r.deployment(ctx, e, stable)
	if err != nil {
		return err
	}
	return r.settle(ctx, parent, e, observed{refused: why, stable: stableDep, now: metav1.NewTime(r.clock.Now())})
}

// settle writes the status of what was seen; an object changed or gone meanwhile is no error (its
// newer version reconciles again).
func (r *Reconciler) settle(ctx context.Context, parent client.Object, e *endpoint, seen observed) error {
	if err := r.writeStatus(ctx, parent, e, seen); !errors.Is(err, errStale) {
		return err
	}
	return nil
}

// writeStatus writes the API's status of parent after what was seen, when it changed, and tells
// of it. errStale: the object changed or went meanwhile.
func (r *Reconciler) writeStatus(ctx context.Context, parent client.Object, e *endpoint, seen observed) error {
	st, told := r.api.status(parent, e, seen)
	if st == nil {
		return nil
	}
	if err := r.status.Write(ctx, parent, st); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return errStale
		}
		return fmt.Errorf("writing the status of %s %s: %w", r.api.kind().gvk.Kind, parent.GetName(), err)
	}
	r.tell.Tell(parent, told)
	return nil
}

var errStale = errors.New("the object changed since it was read")

// refused is why an API's object cannot run at all (no runtime serves its model): its reason and
// what to do. read returns it with the object.
type refused struct{ reason, message string }

func (e *refused) Error() string { return e.message }

// conflictRecheck is how soon an InferenceService held by an object in the way looks again
// (objects without kiln's label are in no cache: nothing tells when it goes).
const conflictRecheck = 10 * time.Second

// Reasons of the Ready condition when kiln could not write what the service needs.
const (
	ReasonNameConflict = owned.ReasonNameConflict
	ReasonRefused      = owned.ReasonRefused
)

// trouble is why the predictor's pods do not become ready, when they say.
type trouble struct{ reason, message string }

// podsOf is the pods of a version's Deployment (its selector's) in the controller's own cache,
// by name.
func (r *Reconciler) podsOf(ctx context.Context, e *endpoint, version string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.owned.List(ctx, &pods, client.InNamespace(e.namespace), client.MatchingFields{podsOfService: e.id},
		client.MatchingLabels(podSelector(e, version))); err != nil {
		return nil, err
	}
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods.Items, nil
}

// troubleOf says what keeps the service from serving: an object in the way or one the apiserver
// refused (applyErr), else what keeps the first of the stable version's pods from starting — the
// model fetch failing (its termination message, which kiln-fetch writes without secrets), or a
// container or the scheduler (stuck.Pod).
func troubleOf(e *endpoint, stableDep *appsv1.Deployment, pods []corev1.Pod, applyErr error) trouble {
	if reason, message, _ := owned.Why(applyErr); reason != "" {
		return trouble{reason, message}
	}
	if stableDep == nil || serving(stableDep) {
		return trouble{}
	}
	for i := range pods {
		if t := podTrouble(&pods[i], e.mount.fetch); t.reason != "" {
			return t
		}
	}
	return trouble{}
}

// blocks says whether the trouble is kiln's writes', which keep the service from being Ready
// whatever its pods do.
func (t trouble) blocks() bool { return t.reason == ReasonNameConflict || t.reason == ReasonRefused }

// reasonModelFetchFailed: a pod's model fetch failed.
const reasonModelFetchFailed = "ModelFetchFailed"

// podTrouble is what keeps one pod from starting, if it says; fetch is the model fetch's container.
func podTrouble(p *corev1.Pod, fetch string) trouble {
	for _, cs := range p.Status.InitContainerStatuses {
		if cs.Name != fetch {
			continue
		}
		t := cs.State.Terminated
		if t == nil {
			t = cs.LastTerminationState.Terminated
		}
		if t != nil && t.ExitCode != 0 {
			msg := modeluri.RedactText(strings.TrimSpace(t.Message), "")
			if msg == "" {
				msg = fmt.Sprintf("exit code %d", t.ExitCode)
			}
			return trouble{reasonModelFetchFailed, fmt.Sprintf("fetching the model failed in pod %s: %s", p.Name, msg)}
		}
	}
	if reason, msg := stuck.Pod(p, "pod "+p.Name); reason != "" {
		return trouble{reason, msg}
	}
	return trouble{}
}

// told is what the write of the status st over old's tells: how long the service took to become
// Ready (from its creation, or from when it stopped being ready), and a Warning event when kiln's
// writes start being refused or held by an object in the way.
func told(old *servingv1alpha1.InferenceService, st servingv1alpha1.InferenceServiceStatus, why trouble) transition.Told {
	return toldOf(old.CreationTimestamp, old.Status.Conditions, st.Conditions, why)
}

// toldOf is told of an object created at created whose conditions go from old to conds.
func toldOf(created metav1.Time, old, conds []metav1.Condition, why trouble) transition.Told {
	var t transition.Told
	now := meta.FindStatusCondition(conds, Ready)
	before := meta.FindStatusCondition(old, Ready)
	if why.blocks() && (before == nil || before.Reason != why.reason || before.Message != why.message) {
		t.Event(corev1.EventTypeWarning, why.reason, why.message)
	}
	if now == nil || now.Status != metav1.ConditionTrue || (before != nil && before.Status == metav1.ConditionTrue) {
		return t
	}
	since := created.Time
	if before != nil {
		since = before.LastTransitionTime.Time
	}
	took := now.LastTransitionTime.Sub(since)
	t.Ready = &took
	return t
}

// applyAll makes (creates, or server-side applies: docs/decisions.md, 26) the desired objects
// and deletes those the spec dropped, through owned.Kit. An object of the same name kiln does not
// control is never taken over: nothing is written, and the *owned.Conflict says which object is
// in the way. It returns the Deployments as the apiserver answered (as read, where nothing was
// written).
//
// A new endpoint — its stable Deployment not in the cache — gets everything but its Services
// (servicesNext): its Services, the objects it no longer wants deleted and its first status come
// with the reconcile the Deployment's arrival in the cache brings, at once unless the apiserver
// has many Services to make. The apiserver makes Services about one at a time (16–21 a second on
// 2 cores), and a reconcile that waited for its Service held back the next endpoints'
// Deployments, whose pods take longest (docs/decisions.md, 21). A Deployment of the endpoint's
// that the apiserver has out of the cache's sight (its labels edited away) is found by its create
// and applied, which puts back the labels the cache selects: its arrival brings the Services.
func (r *Reconciler) applyAll(ctx context.Context, e *endpoint, sc scaling, have apis, stableDep, canaryDep *appsv1.Deployment) (_, _ *appsv1.Deployment, servicesNext bool, err error) {
	p := desired(e, sc, have, r.opts)
	want, services := p.want, []client.Object(nil)
	if stableDep == nil { // new, or out of the cache's sight
		want = nil
		for _, o := range p.want {
			if _, ok := o.(*corev1.Service); ok {
				services = append(services, o)
			} else {
				want = append(want, o)
			}
		}
	}
	// An autoscaler about to take over a Deployment's replicas: kiln's apply stops setting them,
	// and a field that loses its only owner is reset (to 1). Another field manager first applies
	// the current count, so the count stays until the autoscaler changes it.
	handOver := func() error {
		for _, h := range []struct {
			dep        *appsv1.Deployment
			autoscaled bool
			scaler     client.Object
		}{
			{stableDep, sc.stable.replicas == nil, scalerOf(e, stable, sc)},
			{canaryDep, e.canary != nil && sc.canary.replicas == nil, scalerOf(e, canary, sc)},
		} {
			if h.dep != nil && h.autoscaled {
				if err := r.handOver(ctx, h.dep, h.scaler); err != nil {
					return err
				}
			}
		}
		return nil
	}
	before := func() error {
		// A stable Deployment without the UID of an existing one is created by this ApplyAll, or
		// found by its create and applied: either way its arrival in the cache reconciles again.
		servicesNext = stableDep == nil && p.stable.GetUID() == ""
		return handOver()
	}
	if err := r.kit.ApplyAll(ctx, e.parent, want, before); err != nil {
		return stableDep, canaryDep, false, err
	}
	stableDep = p.stable
	if p.canary != nil {
		canaryDep = p.canary
	}
	if servicesNext {
		return stableDep, canaryDep, true, nil
	}
	// No arrival brings another reconcile for a Deployment that was there already.
	if err := r.kit.ApplyAll(ctx, e.parent, services, nil); err != nil {
		return stableDep, canaryDep, false, err
	}
	for _, o := range p.drop {
		if err := r.kit.Delete(ctx, e.parent, o); err != nil {
			return stableDep, canaryDep, false, err
		}
	}
	return stableDep, canaryDep, false, nil
}

// HandoverFieldManager keeps a Deployment's replica count while an autoscaler takes it over.
const HandoverFieldManager = "kiln-replicas-handover"

// scalerOf is the autoscaler object that decides a version's replicas: its HPA, or the stable
// version's ScaledObject.
func scalerOf(e *endpoint, version string, sc scaling) client.Object {
	if version == stable && sc.keda {
		return optional(e, scaledObjectGVK, predictorName(e, stable))
	}
	return &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: objectMeta(e, predictorName(e, version), version)}
}

// handOver applies, as HandoverFieldManager, the Deployment's current replicas while its
// autoscaler does not exist yet (once it does, it owns the count).
func (r *Reconciler) handOver(ctx context.Context, dep *appsv1.Deployment, scaler client.Object) error {
	err := r.cacheOf(scaler).Get(ctx, client.ObjectKeyFromObject(scaler), scaler)
	if err == nil || !apierrors.IsNotFound(err) || dep.Spec.Replicas == nil {
		return err
	}
	// Unstructured: a typed Deployment would also send an empty selector and template.
	keep := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": dep.Name, "namespace": dep.Namespace},
		"spec":     map[string]any{"replicas": int64(*dep.Spec.Replicas)}}}
	if err := r.client.Patch(ctx, keep, client.Apply, client.FieldOwner(HandoverFieldManager)); err != nil { //nolint:staticcheck // as applyAll
		return fmt.Errorf("keeping the replicas of Deployment %s while its autoscaler takes over: %w", dep.Name, err)
	}
	return nil
}

// cacheOf is the cache that holds o's kind: the manager's for Deployments and HPAs, the
// controller's own for the rest.
func (r *Reconciler) cacheOf(o client.Object) client.Reader {
	switch o.(type) {
	case *appsv1.Deployment, *autoscalingv2.HorizontalPodAutoscaler:
		return r.client
	}
	return r.owned
}

// newOptional is an empty object of an optional API's kind.
func newOptional(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

func optional(e *endpoint, gvk schema.GroupVersionKind, name string) client.Object {
	u := newOptional(gvk)
	u.SetNamespace(e.namespace)
	u.SetName(name)
	return u
}

func (r *Reconciler) deployment(ctx context.Context, e *endpoint, version string) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: e.namespace, Name: predictorName(e, version)}}
	if ok, err := r.kit.Get(ctx, e.parent, d); !ok || err != nil {
		return nil, err
	}
	return d, nil
}

// ingressOf is the endpoint's Ingress from the cache; nil when there is none or it is not the
// endpoint's.
func (r *Reconciler) ingressOf(ctx context.Context, e *endpoint) (*networkingv1.Ingress, error) {
	in := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: e.namespace, Name: e.ingress.name}}
	if ok, err := r.kit.Get(ctx, e.parent, in); !ok || err != nil {
		return nil, err
	}
	return in, nil
}

// interceptorRouteReady says whether the KEDA HTTP add-on reports the InferenceService's
// InterceptorRoute Ready: only then do requests wake a service scaled to zero.
func (r *Reconciler) interceptorRouteReady(ctx context.Context, e *endpoint) (bool, error) {
	route, err := r.ownedOptional(ctx, e, interceptorGVK)
	if route == nil {
		return false, err
	}
	conds, _, _ := unstructured.NestedSlice(route.Object, "status", "conditions")
	return conditionTrue(conds, "Ready"), nil
}

// exactSplit is what splits a canary's requests exactly, if anything does: the HTTPRoute, once a
// parent accepted it; else Istio's VirtualService, once the versions' pods are in the mesh.
func (r *Reconciler) exactSplit(ctx context.Context, e *endpoint, have apis) (servingv1alpha1.TrafficMode, error) {
	if e.canary == nil {
		return "", nil
	}
	if ok, err := r.routeAccepted(ctx, e, have); ok || err != nil {
		return servingv1alpha1.TrafficHTTPRoute, err
	}
	if !have.istio {
		return "", nil
	}
	var pods corev1.PodList
	if err := r.owned.List(ctx, &pods, client.InNamespace(e.namespace), client.MatchingFields{podsOfService: e.id}); err != nil {
		return "", err
	}
	if !inMesh(pods.Items) {
		return "", nil
	}
	return servingv1alpha1.TrafficVirtualService, nil
}

// istioProxy is the sidecar Istio injects into a pod of the mesh (a container, or an init
// container that keeps running).
const istioProxy = "istio-proxy"

// inMesh: there are pods, and every one of them runs Istio's sidecar (as their status shows).
func inMesh(pods []corev1.Pod) bool {
	for _, p := range pods {
		isProxy := func(s corev1.ContainerStatus) bool { return s.Name == istioProxy }
		if !slices.ContainsFunc(p.Status.ContainerStatuses, isProxy) && !slices.ContainsFunc(p.Status.InitContainerStatuses, isProxy) {
			return false
		}
	}
	return len(pods) > 0
}

// routeAccepted says whether a parent (a mesh or gateway) accepted the InferenceService's
// HTTPRoute, as the route's status shows: only then does the route split anything.
func (r *Reconciler) routeAccepted(ctx context.Context, e *endpoint, have apis) (bool, error) {
	if !have.gateway || e.canary == nil {
		return false, nil
	}
	route, err := r.ownedOptional(ctx, e, httpRouteGVK)
	if route == nil {
		return false, err
	}
	parents, _, _ := unstructured.NestedSlice(route.Object, "status", "parents")
	for _, p := range parents {
		conds, _, _ := unstructured.NestedSlice(p.(map[string]any), "conditions")
		if conditionTrue(conds, "Accepted") {
			return true, nil
		}
	}
	return false, nil
}

// ownedOptional is the InferenceService's object of an optional kind, named after it, from the
// cache; nil when there is none or it is not the InferenceService's.
func (r *Reconciler) ownedOptional(ctx context.Context, e *endpoint, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	o := newOptional(gvk)
	o.SetNamespace(e.namespace)
	o.SetName(e.name)
	if ok, err := r.kit.Get(ctx, e.parent, o); !ok || err != nil {
		return nil, err
	}
	return o, nil
}

// conditionTrue says whether conds (status conditions, unstructured) hold ct with status True.
func conditionTrue(conds []any, ct string) bool {
	for _, c := range conds {
		if c, _ := c.(map[string]any); c["type"] == ct && c["status"] == "True" {
			return true
		}
	}
	return false
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
		httpAddOn:  has("interceptorroutes.http.keda.sh"),
		monitoring: has("servicemonitors.monitoring.coreos.com") && has("prometheusrules.monitoring.coreos.com"),
		istio:      has("virtualservices.networking.istio.io"),
	}
}
