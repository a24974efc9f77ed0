package kserve

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	kservev1beta1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1beta1"
)

// runtimeYAML is a ClusterServingRuntime written as KServe's config/runtimes writes them.
func runtimeYAML(t *testing.T, name, serverType, spec string) Runtime {
	t.Helper()
	r := rt(name, "").cluster()
	if err := yaml.Unmarshal([]byte(spec), &r.Spec); err != nil {
		t.Fatal(err)
	}
	if serverType != "" {
		r.Annotations = map[string]string{AnnotationServerType: serverType}
	}
	return r.Runtime
}

func sklearnServer(t *testing.T) Runtime {
	return runtimeYAML(t, "kserve-sklearnserver", "sklearnserver", `
annotations: {prometheus.kserve.io/port: "8080"}
labels: {team: runtimes}
supportedModelFormats: [{name: sklearn, version: "1", autoSelect: true, priority: 1}]
protocolVersions: [v1, v2]
nodeSelector: {pool: cpu}
tolerations: [{key: dedicated, operator: Exists}]
containers:
- name: kserve-container
  image: kserve/sklearnserver:v0.20.0
  args: ["--model_name={{.Name}}", --model_dir=/mnt/models, --http_port=8080]
  env: [{name: FROM_RUNTIME, value: "1"}, {name: LEVEL, value: info}]
  securityContext: {runAsNonRoot: true}
  resources: {requests: {cpu: "1", memory: 2Gi}, limits: {cpu: "1", memory: 2Gi}}
- name: sidecar
  image: example/sidecar:1
`)
}

func isvcOf(t *testing.T, doc string) *kservev1beta1.InferenceService {
	t.Helper()
	var i kservev1beta1.InferenceService
	if err := yaml.UnmarshalStrict([]byte(doc), &i); err != nil {
		t.Fatal(err)
	}
	return &i
}

func container(t *testing.T, p Predictor, name string) corev1.Container {
	t.Helper()
	i := slices.IndexFunc(p.Pod.Containers, func(c corev1.Container) bool { return c.Name == name })
	if i < 0 {
		t.Fatalf("no container %s in %+v", name, p.Pod.Containers)
	}
	return p.Pod.Containers[i]
}

func env(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return "<unset>"
}

func TestBuildRunsTheModelOnItsRuntimeAsKServeDoes(t *testing.T) {
	isvc := isvcOf(t, `
metadata: {name: sklearn-iris, namespace: ns, labels: {owner: ana}, annotations: {note: kept, kubectl.kubernetes.io/last-applied-configuration: "{}"}}
spec:
  predictor:
    labels: {tier: gold}
    nodeSelector: {pool: fast}
    sklearn:
      storageUri: gs://kfserving-examples/models/sklearn/1.0/model
      args: [--workers=2]
      env: [{name: LEVEL, value: debug}]
      resources: {limits: {cpu: "2"}}
`)
	p, err := Build(isvc, &isvc.Spec.Predictor, nil, []Runtime{sklearnServer(t)})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "sklearn-iris-predictor" || p.Runtime == nil || p.Runtime.Name != "kserve-sklearnserver" || p.Protocol != "v1" {
		t.Errorf("Build = name %s, runtime %v, protocol %s; want sklearn-iris-predictor on kserve-sklearnserver, v1", p.Name, p.Runtime, p.Protocol)
	}
	if p.StorageURI != "gs://kfserving-examples/models/sklearn/1.0/model" {
		t.Errorf("StorageURI = %q", p.StorageURI)
	}
	c := container(t, p, ContainerName)
	if c.Image != "kserve/sklearnserver:v0.20.0" || c.SecurityContext == nil || !*c.SecurityContext.RunAsNonRoot {
		t.Errorf("serving container = %+v, want the runtime's image and security context", c)
	}
	if want := []string{"--model_name=sklearn-iris", "--model_dir=/mnt/models", "--http_port=8080", "--workers=2"}; !slices.Equal(c.Args, want) {
		t.Errorf("args = %q, want the runtime's, filled, then the model's: %q", c.Args, want)
	}
	if env(c, "LEVEL") != "debug" || env(c, "FROM_RUNTIME") != "1" || env(c, "INFERENCE_SERVICE_NAME") != "sklearn-iris" {
		t.Errorf("env = %+v, want the model's over the runtime's and INFERENCE_SERVICE_NAME", c.Env)
	}
	if cpu, mem := c.Resources.Limits[corev1.ResourceCPU], c.Resources.Limits[corev1.ResourceMemory]; cpu.String() != "2" || mem.String() != "2Gi" {
		t.Errorf("limits = %v, want the model's cpu over the runtime's memory", c.Resources.Limits)
	}
	if names := []string{p.Pod.Containers[0].Name, p.Pod.Containers[1].Name}; !slices.Equal(names, []string{ContainerName, "sidecar"}) {
		t.Errorf("containers = %v, want kserve-container then the runtime's others", names)
	}
	if p.Pod.NodeSelector["pool"] != "fast" || len(p.Pod.Tolerations) != 1 {
		t.Errorf("pod = %+v, want the predictor's node selector over the runtime's, and its tolerations", p.Pod)
	}
	wantLabels := map[string]string{"team": "runtimes", "owner": "ana", "tier": "gold", LabelInferenceService: "sklearn-iris", LabelComponent: "predictor"}
	if d := cmp.Diff(wantLabels, p.Labels); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	if p.Annotations["note"] != "kept" || p.Annotations["prometheus.kserve.io/port"] != "8080" || p.Annotations["kubectl.kubernetes.io/last-applied-configuration"] != "" || p.Annotations[AnnotationModelFormat] != "" {
		t.Errorf("annotations = %v, want the runtime's and the InferenceService's but the disallowed", p.Annotations)
	}
	if isvc.Spec.Predictor.SKLearn.Args[0] != "--workers=2" || len(isvc.Spec.Predictor.SKLearn.Env) != 1 || isvc.Labels["modelClass"] != "" {
		t.Errorf("Build changed the InferenceService: %+v", isvc)
	}
}

func TestBuildAddsWhatEachServerNeeds(t *testing.T) {
	mlserver := runtimeYAML(t, "kserve-mlserver", "mlserver", `
supportedModelFormats: [{name: xgboost, version: "2", autoSelect: true, priority: 2}]
protocolVersions: [v2]
containers: [{name: kserve-container, image: "docker.io/seldonio/mlserver:1.7.1", env: [{name: MLSERVER_MODEL_IMPLEMENTATION, value: "{{.Labels.modelClass}}"}]}]
`)
	isvc := isvcOf(t, `
metadata: {name: xgb, namespace: ns}
spec: {predictor: {model: {modelFormat: {name: xgboost}, protocolVersion: v2, storageUri: "gs://m/x"}}}
`)
	p, err := Build(isvc, &isvc.Spec.Predictor, nil, []Runtime{mlserver})
	if err != nil {
		t.Fatal(err)
	}
	c := container(t, p, ContainerName)
	if env(c, "MLSERVER_MODEL_IMPLEMENTATION") != "mlserver_xgboost.XGBoostModel" || env(c, "MLSERVER_MODEL_NAME") != "xgb" || env(c, "MLSERVER_MODEL_URI") != ModelDir {
		t.Errorf("MLServer env = %+v", c.Env)
	}
	if p.Labels["modelClass"] != "mlserver_xgboost.XGBoostModel" {
		t.Errorf("labels = %v, want modelClass, as KServe labels it", p.Labels)
	}

	torch := runtimeYAML(t, "kserve-torchserve", "torchserve", `
supportedModelFormats: [{name: pytorch, version: "1", autoSelect: true, priority: 2}]
protocolVersions: [v1, v2, grpc-v2]
containers: [{name: kserve-container, image: "pytorch/torchserve-kfs:0.9.0", env: [{name: TS_SERVICE_ENVELOPE, value: "{{.Labels.serviceEnvelope}}"}]}]
`)
	isvc = isvcOf(t, `
metadata: {name: torch, namespace: ns}
spec: {predictor: {pytorch: {storageUri: "gs://m/t", protocolVersion: v2, resources: {limits: {nvidia.com/gpu: "1"}}}}}
`)
	if p, err = Build(isvc, &isvc.Spec.Predictor, nil, []Runtime{torch}); err != nil {
		t.Fatal(err)
	}
	c = container(t, p, ContainerName)
	if env(c, "TS_SERVICE_ENVELOPE") != "kservev2" || env(c, "PROTOCOL_VERSION") != "v2" || c.Image != "pytorch/torchserve-kfs:0.9.0-gpu" {
		t.Errorf("TorchServe container = image %s, env %+v; want the v2 envelope and the GPU image", c.Image, c.Env)
	}

	triton := runtimeYAML(t, "kserve-tritonserver", "", `
supportedModelFormats: [{name: triton, version: "2", autoSelect: true, priority: 1}]
protocolVersions: [v2, grpc-v2]
containers: [{name: kserve-container, image: "nvcr.io/nvidia/tritonserver:23.05-py3", args: [tritonserver]}]
`)
	isvc = isvcOf(t, `
metadata: {name: tr, namespace: ns}
spec: {predictor: {triton: {runtimeVersion: 24.01-py3}}}
`)
	if p, err = Build(isvc, &isvc.Spec.Predictor, nil, []Runtime{triton}); err != nil {
		t.Fatal(err)
	}
	c = container(t, p, ContainerName)
	if !slices.Equal(c.Args, []string{"tritonserver", "--model-control-mode=explicit"}) || c.Image != "nvcr.io/nvidia/tritonserver:24.01-py3" || p.StorageURI != "" {
		t.Errorf("Triton without a model = image %s, args %q; want runtimeVersion's tag and explicit model control", c.Image, c.Args)
	}
}

// The controller hands Build the runtimes of its cache, not copies: Build must leave them as they
// are, whatever it merges, fills or appends.
func TestBuildLeavesTheRuntimesAsTheyAre(t *testing.T) {
	withTransformer := runtimeYAML(t, "kserve-mlserver", "mlserver", `
labels: {team: runtimes}
annotations: {prometheus.kserve.io/port: "8080"}
supportedModelFormats: [{name: xgboost, version: "2", autoSelect: true, priority: 2}]
protocolVersions: [v2]
nodeSelector: {pool: cpu}
tolerations: [{key: dedicated, operator: Exists}]
volumes: [{name: cache, emptyDir: {}}]
containers:
- name: kserve-container
  image: "docker.io/seldonio/mlserver:1.7.1"
  args: ["--name={{.Name}}"]
  env: [{name: MLSERVER_MODEL_IMPLEMENTATION, value: "{{.Labels.modelClass}}"}, {name: LEVEL, value: info}]
  resources: {requests: {cpu: "1", memory: 2Gi}}
- name: transformer-container
  image: example/transformer:1
  args: ["--predictor={{.Name}}"]
  env: [{name: MODE, value: fast}]
- name: sidecar
  image: example/sidecar:1
`)
	runtimes := []Runtime{sklearnServer(t), withTransformer}
	before := make([]Runtime, len(runtimes))
	for i, r := range runtimes {
		before[i] = Runtime{Name: r.Name, Cluster: r.Cluster, Created: r.Created, Annotations: maps.Clone(r.Annotations), Spec: *r.Spec.DeepCopy()}
	}
	for _, doc := range []string{`
metadata: {name: a, namespace: ns, labels: {owner: ana}}
spec:
  predictor:
    nodeSelector: {pool: fast}
    tolerations: [{key: gpu, operator: Exists}]
    sklearn: {storageUri: "gs://m/a", args: [--workers=2], env: [{name: LEVEL, value: debug}], resources: {limits: {cpu: "2"}}}
`, `
metadata: {name: b, namespace: ns}
spec:
  predictor:
    model: {modelFormat: {name: xgboost}, protocolVersion: v2, storageUri: "gs://m/b", args: [--extra], env: [{name: LEVEL, value: debug}]}
    containers: [{name: transformer-container, args: [--own], env: [{name: MODE, value: slow}]}, {name: own, image: example/own:1}]
    volumes: [{name: data, emptyDir: {}}]
`, `
metadata: {name: c, namespace: ns}
spec: {predictor: {model: {modelFormat: {name: xgboost}, protocolVersion: v2, storageUri: "gs://m/c"}}}
`} {
		isvc := isvcOf(t, doc)
		if _, err := Build(isvc, &isvc.Spec.Predictor, nil, runtimes); err != nil {
			t.Fatal(err)
		}
	}
	if d := cmp.Diff(before, runtimes); d != "" {
		t.Errorf("Build changed the runtimes (-before +after):\n%s", d)
	}
}

func TestImageForFollowsKServesTagRules(t *testing.T) {
	gpu := corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}
	vllm := Runtime{Name: "kserve-vllmserver"}
	for _, tc := range []struct {
		image   string
		version *string
		res     corev1.ResourceRequirements
		rt      Runtime
		want    string
	}{
		{"vllm/vllm-openai:v0.9", nil, corev1.ResourceRequirements{}, vllm, "vllm/vllm-openai-cpu:v0.9"},
		{"vllm/vllm-openai:v0.9", nil, gpu, vllm, "vllm/vllm-openai:v0.9"},
		{"a/b@sha256:abc", ptr.To("2"), gpu, vllm, "a/b@sha256:abc"},
		{"a/b", ptr.To("2"), corev1.ResourceRequirements{}, Runtime{}, "a/b:2"},
		{"registry:5000/a/b:1", ptr.To("2"), corev1.ResourceRequirements{}, Runtime{}, "registry:5000/a/b:2"},
		{"tensorflow/serving:2.6.2", nil, gpu, Runtime{Annotations: map[string]string{AnnotationServerType: "tensorflow-serving"}}, "tensorflow/serving:2.6.2-gpu"},
	} {
		if got := imageFor(corev1.Container{Image: tc.image, Resources: tc.res}, tc.version, tc.rt); got != tc.want {
			t.Errorf("imageFor(%s, %v) = %s, want %s", tc.image, ptr.Deref(tc.version, ""), got, tc.want)
		}
	}
}

func TestBuildNamesAPredictorAndServesCustomContainers(t *testing.T) {
	isvc := isvcOf(t, `
metadata: {name: custom, namespace: ns}
spec:
  predictor:
    name: blue
    containers:
    - image: example/server:1
      env: [{name: STORAGE_URI, value: "s3://bucket/model"}]
      resources: {limits: {memory: 4Gi}}
`)
	p, err := Build(isvc, &isvc.Spec.Predictor, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := container(t, p, ContainerName)
	if p.Name != "custom-blue-predictor" || p.StorageURI != "s3://bucket/model" || env(c, "STORAGE_URI") != ModelDir || p.Runtime != nil {
		t.Errorf("custom predictor = %s, model %q, STORAGE_URI %q; want custom-blue-predictor fetching s3://bucket/model into %s", p.Name, p.StorageURI, env(c, "STORAGE_URI"), ModelDir)
	}
	mem, cpu := c.Resources.Limits[corev1.ResourceMemory], c.Resources.Requests[corev1.ResourceCPU]
	if mem.String() != "4Gi" || cpu.String() != "1" {
		t.Errorf("resources = %+v, want its own memory limit and KServe's default CPU", c.Resources)
	}
	if got := Selector(p.Name); got[LabelApp] != "isvc.custom-blue-predictor" {
		t.Errorf("Selector = %v", got)
	}
}

func TestBuildSaysWhatIsWrong(t *testing.T) {
	sklearn := isvcOf(t, `
metadata: {name: s, namespace: ns}
spec: {predictor: {sklearn: {storageUri: "gs://m/s"}}}
`)
	for _, tc := range []struct {
		name   string
		isvc   *kservev1beta1.InferenceService
		rt     Runtime
		reason kservev1beta1.FailureReason
		want   string
	}{
		{"a runtime without kserve-container", sklearn, runtimeYAML(t, "r", "", `
supportedModelFormats: [{name: sklearn, autoSelect: true}]
containers: [{name: server, image: x}]`), kservev1beta1.InvalidPredictorSpec, "ClusterServingRuntime r has no container named kserve-container"},
		{"a template that does not fill", sklearn, runtimeYAML(t, "r", "", `
supportedModelFormats: [{name: sklearn, autoSelect: true}]
containers: [{name: kserve-container, image: x, args: ["{{.Nope}}"]}]`), kservev1beta1.InvalidPredictorSpec, "a template in container kserve-container does not fill"},
		{"no runtime for the format", sklearn, runtimeYAML(t, "r", "", `
supportedModelFormats: [{name: onnx, autoSelect: true}]
containers: [{name: kserve-container, image: x}]`), kservev1beta1.NoSupportingRuntime, "no runtime serves model format sklearn"},
		{"no containers, no model", isvcOf(t, `{metadata: {name: e, namespace: ns}, spec: {predictor: {minReplicas: 1}}}`), Runtime{},
			kservev1beta1.InvalidPredictorSpec, "give a framework (e.g. sklearn), a model, or containers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(tc.isvc, &tc.isvc.Spec.Predictor, nil, []Runtime{tc.rt})
			var f *Failure
			if !errors.As(err, &f) || f.Reason != tc.reason || !strings.Contains(f.Message, tc.want) {
				t.Fatalf("Build = %v, want a %s failure saying %q", err, tc.reason, tc.want)
			}
		})
	}
}
