package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
)

// InferenceServiceSpec describes a model endpoint.
// +kubebuilder:validation:XValidation:rule="self.model.framework != 'custom' || (has(self.server) && has(self.server.image))",message="spec.server.image is required with framework custom: name the image of your model server"
// +kubebuilder:validation:XValidation:rule="!has(self.server) || !has(self.server.tokenAuth) || self.model.framework == 'torchserve'",message="spec.server.tokenAuth is TorchServe's: it needs spec.model.framework torchserve"
type InferenceServiceSpec struct {
	// Model is the model served: where it is, which server framework serves it, how it is fetched.
	Model Model `json:"model"`

	// Server overrides the framework's model server: image, arguments, port, startup time.
	// +optional
	Server *Server `json:"server,omitempty"`

	// Scaling bounds the number of replicas.
	// +optional
	Scaling *Scaling `json:"scaling,omitempty"`

	// GPUs are the GPUs of each replica. Unset: none.
	// +optional
	GPUs *GPUs `json:"gpus,omitempty"`

	// Resources of each replica.
	// +optional
	Resources servingv1alpha1.ServingResources `json:"resources,omitempty"`

	// Traffic sends a share of requests to a canary model.
	// +optional
	Traffic *servingv1alpha1.Traffic `json:"traffic,omitempty"`

	// Pod shapes the model server's pods: placement, identity, environment and security.
	// +optional
	Pod *servingv1alpha1.PodOptions `json:"pod,omitempty"`

	// NetworkPolicy, when set, lets only the peers it names reach the model server's pods,
	// through a NetworkPolicy kiln makes (enforced where the cluster's network plugin enforces
	// NetworkPolicies).
	// +optional
	NetworkPolicy *servingv1alpha1.ServiceNetworkPolicy `json:"networkPolicy,omitempty"`
}

// Model is the model an InferenceService serves.
type Model struct {
	// URI is where the model is: pvc://<claim>/<path> (mounted read-only); http://, https://,
	// s3://<bucket>/<key>, gs://<bucket>/<key> or azblob://<container>/<key> (fetched into an
	// emptyDir by an init container before the server starts: one object, or every object under a
	// prefix; https://<account>.blob.core.windows.net/<container>/<key> is read as Azure
	// storage); hf://<org>/<model>[@<revision>] (every file of a Hugging Face Hub model).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('pvc://') || self.matches('^pvc://[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*(/.*)?$')",message="spec.model.uri: in pvc://<claim>/<path> the claim must be the name of a PersistentVolumeClaim (lowercase letters, digits, '-' and '.')"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('pvc://') || !(self.matches('^pvc://[^/]*//') || self.matches('^pvc://[^/]*/(.*/)?[.][.](/.*)?$'))",message="spec.model.uri: in pvc://<claim>/<path> the path must be relative inside the claim, without '..'"
	// +kubebuilder:validation:XValidation:rule="self.matches('^(pvc|https?|s3|gs|azblob|hf)://.+')",message="spec.model.uri must start with pvc://, http://, https://, s3://, gs://, azblob:// or hf://"
	URI string `json:"uri"`

	// Framework is triton, torchserve, mlserver, sklearn, xgboost (MLServer runtimes),
	// tensorflow (TensorFlow Serving), onnx (Triton), vllm or huggingface (vLLM's
	// OpenAI-compatible server, tensor-parallel over the replica's GPUs) or custom.
	Framework servingv1alpha1.Framework `json:"framework"`

	// Storage says how the model is fetched (not for pvc:// models, which are mounted).
	// +optional
	Storage *ModelStorage `json:"storage,omitempty"`
}

// ModelStorage is how kiln-fetch reads the model.
type ModelStorage struct {
	// SecretName is a Secret in the InferenceService's namespace whose keys become the
	// environment of the fetch container only (the model server never sees them): AWS_* for
	// s3://, GOOGLE_APPLICATION_CREDENTIALS for gs://, AZURE_STORAGE_* for azblob://, HF_TOKEN
	// for hf:// (docs/inferenceservice.md). Without it, models are read anonymously or through
	// workload identity with spec.pod.serviceAccountName.
	// +optional
	SecretName string `json:"secretName,omitempty"`
	// SizeLimit bounds the model volume and the fetch, which stops with a clear error when the
	// model is larger (default 50Gi).
	// +kubebuilder:validation:XValidation:rule="quantity(self).isGreaterThan(quantity('0'))",message="spec.model.storage.sizeLimit must be positive, e.g. 20Gi"
	// +optional
	SizeLimit *resource.Quantity `json:"sizeLimit,omitempty"`
	// SHA256 is the hex digest a single-object model must have; the fetch fails otherwise.
	// +kubebuilder:validation:Pattern=`^[0-9a-fA-F]{64}$`
	// +optional
	SHA256 string `json:"sha256,omitempty"`
}

// Server overrides the framework's model server.
// +kubebuilder:validation:MinProperties=1
type Server struct {
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
	// StartupTimeoutSeconds is how long a replica may take to load its model and answer its
	// health check before the liveness probe may restart it: default 600.
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=86400
	// +optional
	StartupTimeoutSeconds *int32 `json:"startupTimeoutSeconds,omitempty"`
	// TokenAuth is TorchServe's token authorization (framework torchserve only): Enabled (its
	// default) or Disabled.
	// +kubebuilder:validation:Enum=Enabled;Disabled
	// +optional
	TokenAuth string `json:"tokenAuth,omitempty"`
}

// Scaling bounds the replicas.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="!has(self.maxReplicas) || self.maxReplicas >= (has(self.minReplicas) ? self.minReplicas : 1)",message="spec.scaling.maxReplicas must be at least spec.scaling.minReplicas"
type Scaling struct {
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
}

// GPUs are a replica's GPUs: how many, of which extended resource.
// +kubebuilder:validation:MinProperties=1
type GPUs struct {
	// Count is the number of GPUs of each replica, at most 128.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	// +optional
	Count int32 `json:"count,omitempty"`
	// Resource is the extended resource a GPU is: nvidia.com/gpu (default), amd.com/gpu, a MIG
	// profile such as nvidia.com/mig-3g.20gb. Replicas asking for GPUs tolerate its NoSchedule
	// taint.
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)+/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$')",message="spec.gpus.resource must be an extended resource name with a domain, e.g. nvidia.com/gpu or amd.com/gpu"
	// +optional
	Resource corev1.ResourceName `json:"resource,omitempty"`
}

// InferenceService serves a model: a Deployment per version, a stable Service and per-version
// Services, an autoscaler, a canary split and monitoring where those APIs are installed. The
// stored version.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.scaling.minReplicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:scope=Namespaced,shortName=isvc
// +kubebuilder:printcolumn:name="Framework",type=string,JSONPath=`.spec.model.framework`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.readyReplicas`,priority=1
// +kubebuilder:printcolumn:name="Canary",type=integer,JSONPath=`.status.traffic.canaryPercent`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 46 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label of at most 46 characters (its canary Service is named <name>-predictor-canary), e.g. sentiment"
type InferenceService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   InferenceServiceSpec                   `json:"spec,omitempty"`
	Status servingv1alpha1.InferenceServiceStatus `json:"status,omitempty"`
}

// InferenceServiceList is a list of InferenceServices.
// +kubebuilder:object:root=true
type InferenceServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InferenceService `json:"items"`
}

func init() { SchemeBuilder.Register(&InferenceService{}, &InferenceServiceList{}) }
