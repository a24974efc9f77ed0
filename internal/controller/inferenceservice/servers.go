// Package inferenceservice is the InferenceService controller: Deployments per model version,
// Services, an autoscaler, a canary split (weighted HTTPRoute, or replica counts without Gateway
// API), scale to zero through KEDA and monitoring through the Prometheus Operator where those APIs
// are installed, all server-side applied under one field manager.
package inferenceservice

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	"github.com/kiln-ml/kiln/internal/kserve"
)

// ModelDir is where the model is mounted or fetched to: KServe's place, for both APIs.
const ModelDir = kserve.ModelDir

// server is what kiln knows of a model server.
type server struct {
	image string
	port  int32
	// args run the server on the model in ModelDir, listening on port, using gpus GPUs.
	args func(port, gpus int32) []string
	env  []corev1.EnvVar
	// live and ready are HTTP health paths; empty means a TCP check on the port.
	live, ready string
	// metrics is where the server publishes Prometheus metrics, and which of them count
	// requests; a zero value: none kiln knows of.
	metrics promEndpoint
}

// promEndpoint is a server's Prometheus endpoint and its request counters.
type promEndpoint struct {
	// port serves path; 0 is the serving port.
	port int32
	path string
	// ok and failed name the counters of answered and failed requests (PromQL series selectors,
	// without the namespace and service matchers kiln adds). Requests are their sum.
	ok, failed []string
}

func (m promEndpoint) known() bool { return m.path != "" }

// counts says whether the requests and failures are known, for an error-rate alert.
func (m promEndpoint) counts() bool { return len(m.ok) > 0 && len(m.failed) > 0 }

var v2Live, v2Ready = "/v2/health/live", "/v2/health/ready"

// torchServeGPUImage is TorchServe's image for replicas with GPUs.
const torchServeGPUImage = "pytorch/torchserve:0.11.0-gpu"

var triton = server{image: "nvcr.io/nvidia/tritonserver:24.08-py3", port: 8000, live: v2Live, ready: v2Ready,
	metrics: promEndpoint{port: 8002, path: "/metrics", ok: []string{"nv_inference_request_success"}, failed: []string{"nv_inference_request_failure"}},
	args: func(port, _ int32) []string {
		return []string{"tritonserver", "--model-repository=" + ModelDir, "--http-port=" + itoa(port)}
	}}

// vllm serves an LLM through an OpenAI-compatible API, its tensors split over the replica's
// GPUs.
var vllm = server{image: "vllm/vllm-openai:v0.6.3", port: 8000, live: "/health", ready: "/health",
	// vLLM's HTTP metrics (prometheus-fastapi-instrumentator: status grouped as 2xx, 4xx, 5xx).
	metrics: promEndpoint{path: "/metrics", ok: []string{`http_requests_total{status!~"5.*"}`}, failed: []string{`http_requests_total{status=~"5.*"}`}},
	args: func(port, gpus int32) []string {
		args := []string{"--model", ModelDir, "--served-model-name", "model", "--port", itoa(port)}
		if gpus > 1 {
			args = append(args, "--tensor-parallel-size", itoa(gpus))
		}
		return args
	}}

// TensorFlow Serving's image for replicas with GPUs.
const tensorFlowGPUImage = "tensorflow/serving:2.17.0-gpu"

func mlserver(impl string) server {
	s := server{image: "seldonio/mlserver:1.6.1", port: 8080, live: v2Live, ready: v2Ready,
		metrics: promEndpoint{port: 8082, path: "/metrics", ok: []string{"model_infer_request_success_total"}, failed: []string{"model_infer_request_failure_total"}},
		args:    func(int32, int32) []string { return []string{"mlserver", "start", ModelDir} }}
	s.env = []corev1.EnvVar{{Name: "MLSERVER_MODEL_URI", Value: ModelDir}, {Name: "MLSERVER_MODEL_NAME", Value: "model"}}
	if impl != "" {
		s.env = append(s.env, corev1.EnvVar{Name: "MLSERVER_MODEL_IMPLEMENTATION", Value: impl})
	}
	return s
}

var servers = map[servingv1alpha1.Framework]server{
	servingv1alpha1.FrameworkTriton: triton,
	servingv1alpha1.FrameworkONNX:   triton, // ONNX models in a Triton model repository
	servingv1alpha1.FrameworkTensorFlow: {image: "tensorflow/serving:2.17.0", port: 8501, ready: "/v1/models/model",
		args: func(port, _ int32) []string {
			return []string{"tensorflow_model_server", "--model_name=model", "--model_base_path=" + ModelDir, "--rest_api_port=" + itoa(port), "--port=8500"}
		}},
	servingv1alpha1.FrameworkVLLM:        vllm,
	servingv1alpha1.FrameworkHuggingFace: vllm, // Hugging Face models behind vLLM's OpenAI-compatible server
	// TorchServe's metrics API (0.0.0.0:8082 in its image's config.properties) publishes the
	// request counters with metrics_mode=prometheus.
	servingv1alpha1.FrameworkTorchServe: {image: "pytorch/torchserve:0.11.0-cpu", port: 8080, live: "/ping", ready: "/ping",
		metrics: promEndpoint{port: 8082, path: "/metrics", ok: []string{"Requests2XX", "Requests4XX"}, failed: []string{"Requests5XX"}},
		args: func(int32, int32) []string {
			return []string{"torchserve", "--start", "--foreground", "--model-store=" + ModelDir, "--models", "all"}
		}},
	servingv1alpha1.FrameworkMLServer: mlserver(""),
	servingv1alpha1.FrameworkSKLearn:  mlserver("mlserver_sklearn.SKLearnModel"),
	servingv1alpha1.FrameworkXGBoost:  mlserver("mlserver_xgboost.XGBoostModel"),
	servingv1alpha1.FrameworkCustom:   {port: 8080, args: func(int32, int32) []string { return nil }},
}

// serverOf is the framework's server with the spec's overrides applied.
func serverOf(isvc *servingv1alpha1.InferenceService) server {
	s := servers[isvc.Spec.Framework]
	if isvc.Spec.GPUPerReplica > 0 { // the CPU images have no CUDA
		switch isvc.Spec.Framework {
		case servingv1alpha1.FrameworkTorchServe:
			s.image = torchServeGPUImage
		case servingv1alpha1.FrameworkTensorFlow:
			s.image = tensorFlowGPUImage
		}
	}
	if isvc.Spec.Image != "" {
		s.image = isvc.Spec.Image
	}
	if isvc.Spec.Port != 0 {
		s.port = isvc.Spec.Port
	}
	return s
}

func (s server) probe(path string) *corev1.Probe {
	h := corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(s.port)}}
	if path != "" {
		h = corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(s.port)}}
	}
	return &corev1.Probe{ProbeHandler: h, PeriodSeconds: 10, FailureThreshold: 3}
}

// startupProbe checks readiness every 10 s for up to timeout seconds while the server loads its
// model; liveness and readiness take over once it answers.
func (s server) startupProbe(timeout int32) *corev1.Probe {
	p := s.probe(s.ready)
	p.FailureThreshold = max(1, (timeout+p.PeriodSeconds-1)/p.PeriodSeconds)
	return p
}
