package kserve

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/ptr"

	kservev1alpha1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1alpha1"
	kservev1beta1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1beta1"
)

// Names and labels KServe gives a predictor's objects and pods.
const (
	// ContainerName is the container that serves the model, in a runtime and in the pods.
	ContainerName = "kserve-container"
	// LabelInferenceService names the InferenceService on its objects and pods.
	LabelInferenceService = "serving.kserve.io/inferenceservice"
	// LabelComponent is "predictor" on the predictor's objects and pods.
	LabelComponent = "component"
	// LabelApp selects a predictor's pods: isvc.<predictor name>.
	LabelApp = "app"
	// ModelDir is where the serving container finds the model.
	ModelDir = "/mnt/models"
	// AnnotationServerType on a runtime names its server (mlserver, tritonserver, …).
	AnnotationServerType = "serving.kserve.io/server-type"
	// AnnotationModelFormat on an InferenceService names its model's format, for runtimes'
	// templates ({{.Annotations.modelFormat}}).
	AnnotationModelFormat = "modelFormat"

	transformerContainer = "transformer-container"
	customStorageURIEnv  = "STORAGE_URI"
)

// Predictor is a predictor as KServe's Standard mode runs it: the name of its Deployment,
// Service and autoscaler, their labels and annotations, and the pod.
type Predictor struct {
	Name        string
	Labels      map[string]string
	Annotations map[string]string
	Pod         corev1.PodSpec
	// StorageURI is the model to put in ModelDir of ContainerName before it starts ("" for none).
	StorageURI string
	// Runtime served the model form; nil for a custom predictor.
	Runtime *Runtime
	// Protocol the model is served with ("" when neither the model nor the runtime says).
	Protocol kservev1alpha1.Protocol
}

// Build is predictor p of isvc (its spec.predictor, or a canary's: CanaryPredictor) as KServe
// runs it, on the runtimes given. The error is a *Failure when the spec or the runtime is at
// fault. Build only reads the runtimes (callers pass the cache's own): what it takes of them it
// copies.
func Build(isvc *kservev1beta1.InferenceService, p *kservev1beta1.PredictorSpec, namespaced, cluster []Runtime) (Predictor, error) {
	out := Predictor{Name: PredictorName(isvc.Name, p.Name)}
	meta := *isvc.ObjectMeta.DeepCopy()
	var runtimeLabels, runtimeAnnotations map[string]string
	if m := ModelOf(p); m != nil {
		rt, err := Pick(m, namespaced, cluster)
		if err != nil {
			return Predictor{}, err
		}
		m = withServerDefaults(m, rt, &meta)
		if out.Pod, err = modelPod(m, p, rt, meta); err != nil {
			return Predictor{}, err
		}
		out.Runtime, out.Protocol = &rt, Protocol(m, rt)
		out.StorageURI = ptr.Deref(m.StorageURI, "")
		runtimeLabels, runtimeAnnotations = rt.Spec.Labels, rt.Spec.Annotations
	} else {
		var err error
		if out.Pod, out.StorageURI, err = customPod(p); err != nil {
			return Predictor{}, err
		}
	}
	for i := range out.Pod.Containers {
		out.Pod.Containers[i].Env = setEnv(out.Pod.Containers[i].Env, "INFERENCE_SERVICE_NAME", isvc.Name)
	}
	// Later maps win: the runtime's, the InferenceService's, the predictor's, KServe's own.
	out.Labels = union(runtimeLabels, meta.Labels, p.Labels, map[string]string{LabelInferenceService: isvc.Name, LabelComponent: "predictor"})
	out.Annotations = union(runtimeAnnotations, withoutDisallowed(meta.Annotations), withoutDisallowed(p.Annotations))
	return out, nil
}

// PredictorName names a predictor's Deployment, Service and autoscaler: <isvc>-predictor, or
// <isvc>-<name>-predictor for a named one.
func PredictorName(isvc, name string) string {
	if name != "" {
		return isvc + "-" + name + "-predictor"
	}
	return isvc + "-predictor"
}

// Selector is the label that selects a predictor's pods, on its Deployment and Service.
func Selector(predictorName string) map[string]string {
	return map[string]string{LabelApp: "isvc." + predictorName}
}

// Failure is why KServe would not serve a predictor: its failure reason and what to do.
type Failure struct {
	Reason  kservev1beta1.FailureReason
	Message string
}

func (e *Failure) Error() string { return e.Message }

func invalid(format string, args ...any) *Failure {
	return &Failure{kservev1beta1.InvalidPredictorSpec, fmt.Sprintf(format, args...)}
}

// withServerDefaults is the model with what KServe adds for the runtime's server (named by its
// server-type annotation, or by KServe's runtime names): MLServer's model name, location and
// implementation, TorchServe's envelope and protocol, Triton's explicit model control without a
// model. Labels the runtime's templates read go to meta.
func withServerDefaults(m *kservev1beta1.ModelSpec, rt Runtime, meta *metav1.ObjectMeta) *kservev1beta1.ModelSpec {
	m = m.DeepCopy()
	server := rt.Annotations[AnnotationServerType]
	if server == "" {
		server = map[string]string{"kserve-mlserver": "mlserver", "kserve-torchserve": "torchserve", "kserve-tritonserver": "tritonserver"}[rt.Name]
	}
	setLabel := func(k, v string) {
		if meta.Labels == nil {
			meta.Labels = map[string]string{}
		}
		meta.Labels[k] = v
	}
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	if _, ok := meta.Annotations[AnnotationModelFormat]; !ok {
		meta.Annotations[AnnotationModelFormat] = m.ModelFormat.Name
	}
	noModel := m.StorageURI == nil && m.Storage == nil
	v1, v2 := kservev1alpha1.ProtocolV1, kservev1alpha1.ProtocolV2
	switch server {
	case "mlserver":
		m.ProtocolVersion = cmp.Or(m.ProtocolVersion, &v2)
		if noModel {
			m.Env = addEnv(m.Env, "MLSERVER_LOAD_MODELS_AT_STARTUP", "false")
		} else {
			m.Env = addEnv(addEnv(m.Env, "MLSERVER_MODEL_NAME", meta.Name), "MLSERVER_MODEL_URI", ModelDir)
		}
		class := map[string]string{"xgboost": "mlserver_xgboost.XGBoostModel", "lightgbm": "mlserver_lightgbm.LightGBMModel", "mlflow": "mlserver_mlflow.MLflowRuntime"}[m.ModelFormat.Name]
		setLabel("modelClass", cmp.Or(class, "mlserver_sklearn.SKLearnModel"))
	case "torchserve":
		m.ProtocolVersion = cmp.Or(m.ProtocolVersion, &v1)
		envelope := "kserve"
		if p := *m.ProtocolVersion; p == kservev1alpha1.ProtocolV2 || p == kservev1alpha1.ProtocolGRPCV2 {
			envelope = "kservev2"
		}
		setLabel("serviceEnvelope", envelope)
		m.Env = append(m.Env, corev1.EnvVar{Name: "PROTOCOL_VERSION", Value: string(*m.ProtocolVersion)})
	case "tritonserver":
		m.ProtocolVersion = cmp.Or(m.ProtocolVersion, &v2)
		if noModel {
			m.Args = append(m.Args, "--model-control-mode=explicit")
		}
	}
	return m
}

// modelPod is the pod of a model served by runtime rt: the runtime's kserve-container with the
// model's container fields merged over it (a strategic merge, args appended), its templates
// filled from the InferenceService's metadata and its image tag set; the runtime's pod fields
// under the predictor's; the runtime's transformer, then its other containers and the
// predictor's own.
func modelPod(m *kservev1beta1.ModelSpec, p *kservev1beta1.PredictorSpec, rt Runtime, meta metav1.ObjectMeta) (corev1.PodSpec, error) {
	if len(rt.Spec.Containers) == 0 {
		return corev1.PodSpec{}, invalid("%s %s has no containers: give it a container named %s", rt.kind(), rt.Name, ContainerName)
	}
	i := slices.IndexFunc(rt.Spec.Containers, func(c corev1.Container) bool { return c.Name == ContainerName })
	if i < 0 {
		return corev1.PodSpec{}, invalid("%s %s has no container named %s, which serves the model", rt.kind(), rt.Name, ContainerName)
	}
	server, err := mergeContainer(rt.Spec.Containers[i], m.Container)
	if err != nil {
		return corev1.PodSpec{}, invalid("spec.predictor: the model's container fields do not merge with %s %s's %s: %v", rt.kind(), rt.Name, ContainerName, err)
	}
	if err := fillTemplates(&server, meta); err != nil {
		return corev1.PodSpec{}, invalid("%s %s: a template in container %s does not fill from the InferenceService: %v", rt.kind(), rt.Name, ContainerName, err)
	}
	server.Image = imageFor(server, m.RuntimeVersion, rt)
	pod, err := mergePod(rt.Spec.ServingRuntimePodSpec, p.PodSpec)
	if err != nil {
		return corev1.PodSpec{}, invalid("spec.predictor: its pod fields do not merge with %s %s's: %v", rt.kind(), rt.Name, err)
	}
	containers := []corev1.Container{server}
	rtTransformer := slices.IndexFunc(rt.Spec.Containers, func(c corev1.Container) bool { return c.Name == transformerContainer })
	ownTransformer := slices.IndexFunc(p.Containers, func(c corev1.Container) bool { return c.Name == transformerContainer })
	var transformer *corev1.Container
	switch {
	case rtTransformer >= 0 && ownTransformer >= 0:
		t, err := mergeContainer(rt.Spec.Containers[rtTransformer], p.Containers[ownTransformer])
		if err != nil {
			return corev1.PodSpec{}, invalid("spec.predictor.containers: %s does not merge with %s %s's: %v", transformerContainer, rt.kind(), rt.Name, err)
		}
		transformer = &t
	case rtTransformer >= 0:
		transformer = rt.Spec.Containers[rtTransformer].DeepCopy()
	case ownTransformer >= 0:
		transformer = p.Containers[ownTransformer].DeepCopy()
	}
	if transformer != nil {
		if err := fillTemplates(transformer, meta); err != nil {
			return corev1.PodSpec{}, invalid("%s %s: a template in container %s does not fill from the InferenceService: %v", rt.kind(), rt.Name, transformerContainer, err)
		}
		containers = append(containers, *transformer)
	}
	for _, c := range rt.Spec.Containers {
		if c.Name != ContainerName && c.Name != transformerContainer {
			containers = append(containers, *c.DeepCopy())
		}
	}
	for _, c := range p.Containers {
		if c.Name != transformerContainer {
			containers = append(containers, *c.DeepCopy())
		}
	}
	pod.Containers = containers
	return pod, nil
}

// customPod is the pod of a predictor of containers only: kserve-container (the first container,
// when it is the only one or has no name) serves, with a CPU and memory of 1 and 2Gi where it
// sets none; its STORAGE_URI variable is the model, which it then finds in ModelDir.
func customPod(p *kservev1beta1.PredictorSpec) (corev1.PodSpec, string, error) {
	var pod corev1.PodSpec
	raw, err := json.Marshal(p.PodSpec)
	if err == nil {
		err = json.Unmarshal(raw, &pod)
	}
	if err != nil {
		return corev1.PodSpec{}, "", invalid("spec.predictor: %v", err)
	}
	if len(pod.Containers) == 0 {
		return corev1.PodSpec{}, "", invalid("spec.predictor: give a framework (e.g. sklearn), a model, or containers")
	}
	if len(pod.Containers) == 1 || pod.Containers[0].Name == "" {
		pod.Containers[0].Name = ContainerName
	}
	i := slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == ContainerName })
	if i < 0 {
		return corev1.PodSpec{}, "", invalid("spec.predictor.containers: name the container that serves the model %s", ContainerName)
	}
	c := &pod.Containers[i]
	for name, q := range map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "2Gi"} {
		for _, l := range []*corev1.ResourceList{&c.Resources.Requests, &c.Resources.Limits} {
			if _, ok := (*l)[name]; !ok {
				if *l == nil {
					*l = corev1.ResourceList{}
				}
				(*l)[name] = resource.MustParse(q)
			}
		}
	}
	var uri string
	for j, e := range c.Env {
		if e.Name == customStorageURIEnv && e.Value != "" {
			uri = e.Value
			c.Env[j].Value = ModelDir
		}
	}
	return pod, uri, nil
}

// mergeContainer is base with overlay merged over it as a strategic merge patch (env, ports and
// mounts by key, resources by name), overlay's args after base's, base's name kept when overlay
// has none; a variable overlay sets by value or by reference is only that.
func mergeContainer(base, overlay corev1.Container) (corev1.Container, error) {
	merged, err := strategicMerge(base, overlay)
	if err != nil {
		return corev1.Container{}, err
	}
	merged.Args = append(slices.Clone(base.Args), overlay.Args...)
	if merged.Name == "" {
		merged.Name = base.Name
	}
	for i := range merged.Env {
		e := &merged.Env[i]
		j := slices.IndexFunc(overlay.Env, func(o corev1.EnvVar) bool { return o.Name == e.Name })
		if j < 0 || e.Value == "" || e.ValueFrom == nil {
			continue
		}
		if overlay.Env[j].ValueFrom != nil {
			e.Value = ""
		} else {
			e.ValueFrom = nil
		}
	}
	return merged, nil
}

// mergePod is the runtime's pod fields with the predictor's merged over them.
func mergePod(rt kservev1alpha1.ServingRuntimePodSpec, own kservev1beta1.PodSpec) (corev1.PodSpec, error) {
	base := corev1.PodSpec{NodeSelector: rt.NodeSelector, Affinity: rt.Affinity, Tolerations: rt.Tolerations,
		Volumes: rt.Volumes, ImagePullSecrets: rt.ImagePullSecrets, SchedulerName: rt.SchedulerName}
	return strategicMerge(base, own)
}

// strategicMerge merges overlay (any value that writes as T's JSON) over base, as a strategic
// merge patch of T.
func strategicMerge[T any](base T, overlay any) (T, error) {
	var out T
	b, err := json.Marshal(base)
	if err != nil {
		return out, err
	}
	o, err := json.Marshal(overlay)
	if err != nil {
		return out, err
	}
	merged, err := strategicpatch.StrategicMergePatch(b, o, out)
	if err != nil {
		return out, err
	}
	err = json.Unmarshal(merged, &out)
	return out, err
}

var imageTag = regexp.MustCompile(`:[\w.\-]*$`)

// imageFor is the serving container's image: its tag replaced by runtimeVersion; otherwise, for
// servers KServe publishes so, the GPU build (-gpu tag) with NVIDIA GPUs and vLLM's CPU build
// (repository -cpu) without. A digest stays.
func imageFor(c corev1.Container, runtimeVersion *string, rt Runtime) string {
	image := c.Image
	if strings.Contains(image, "@sha256:") {
		return image
	}
	if runtimeVersion != nil {
		if imageTag.MatchString(image) {
			return imageTag.ReplaceAllString(image, ":"+*runtimeVersion)
		}
		return image + ":" + *runtimeVersion
	}
	server := rt.Annotations[AnnotationServerType]
	if server == "" {
		server = map[string]string{"kserve-tensorflow-serving": "tensorflow-serving", "kserve-torchserve": "torchserve",
			"kserve-huggingfaceserver": "huggingfaceserver", "kserve-vllmserver": "vllmserver"}[rt.Name]
	}
	tag := imageTag.FindString(image)
	if tag == "" {
		return image
	}
	repo := strings.TrimSuffix(image, tag)
	switch {
	case nvidiaGPU(c.Resources) && (server == "tensorflow-serving" || server == "torchserve" || server == "huggingfaceserver") && !strings.HasSuffix(image, "-gpu"):
		return image + "-gpu"
	case !nvidiaGPU(c.Resources) && server == "vllmserver" && !strings.HasSuffix(repo, "-cpu"):
		return repo + "-cpu" + tag
	}
	return image
}

func nvidiaGPU(r corev1.ResourceRequirements) bool {
	for name := range r.Limits {
		if name == "nvidia.com/gpu" || strings.HasPrefix(string(name), "nvidia.com/mig") {
			return true
		}
	}
	return false
}

// disallowed are the InferenceService annotations KServe does not pass to the predictor's objects.
var disallowed = map[string]bool{
	"autoscaling.knative.dev/min-scale":                        true,
	"autoscaling.knative.dev/max-scale":                        true,
	"internal.serving.kserve.io/storage-initializer-sourceuri": true,
	"kubectl.kubernetes.io/last-applied-configuration":         true,
	AnnotationModelFormat:                                      true,
}

func withoutDisallowed(m map[string]string) map[string]string {
	out := maps.Clone(m)
	maps.DeleteFunc(out, func(k, _ string) bool { return disallowed[k] })
	return out
}

// union is the maps merged, later ones winning.
func union(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

// addEnv adds a variable unless env has it.
func addEnv(env []corev1.EnvVar, name, value string) []corev1.EnvVar {
	if slices.ContainsFunc(env, func(e corev1.EnvVar) bool { return e.Name == name }) {
		return env
	}
	return append(env, corev1.EnvVar{Name: name, Value: value})
}

// setEnv sets a variable, replacing one of the same name.
func setEnv(env []corev1.EnvVar, name, value string) []corev1.EnvVar {
	env = slices.DeleteFunc(slices.Clone(env), func(e corev1.EnvVar) bool { return e.Name == name })
	return append(env, corev1.EnvVar{Name: name, Value: value})
}
