package inferenceservice

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kservev1alpha1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1alpha1"
	kservev1beta1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1beta1"
	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	"github.com/kiln-ml/kiln/internal/kserve"
)

// sklearnRuntime is KServe's sklearn runtime as its config/runtimes has it (image pinned).
const sklearnRuntime = `
apiVersion: serving.kserve.io/v1alpha1
kind: ClusterServingRuntime
metadata: {name: kserve-sklearnserver, annotations: {serving.kserve.io/server-type: sklearnserver}}
spec:
  annotations: {prometheus.kserve.io/port: "8002", prometheus.kserve.io/path: /metrics}
  supportedModelFormats: [{name: sklearn, version: "1", autoSelect: true, priority: 1}]
  protocolVersions: [v1, v2]
  containers:
  - name: kserve-container
    image: kserve/sklearnserver:v0.20.0
    args: ["--model_name={{.Name}}", --model_dir=/mnt/models, --http_port=8080]
    resources: {requests: {cpu: "1", memory: 2Gi}, limits: {cpu: "1", memory: 2Gi}}
`

// kservePlan is what the engine makes of a KServe InferenceService (YAML), on kserve-sklearnserver,
// on a cluster without the optional APIs.
func kservePlan(t *testing.T, doc string) plan { return kservePlanOn(t, doc, apis{}) }

func kservePlanOn(t *testing.T, doc string, have apis) plan {
	t.Helper()
	_, e := kserveEndpoint(t, doc, kserveAPI{})
	return desired(&e, decide(&e, have, ""), have, Options{}.withDefaults())
}

// kserveEndpoint is the endpoint of a KServe InferenceService (YAML) on kserve-sklearnserver, as
// api reads it (its canary, its Ingress).
func kserveEndpoint(t *testing.T, doc string, api kserveAPI) (*kservev1beta1.InferenceService, endpoint) {
	t.Helper()
	var isvc kservev1beta1.InferenceService
	if err := yaml.UnmarshalStrict([]byte(doc), &isvc); err != nil {
		t.Fatal(err)
	}
	var csr kservev1alpha1.ClusterServingRuntime
	if err := yaml.UnmarshalStrict([]byte(sklearnRuntime), &csr); err != nil {
		t.Fatal(err)
	}
	runtimes := kserve.Clustered([]kservev1alpha1.ClusterServingRuntime{csr})
	p, err := kserve.Build(&isvc, &isvc.Spec.Predictor, nil, runtimes)
	if err != nil {
		t.Fatal(err)
	}
	e := fromKServe(&isvc, p, "kiln")
	e.ingress = api.ingressOf(&isvc, e.address)
	if err := api.withCanary(t.Context(), &isvc, &e, nil, runtimes); err != nil {
		t.Fatal(err)
	}
	return &isvc, e
}

func find[T client.Object](objs []client.Object, name string) T {
	var zero T
	for _, o := range objs {
		if t, ok := o.(T); ok && o.GetName() == name {
			return t
		}
	}
	return zero
}

// KServe's sklearn sample runs as KServe's Standard mode runs it: Deployment and Service
// sklearn-iris-predictor under KServe's selector and labels, the runtime's server reading the model
// storage-initializer fetched into /mnt/models, the Service's port 80 to the server's 8080.
func TestAKServeSampleMakesKServesObjects(t *testing.T) {
	p := kservePlan(t, `
metadata: {name: sklearn-iris, namespace: ns, uid: u-1}
spec: {predictor: {sklearn: {storageUri: "gs://kfserving-examples/models/sklearn/1.0/model"}}}
`)
	d := find[*appsv1.Deployment](p.want, "sklearn-iris-predictor")
	if d == nil {
		t.Fatalf("no Deployment sklearn-iris-predictor in %d objects", len(p.want))
	}
	if d.Spec.Template.Labels[LabelService] != "sklearn-iris.kserve" {
		t.Errorf("pod labels %v: want %s sklearn-iris.kserve, apart from a kiln InferenceService sklearn-iris", d.Spec.Template.Labels, LabelService)
	}
	if sel := d.Spec.Selector.MatchLabels; len(sel) != 1 || sel["app"] != "isvc.sklearn-iris-predictor" {
		t.Errorf("selector = %v, want KServe's app=isvc.sklearn-iris-predictor", sel)
	}
	tl := d.Spec.Template.Labels
	if tl["app"] != "isvc.sklearn-iris-predictor" || tl["serving.kserve.io/inferenceservice"] != "sklearn-iris" || tl["component"] != "predictor" {
		t.Errorf("pod labels = %v, want KServe's", tl)
	}
	if o := d.OwnerReferences; len(o) != 1 || o[0].APIVersion != "serving.kserve.io/v1beta1" || o[0].UID != "u-1" || !*o[0].Controller {
		t.Errorf("owner = %+v, want KServe's InferenceService", o)
	}
	pod := d.Spec.Template.Spec
	if len(pod.InitContainers) != 1 || pod.InitContainers[0].Name != "storage-initializer" || pod.InitContainers[0].Env[0].Value != "gs://kfserving-examples/models/sklearn/1.0/model" {
		t.Errorf("init containers = %+v, want storage-initializer fetching the model", pod.InitContainers)
	}
	server := pod.Containers[0]
	if server.Name != "kserve-container" || server.Args[0] != "--model_name=sklearn-iris" || server.ReadinessProbe == nil || server.ReadinessProbe.TCPSocket.Port.IntValue() != 8080 {
		t.Errorf("server = %+v, want the runtime's, filled, ready on TCP 8080", server)
	}
	if !slices.ContainsFunc(server.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == "kserve-provision-location" && m.MountPath == "/mnt/models" && m.ReadOnly
	}) {
		t.Errorf("server mounts %+v, want the model read-only at /mnt/models", server.VolumeMounts)
	}
	svc := find[*corev1.Service](p.want, "sklearn-iris-predictor")
	if svc == nil || svc.Spec.Ports[0].Port != 80 || svc.Spec.Ports[0].TargetPort.IntValue() != 8080 {
		t.Fatalf("Service = %+v, want sklearn-iris-predictor, port 80 to 8080", svc)
	}
	if find[*corev1.Service](p.want, "sklearn-iris") != nil {
		t.Errorf("a Service sklearn-iris is made: KServe's address is sklearn-iris-predictor alone")
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || find[*autoscalingv2.HorizontalPodAutoscaler](p.want, "sklearn-iris-predictor") != nil {
		t.Errorf("replicas %v: want 1 and no HPA without maxReplicas", d.Spec.Replicas)
	}
}

// An HPA between minReplicas and maxReplicas on scaleMetric at scaleTarget; autoscalerClass none
// fixes minReplicas; minReplicas 0 is 1 under an HPA, as in KServe.
func TestKServeScalingFollowsTheComponentExtension(t *testing.T) {
	p := kservePlan(t, `
metadata: {name: s, namespace: ns}
spec: {predictor: {minReplicas: 0, maxReplicas: 4, scaleTarget: 60, sklearn: {storageUri: "gs://m/s"}}}
`)
	h := find[*autoscalingv2.HorizontalPodAutoscaler](p.want, "s-predictor")
	if h == nil || *h.Spec.MinReplicas != 1 || h.Spec.MaxReplicas != 4 || h.Spec.Metrics[0].Resource.Name != corev1.ResourceCPU || *h.Spec.Metrics[0].Resource.Target.AverageUtilization != 60 {
		t.Fatalf("HPA = %+v, want 1..4 on 60%% CPU", h)
	}
	p = kservePlan(t, `
metadata: {name: s, namespace: ns, annotations: {serving.kserve.io/autoscalerClass: none}}
spec: {predictor: {minReplicas: 2, maxReplicas: 4, sklearn: {storageUri: "gs://m/s"}}}
`)
	if d := find[*appsv1.Deployment](p.want, "s-predictor"); *d.Spec.Replicas != 2 || find[*autoscalingv2.HorizontalPodAutoscaler](p.want, "s-predictor") != nil {
		t.Errorf("autoscalerClass none: replicas %d and an HPA; want 2 and none", *d.Spec.Replicas)
	}
	p = kservePlan(t, `
metadata: {name: s, namespace: ns}
spec: {predictor: {maxReplicas: 3, autoScaling: {metrics: [{type: Resource, resource: {name: memory, target: {type: AverageValue, averageValue: 1Gi}}}]}, sklearn: {storageUri: "gs://m/s"}}}
`)
	h = find[*autoscalingv2.HorizontalPodAutoscaler](p.want, "s-predictor")
	if h == nil || h.Spec.Metrics[0].Resource.Name != corev1.ResourceMemory || h.Spec.Metrics[0].Resource.Target.AverageValue.String() != "1Gi" {
		t.Errorf("HPA = %+v, want autoScaling's memory average value", h)
	}
}

// A named predictor's objects are all <name>-<predictor.name>-predictor; every object carries
// serving.kiln.dev/api=kserve (the KServe controller's cache holds them); the ServiceMonitor
// scrapes the predictor's Service, which names the metrics port; the alert rule, without request
// counters, alerts on unavailable replicas alone.
func TestAKServePredictorsObjectsAreNamedAndLabelledAsOne(t *testing.T) {
	p := kservePlanOn(t, `
metadata: {name: x, namespace: ns}
spec: {predictor: {name: blue, maxReplicas: 3, sklearn: {storageUri: "gs://m/x"}}}
`, apis{gateway: true, keda: true, httpAddOn: true, monitoring: true})
	for _, o := range p.want {
		if o.GetLabels()[LabelAPI] != "kserve" || o.GetLabels()[LabelService] != "x.kserve" {
			t.Errorf("%T %s labels %v, want %s=kserve and %s=x.kserve", o, o.GetName(), o.GetLabels(), LabelAPI, LabelService)
		}
		if o.GetName() != "x-blue-predictor" && o.GetName() != "x" {
			t.Errorf("%T %s: want x-blue-predictor (or x for the monitoring)", o, o.GetName())
		}
	}
	d := find[*appsv1.Deployment](p.want, "x-blue-predictor")
	if d == nil || d.Spec.Selector.MatchLabels["app"] != "isvc.x-blue-predictor" || find[*autoscalingv2.HorizontalPodAutoscaler](p.want, "x-blue-predictor") == nil {
		t.Fatalf("want the Deployment and HPA x-blue-predictor, selecting app=isvc.x-blue-predictor")
	}
	for _, o := range []client.Object{d, find[*corev1.Service](p.want, "x-blue-predictor"), find[*autoscalingv2.HorizontalPodAutoscaler](p.want, "x-blue-predictor")} {
		if o.GetLabels()["app"] != "isvc.x-blue-predictor" { // as KServe labels them: kubectl get deploy,svc,hpa -l app=… finds them
			t.Errorf("%T labels %v, want app=isvc.x-blue-predictor", o, o.GetLabels())
		}
	}
	svc := find[*corev1.Service](p.want, "x-blue-predictor")
	if svc == nil || svc.Labels[LabelVersion] != stable || len(svc.Spec.Ports) != 2 || svc.Spec.Ports[1].Port != 8002 {
		t.Fatalf("Service = %+v, want the stable version's, with the metrics port 8002", svc)
	}
	var sm, rule *unstructured.Unstructured
	for _, o := range p.want {
		if u, ok := o.(*unstructured.Unstructured); ok && u.GetKind() == "ServiceMonitor" {
			sm = u
		} else if ok && u.GetKind() == "PrometheusRule" {
			rule = u
		}
	}
	if sm == nil || rule == nil {
		t.Fatal("no ServiceMonitor or PrometheusRule for a runtime that says where its metrics are")
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != "metrics" {
		t.Errorf("ServiceMonitor endpoints %v, want the Service's metrics port", endpoints)
	}
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	rules := groups[0].(map[string]any)["rules"].([]any)
	if len(rules) != 1 || !strings.Contains(rules[0].(map[string]any)["expr"].(string), `deployment=~"x-blue-predictor|x-blue-predictor-canary"`) {
		t.Errorf("rules = %v, want the replicas alert alone, on x-blue-predictor", rules)
	}
}

// deploymentStrategy reaches the Deployment, and autoScaling.behavior the HPA.
func TestKServeStrategyAndBehaviorAreKept(t *testing.T) {
	p := kservePlan(t, `
metadata: {name: s, namespace: ns}
spec: {predictor: {maxReplicas: 3, deploymentStrategy: {type: Recreate}, autoScaling: {behavior: {scaleDown: {stabilizationWindowSeconds: 60}}}, sklearn: {storageUri: "gs://m/s"}}}
`)
	if d := find[*appsv1.Deployment](p.want, "s-predictor"); d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("strategy %+v, want Recreate", d.Spec.Strategy)
	}
	if h := find[*autoscalingv2.HorizontalPodAutoscaler](p.want, "s-predictor"); h.Spec.Behavior == nil || *h.Spec.Behavior.ScaleDown.StabilizationWindowSeconds != 60 {
		t.Errorf("HPA behavior %+v, want autoScaling's", h.Spec.Behavior)
	}
}

// A kiln InferenceService's pods never carry LabelAPI, even when spec.pod.labels sets it: its
// controller's cache leaves out the pods that do.
func TestKilnPodsNeverCarryAnotherAPIsLabel(t *testing.T) {
	i := isvc(nil, nil, -1)
	i.Spec.Pod = &servingv1alpha1.PodOptions{Labels: map[string]string{LabelAPI: "kserve", "team": "a"}}
	if l := deploymentOf(i, stable, nil).Spec.Template.Labels; l[LabelAPI] != "" || l["team"] != "a" {
		t.Errorf("pod labels %v, want team and no %s", l, LabelAPI)
	}
}

// spec.canary's canary on a cluster whose mesh accepted the HTTPRoute: Deployment and Service
// x-v2-predictor beside x-predictor, the route splitting the predictor's address 80/20 between
// them, and the address Service, the route's stable backend, selecting the stable pods alone (the
// canary's pods behind it would take more than their share).
func TestAKServeCanaryIsSplitExactlyByAnAcceptedRoute(t *testing.T) {
	_, e := kserveEndpoint(t, `
metadata: {name: x, namespace: ns}
spec:
  predictor: {sklearn: {storageUri: "gs://m/v1"}}
  canary: [{trafficPercent: 20, predictor: {name: v2, sklearn: {storageUri: "gs://m/v2"}}}]
`, kserveAPI{})
	have := apis{gateway: true}
	plan := desired(&e, decide(&e, have, servingv1alpha1.TrafficHTTPRoute), have, Options{}.withDefaults())
	c := find[*appsv1.Deployment](plan.want, "x-v2-predictor")
	if c == nil || c.Spec.Selector.MatchLabels["app"] != "isvc.x-v2-predictor" || c.Spec.Template.Annotations[modelURIAnnotation] != "gs://m/v2" {
		t.Fatalf("canary Deployment %+v, want x-v2-predictor serving gs://m/v2", c)
	}
	if svc := find[*corev1.Service](plan.want, "x-predictor"); svc.Spec.Selector[LabelVersion] != stable {
		t.Errorf("address Service selects %v, want the stable pods alone", svc.Spec.Selector)
	}
	var route *unstructured.Unstructured
	for _, o := range plan.want {
		if u, ok := o.(*unstructured.Unstructured); ok && u.GetKind() == "HTTPRoute" {
			route = u
		}
	}
	if route == nil {
		t.Fatal("no HTTPRoute")
	}
	rules, _, _ := unstructured.NestedSlice(route.Object, "spec", "rules")
	backends := rules[0].(map[string]any)["backendRefs"].([]any)
	got := []string{}
	for _, b := range backends {
		b := b.(map[string]any)
		got = append(got, b["name"].(string)+"="+strconv.Itoa(int(b["weight"].(int64))))
	}
	if strings.Join(got, ",") != "x-predictor=80,x-v2-predictor=20" {
		t.Errorf("route backends %v, want x-predictor=80,x-v2-predictor=20", got)
	}
}

// With an ingress domain, a KServe InferenceService gets an Ingress for KServe's host names,
// routed to its predictor's Service; IngressReady, Ready and url wait for an ingress controller to
// admit it (an address in its status); cluster-local ones get none.
func TestAKServeIngressIsClaimedOnceAdmitted(t *testing.T) {
	api := kserveAPI{ingressDomain: "models.example.com", ingressClass: "nginx"}
	isvc, e := kserveEndpoint(t, `
metadata: {name: x, namespace: ns, generation: 1}
spec: {predictor: {sklearn: {storageUri: "gs://m/v1"}}}
`, api)
	plan := desired(&e, decide(&e, apis{}, ""), apis{}, Options{}.withDefaults())
	in := find[*networkingv1.Ingress](plan.want, "x")
	if in == nil || *in.Spec.IngressClassName != "nginx" || len(in.Spec.Rules) != 2 || in.Spec.Rules[0].Host != "x-ns.models.example.com" ||
		in.Spec.Rules[1].Host != "x-predictor-ns.models.example.com" || in.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name != "x-predictor" {
		t.Fatalf("Ingress %+v, want KServe's hosts to x-predictor, class nginx", in)
	}
	ready := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}}
	for _, tc := range []struct {
		seen   *networkingv1.Ingress
		reason string
		url    string
	}{
		{nil, "IngressNotCreated", ""},
		{in.DeepCopy(), "IngressNotAdmitted", ""},
		{&networkingv1.Ingress{Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{Ingress: []networkingv1.IngressLoadBalancerIngress{{IP: "10.0.0.9"}}}}},
			"IngressAdmitted", "http://x-ns.models.example.com"},
	} {
		st := kserveStatus(isvc, &e, observed{stable: ready, ingress: tc.seen})
		c := meta.FindStatusCondition(st.Conditions, "IngressReady")
		if c.Reason != tc.reason || meta.IsStatusConditionTrue(st.Conditions, "Ready") != (tc.url != "") || st.URL != tc.url {
			t.Errorf("Ingress %+v: IngressReady %s, Ready %v, url %q; want %s and url %q", tc.seen, c.Reason, meta.IsStatusConditionTrue(st.Conditions, "Ready"), st.URL, tc.reason, tc.url)
		}
	}
	isvc.Labels = map[string]string{"networking.kserve.io/visibility": "cluster-local"}
	if api.ingressOf(isvc, "x-predictor") != nil {
		t.Error("an Ingress for a cluster-local InferenceService")
	}
}

// What KServe's clients read while a KServe InferenceService changes: the url stays while the
// old pods answer through a rollout (KServeClient's wait_model_ready reads it), and Ready does not
// wait for spec.canary's canary (KServe's Ready is PredictorReady and IngressReady).
func TestAKServeURLAndReadyThroughChanges(t *testing.T) {
	isvc, e := kserveEndpoint(t, `
metadata: {name: x, namespace: ns, generation: 2}
spec:
  predictor: {sklearn: {storageUri: "gs://m/v1"}}
  canary: [{trafficPercent: 20, predictor: {name: v2, sklearn: {storageUri: "gs://m/v2"}}}]
`, kserveAPI{})
	ready := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}}
	rolling := ready.DeepCopy()
	rolling.Status.Replicas, rolling.Status.UpdatedReplicas = 2, 1
	unready := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1}}
	for _, tc := range []struct {
		name           string
		stable, canary *appsv1.Deployment
		ready          bool
		reason         string
	}{
		{"both ready", ready, ready, true, "Ready"},
		{"the canary not ready", ready, unready, true, "Ready"},
		{"a rollout", rolling, ready, false, "RolloutProgressing"},
	} {
		st := kserveStatus(isvc, &e, observed{stable: tc.stable, canary: tc.canary})
		c := meta.FindStatusCondition(st.Conditions, "Ready")
		if c == nil || (c.Status == metav1.ConditionTrue) != tc.ready || c.Reason != tc.reason || st.URL != "http://x-predictor.ns.svc.cluster.local" {
			t.Errorf("%s: Ready %+v, url %q; want %v %s and the predictor's url", tc.name, c, st.URL, tc.ready, tc.reason)
		}
	}
	if st := kserveStatus(isvc, &e, observed{stable: unready, canary: ready}); st.URL != "" {
		t.Errorf("url %q while no predictor pod is ready", st.URL)
	}
}

// A refused spec that renames the predictor finds no Deployment under the new name and deletes
// nothing: the status still remembers the predictor the former name made, which goes once a spec
// runs (retiredPredictors), and whether kiln made an Ingress.
func TestARefusedRenameRemembersWhatRan(t *testing.T) {
	isvc, e := kserveEndpoint(t, `
metadata: {name: x, namespace: ns, generation: 2}
spec: {predictor: {name: blue, sklearn: {storageUri: "gs://m/v1"}}}
status:
  components: {predictor: {latestCreatedRevision: x-predictor-abc}}
  conditions: [{type: IngressReady, status: "True", reason: IngressAdmitted, lastTransitionTime: "2026-12-08T00:00:00Z"}]
`, kserveAPI{})
	st := kserveStatus(isvc, &e, observed{refused: &refused{"RuntimeNotRecognized", "no runtime named team-sklearn"}})
	isvc.Status = st
	if got := retiredPredictors(isvc); !slices.Contains(got, "x-predictor") {
		t.Errorf("retired predictors %v, want x-predictor remembered", got)
	}
	if ingressMade(isvc) != "x" {
		t.Errorf("ingress made %q, want x remembered (conditions %+v)", ingressMade(isvc), st.Conditions)
	}
	if c := meta.FindStatusCondition(st.Conditions, "Ready"); c == nil || c.Reason != "RuntimeNotRecognized" || st.URL != "" {
		t.Errorf("Ready %+v url %q, want RuntimeNotRecognized and no url", c, st.URL)
	}
}
