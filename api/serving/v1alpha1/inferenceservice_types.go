package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Framework is the model server that serves the model.
// +kubebuilder:validation:Enum=triton;torchserve;mlserver;sklearn;xgboost;tensorflow;onnx;huggingface;vllm;custom
type Framework string

const (
	FrameworkTriton      Framework = "triton"
	FrameworkTorchServe  Framework = "torchserve"
	FrameworkMLServer    Framework = "mlserver"
	FrameworkSKLearn     Framework = "sklearn"     // MLServer's scikit-learn runtime
	FrameworkXGBoost     Framework = "xgboost"     // MLServer's XGBoost runtime
	FrameworkTensorFlow  Framework = "tensorflow"  // TensorFlow Serving
	FrameworkONNX        Framework = "onnx"        // through Triton
	FrameworkHuggingFace Framework = "huggingface" // through vLLM
	FrameworkVLLM        Framework = "vllm"        // an OpenAI-compatible LLM server
	FrameworkCustom      Framework = "custom"
)

// InferenceServiceSpec describes a model endpoint.
// +kubebuilder:validation:XValidation:rule="!has(self.maxReplicas) || self.maxReplicas >= (has(self.minReplicas) ? self.minReplicas : 1)",message="spec.maxReplicas must be at least spec.minReplicas"
// +kubebuilder:validation:XValidation:rule="self.framework != 'custom' || has(self.image)",message="spec.image is required with framework custom: name the image of your model server"
// +kubebuilder:validation:XValidation:rule="!has(self.tokenAuth) || self.framework == 'torchserve'",message="spec.tokenAuth is TorchServe's: it needs framework torchserve"
type InferenceServiceSpec struct {
	// ModelURI is where the model is: pvc://<claim>/<path> (mounted read-only); http://,
	// https://, s3://<bucket>/<key>, gs://<bucket>/<key> or azblob://<container>/<key> (fetched into
	// an emptyDir by an init container before the server starts: one object, or every object under
	// a prefix; https://<account>.blob.core.windows.net/<container>/<key> is read as Azure storage);
	// hf://<org>/<model>[@<revision>] (every file of a Hugging Face Hub model, fetched likewise).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('pvc://') || self.matches('^pvc://[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*(/.*)?$')",message="spec.modelUri: in pvc://<claim>/<path> the claim must be the name of a PersistentVolumeClaim (lowercase letters, digits, '-' and '.')"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('pvc://') || !(self.matches('^pvc://[^/]*//') || self.matches('^pvc://[^/]*/(.*/)?[.][.](/.*)?$'))",message="spec.modelUri: in pvc://<claim>/<path> the path must be relative inside the claim, without '..'"
	// +kubebuilder:validation:XValidation:rule="self.matches('^(pvc|https?|s3|gs|azblob|hf)://.+')",message="spec.modelUri must start with pvc://, http://, https://, s3://, gs://, azblob:// or hf://"
	ModelURI string `json:"modelUri"`

	// Framework is triton, torchserve, mlserver, sklearn, xgboost (MLServer runtimes),
	// tensorflow (TensorFlow Serving), onnx (Triton), vllm or huggingface (vLLM's OpenAI-compatible
	// server, tensor-parallel over the replica's GPUs) or custom.
	Framework Framework `json:"framework"`

	// Image overrides the framework's server image; required for custom.
	// +optional
	Image string `json:"image,omitempty"`

	// Args are extra arguments of the server.
	// +optional
	Args []string `json:"args,omitempty"`

	// Port is the server's HTTP port; default the framework's (8080 for TorchServe and MLServer,
	// 8000 for Triton).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// MinReplicas is the lowest number of replicas (default 1); 0 scales to zero through KEDA,
	// where KEDA is installed.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// MaxReplicas is the highest; above minReplicas (and minReplicas >= 1) an autoscaling/v2
	// HorizontalPodAutoscaler scales between them on CPU. At most 10000.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxReplicas *int32 `json:"maxReplicas,omitempty"`

	// GPUPerReplica is the number of GPUs (of gpuResource) of each replica, at most 128.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	// +optional
	GPUPerReplica int32 `json:"gpuPerReplica,omitempty"`

	// GPUResource is the extended resource a GPU is: nvidia.com/gpu (default), amd.com/gpu, a MIG
	// profile such as nvidia.com/mig-3g.20gb. Replicas asking for GPUs tolerate its NoSchedule
	// taint, as Kubernetes' ExtendedResourceToleration admission does.
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)+/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$')",message="spec.gpuResource must be an extended resource name with a domain, e.g. nvidia.com/gpu or amd.com/gpu"
	// +optional
	GPUResource corev1.ResourceName `json:"gpuResource,omitempty"`

	// StartupTimeoutSeconds is how long a replica may take to load its model and answer its
	// health check (a startup probe) before the liveness probe may restart it: default 600, for
	// models of many GB.
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=86400
	// +optional
	StartupTimeoutSeconds *int32 `json:"startupTimeoutSeconds,omitempty"`

	// TokenAuth is TorchServe's token authorization (framework torchserve only): Enabled, its
	// default — every call needs a key from the key_file.json TorchServe writes into its working
	// directory at start (read it with kubectl exec) — or Disabled (--disable-token-auth), for a
	// server reached only inside the cluster or behind a gateway that authenticates.
	// +kubebuilder:validation:Enum=Enabled;Disabled
	// +optional
	TokenAuth string `json:"tokenAuth,omitempty"`

	// Storage says how the model is fetched (not for pvc:// models, which are mounted).
	// +optional
	Storage *ModelStorage `json:"storage,omitempty"`

	// Pod shapes the model server's pods: placement, identity, environment and security.
	// +optional
	Pod *PodOptions `json:"pod,omitempty"`

	// Resources of each replica.
	// +optional
	Resources ServingResources `json:"resources,omitempty"`

	// Traffic sends a share of requests to a canary model.
	// +optional
	Traffic *Traffic `json:"traffic,omitempty"`

	// NetworkPolicy, when set, lets only the peers it names reach the model server's pods,
	// through a NetworkPolicy kiln makes (enforced where the cluster's network plugin enforces
	// NetworkPolicies).
	// +optional
	NetworkPolicy *ServiceNetworkPolicy `json:"networkPolicy,omitempty"`
}

// ServiceNetworkPolicy names who may reach an InferenceService.
type ServiceNetworkPolicy struct {
	// From are the peers that may reach the pods (namespaceSelector, podSelector, ipBlock, as in
	// a NetworkPolicy's ingress rule); a Prometheus that scrapes them must be among them. Empty:
	// no one — but the KEDA HTTP add-on's interceptor, when the service scales to zero.
	// +optional
	From []networkingv1.NetworkPolicyPeer `json:"from,omitempty"`
}

// ModelStorage is how kiln-fetch reads the model.
type ModelStorage struct {
	// SecretName is a Secret in the InferenceService's namespace whose keys become the environment
	// of the fetch container only (the model server never sees them): AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL (an S3-compatible store) for s3://;
	// GOOGLE_APPLICATION_CREDENTIALS (a service account key's JSON) for gs://;
	// AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN or
	// AZURE_STORAGE_CONNECTION_STRING for azblob://; HF_TOKEN for a gated or private hf:// model.
	// Without it, buckets and containers are read anonymously (azblob:// then names its account:
	// ?storage_account=<name>), or through workload identity with spec.pod.serviceAccountName.
	// +optional
	SecretName string `json:"secretName,omitempty"`
	// SizeLimit bounds the model volume and the fetch, which stops with a clear error when the
	// model is larger (default 50Gi).
	// +kubebuilder:validation:XValidation:rule="quantity(self).isGreaterThan(quantity('0'))",message="spec.storage.sizeLimit must be positive, e.g. 20Gi"
	// +optional
	SizeLimit *resource.Quantity `json:"sizeLimit,omitempty"`
	// SHA256 is the hex digest a single-object model must have; the fetch fails otherwise.
	// +kubebuilder:validation:Pattern=`^[0-9a-fA-F]{64}$`
	// +optional
	SHA256 string `json:"sha256,omitempty"`
}

// PodOptions go to every pod of the InferenceService as they are. Env and envFrom reach the model
// server's container only (not the model fetch). Labels and annotations are added to the pods'
// own; kiln's (the selector, the model URI) win.
type PodOptions struct {
	// Labels are added to the pods' labels.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are added to the pods' annotations.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// NodeSelector places the pods on nodes with these labels.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations of the pods (replicas asking for GPUs also tolerate the GPU resource's taint).
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// Affinity of the pods.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// ServiceAccountName the pods run as (workload identity for the model fetch).
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// ImagePullSecrets for private server images.
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// Env of the model server's container.
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`
	// EnvFrom of the model server's container.
	// +optional
	EnvFrom []corev1.EnvFromSource `json:"envFrom,omitempty"`
	// SecurityContext of the pods.
	// +optional
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`
	// ContainerSecurityContext is the model server container's securityContext: what a namespace
	// enforcing Pod Security "restricted" asks of it (allowPrivilegeEscalation false, capabilities
	// dropped) is set here. (kiln's model fetch container meets "restricted" on its own.)
	// +optional
	ContainerSecurityContext *corev1.SecurityContext `json:"containerSecurityContext,omitempty"`
	// RuntimeClassName of the pods, e.g. nvidia.
	// +optional
	RuntimeClassName *string `json:"runtimeClassName,omitempty"`
	// PriorityClassName of the pods.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
}

// ServingResources are the CPU and memory of a replica.
type ServingResources struct {
	// +optional
	CPURequest *resource.Quantity `json:"cpuRequest,omitempty"`
	// +optional
	CPULimit *resource.Quantity `json:"cpuLimit,omitempty"`
	// +optional
	MemoryRequest *resource.Quantity `json:"memoryRequest,omitempty"`
	// +optional
	MemoryLimit *resource.Quantity `json:"memoryLimit,omitempty"`
}

// Traffic splits requests between the model of spec.modelUri and a canary. Promote: set modelUri
// to the canary's and remove traffic. Roll back: remove traffic.
type Traffic struct {
	// CanaryVersion is the model URI of the canary, in the same forms as modelUri.
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('pvc://') || self.matches('^pvc://[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*(/.*)?$')",message="spec.traffic.canaryVersion: in pvc://<claim>/<path> the claim must be the name of a PersistentVolumeClaim (lowercase letters, digits, '-' and '.')"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('pvc://') || !(self.matches('^pvc://[^/]*//') || self.matches('^pvc://[^/]*/(.*/)?[.][.](/.*)?$'))",message="spec.traffic.canaryVersion: in pvc://<claim>/<path> the path must be relative inside the claim, without '..'"
	// +kubebuilder:validation:XValidation:rule="self.matches('^(pvc|https?|s3|gs|azblob|hf)://.+')",message="spec.traffic.canaryVersion must be a model URI starting with pvc://, http://, https://, s3://, gs://, azblob:// or hf://"
	CanaryVersion string `json:"canaryVersion"`
	// CanaryPercent is the share of requests the canary gets, 0 to 100.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	CanaryPercent int32 `json:"canaryPercent"`
}

// TrafficMode is how the canary split is enforced.
type TrafficMode string

const (
	// TrafficHTTPRoute: a weighted Gateway API HTTPRoute splits requests exactly; kiln claims it
	// only once the route's status shows a parent (a mesh, for a route on a Service) accepted it.
	TrafficHTTPRoute TrafficMode = "HTTPRoute"
	// TrafficVirtualService: an Istio VirtualService splits requests exactly; kiln claims it only
	// once the versions' pods are in the mesh (they run Istio's istio-proxy sidecar).
	TrafficVirtualService TrafficMode = "VirtualService"
	// TrafficReplicaSplit: without an accepted route, the stable Service spreads requests over the
	// ready pods of both versions: the split is their ratio, approximately.
	TrafficReplicaSplit TrafficMode = "ReplicaSplit"
)

// TrafficStatus is the split in force.
type TrafficStatus struct {
	Mode TrafficMode `json:"mode,omitempty"`
	// StablePercent and CanaryPercent are the route's weights (HTTPRoute, VirtualService), or the share of each
	// version among the ready pods the stable Service selects (ReplicaSplit).
	StablePercent int32 `json:"stablePercent"`
	CanaryPercent int32 `json:"canaryPercent"`
	// Approximate is true when the split follows pod counts rather than a router's weights.
	// +optional
	Approximate bool `json:"approximate,omitempty"`
}

// InferenceServiceStatus is what kiln observed of the endpoint.
type InferenceServiceStatus struct {
	// Conditions: Ready, PredictorReady, CanaryReady.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Replicas and ReadyReplicas count the pods of both versions.
	// +optional
	Replicas int32 `json:"replicas"`
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`
	// Selector selects the stable version's pods (for the scale subresource).
	// +optional
	Selector string `json:"selector,omitempty"`
	// URL is the in-cluster address: http://<name>.<namespace>.svc.cluster.local.
	// +optional
	URL string `json:"url,omitempty"`
	// ActiveVersion is the model URI of the stable version; CanaryVersion the canary's.
	// +optional
	ActiveVersion string `json:"activeVersion,omitempty"`
	// +optional
	CanaryVersion string `json:"canaryVersion,omitempty"`
	// Traffic is the split in force and how it is enforced.
	// +optional
	Traffic *TrafficStatus `json:"traffic,omitempty"`
	// LastReconcileTime is when this status was last changed.
	// +optional
	LastReconcileTime *metav1.Time `json:"lastReconcileTime,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// InferenceService serves a model: a Deployment per version, a stable Service and per-version
// Services, an autoscaler, a canary split and monitoring where those APIs are installed. Served
// as it was; stored as v1beta1, converted by kiln's conversion webhook.
// +kubebuilder:object:root=true
// +kubebuilder:deprecatedversion:warning="serving.kiln.dev/v1alpha1 InferenceService is deprecated: write serving.kiln.dev/v1beta1, which kiln stores (README, API versions); v1alpha1 stays served"
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.minReplicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:scope=Namespaced,shortName=isvc
// +kubebuilder:printcolumn:name="Framework",type=string,JSONPath=`.spec.framework`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.readyReplicas`,priority=1
// +kubebuilder:printcolumn:name="Canary",type=integer,JSONPath=`.status.traffic.canaryPercent`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 46 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label of at most 46 characters (its canary Service is named <name>-predictor-canary), e.g. sentiment"
type InferenceService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   InferenceServiceSpec   `json:"spec,omitempty"`
	Status InferenceServiceStatus `json:"status,omitempty"`
}

// InferenceServiceList is a list of InferenceServices.
// +kubebuilder:object:root=true
type InferenceServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InferenceService `json:"items"`
}

func init() { SchemeBuilder.Register(&InferenceService{}, &InferenceServiceList{}) }

// Hub marks v1alpha1 as the InferenceService version every other converts to and from, in kiln's
// conversion webhook and in its controllers, which read the stored v1beta1 and compute on this
// form (docs/decisions.md, 17).
func (*InferenceService) Hub() {}
