package serving

// The InferenceService with the APIs kiln uses where the cluster serves them: Gateway API routes
// for canary traffic, KEDA for scale to zero, the Prometheus operator for monitoring.

import (
	"context"
	"fmt"
	"k8s.io/utils/ptr"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	"github.com/kiln-ml/kiln/test/testenv"
)

// canaryThenPromoteAndRollBack drives a canary to 20 percent of 5 replicas, waits until the status
// reports the pods' approximate 80/20 split, checks it with check, then rolls it back and promotes
// it, each in one edit, ending with one Deployment.
func canaryThenPromoteAndRollBack(t *testing.T, ns, name string, check func(*servingv1alpha1.InferenceService)) {
	i := create(t, newISVC(ns, name, func(s *servingv1alpha1.InferenceServiceSpec) { s.MinReplicas = ptr.To[int32](5) }))
	makeReady(t, deployment(t, ns, name+"-predictor"))
	edit(t, i, func(s *servingv1alpha1.InferenceServiceSpec) {
		s.Traffic = &servingv1alpha1.Traffic{CanaryVersion: "s3://models/iris/v2", CanaryPercent: 20}
	})
	// Each version gets its share of the 5 replicas, rounded up: 4 and 1.
	testenv.Eventually(t, func() error {
		if n := *deployment(t, ns, name+"-predictor").Spec.Replicas; n != 4 {
			return fmt.Errorf("stable replicas %d, want 4", n)
		}
		return nil
	})
	makeReady(t, deployment(t, ns, name+"-predictor"))
	makeReady(t, deployment(t, ns, name+"-predictor-canary"))
	// The status follows the Deployments' ready replicas as the cache sees them: a status written
	// before the stable Deployment's 4 ready replicas reached it says 83/17 (5 and 1) for a while.
	check(waitStatus(t, i, func(i *servingv1alpha1.InferenceService) error {
		if err := conditionIs("CanaryReady", metav1.ConditionTrue)(i); err != nil {
			return err
		}
		if tr := i.Status.Traffic; tr == nil || tr.Mode != servingv1alpha1.TrafficReplicaSplit || tr.CanaryPercent != 20 || tr.StablePercent != 80 || !tr.Approximate {
			return fmt.Errorf("traffic %+v, want ReplicaSplit 80/20, approximate", tr)
		}
		return nil
	}))

	// Roll back: remove traffic.
	edit(t, i, func(s *servingv1alpha1.InferenceServiceSpec) { s.Traffic = nil })
	gone(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-predictor-canary"}})
	// Promote: the canary's model becomes the active one.
	edit(t, i, func(s *servingv1alpha1.InferenceServiceSpec) {
		s.Traffic = &servingv1alpha1.Traffic{CanaryVersion: "s3://models/iris/v2", CanaryPercent: 20}
	})
	deployment(t, ns, name+"-predictor-canary")
	edit(t, i, func(s *servingv1alpha1.InferenceServiceSpec) { s.ModelURI, s.Traffic = "s3://models/iris/v2", nil })
	gone(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-predictor-canary"}})
	rollOut(t, ns, name+"-predictor", "s3://models/iris/v2")
	promoted := waitStatus(t, i, func(i *servingv1alpha1.InferenceService) error {
		if i.Status.ActiveVersion != "s3://models/iris/v2" || i.Status.Traffic != nil {
			return fmt.Errorf("activeVersion %s traffic %+v", i.Status.ActiveVersion, i.Status.Traffic)
		}
		return nil
	})
	if meta.FindStatusCondition(promoted.Status.Conditions, "CanaryReady") != nil {
		t.Error("CanaryReady remains without a canary")
	}
}

func TestCanaryByReplicaSplitWithoutGatewayAPI(t *testing.T) {
	ns := env.Namespace(t)
	canaryThenPromoteAndRollBack(t, ns, "split", func(i *servingv1alpha1.InferenceService) {
		if s, c := deployment(t, ns, "split-predictor"), deployment(t, ns, "split-predictor-canary"); *s.Spec.Replicas != 4 || *c.Spec.Replicas != 1 {
			t.Errorf("replicas stable %d canary %d, want 4 and 1", *s.Spec.Replicas, *c.Spec.Replicas)
		}
	})
}

func TestScaleToZeroWithoutKEDASaysWhatIsMissing(t *testing.T) {
	ns := env.Namespace(t)
	i := create(t, newISVC(ns, "zero", func(s *servingv1alpha1.InferenceServiceSpec) { s.MinReplicas = ptr.To[int32](0) }))
	st := waitStatus(t, i, conditionIs("ScaleToZero", metav1.ConditionFalse))
	if c := meta.FindStatusCondition(st.Status.Conditions, "ScaleToZero"); c.Reason != "ScaleToZeroUnavailable" || !strings.Contains(c.Message, "neither is installed") {
		t.Errorf("ScaleToZero condition %+v", c)
	}
	if d := deployment(t, ns, "zero-predictor"); *d.Spec.Replicas != 1 {
		t.Errorf("replicas %d, want 1 while KEDA is missing", *d.Spec.Replicas)
	}
}

// The tests below install optional APIs, as a cluster admin would, and must run last.

// Scale to zero needs KEDA and its HTTP add-on: with KEDA alone one replica runs and the status
// says what is missing; with both, kiln makes an InterceptorRoute and a ScaledObject with the
// add-on's external-push trigger (checked by KEDA's own CRD and the add-on's API), points the
// InferenceService's address at the interceptor, keeps the replicas while KEDA takes them over,
// and reports Ready with zero pods only while the add-on reports the route Ready.
func TestScaleToZeroThroughKEDAsHTTPAddOn(t *testing.T) {
	env.InstallCRDs(t, filepath.Join(testenv.KEDACRDs(t), "keda.sh_scaledobjects.yaml"))
	ns := env.Namespace(t)
	i := create(t, newISVC(ns, "zero", func(s *servingv1alpha1.InferenceServiceSpec) {
		s.MinReplicas, s.MaxReplicas = ptr.To[int32](0), ptr.To[int32](4)
	}))
	waitStatus(t, i, func(i *servingv1alpha1.InferenceService) error {
		if c := meta.FindStatusCondition(i.Status.Conditions, "ScaleToZero"); c == nil || c.Reason != "ScaleToZeroUnavailable" || !strings.Contains(c.Message, "the HTTP add-on is not installed") {
			return fmt.Errorf("ScaleToZero %+v, want the HTTP add-on named missing", c)
		}
		return nil
	})
	makeReady(t, deployment(t, ns, "zero-predictor"))

	env.InstallCRDs(t, filepath.Join(testenv.RepoRoot(), "test", "testdata", "crds", "http.keda.sh_interceptorroutes.yaml"))
	get := func(apiVersion, kind, name string) *unstructured.Unstructured {
		t.Helper()
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		env.Await(t, ns, name, u)
		return u
	}
	so := get("keda.sh/v1alpha1", "ScaledObject", "zero-predictor")
	trigger, _, _ := unstructured.NestedSlice(so.Object, "spec", "triggers")
	if spec := so.Object["spec"].(map[string]any); spec["minReplicaCount"] != int64(0) || spec["maxReplicaCount"] != int64(4) || len(trigger) != 1 ||
		trigger[0].(map[string]any)["type"] != "external-push" || trigger[0].(map[string]any)["metadata"].(map[string]any)["interceptorRoute"] != "zero" {
		t.Errorf("ScaledObject spec %v", spec)
	}
	route := get("http.keda.sh/v1beta1", "InterceptorRoute", "zero")
	target, _, _ := unstructured.NestedMap(route.Object, "spec", "target")
	hosts, _, _ := unstructured.NestedSlice(route.Object, "spec", "rules")
	if target["service"] != "zero-predictor" || target["port"] != int64(80) || !strings.Contains(fmt.Sprint(hosts), "zero."+ns+".svc.cluster.local:8080") {
		t.Errorf("InterceptorRoute target %v, rules %v", target, hosts)
	}
	testenv.Eventually(t, func() error {
		svc := &corev1.Service{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "zero"}, svc); err != nil {
			return err
		}
		if svc.Spec.Type != corev1.ServiceTypeExternalName || svc.Spec.ExternalName != "keda-add-ons-http-interceptor-proxy.keda.svc.cluster.local" {
			return fmt.Errorf("Service zero is %s %q, want a name for the interceptor", svc.Spec.Type, svc.Spec.ExternalName)
		}
		return nil
	})
	// KEDA takes the replicas over: until it changes them, the running replica stays.
	testenv.Consistently(t, func() error {
		if n := *deployment(t, ns, "zero-predictor").Spec.Replicas; n != 1 {
			return fmt.Errorf("replicas %d while KEDA takes over, want 1 kept", n)
		}
		return nil
	})
	waitStatus(t, i, func(i *servingv1alpha1.InferenceService) error {
		if i.Status.URL != "http://zero."+ns+".svc.cluster.local:8080" {
			return fmt.Errorf("url %s, want the address through the interceptor", i.Status.URL)
		}
		return nil
	})

	// KEDA scales it to zero: not Ready while nothing would wake it.
	testenv.Eventually(t, func() error {
		d := deployment(t, ns, "zero-predictor")
		d.Spec.Replicas = ptr.To[int32](0)
		if err := env.Client.Update(context.Background(), d); err != nil {
			return err
		}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation}
		return env.Client.Status().Update(context.Background(), d)
	})
	waitStatus(t, i, func(i *servingv1alpha1.InferenceService) error {
		c := meta.FindStatusCondition(i.Status.Conditions, "Ready")
		z := meta.FindStatusCondition(i.Status.Conditions, "ScaleToZero")
		if c == nil || c.Status != metav1.ConditionFalse || z == nil || z.Reason != "InterceptorRouteNotReady" {
			return fmt.Errorf("Ready %+v, ScaleToZero %+v: want not ready while the route is not", c, z)
		}
		return nil
	})
	// The add-on reports the route Ready: requests wake it, and Ready says so.
	testenv.Eventually(t, func() error {
		route := get("http.keda.sh/v1beta1", "InterceptorRoute", "zero")
		route.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Reconciled",
			"message": "", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}
		return env.Client.Status().Update(context.Background(), route)
	})
	ready := waitStatus(t, i, conditionIs("Ready", metav1.ConditionTrue))
	if c := meta.FindStatusCondition(ready.Status.Conditions, "Ready"); c.Reason != "ScaledToZero" || !strings.Contains(c.Message, "wakes it") {
		t.Errorf("Ready %+v, want ScaledToZero saying requests wake it", c)
	}
	if c := meta.FindStatusCondition(ready.Status.Conditions, "ScaleToZero"); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("ScaleToZero %+v", c)
	}
}

func TestMonitoringWherePrometheusOperatorIsInstalled(t *testing.T) {
	dir := filepath.Join(testenv.RepoRoot(), "test", "testdata", "crds")
	env.InstallCRDs(t, filepath.Join(dir, "monitoring.coreos.com_servicemonitors.yaml"), filepath.Join(dir, "monitoring.coreos.com_prometheusrules.yaml"))
	ns := env.Namespace(t)
	create(t, newISVC(ns, "watched", nil))
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("monitoring.coreos.com/v1")
		u.SetKind(kind)
		env.Await(t, ns, "watched", u)
		if kind == "ServiceMonitor" {
			// MLServer (sklearn) publishes its metrics on 8082: the ServiceMonitor scrapes the
			// per-version Services' "metrics" port, which leads to the container's.
			endpoints, _, _ := unstructured.NestedSlice(u.Object, "spec", "endpoints")
			if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != "metrics" {
				t.Errorf("ServiceMonitor endpoints %v, want the metrics port", endpoints)
			}
		}
	}
	svc := &corev1.Service{}
	env.Await(t, ns, "watched-predictor", svc) // made after the Deployment, in the next reconcile
	ports := deployment(t, ns, "watched-predictor").Spec.Template.Spec.Containers[0].Ports
	if len(svc.Spec.Ports) != 2 || svc.Spec.Ports[1].Name != "metrics" || svc.Spec.Ports[1].Port != 8082 || len(ports) != 2 || ports[1].ContainerPort != 8082 {
		t.Errorf("Service ports %+v, container ports %+v: want metrics on 8082", svc.Spec.Ports, ports)
	}
}

func TestCanaryByHTTPRouteWithGatewayAPI(t *testing.T) {
	env.InstallCRDs(t, testenv.GatewayAPICRDs(t))
	ns := env.Namespace(t)
	canaryThenPromoteAndRollBack(t, ns, "routed", func(i *servingv1alpha1.InferenceService) {
		// The CRDs alone enforce nothing: until a parent accepts the route, the pods split (as the
		// helper waited for).
		route := &unstructured.Unstructured{}
		route.SetAPIVersion("gateway.networking.k8s.io/v1")
		route.SetKind("HTTPRoute")
		testenv.Eventually(t, func() error {
			if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "routed"}, route); err != nil {
				return err
			}
			// As a mesh implementing GAMMA reports it.
			route.Object["status"] = map[string]any{"parents": []any{map[string]any{
				"parentRef":      map[string]any{"group": "", "kind": "Service", "name": "routed", "port": int64(80)},
				"controllerName": "mesh.example.com/gamma",
				"conditions": []any{map[string]any{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
					"observedGeneration": route.GetGeneration(), "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}},
			}}}
			return env.Client.Status().Update(context.Background(), route)
		})
		waitStatus(t, i, func(i *servingv1alpha1.InferenceService) error {
			if tr := i.Status.Traffic; tr == nil || tr.Mode != servingv1alpha1.TrafficHTTPRoute || tr.CanaryPercent != 20 || tr.Approximate {
				return fmt.Errorf("traffic %+v, want HTTPRoute 80/20", tr)
			}
			return nil
		})
		rules, _, _ := unstructured.NestedSlice(route.Object, "spec", "rules")
		backends := rules[0].(map[string]any)["backendRefs"].([]any)
		got := fmt.Sprintf("%v=%v %v=%v", backends[0].(map[string]any)["name"], backends[0].(map[string]any)["weight"],
			backends[1].(map[string]any)["name"], backends[1].(map[string]any)["weight"])
		if got != "routed-predictor=80 routed-predictor-canary=20" {
			t.Errorf("HTTPRoute backends %s, want routed-predictor=80 routed-predictor-canary=20", got)
		}
	})
	gone(t, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"namespace": ns, "name": "routed"}}})
}

// With Istio's API (its real CRDs) and no accepted HTTPRoute, a canary gets a VirtualService that
// splits the address between the versions' Services by weight; the status claims the split only
// once the pods run Istio's sidecar, as the mesh's injection makes them.
func TestCanaryByVirtualServiceWithIstio(t *testing.T) {
	env.InstallCRDs(t, testenv.IstioCRDs(t))
	ns := env.Namespace(t)
	i := create(t, newISVC(ns, "meshed", func(s *servingv1alpha1.InferenceServiceSpec) {
		s.MinReplicas = ptr.To[int32](5)
		s.Traffic = &servingv1alpha1.Traffic{CanaryVersion: "s3://models/iris/v2", CanaryPercent: 20}
	}))
	makeReady(t, deployment(t, ns, "meshed-predictor"))
	makeReady(t, deployment(t, ns, "meshed-predictor-canary"))
	vs := &unstructured.Unstructured{}
	vs.SetAPIVersion("networking.istio.io/v1")
	vs.SetKind("VirtualService")
	weights := func() string {
		t.Helper()
		env.Await(t, ns, "meshed", vs)
		hosts, _, _ := unstructured.NestedStringSlice(vs.Object, "spec", "hosts")
		http, _, _ := unstructured.NestedSlice(vs.Object, "spec", "http")
		var out []string
		for _, r := range http[0].(map[string]any)["route"].([]any) {
			r := r.(map[string]any)
			out = append(out, fmt.Sprintf("%v=%v", r["destination"].(map[string]any)["host"], r["weight"]))
		}
		return strings.Join(hosts, ",") + " -> " + strings.Join(out, " ")
	}
	host := func(s string) string { return s + "." + ns + ".svc.cluster.local" }
	if got, want := weights(), host("meshed")+" -> "+host("meshed-predictor")+"=80 "+host("meshed-predictor-canary")+"=20"; got != want {
		t.Errorf("VirtualService %s, want %s", got, want)
	}
	waitStatus(t, i, func(i *servingv1alpha1.InferenceService) error {
		if tr := i.Status.Traffic; tr == nil || tr.Mode != servingv1alpha1.TrafficReplicaSplit || !tr.Approximate {
			return fmt.Errorf("traffic %+v, want ReplicaSplit while the pods are outside the mesh", tr)
		}
		return nil
	})
	// The pods as Istio's injection makes them: a sidecar beside the server.
	for n, version := range []string{"stable", "stable", "stable", "stable", "canary"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("meshed-%d", n), Namespace: ns,
			Labels: map[string]string{"serving.kiln.dev/inferenceservice": "meshed", "serving.kiln.dev/version": version}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "predictor", Image: "i"}, {Name: "istio-proxy", Image: "proxy"}}}}
		if err := env.Client.Create(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "predictor", Ready: true}, {Name: "istio-proxy", Ready: true}}
		if err := env.Client.Status().Update(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
	edit(t, i, func(s *servingv1alpha1.InferenceServiceSpec) { s.Traffic.CanaryPercent = 30 })
	waitStatus(t, i, func(i *servingv1alpha1.InferenceService) error {
		if tr := i.Status.Traffic; tr == nil || tr.Mode != servingv1alpha1.TrafficVirtualService || tr.Approximate || tr.StablePercent != 70 || tr.CanaryPercent != 30 {
			return fmt.Errorf("traffic %+v, want VirtualService 70/30", tr)
		}
		return nil
	})
	if got := weights(); !strings.HasSuffix(got, "=70 "+host("meshed-predictor-canary")+"=30") {
		t.Errorf("VirtualService %s, want 70/30", got)
	}
	edit(t, i, func(s *servingv1alpha1.InferenceServiceSpec) { s.Traffic = nil })
	gone(t, vs)
}
