package inferenceservice

// KServe's two canaries, on the engine's one: spec.canary (v0.20's named canary, a predictor of
// its own beside the stable one) and canaryTrafficPercent (the spec's new pods beside the ones
// rolled out before, as KServe's Knative mode splits revisions).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kservev1beta1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1beta1"
	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	"github.com/kiln-ml/kiln/internal/kserve"
)

// revisionAnnotation on a KServe predictor's pod template names its revision: a hash of the rest
// of the template. canaryTrafficPercent keeps the pods of the revision rolled out before.
const revisionAnnotation = "serving.kiln.dev/revision"

// revisionOf is the revision of pods t: the first 10 hex digits of the SHA-256 of their JSON.
func revisionOf(t corev1.PodTemplateSpec) string {
	b, _ := json.Marshal(t) // a PodTemplateSpec always marshals
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:10]
}

// withCanary adds the canary isvc asks for to e: spec.canary's one entry, its predictor laid over
// spec.predictor; or, under canaryTrafficPercent below 100, the spec's pods beside those of the
// revision the stable Deployment runs, which it keeps, while the two differ.
func (k kserveAPI) withCanary(ctx context.Context, isvc *kservev1beta1.InferenceService, e *endpoint, namespaced, cluster []kserve.Runtime) error {
	if len(isvc.Spec.Canary) == 1 {
		c := isvc.Spec.Canary[0]
		at := "spec.canary[0].predictor"
		if c.Predictor.Unknown != "" {
			return &refused{string(kservev1beta1.InvalidPredictorSpec), fmt.Sprintf(
				"%s: unknown field %q: a canary's predictor has the fields of spec.predictor", at, c.Predictor.Unknown)}
		}
		spec, err := kserve.CanaryPredictor(isvc.Spec.Predictor, c.Predictor)
		if err != nil {
			return &refused{string(kservev1beta1.InvalidPredictorSpec), at + ": " + err.Error()}
		}
		if why := predictorNotServed(&spec, at); why != nil {
			return why
		}
		p, err := kserve.Build(isvc, &spec, namespaced, cluster)
		if err != nil {
			if why := refusalOf(err, at); why != nil {
				return why
			}
			return err
		}
		v, port := kserveVersion(p, k.fetchImage)
		if port != e.port {
			return &refused{string(kservev1beta1.InvalidPredictorSpec), fmt.Sprintf(
				"%s: the canary's server listens on port %d, the predictor's on %d: kiln splits one address between them; serve both on one port", at, port, e.port)}
		}
		e.canary, e.canaryPercent, e.canaryName = &v, c.TrafficPercent, p.Name
		return nil
	}
	pct := isvc.Spec.Predictor.CanaryTrafficPercent
	if pct == nil || *pct >= 100 {
		return nil
	}
	// The cache keeps a Deployment's template's annotations, not its spec: the apiserver has the
	// pods to keep, when they are another revision.
	live := &appsv1.Deployment{}
	key := client.ObjectKey{Namespace: e.namespace, Name: e.base}
	if err := k.client.Get(ctx, key, live); err != nil {
		return client.IgnoreNotFound(err)
	}
	held := live.Spec.Template.Annotations[revisionAnnotation]
	if held == "" || held == e.stable.template.Annotations[revisionAnnotation] || !metav1.IsControlledBy(live, isvc) {
		return nil
	}
	if err := k.reader.Get(ctx, key, live); err != nil {
		return client.IgnoreNotFound(err)
	}
	if held = live.Spec.Template.Annotations[revisionAnnotation]; held == "" || held == e.stable.template.Annotations[revisionAnnotation] {
		return nil // the cache was behind
	}
	latest := e.stable
	e.stable = versionPods{template: *live.Spec.Template.DeepCopy(), model: live.Spec.Template.Annotations[modelURIAnnotation]}
	e.canary, e.canaryPercent = &latest, int32(*pct)
	return nil
}

// retiredPredictors are the names of the versions isvc's status says run that the spec no longer
// asks for, whose objects go: its canaryStatuses', the predictor a changed predictor.name named
// before (as KServe, which deletes it), and the <predictor>-canary of a canaryTrafficPercent split.
func retiredPredictors(isvc *kservev1beta1.InferenceService) []string {
	var out []string
	for _, c := range isvc.Status.CanaryStatuses {
		out = append(out, kserve.PredictorName(isvc.Name, c.Name))
	}
	ran := kserve.PredictorName(isvc.Name, isvc.Spec.Predictor.Name)
	component := isvc.Status.Components[kservePredictor]
	// A revision is <predictor>-<hash>: kserveRevisions names it.
	if i := strings.LastIndexByte(component.LatestCreatedRevision, '-'); i > 0 && component.LatestCreatedRevision[:i] != ran {
		ran = component.LatestCreatedRevision[:i]
		out = append(out, ran)
	}
	if len(component.Traffic) > 1 {
		out = append(out, ran+"-canary")
	}
	return out
}

const kservePredictor = "predictor"

// kserveRevisions fills a predictor's revisions and traffic, and the canaries', in st, from what
// was seen; it says whether the canary, when there is one, is ready.
func kserveRevisions(isvc *kservev1beta1.InferenceService, st *kservev1beta1.InferenceServiceStatus, c *kservev1beta1.ComponentStatusSpec, e *endpoint, seen observed, set func(string, bool, string, string)) (canaryOK bool, canaryMsg string) {
	old := st.Components[kservePredictor]
	revision := func(v *versionPods) string {
		return predictorName(e, stable) + "-" + v.template.Annotations[revisionAnnotation]
	}
	stableRev := revision(&e.stable)
	st.CanaryStatuses = nil
	c.LatestCreatedRevision, c.LatestReadyRevision = stableRev, old.LatestReadyRevision
	c.LatestRolledoutRevision, c.PreviousRolledoutRevision = old.LatestRolledoutRevision, old.PreviousRolledoutRevision
	if rolloutOf(seen.stable).complete && seen.stable.Status.ReadyReplicas > 0 && old.LatestRolledoutRevision != stableRev {
		if old.LatestRolledoutRevision != "" {
			c.PreviousRolledoutRevision = old.LatestRolledoutRevision
		}
		c.LatestRolledoutRevision = stableRev
	}
	if e.canary == nil {
		if seen.stable != nil && seen.stable.Status.ReadyReplicas > 0 {
			c.LatestReadyRevision = stableRev
		}
		c.Traffic = []kservev1beta1.TrafficTarget{{RevisionName: stableRev, LatestRevision: ptr.To(true), Percent: ptr.To[int64](100)}}
		meta.RemoveStatusCondition(&st.Conditions, kservev1beta1.ConditionCanaryPredictorReady)
		return true, ""
	}
	s, cp, exact := split(seen.sc, e.canaryPercent, seen.stable, seen.canary)
	canaryOK, _, canaryMsg = versionReady(seen.canary, false, "")
	how := fmt.Sprintf("requests split by ready replicas, %d%% to %d%%: a Gateway API mesh that accepts kiln's HTTPRoute %s, or Istio (its VirtualService API, and its sidecar in the pods), would split them %d%% to %d%% exactly",
		s, cp, e.name, 100-e.canaryPercent, e.canaryPercent)
	if seen.sc.meshPending {
		how = fmt.Sprintf("requests split by ready replicas, %d%% to %d%%: Istio's VirtualService %s splits them %d%% to %d%% exactly once the pods run Istio's sidecar (label the namespace istio-injection=enabled)",
			s, cp, e.name, 100-e.canaryPercent, e.canaryPercent)
	}
	if exact {
		how = fmt.Sprintf("requests split %d%% to %d%% by %s %s", s, cp, seen.sc.mode, e.name)
	}
	if canaryOK {
		set(kservev1beta1.ConditionCanaryPredictorReady, true, "AllCanariesReady", predictorName(e, canary)+" is ready; "+how)
	} else {
		set(kservev1beta1.ConditionCanaryPredictorReady, false, "CanariesNotReady", predictorName(e, canary)+": "+canaryMsg+"; "+how)
	}
	if e.canaryName != "" { // spec.canary: the predictor is the latest revision, the canary beside it
		if seen.stable != nil && seen.stable.Status.ReadyReplicas > 0 {
			c.LatestReadyRevision = stableRev
		}
		c.Traffic = []kservev1beta1.TrafficTarget{{RevisionName: stableRev, LatestRevision: ptr.To(true), Percent: ptr.To(int64(s))}}
		st.CanaryStatuses = []kservev1beta1.CanaryStatus{{Name: isvc.Spec.Canary[0].Predictor.Name, Ready: canaryOK, TrafficPercent: cp}}
		return canaryOK, canaryMsg
	}
	// canaryTrafficPercent: the spec's pods are the latest revision, the rolled-out ones the previous.
	latestRev := revision(e.canary)
	c.LatestCreatedRevision = latestRev
	if canaryOK {
		c.LatestReadyRevision = latestRev
	}
	c.Traffic = []kservev1beta1.TrafficTarget{
		{Tag: "prev", RevisionName: stableRev, LatestRevision: ptr.To(false), Percent: ptr.To(int64(s))},
		{Tag: "latest", RevisionName: latestRev, LatestRevision: ptr.To(true), Percent: ptr.To(int64(cp))},
	}
	return canaryOK, canaryMsg
}

// split is the share of requests each version takes: the route's weights once a parent accepted
// it, or the VirtualService's once the pods are in Istio's mesh (exact), else each version's share of the ready pods the stable Service selects (0 and 0
// while none is ready).
func split(sc scaling, pct int32, stableDep, canaryDep *appsv1.Deployment) (stablePct, canaryPct int32, exact bool) {
	if sc.mode == servingv1alpha1.TrafficHTTPRoute || sc.mode == servingv1alpha1.TrafficVirtualService {
		return 100 - pct, pct, true
	}
	var s, c int32
	if stableDep != nil {
		s = stableDep.Status.ReadyReplicas
	}
	if canaryDep != nil {
		c = canaryDep.Status.ReadyReplicas
	}
	switch sc.serves {
	case stable:
		c = 0
	case canary:
		s = 0
	}
	if s+c == 0 {
		return 0, 0, false
	}
	canaryPct = (c*100 + (s+c)/2) / (s + c)
	return 100 - canaryPct, canaryPct, false
}
