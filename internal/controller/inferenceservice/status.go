package inferenceservice

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	"github.com/kiln-ml/kiln/internal/modeluri"
	"github.com/kiln-ml/kiln/internal/stuck"
)

// Condition types.
const (
	Ready          = "Ready"
	PredictorReady = "PredictorReady"
	CanaryReady    = "CanaryReady"
	ScaleToZero    = "ScaleToZero"
)

// status derives the status from the Deployments seen now (nil when absent) and why the
// predictor's pods do not start, when known.
// wakes says whether the HTTP add-on accepted the route that wakes a service scaled to zero;
// interceptor is its proxy.
func status(isvc *servingv1alpha1.InferenceService, e *endpoint, sc scaling, stableDep, canaryDep *appsv1.Deployment, why trouble, wakes bool, interceptor string, now metav1.Time) servingv1alpha1.InferenceServiceStatus {
	st := *isvc.Status.DeepCopy()
	st.ObservedGeneration = isvc.Generation
	st.URL = "http://" + serviceHost(e)
	if sc.keda { // the Service is a name for the interceptor, which listens on its own port
		_, port := interceptorHost(interceptor)
		st.URL += ":" + port
	}
	st.Selector = labels.FormatLabels(selector(e, stable))
	st.CanaryVersion, st.Traffic = "", traffic(isvc, sc, stableDep, canaryDep)
	rollout := rolloutOf(stableDep)
	if rollout.complete {
		st.ActiveVersion = stableDep.Spec.Template.Annotations[modelURIAnnotation]
	}
	st.Replicas, st.ReadyReplicas = 0, 0
	for _, d := range []*appsv1.Deployment{stableDep, canaryDep} {
		if d != nil {
			st.Replicas += d.Status.Replicas
			st.ReadyReplicas += d.Status.ReadyReplicas
		}
	}
	set := func(t string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: isvc.Generation, LastTransitionTime: now})
	}
	predictorOK, reason, msg := predictorReady(stableDep, sc.keda && wakes, st.URL, why)
	set(PredictorReady, predictorOK, reason, msg)
	ready, readyReason, readyMsg := predictorOK, reason, msg
	// Ready means the spec's model serves: while a change rolls out, the old version may serve,
	// but the InferenceService is not ready with what it asks for.
	if predictorOK && !rollout.complete && !(sc.keda && scaledToZero(stableDep)) {
		ready, readyReason, readyMsg = false, rollout.reason, rollout.message(st.ActiveVersion, modeluri.Redact(isvc.Spec.ModelURI), why)
	}
	if isvc.Spec.Traffic != nil {
		st.CanaryVersion = modeluri.Redact(isvc.Spec.Traffic.CanaryVersion)
		ok, r, m := versionReady(canaryDep, false, "")
		set(CanaryReady, ok, r, m)
		if predictorOK && !ok {
			ready, readyReason, readyMsg = false, "CanaryNotReady", "canary: "+m
		}
	} else {
		meta.RemoveStatusCondition(&st.Conditions, CanaryReady)
	}
	if why.blocks() {
		ready, readyReason, readyMsg = false, why.reason, why.message
	}
	switch {
	case sc.zeroPaused:
		set(ScaleToZero, false, "CanaryRunning", "minReplicas 0 is paused while a canary runs: each version keeps at least one replica")
	case sc.keda && wakes:
		set(ScaleToZero, true, "HTTPAddOn", "KEDA scales the predictor from zero; the KEDA HTTP add-on's interceptor holds requests to "+st.URL+" while a replica starts")
	case sc.keda:
		set(ScaleToZero, false, "InterceptorRouteNotReady", "the KEDA HTTP add-on has not reported InterceptorRoute "+isvc.Name+" Ready: until it does, nothing wakes the service from zero")
	case sc.zeroUnavailable != "":
		set(ScaleToZero, false, "ScaleToZeroUnavailable", "minReplicas 0 needs KEDA (keda.sh/v1alpha1 ScaledObject) and its HTTP add-on (http.keda.sh/v1beta1 InterceptorRoute), which holds requests while a replica starts; "+
			sc.zeroUnavailable+": install what is missing, or set minReplicas to 1 or more; running 1 replica meanwhile")
	default:
		meta.RemoveStatusCondition(&st.Conditions, ScaleToZero)
	}
	if ready && readyReason != "ScaledToZero" { // scaled to zero, the reason says requests wake it
		readyReason, readyMsg = "Ready", "serving at "+st.URL
	}
	set(Ready, ready, readyReason, readyMsg)
	if !equality.Semantic.DeepEqual(withoutTime(st), withoutTime(isvc.Status)) {
		st.LastReconcileTime = &now
	}
	return st
}

// traffic is the split in force: the route's weights once a parent accepted it, else each
// version's share of the ready pods the stable Service selects.
func traffic(isvc *servingv1alpha1.InferenceService, sc scaling, stableDep, canaryDep *appsv1.Deployment) *servingv1alpha1.TrafficStatus {
	t := isvc.Spec.Traffic
	if t == nil {
		return nil
	}
	s, c, exact := split(sc, t.CanaryPercent, stableDep, canaryDep)
	return &servingv1alpha1.TrafficStatus{Mode: sc.mode, Approximate: !exact, StablePercent: s, CanaryPercent: c}
}

func withoutTime(st servingv1alpha1.InferenceServiceStatus) servingv1alpha1.InferenceServiceStatus {
	st.LastReconcileTime = nil
	return st
}

// versionReady: a version is ready when its Deployment has a ready replica (or, under KEDA, is
// scaled to zero on purpose).
// versionReady: a version is ready when its Deployment has a ready replica, or, when requests
// wake it (KEDA with an accepted InterceptorRoute), it is scaled to zero on purpose.
func versionReady(d *appsv1.Deployment, wakes bool, url string) (bool, string, string) {
	switch {
	case d == nil:
		return false, "Creating", "the Deployment does not exist yet"
	case d.Status.ReadyReplicas > 0:
		return true, "ReplicasReady", fmt.Sprintf("%d of %d replicas ready", d.Status.ReadyReplicas, d.Status.Replicas)
	case wakes && scaledToZero(d):
		return true, "ScaledToZero", "scaled to zero: a request to " + url + " wakes it (the KEDA HTTP add-on holds it until a replica is ready)"
	}
	return false, "ReplicasNotReady", fmt.Sprintf("0 of %d replicas ready", d.Status.Replicas)
}

// predictorReady is versionReady of the stable version, with what keeps its pods from starting
// when they say.
func predictorReady(d *appsv1.Deployment, wakes bool, url string, why trouble) (bool, string, string) {
	ok, reason, msg := versionReady(d, wakes, url)
	if !ok && why.reason != "" && !why.blocks() {
		reason, msg = why.reason, msg+": "+why.message
	}
	return ok, reason, msg
}

// scaledToZero: the Deployment asks for no replica and has none.
func scaledToZero(d *appsv1.Deployment) bool {
	return d != nil && d.Spec.Replicas != nil && *d.Spec.Replicas == 0 && d.Status.Replicas == 0
}

// modelURIAnnotation on a pod template says which model it serves (changing it rolls the
// Deployment).
const modelURIAnnotation = "serving.kiln.dev/model-uri"

// asPodsSay is d with the ready replicas its pods, as the controller's cache has them, show
// beyond its status: a pod's readiness reaches a Deployment's status only once the ReplicaSet's
// controller and then the Deployment's have written theirs, seconds later on a busy cluster,
// while the pod's own change is in the cache at once (docs/decisions.md, 23). The pods count
// only where they are the current template's, not an older one's still on their way out, nor
// those of an earlier Deployment of the name:
//   - the status speaks of the current template alone (observed, every replica updated) and the
//     cache has exactly the live pods the status counts; or
//   - d's spec never changed (generation 1: it has had one template) and every live pod was made
//     by a ReplicaSet (one pod-template-hash among them), from a template with d's model and
//     revision (templateAnnotations), in a second after d was created, which an earlier
//     Deployment's pods were not. The status need not have counted them.
//
// It never says less than the status.
func asPodsSay(d *appsv1.Deployment, pods []corev1.Pod) *appsv1.Deployment {
	if !lagging(d) {
		return d
	}
	var live, ready int32
	firstTemplate, hash := d.Generation == 1, ""
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		live++
		if stuck.Ready(p) {
			ready++
		}
		h := p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
		if h == "" || (hash != "" && h != hash) || !sameModel(p, d) ||
			p.CreationTimestamp.Unix() <= d.CreationTimestamp.Unix() { // whole seconds, as the apiserver keeps them
			firstTemplate = false
		}
		hash = h
	}
	counted := d.Status.ObservedGeneration >= d.Generation && d.Status.Replicas == d.Status.UpdatedReplicas && live == d.Status.Replicas
	if ready <= d.Status.ReadyReplicas || (!counted && !firstTemplate) {
		return d
	}
	seen := *d
	seen.Status.ReadyReplicas = ready
	if !counted { // the first template's pods, which its status has not all counted yet
		seen.Status.ObservedGeneration = d.Generation
		seen.Status.Replicas = max(d.Status.Replicas, live)
		seen.Status.UpdatedReplicas = seen.Status.Replicas
	}
	if d.Spec.MinReadySeconds == 0 { // ready is available
		seen.Status.AvailableReplicas = max(seen.Status.AvailableReplicas, ready)
	}
	return &seen
}

// templateAnnotations are the annotations of a pod template that say what its pods serve: the
// model, and the revision of KServe's predictors (a hash of the rest of the template).
var templateAnnotations = [...]string{modelURIAnnotation, revisionAnnotation}

// sameModel says whether pod p was made from a template with d's templateAnnotations.
func sameModel(p *corev1.Pod, d *appsv1.Deployment) bool {
	for _, k := range templateAnnotations {
		if p.Annotations[k] != d.Spec.Template.Annotations[k] {
			return false
		}
	}
	return true
}

// lagging says whether d's pods may say more than its status: fewer replicas ready than it
// counts, where the status is observed and speaks of one template; or, where d's spec never
// changed, fewer ready than it wants (its pods may be more than the status has counted yet).
func lagging(d *appsv1.Deployment) bool {
	switch {
	case d == nil:
		return false
	case d.Generation == 1 && d.Status.ReadyReplicas < ptr.Deref(d.Spec.Replicas, 1):
		return true
	}
	return d.Status.ObservedGeneration >= d.Generation && d.Status.Replicas == d.Status.UpdatedReplicas &&
		d.Status.ReadyReplicas < d.Status.Replicas
}

// serving says whether d's current template serves, as its status says: its pods then have no
// trouble to tell.
func serving(d *appsv1.Deployment) bool {
	return d.Status.ReadyReplicas > 0 && rolloutOf(d).complete
}

// rollout is how far a Deployment's current template has rolled out: observed, no pods of an
// older template left, some available (as `kubectl rollout status` judges it, but for scaling).
type rollout struct {
	complete bool
	// reason is RolloutProgressing, or RolloutFailed once the Deployment's progress deadline passed.
	reason string
}

func rolloutOf(d *appsv1.Deployment) rollout {
	switch {
	case d == nil || d.Status.ObservedGeneration < d.Generation:
		return rollout{reason: "RolloutProgressing"}
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			return rollout{reason: "RolloutFailed"}
		}
	}
	// Pods of an older template remain until the new ones are available. (A scale-up is no
	// rollout: the new pods run the current template.)
	if d.Status.Replicas > d.Status.UpdatedReplicas || (d.Status.UpdatedReplicas > 0 && d.Status.AvailableReplicas == 0) {
		return rollout{reason: "RolloutProgressing"}
	}
	return rollout{complete: true}
}

// message says which version serves while which rolls out, and what holds the new one.
func (r rollout) message(active, wanted string, why trouble) string {
	change := wanted
	if active == wanted {
		change = "a change to its pods"
	}
	msg := fmt.Sprintf("%s serves while %s rolls out", active, change)
	if r.reason == "RolloutFailed" {
		msg = fmt.Sprintf("%s serves; the rollout of %s passed its progress deadline", active, change)
	}
	if why.message != "" {
		msg += ": " + why.message
	}
	return msg
}
