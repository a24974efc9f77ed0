package serving

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kservev1alpha1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1alpha1"
	kservev1beta1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1beta1"
	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/internal/kserve"
	"github.com/kiln-ml/kiln/test/testenv"
)

// kiln's refusals of the parts of KServe's API it does not serve, by the field they name.
var kserveRefusals = []string{
	"spec.transformer: kiln serves KServe's predictor only",
	"spec.explainer: kiln serves KServe's predictor only",
	"spec.predictor.workerSpec: multi-node serving is not served by kiln",
}

// createStrictly dry-runs the creation of o with strict field validation: the apiserver refuses a
// field kiln's schema does not know instead of dropping it, and stores nothing.
func createStrictly(ctx context.Context, o *unstructured.Unstructured) error {
	return env.Client.Create(ctx, o.DeepCopy(), client.DryRunAll, client.FieldValidation("Strict"))
}

// TestKServesOwnManifestsAreKeptAsWritten: KServe v0.20's runtime manifests and every
// InferenceService of its v1beta1 samples are accepted with every field they set, or refused
// naming a part of KServe kiln does not serve; its sklearn and rollout samples are accepted.
func TestKServesOwnManifestsAreKeptAsWritten(t *testing.T) {
	ctx := context.Background()
	runtimes := testenv.KServeManifests(t, "runtimes")
	if len(runtimes) < 10 {
		t.Fatalf("read %d of KServe's runtime manifests, want its 15", len(runtimes))
	}
	for _, r := range runtimes {
		if err := createStrictly(ctx, r); err != nil {
			t.Errorf("KServe's %s %s is refused: %v", r.GetKind(), r.GetName(), err)
		}
	}

	pickFromKServesRuntimes(t, runtimes)

	ns := env.Namespace(t)
	isvcs := func(sub string) []*unstructured.Unstructured {
		objs := slices.DeleteFunc(testenv.KServeManifests(t, sub), func(o *unstructured.Unstructured) bool {
			return o.GetAPIVersion() != "serving.kserve.io/v1beta1" || o.GetKind() != "InferenceService"
		})
		for _, o := range objs {
			o.SetNamespace(ns)
		}
		return objs
	}
	for _, sub := range []string{"samples/sklearn/v1/sklearn.yaml", "samples/rollout/default.yaml", "samples/rollout/canary.yaml"} {
		objs := isvcs(sub)
		if len(objs) != 1 {
			t.Fatalf("%s holds %d InferenceServices, want 1", sub, len(objs))
		}
		if err := createStrictly(ctx, objs[0]); err != nil {
			t.Errorf("KServe's %s is refused: %v", sub, err)
		}
	}

	// Samples KServe's own CRD refuses too (read from it, v0.20.0).
	upstreamMistakes := map[string]string{"torchserve-bloom-560m": `spec.nodeName, a field KServe's schema has under spec.predictor only`}
	var accepted, refused int
	for _, o := range isvcs("samples") {
		err := createStrictly(ctx, o)
		switch {
		case upstreamMistakes[o.GetName()] != "" && err != nil && strings.Contains(err.Error(), "nodeName"):
			t.Logf("KServe's sample %s is refused, as by KServe: %s", o.GetName(), upstreamMistakes[o.GetName()])
		case err == nil:
			accepted++
		case slices.ContainsFunc(kserveRefusals, func(r string) bool { return strings.Contains(err.Error(), r) }):
			refused++
		default:
			t.Errorf("KServe's sample InferenceService %s is refused, not for a part kiln does not serve: %v", o.GetName(), err)
		}
	}
	t.Logf("of KServe's v1beta1 sample InferenceServices, %d accepted, %d refused for a part kiln does not serve", accepted, refused)
	if accepted < 30 {
		t.Errorf("%d of KServe's samples accepted, want most of its 55", accepted)
	}
}

// TestKServeInferenceServicesOutOfBoundsAreRefusedNamingTheField: what would make objects the
// apiserver refuses, or that kiln does not serve, is refused at admission by the CRD's own rules.
func TestKServeInferenceServicesOutOfBoundsAreRefusedNamingTheField(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	isvc := func(name string, predictor map[string]any, more map[string]any) *unstructured.Unstructured {
		spec := map[string]any{"predictor": predictor}
		for k, v := range more {
			spec[k] = v
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec}}
	}
	sklearn := func() map[string]any {
		return map[string]any{"sklearn": map[string]any{"storageUri": "gs://kfserving-examples/models/sklearn/1.0/model"}}
	}
	with := func(p map[string]any, k string, v any) map[string]any { p[k] = v; return p }
	// The longest names: 48, and 47 with a predictor's.
	for _, fine := range []*unstructured.Unstructured{isvc(strings.Repeat("a", 48), sklearn(), nil), isvc(strings.Repeat("a", 40), with(sklearn(), "name", strings.Repeat("b", 7)), nil)} {
		if err := createStrictly(ctx, fine); err != nil {
			t.Fatalf("%s is refused: %v", fine.GetName(), err)
		}
	}
	for _, tc := range []struct {
		name string
		obj  *unstructured.Unstructured
		want string
	}{
		{"a name too long for its pods' label", isvc(strings.Repeat("a", 49), sklearn(), nil), "metadata.name must be a DNS-1035 label of at most 48 characters"},
		{"a predictor name too long for its pods' label", isvc(strings.Repeat("a", 40), with(sklearn(), "name", strings.Repeat("b", 8)), nil), "spec.predictor.name: the pods are labelled"},
		{"a canary name too long for its pods' label", isvc(strings.Repeat("a", 40), sklearn(), map[string]any{"canary": []any{map[string]any{"trafficPercent": int64(10), "predictor": with(sklearn(), "name", strings.Repeat("c", 8))}}}), "spec.canary[].predictor.name"},
		{"maxReplicas below minReplicas", isvc("scale", with(with(sklearn(), "minReplicas", int64(3)), "maxReplicas", int64(2)), nil), "spec.predictor.maxReplicas must be at least spec.predictor.minReplicas"},
		{"a transformer", isvc("tr", sklearn(), map[string]any{"transformer": map[string]any{"containers": []any{}}}), kserveRefusals[0]},
		{"an explainer", isvc("ex", sklearn(), map[string]any{"explainer": map[string]any{}}), kserveRefusals[1]},
		{"multi-node workers", isvc("mn", with(sklearn(), "workerSpec", map[string]any{"tensorParallelSize": int64(2)}), nil), kserveRefusals[2]},
		{"a canary above 100%", isvc("c", sklearn(), map[string]any{"canary": []any{map[string]any{"trafficPercent": int64(101), "predictor": map[string]any{"name": "v2"}}}}), "spec.canary[0].trafficPercent"},
		{"an unknown protocol", isvc("p", map[string]any{"sklearn": map[string]any{"protocolVersion": "v3"}}, nil), "spec.predictor.sklearn.protocolVersion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := createStrictly(ctx, tc.obj)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("create = %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
}

// pickFromKServesRuntimes: among KServe's own runtimes, kiln picks for each format what KServe's
// rules pick, and builds the pod with every template of the runtime filled.
func pickFromKServesRuntimes(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var csrs []kservev1alpha1.ClusterServingRuntime
	for _, o := range objs {
		var r kservev1alpha1.ClusterServingRuntime
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &r, true); err != nil {
			t.Fatalf("KServe's runtime %s does not decode into kiln's type: %v", o.GetName(), err)
		}
		csrs = append(csrs, r)
	}
	for _, tc := range []struct{ predictor, want string }{
		{`{"sklearn":{}}`, "kserve-sklearnserver"},
		{`{"xgboost":{}}`, "kserve-xgbserver"},
		{`{"lightgbm":{}}`, "kserve-lgbserver"},
		{`{"tensorflow":{}}`, "kserve-tensorflow-serving"},
		{`{"pytorch":{}}`, "kserve-torchserve"},
		{`{"onnx":{}}`, "kserve-tritonserver"},
		{`{"triton":{}}`, "kserve-tritonserver"},
		{`{"huggingface":{}}`, "kserve-huggingfaceserver"},
		{`{"model":{"modelFormat":{"name":"sklearn"},"protocolVersion":"v2"}}`, "kserve-mlserver"},
		{`{"model":{"modelFormat":{"name":"vLLM"}}}`, "kserve-vllmserver"},
		{`{"model":{"modelFormat":{"name":"onnx"},"protocolVersion":"v2"}}`, "kserve-tritonserver"},
	} {
		var p kservev1beta1.PredictorSpec
		if err := json.Unmarshal([]byte(tc.predictor), &p); err != nil {
			t.Fatal(err)
		}
		got, err := kserve.Pick(kserve.ModelOf(&p), nil, kserve.Clustered(csrs))
		if err != nil || got.Name != tc.want || !got.Cluster {
			t.Errorf("for predictor %s kiln picks %q, %v; KServe's rules pick ClusterServingRuntime %s", tc.predictor, got.Name, err, tc.want)
			continue
		}
		isvc := &kservev1beta1.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", Labels: map[string]string{"modelClass": "c"}}}
		built, err := kserve.Build(isvc, &p, nil, kserve.Clustered(csrs))
		if err != nil {
			t.Errorf("for predictor %s on %s: %v", tc.predictor, got.Name, err)
			continue
		}
		if pod, _ := json.Marshal(built.Pod); strings.Contains(string(pod), "{{") {
			t.Errorf("for predictor %s, %s's pod keeps a template: %s", tc.predictor, got.Name, pod)
		}
	}
}

// TestKilnsRuntimesAreKServesWithPinnedImages: the ClusterServingRuntimes kiln installs are
// KServe's default single-model runtimes, field for field but for their images, which are pinned;
// the apiserver takes them as written.
func TestKilnsRuntimesAreKServesWithPinnedImages(t *testing.T) {
	ctx := context.Background()
	decode := func(objs []*unstructured.Unstructured) map[string]kservev1alpha1.ClusterServingRuntime {
		out := map[string]kservev1alpha1.ClusterServingRuntime{}
		for _, o := range objs {
			var r kservev1alpha1.ClusterServingRuntime
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &r, true); err != nil {
				t.Fatalf("runtime %s: %v", o.GetName(), err)
			}
			out[r.Name] = r
		}
		return out
	}
	theirs := decode(testenv.KServeManifests(t, "runtimes"))
	objs, err := devcluster.ReadObjects(filepath.Join(testenv.RepoRoot(), "config", "kserve", "runtimes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ours := decode(objs)
	for _, o := range objs {
		if err := createStrictly(ctx, o); err != nil {
			t.Errorf("kiln's %s is refused: %v", o.GetName(), err)
		}
	}
	for name, their := range theirs {
		our, ok := ours[name]
		if their.Spec.WorkerSpec != nil {
			if ok {
				t.Errorf("kiln installs %s, a multi-node runtime, which it does not serve", name)
			}
			continue
		}
		if !ok {
			t.Errorf("kiln does not install KServe's runtime %s", name)
			continue
		}
		for i := range our.Spec.Containers {
			image := our.Spec.Containers[i].Image
			if tag := image[strings.LastIndex(image, ":")+1:]; strings.Contains(image, "latest") || strings.Contains(tag, "/") || !strings.Contains(image, ":") {
				t.Errorf("%s's image %s is not pinned to a release", name, image)
			}
			our.Spec.Containers[i].Image = their.Spec.Containers[i].Image
		}
		if d := cmp.Diff(their.Spec, our.Spec); d != "" || !maps.Equal(their.Annotations, our.Annotations) {
			t.Errorf("kiln's %s differs from KServe's but for its image (-KServe's +kiln's):\n%s%v %v", name, d, their.Annotations, our.Annotations)
		}
	}
	if len(ours) != len(theirs)-1 {
		t.Errorf("kiln installs %d runtimes, want KServe's %d but the multi-node one", len(ours), len(theirs))
	}
	pickFromKServesRuntimes(t, objs)
}

// installKilnRuntimes applies the ClusterServingRuntimes kiln ships (again is harmless).
func installKilnRuntimes(t *testing.T) {
	t.Helper()
	testenv.ApplyKServeRuntimes(t, env.Client)
}

// kserveSample is KServe's sample of sub (one InferenceService) in namespace ns.
func kserveSample(t *testing.T, sub, ns string) *unstructured.Unstructured {
	t.Helper()
	objs := testenv.KServeManifests(t, sub)
	if len(objs) != 1 {
		t.Fatalf("%s holds %d objects, want 1", sub, len(objs))
	}
	objs[0].SetNamespace(ns)
	return objs[0]
}

// KServe's sklearn sample, unchanged, runs on kiln's engine with KServe's objects and status: a
// Deployment and Service sklearn-iris-predictor on kiln's kserve-sklearnserver runtime, and, once
// its replica is ready, Ready with the address, the runtime and the model loaded.
func TestKServesSklearnSampleIsServed(t *testing.T) {
	installKilnRuntimes(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	sample := kserveSample(t, "samples/sklearn/v1/sklearn.yaml", ns)
	if err := env.Client.Create(ctx, sample); err != nil {
		t.Fatal(err)
	}
	d := deployment(t, ns, "sklearn-iris-predictor")
	if d.Spec.Selector.MatchLabels["app"] != "isvc.sklearn-iris-predictor" || d.Spec.Template.Spec.Containers[0].Image != "kserve/sklearnserver:v0.20.0" ||
		d.Spec.Template.Spec.InitContainers[0].Name != "storage-initializer" {
		t.Errorf("Deployment = selector %v, containers %+v", d.Spec.Selector.MatchLabels, d.Spec.Template.Spec.Containers)
	}
	svc := &corev1.Service{}
	env.Await(t, ns, "sklearn-iris-predictor", svc)
	if p := svc.Spec.Ports[0]; p.Port != 80 || p.TargetPort.IntValue() != 8080 {
		t.Errorf("Service ports = %+v, want 80 to 8080", svc.Spec.Ports)
	}
	makeReady(t, d)
	isvc := condition(t, client.ObjectKeyFromObject(sample), "Ready", metav1.ConditionTrue, "Ready")
	address := "http://sklearn-iris-predictor." + ns + ".svc.cluster.local"
	if isvc.Status.URL != address || isvc.Status.Address == nil || isvc.Status.Address.URL != address || isvc.Status.ClusterServingRuntimeName != "kserve-sklearnserver" ||
		isvc.Status.ModelStatus.TransitionStatus != kservev1beta1.UpToDate || isvc.Status.DeploymentMode != "Standard" {
		t.Errorf("status = %+v", isvc.Status)
	}
	for _, ct := range []string{"PredictorReady", "IngressReady"} {
		if !meta.IsStatusConditionTrue(isvc.Status.Conditions, ct) {
			t.Errorf("%s is not True: %+v", ct, isvc.Status.Conditions)
		}
	}
}

// A model no runtime serves makes nothing and says which format; autoscalerClass none makes no HPA.
func TestKServeSaysWhatItCannotServe(t *testing.T) {
	installKilnRuntimes(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	isvc := &kservev1beta1.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: "odd", Namespace: ns}, Spec: kservev1beta1.InferenceServiceSpec{
		Predictor: kservev1beta1.PredictorSpec{Model: &kservev1beta1.ModelSpec{ModelFormat: kservev1beta1.ModelFormat{Name: "caffe"}}}}}
	if err := env.Client.Create(ctx, isvc); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(isvc), isvc); err != nil {
			return err
		}
		c := meta.FindStatusCondition(isvc.Status.Conditions, "Ready")
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "NoSupportingRuntime" || !strings.Contains(c.Message, "model format caffe") {
			return fmt.Errorf("Ready = %+v, want False, NoSupportingRuntime, naming caffe", c)
		}
		return nil
	})
	if isvc.Status.ModelStatus.LastFailureInfo == nil || isvc.Status.ModelStatus.LastFailureInfo.Reason != kservev1beta1.NoSupportingRuntime {
		t.Errorf("modelStatus = %+v", isvc.Status.ModelStatus)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "odd-predictor"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Deployment for a model no runtime serves: %v", err)
	}
	// A runtime of the namespace that serves the format: the service starts.
	caffe := &kservev1alpha1.ServingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "caffe", Namespace: ns}, Spec: kservev1alpha1.ServingRuntimeSpec{
		SupportedModelFormats: []kservev1alpha1.SupportedModelFormat{{Name: "caffe", AutoSelect: ptr.To(true)}},
		ServingRuntimePodSpec: kservev1alpha1.ServingRuntimePodSpec{Containers: []corev1.Container{{Name: "kserve-container", Image: "example/caffe:1"}}}}}
	if err := env.Client.Create(ctx, caffe); err != nil {
		t.Fatal(err)
	}
	if d := deployment(t, ns, "odd-predictor"); d.Spec.Template.Spec.Containers[0].Image != "example/caffe:1" {
		t.Errorf("image %s, want the new runtime's", d.Spec.Template.Spec.Containers[0].Image)
	}
	condition(t, client.ObjectKeyFromObject(isvc), "PredictorReady", metav1.ConditionFalse, "ReplicasNotReady")

	fixed := &kservev1beta1.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: "fixed", Namespace: ns, Annotations: map[string]string{"serving.kserve.io/autoscalerClass": "none"}},
		Spec: kservev1beta1.InferenceServiceSpec{Predictor: kservev1beta1.PredictorSpec{SKLearn: &kservev1beta1.PredictorExtensionSpec{StorageURI: ptr.To("gs://m/iris")},
			ComponentExtensionSpec: kservev1beta1.ComponentExtensionSpec{MinReplicas: ptr.To[int32](2), MaxReplicas: 5}}}}
	if err := env.Client.Create(ctx, fixed); err != nil {
		t.Fatal(err)
	}
	withHPA := &kservev1beta1.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: "scaled", Namespace: ns},
		Spec: kservev1beta1.InferenceServiceSpec{Predictor: kservev1beta1.PredictorSpec{SKLearn: &kservev1beta1.PredictorExtensionSpec{StorageURI: ptr.To("gs://m/iris")},
			ComponentExtensionSpec: kservev1beta1.ComponentExtensionSpec{MinReplicas: ptr.To[int32](2), MaxReplicas: 5}}}}
	if err := env.Client.Create(ctx, withHPA); err != nil {
		t.Fatal(err)
	}
	env.Await(t, ns, "scaled-predictor", &autoscalingv2.HorizontalPodAutoscaler{})
	d := deployment(t, ns, "fixed-predictor")
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("autoscalerClass none: replicas %v, want minReplicas 2", d.Spec.Replicas)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fixed-predictor"}, &autoscalingv2.HorizontalPodAutoscaler{}); !apierrors.IsNotFound(err) {
		t.Errorf("autoscalerClass none made an HPA: %v", err)
	}
}

// condition waits until KServe's InferenceService key has condition ct of status and reason.
func condition(t *testing.T, key client.ObjectKey, ct string, status metav1.ConditionStatus, reason string) *kservev1beta1.InferenceService {
	t.Helper()
	return awaitKServe(t, key, func(isvc *kservev1beta1.InferenceService) error {
		if c := meta.FindStatusCondition(isvc.Status.Conditions, ct); c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("%s = %+v, want %s %s", ct, c, status, reason)
		}
		return nil
	})
}

// awaitKServe waits until KServe's InferenceService key passes check, and returns it.
func awaitKServe(t *testing.T, key client.ObjectKey, check func(*kservev1beta1.InferenceService) error) *kservev1beta1.InferenceService {
	t.Helper()
	isvc := &kservev1beta1.InferenceService{}
	testenv.Eventually(t, func() error {
		if err := env.Client.Get(context.Background(), key, isvc); err != nil {
			return err
		}
		return check(isvc)
	})
	return isvc
}

// The stop annotation deletes what the service made and says Stopped; removing it serves again.
// What kiln does not run is said, not done otherwise: an autoscaler class it does not serve
// makes nothing, as do two canaries (kiln runs one), and on a service that runs it changes
// nothing.
func TestKServeStopsAndSaysWhatItDoesNotRun(t *testing.T) {
	installKilnRuntimes(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	sklearn := func(name string, annotations map[string]string) *kservev1beta1.InferenceService {
		return &kservev1beta1.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations},
			Spec: kservev1beta1.InferenceServiceSpec{Predictor: kservev1beta1.PredictorSpec{SKLearn: &kservev1beta1.PredictorExtensionSpec{StorageURI: ptr.To("gs://m/iris")}}}}
	}
	iris := sklearn("iris", nil)
	if err := env.Client.Create(ctx, iris); err != nil {
		t.Fatal(err)
	}
	deployment(t, ns, "iris-predictor")
	testenv.Eventually(t, func() error {
		fresh := &kservev1beta1.InferenceService{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(iris), fresh); err != nil {
			return err
		}
		fresh.Annotations = map[string]string{"serving.kserve.io/stop": "true"}
		return env.Client.Update(ctx, fresh)
	})
	condition(t, client.ObjectKeyFromObject(iris), "Stopped", metav1.ConditionTrue, "Stopped")

	annotate := func(o client.Object, annotations map[string]string) {
		testenv.Eventually(t, func() error {
			fresh := &kservev1beta1.InferenceService{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), fresh); err != nil {
				return err
			}
			fresh.Annotations = annotations
			return env.Client.Update(ctx, fresh)
		})
	}
	gone := func(name string) {
		t.Helper()
		testenv.Eventually(t, func() error {
			for _, o := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}} {
				if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o); !apierrors.IsNotFound(err) {
					return fmt.Errorf("%T %s still there: %v", o, name, err)
				}
			}
			return nil
		})
	}
	gone("iris-predictor")
	annotate(iris, nil)
	deployment(t, ns, "iris-predictor") // serves again

	// A class kiln does not serve, at once or later, makes nothing and says so.
	external := sklearn("ext", map[string]string{"serving.kserve.io/autoscalerClass": "external"})
	if err := env.Client.Create(ctx, external); err != nil {
		t.Fatal(err)
	}
	condition(t, client.ObjectKeyFromObject(external), "Ready", metav1.ConditionFalse, "AutoscalerClassNotServed")
	gone("ext-predictor")
	// Two frameworks: KServe's webhook refuses it; kiln makes nothing and names both.
	two := sklearn("two", nil)
	two.Spec.Predictor.XGBoost = &kservev1beta1.PredictorExtensionSpec{StorageURI: ptr.To("gs://m/x")}
	if err := env.Client.Create(ctx, two); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(condition(t, client.ObjectKeyFromObject(two), "Ready", metav1.ConditionFalse, "InvalidPredictorSpec").Status.Conditions, "Ready"); !strings.Contains(c.Message, "not xgboost and sklearn") {
		t.Errorf("Ready message %q, want both frameworks named", c.Message)
	}
	gone("two-predictor")
	// A framework field beside model: KServe's defaulting webhook writes the framework field's
	// model over the one given, and serves it; so does kiln.
	both := sklearn("both", nil)
	both.Spec.Predictor.Model = &kservev1beta1.ModelSpec{ModelFormat: kservev1beta1.ModelFormat{Name: "xgboost"}, PredictorExtensionSpec: kservev1beta1.PredictorExtensionSpec{StorageURI: ptr.To("gs://m/x")}}
	if err := env.Client.Create(ctx, both); err != nil {
		t.Fatal(err)
	}
	deployment(t, ns, "both-predictor")
	awaitKServe(t, client.ObjectKeyFromObject(both), func(isvc *kservev1beta1.InferenceService) error {
		if isvc.Status.ClusterServingRuntimeName != "kserve-sklearnserver" {
			return fmt.Errorf("clusterServingRuntimeName %q, want kserve-sklearnserver (the sklearn field's)", isvc.Status.ClusterServingRuntimeName)
		}
		return nil
	})
	// A change kiln cannot serve on a service that runs changes nothing (as KServe leaves it): the
	// model serves on, and the status says why the change is not served.
	makeReady(t, deployment(t, ns, "iris-predictor"))
	served := condition(t, client.ObjectKeyFromObject(iris), "Ready", metav1.ConditionTrue, "Ready").Status
	annotate(iris, map[string]string{"serving.kserve.io/autoscalerClass": "external"})
	held := condition(t, client.ObjectKeyFromObject(iris), "Ready", metav1.ConditionFalse, "AutoscalerClassNotServed")
	if st := held.Status; st.URL != served.URL || st.Address == nil || !meta.IsStatusConditionTrue(st.Conditions, "PredictorReady") ||
		!strings.Contains(meta.FindStatusCondition(st.Conditions, "Ready").Message, "Deployment iris-predictor, which it made before, serves on") ||
		st.ModelStatus.TransitionStatus != kservev1beta1.InvalidSpec || st.ModelStatus.ModelRevisionStates.ActiveModelState != kservev1beta1.Loaded {
		t.Errorf("a held service: url %q (was %q), address %v, conditions %+v, model %+v; want them kept, the model Loaded and the spec InvalidSpec", st.URL, served.URL, st.Address, st.Conditions, st.ModelStatus)
	}
	deployment(t, ns, "iris-predictor")
	annotate(iris, nil)
	condition(t, client.ObjectKeyFromObject(iris), "Ready", metav1.ConditionTrue, "Ready")

	// Two canaries: kiln runs one; it makes nothing and says so.
	two = sklearn("twocanaries", nil)
	for _, name := range []string{"a", "b"} {
		two.Spec.Canary = append(two.Spec.Canary, kservev1beta1.CanarySpec{TrafficPercent: 10, Predictor: kservev1beta1.CanaryPredictor{Name: name}})
	}
	if err := env.Client.Create(ctx, two); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(condition(t, client.ObjectKeyFromObject(two), "Ready", metav1.ConditionFalse, "InvalidPredictorSpec").Status.Conditions, "Ready"); !strings.Contains(c.Message, "spec.canary has 2 canaries") {
		t.Errorf("Ready message %q, want the canaries counted", c.Message)
	}
	// A canary's field a predictor does not have: the open schema keeps it, kiln names it.
	typo := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
		"metadata": map[string]any{"name": "typo", "namespace": ns},
		"spec": map[string]any{"predictor": map[string]any{"sklearn": map[string]any{"storageUri": "gs://m/iris"}},
			"canary": []any{map[string]any{"trafficPercent": int64(10), "predictor": map[string]any{"name": "v2", "sklearn": map[string]any{"storageUrl": "gs://m/v2"}}}}}}}
	if err := env.Client.Create(ctx, typo); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(condition(t, client.ObjectKeyFromObject(typo), "Ready", metav1.ConditionFalse, "InvalidPredictorSpec").Status.Conditions, "Ready"); !strings.Contains(c.Message, `spec.canary[0].predictor: unknown field "storageUrl"`) {
		t.Errorf("Ready message %q, want the unknown field named", c.Message)
	}
}

// setSpec replaces the spec of KServe's InferenceService key with sample's (as kubectl apply of
// the next sample does).
func setSpec(t *testing.T, key client.ObjectKey, sample *unstructured.Unstructured) {
	t.Helper()
	spec, _, _ := unstructured.NestedMap(sample.Object, "spec")
	testenv.Eventually(t, func() error {
		fresh := &unstructured.Unstructured{}
		fresh.SetGroupVersionKind(kservev1beta1.GroupVersion.WithKind("InferenceService"))
		if err := env.Client.Get(context.Background(), key, fresh); err != nil {
			return err
		}
		fresh.Object["spec"] = spec
		return env.Client.Update(context.Background(), fresh)
	})
}

// awaitTraffic waits until the predictor's traffic in the status is want, as "tag:percent" (tag ""
// for the latest revision alone).
func awaitTraffic(t *testing.T, key client.ObjectKey, want string) *kservev1beta1.InferenceService {
	t.Helper()
	return awaitKServe(t, key, func(isvc *kservev1beta1.InferenceService) error {
		var got []string
		for _, tt := range isvc.Status.Components["predictor"].Traffic {
			got = append(got, fmt.Sprintf("%s:%d", tt.Tag, ptr.Deref(tt.Percent, -1)))
		}
		if g := strings.Join(got, ","); g != want {
			return fmt.Errorf("traffic %s, want %s", g, want)
		}
		return nil
	})
}

// KServe's rollout samples, unchanged, in order. default.yaml serves flowers. canary.yaml (10%)
// keeps the flowers pods, the revision rolled out, and runs flowers-2 beside them as the latest:
// without a mesh the Service splits requests by ready replicas, and the status says 50%, not 10%.
// pinned.yaml (0%) sends every request to flowers while flowers-2 keeps running. promotion.yaml
// rolls flowers-2 out, and the canary goes.
func TestKServesRolloutSamplesSplitAndPromote(t *testing.T) {
	installKilnRuntimes(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	sample := kserveSample(t, "samples/rollout/default.yaml", ns)
	if err := env.Client.Create(ctx, sample); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(sample)
	flowers, flowers2 := "gs://kfserving-examples/models/tensorflow/flowers", "gs://kfserving-examples/models/tensorflow/flowers-2"
	rollOut(t, ns, "my-model-predictor", flowers)
	first := condition(t, key, "Ready", metav1.ConditionTrue, "Ready").Status.Components["predictor"]
	if first.LatestRolledoutRevision == "" || first.LatestReadyRevision != first.LatestRolledoutRevision {
		t.Errorf("predictor status %+v, want the ready revision rolled out", first)
	}
	awaitTraffic(t, key, ":100")

	setSpec(t, key, kserveSample(t, "samples/rollout/canary.yaml", ns))
	rollOut(t, ns, "my-model-predictor-canary", flowers2)
	if got := deployment(t, ns, "my-model-predictor").Spec.Template.Annotations["serving.kiln.dev/model-uri"]; got != flowers {
		t.Errorf("the rolled-out predictor serves %s, want flowers kept beside the canary", got)
	}
	canaryDep := deployment(t, ns, "my-model-predictor-canary")
	if canaryDep.Spec.Selector.MatchLabels["app"] != "isvc.my-model-predictor-canary" {
		t.Errorf("canary selector %v", canaryDep.Spec.Selector.MatchLabels)
	}
	isvc := awaitTraffic(t, key, "prev:50,latest:50")
	c := isvc.Status.Components["predictor"]
	if c.LatestCreatedRevision == first.LatestRolledoutRevision || c.LatestReadyRevision != c.LatestCreatedRevision || c.Traffic[0].RevisionName != first.LatestRolledoutRevision {
		t.Errorf("predictor status %+v, want the latest revision ready beside the one rolled out (%s)", c, first.LatestRolledoutRevision)
	}
	ready := condition(t, key, "CanaryPredictorReady", metav1.ConditionTrue, "AllCanariesReady")
	if m := meta.FindStatusCondition(ready.Status.Conditions, "CanaryPredictorReady").Message; !strings.Contains(m, "split by ready replicas, 50% to 50%") || !strings.Contains(m, "90% to 10% exactly") {
		t.Errorf("CanaryPredictorReady says %q, want the split in force and how to make it exact", m)
	}

	setSpec(t, key, kserveSample(t, "samples/rollout/pinned.yaml", ns))
	awaitTraffic(t, key, "prev:100,latest:0")
	svc := &corev1.Service{}
	env.Await(t, ns, "my-model-predictor", svc)
	if svc.Spec.Selector["serving.kiln.dev/version"] != "stable" {
		t.Errorf("pinned: the Service selects %v, want the rolled-out pods alone", svc.Spec.Selector)
	}

	setSpec(t, key, kserveSample(t, "samples/rollout/promotion.yaml", ns))
	rollOut(t, ns, "my-model-predictor", flowers2)
	testenv.Eventually(t, func() error {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "my-model-predictor-canary"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the canary's Deployment is still there after the promotion: %v", err)
		}
		return nil
	})
	awaitTraffic(t, key, ":100")
	isvc = awaitKServe(t, key, func(isvc *kservev1beta1.InferenceService) error {
		if c := isvc.Status.Components["predictor"]; c.PreviousRolledoutRevision != first.LatestRolledoutRevision || c.LatestRolledoutRevision == first.LatestRolledoutRevision {
			return fmt.Errorf("predictor status %+v, want flowers-2 rolled out after %s", c, first.LatestRolledoutRevision)
		}
		return nil
	})
	if meta.FindStatusCondition(isvc.Status.Conditions, "CanaryPredictorReady") != nil {
		t.Errorf("CanaryPredictorReady kept without a canary: %+v", isvc.Status.Conditions)
	}
}

// spec.canary's one canary, named v2, runs beside the predictor as its own Deployment and Service
// iris-v2-predictor with the canary's model and the predictor's other fields; the status lists it
// with its share; dropping it from the spec deletes what it made.
func TestKServesNamedCanaryRunsBesideThePredictor(t *testing.T) {
	installKilnRuntimes(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	isvc := &kservev1beta1.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: "iris", Namespace: ns}, Spec: kservev1beta1.InferenceServiceSpec{
		Predictor: kservev1beta1.PredictorSpec{SKLearn: &kservev1beta1.PredictorExtensionSpec{StorageURI: ptr.To("gs://m/iris-1"),
			Container: corev1.Container{Env: []corev1.EnvVar{{Name: "TEAM", Value: "a"}}}}},
		Canary: []kservev1beta1.CanarySpec{{TrafficPercent: 20, Predictor: kservev1beta1.CanaryPredictor{Name: "v2",
			Spec: kservev1beta1.PredictorSpec{SKLearn: &kservev1beta1.PredictorExtensionSpec{StorageURI: ptr.To("gs://m/iris-2")}}}}}}}
	if err := env.Client.Create(ctx, isvc); err != nil {
		t.Fatal(err)
	}
	rollOut(t, ns, "iris-predictor", "gs://m/iris-1")
	rollOut(t, ns, "iris-v2-predictor", "gs://m/iris-2")
	c := deployment(t, ns, "iris-v2-predictor")
	if server := c.Spec.Template.Spec.Containers[0]; c.Spec.Selector.MatchLabels["app"] != "isvc.iris-v2-predictor" ||
		!slices.ContainsFunc(server.Env, func(e corev1.EnvVar) bool { return e.Name == "TEAM" && e.Value == "a" }) {
		t.Errorf("canary Deployment: selector %v, server env %v; want app=isvc.iris-v2-predictor and the predictor's TEAM", c.Spec.Selector.MatchLabels, server.Env)
	}
	env.Await(t, ns, "iris-v2-predictor", &corev1.Service{})
	key := client.ObjectKeyFromObject(isvc)
	condition(t, key, "CanaryPredictorReady", metav1.ConditionTrue, "AllCanariesReady")
	// A status written while the reconcile saw the canary ready but not yet the predictor says
	// 100%: the next one says 50%.
	awaitKServe(t, key, func(isvc *kservev1beta1.InferenceService) error {
		if cs := isvc.Status.CanaryStatuses; len(cs) != 1 || cs[0].Name != "v2" || !cs[0].Ready || cs[0].TrafficPercent != 50 {
			return fmt.Errorf("canaryStatuses %+v, want v2 ready with its share in force (50%%: one ready replica each)", cs)
		}
		return nil
	})
	testenv.Eventually(t, func() error {
		fresh := &kservev1beta1.InferenceService{}
		if err := env.Client.Get(ctx, key, fresh); err != nil {
			return err
		}
		fresh.Spec.Canary = nil
		return env.Client.Update(ctx, fresh)
	})
	testenv.Eventually(t, func() error {
		for _, o := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}} {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "iris-v2-predictor"}, o); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T iris-v2-predictor still there: %v", o, err)
			}
		}
		return nil
	})
	awaitKServe(t, key, func(isvc *kservev1beta1.InferenceService) error {
		if cs := isvc.Status.CanaryStatuses; len(cs) != 0 || meta.FindStatusCondition(isvc.Status.Conditions, "CanaryPredictorReady") != nil {
			return fmt.Errorf("canaryStatuses %+v, conditions %+v after the canary went", cs, isvc.Status.Conditions)
		}
		return nil
	})
	condition(t, key, "Ready", metav1.ConditionTrue, "Ready")

	// A new predictor.name (with a new model, as KServe asks) runs as iris-main-predictor; the
	// predictor it named before goes, as KServe deletes it.
	testenv.Eventually(t, func() error {
		fresh := &kservev1beta1.InferenceService{}
		if err := env.Client.Get(ctx, key, fresh); err != nil {
			return err
		}
		fresh.Spec.Predictor.Name, fresh.Spec.Predictor.SKLearn.StorageURI = "main", ptr.To("gs://m/iris-3")
		return env.Client.Update(ctx, fresh)
	})
	rollOut(t, ns, "iris-main-predictor", "gs://m/iris-3")
	testenv.Eventually(t, func() error {
		for _, o := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &autoscalingv2.HorizontalPodAutoscaler{}} {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "iris-predictor"}, o); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T iris-predictor still there after predictor.name changed: %v", o, err)
			}
		}
		return nil
	})
	awaitKServe(t, key, func(isvc *kservev1beta1.InferenceService) error {
		if a := isvc.Status.Address; a == nil || a.URL != "http://iris-main-predictor."+ns+".svc.cluster.local" {
			return fmt.Errorf("address %+v, want iris-main-predictor's", a)
		}
		return nil
	})
	condition(t, key, "Ready", metav1.ConditionTrue, "Ready")
}

// The runtime a running service names goes (deleted during an upgrade, say): the service serves
// on as it was, as KServe leaves it, and says why its spec is not served; the runtime back, it is
// served again.
func TestARunningServiceOutlivesItsRuntime(t *testing.T) {
	installKilnRuntimes(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	csr := &kservev1alpha1.ClusterServingRuntime{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "kserve-sklearnserver"}, csr); err != nil {
		t.Fatal(err)
	}
	own := &kservev1alpha1.ServingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "team-sklearn", Namespace: ns}, Spec: *csr.Spec.DeepCopy()}
	if err := env.Client.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	isvc := &kservev1beta1.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: "iris", Namespace: ns}, Spec: kservev1beta1.InferenceServiceSpec{
		Predictor: kservev1beta1.PredictorSpec{Model: &kservev1beta1.ModelSpec{ModelFormat: kservev1beta1.ModelFormat{Name: "sklearn"}, Runtime: ptr.To("team-sklearn"),
			PredictorExtensionSpec: kservev1beta1.PredictorExtensionSpec{StorageURI: ptr.To("gs://m/iris")}}}}}
	if err := env.Client.Create(ctx, isvc); err != nil {
		t.Fatal(err)
	}
	makeReady(t, deployment(t, ns, "iris-predictor"))
	served := condition(t, client.ObjectKeyFromObject(isvc), "Ready", metav1.ConditionTrue, "Ready").Status
	if err := env.Client.Delete(ctx, own); err != nil {
		t.Fatal(err)
	}
	held := awaitKServe(t, client.ObjectKeyFromObject(isvc), func(i *kservev1beta1.InferenceService) error {
		if c := meta.FindStatusCondition(i.Status.Conditions, "Ready"); c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "team-sklearn") ||
			!strings.Contains(c.Message, "serves on") {
			return fmt.Errorf("Ready %+v, want False naming the missing runtime and the Deployment serving on", c)
		}
		return nil
	}).Status
	if held.URL != served.URL || held.ServingRuntimeName != "team-sklearn" || !meta.IsStatusConditionTrue(held.Conditions, "PredictorReady") {
		t.Errorf("held: url %q (was %q), runtime %q, conditions %+v; want them as they were", held.URL, served.URL, held.ServingRuntimeName, held.Conditions)
	}
	testenv.Consistently(t, func() error {
		for _, o := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}} {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "iris-predictor"}, o); err != nil {
				return fmt.Errorf("%T iris-predictor of a running service whose runtime went: %v", o, err)
			}
		}
		return nil
	})
	own = &kservev1alpha1.ServingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "team-sklearn", Namespace: ns}, Spec: *csr.Spec.DeepCopy()}
	if err := env.Client.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	condition(t, client.ObjectKeyFromObject(isvc), "Ready", metav1.ConditionTrue, "Ready")
}

// An InferenceService KServe served before kiln carries KServe's finalizer: deleting it takes
// that finalizer off, as KServe's controller would, and leaves any other to its own controller.
func TestKServesFinalizerGoesWithTheService(t *testing.T) {
	installKilnRuntimes(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	isvc := &kservev1beta1.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: "iris", Namespace: ns, Finalizers: []string{"example.com/keep", "inferenceservice.finalizers"}},
		Spec: kservev1beta1.InferenceServiceSpec{Predictor: kservev1beta1.PredictorSpec{SKLearn: &kservev1beta1.PredictorExtensionSpec{StorageURI: ptr.To("gs://m/iris")}}}}
	if err := env.Client.Create(ctx, isvc); err != nil {
		t.Fatal(err)
	}
	deployment(t, ns, "iris-predictor")
	if err := env.Client.Delete(ctx, isvc); err != nil {
		t.Fatal(err)
	}
	awaitKServe(t, client.ObjectKeyFromObject(isvc), func(i *kservev1beta1.InferenceService) error {
		if !slices.Equal(i.Finalizers, []string{"example.com/keep"}) {
			return fmt.Errorf("finalizers %v, want KServe's gone and example.com/keep kept", i.Finalizers)
		}
		return nil
	})
	testenv.Eventually(t, func() error {
		fresh := &kservev1beta1.InferenceService{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(isvc), fresh); err != nil {
			return client.IgnoreNotFound(err)
		}
		fresh.Finalizers = nil
		return env.Client.Update(ctx, fresh)
	})
}
