package v1beta1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	kservev1alpha1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1alpha1"
)

// InferenceServiceSpec is a model endpoint: the predictor that serves the model, and canaries.
// +kubebuilder:validation:XValidation:rule="!has(self.transformer)",message="spec.transformer: kiln serves KServe's predictor only; run the transformer as its own Deployment in front of the predictor's Service"
// +kubebuilder:validation:XValidation:rule="!has(self.explainer)",message="spec.explainer: kiln serves KServe's predictor only; explainers are not served"
type InferenceServiceSpec struct {
	// Predictor serves the model.
	Predictor PredictorSpec `json:"predictor"`
	// Explainer is refused: kiln serves the predictor only.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Explainer *runtime.RawExtension `json:"explainer,omitempty"`
	// Transformer is refused: kiln serves the predictor only.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Transformer *runtime.RawExtension `json:"transformer,omitempty"`
	// Canary predictors (Standard mode), each to take trafficPercent of the requests; each names
	// itself with predictor.name. kiln runs one.
	// +kubebuilder:validation:MaxItems=10
	// +optional
	Canary []CanarySpec `json:"canary,omitempty"`
}

// CanarySpec is a canary predictor and its share of the requests.
type CanarySpec struct {
	// Predictor of the canary, merged over the stable one; its name is required.
	Predictor CanaryPredictor `json:"predictor"`
	// TrafficPercent is the canary's share of requests, 0 to 100.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	TrafficPercent int32 `json:"trafficPercent"`
}

// CanaryPredictor is a canary's predictor: a PredictorSpec. Its schema names only the name and
// keeps the rest as written (a second copy of the predictor's schema would make the CRD too large
// for a client-side kubectl apply); the rest is read as a PredictorSpec.
// +kubebuilder:pruning:PreserveUnknownFields
type CanaryPredictor struct {
	// Name of the canary: its objects are named <isvc>-<name>-predictor.
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=40
	Name string `json:"name"`
	// Spec is the whole predictor, name included.
	Spec PredictorSpec `json:"-"`
	// Unknown, when set, is a field as written that a predictor does not have (the open schema
	// keeps it): the controller refuses the canary, naming it.
	Unknown string `json:"-"`
}

// UnmarshalJSON reads the whole predictor, and the first field written that it does not know.
func (c *CanaryPredictor) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &c.Spec); err != nil {
		return err
	}
	c.Name, c.Unknown = c.Spec.Name, ""
	strict := json.NewDecoder(bytes.NewReader(b))
	strict.DisallowUnknownFields()
	if field, ok := strings.CutPrefix(fmt.Sprint(strict.Decode(&PredictorSpec{})), "json: unknown field "); ok {
		c.Unknown = strings.Trim(field, `"`)
	}
	return nil
}

// MarshalJSON writes the whole predictor, with Name.
func (c CanaryPredictor) MarshalJSON() ([]byte, error) {
	s := c.Spec
	s.Name = c.Name
	return json.Marshal(s)
}

// PredictorSpec is the model server: a framework shorthand, the model form, or custom containers,
// with its pod fields and scaling.
// +kubebuilder:validation:XValidation:rule="!has(self.maxReplicas) || self.maxReplicas == 0 || self.maxReplicas >= (has(self.minReplicas) ? self.minReplicas : 1)",message="spec.predictor.maxReplicas must be at least spec.predictor.minReplicas (or 0, unset)"
// +kubebuilder:validation:XValidation:rule="!has(self.workerSpec)",message="spec.predictor.workerSpec: multi-node serving is not served by kiln; serve the model on one pod (tensor parallel over its GPUs)"
type PredictorSpec struct {
	// Name of the predictor: its objects are named <isvc>-<name>-predictor.
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=40
	// +optional
	Name string `json:"name,omitempty"`

	// +optional
	SKLearn *PredictorExtensionSpec `json:"sklearn,omitempty"`
	// +optional
	XGBoost *PredictorExtensionSpec `json:"xgboost,omitempty"`
	// +optional
	Tensorflow *PredictorExtensionSpec `json:"tensorflow,omitempty"`
	// +optional
	PyTorch *PredictorExtensionSpec `json:"pytorch,omitempty"`
	// +optional
	Triton *PredictorExtensionSpec `json:"triton,omitempty"`
	// +optional
	ONNX *PredictorExtensionSpec `json:"onnx,omitempty"`
	// +optional
	HuggingFace *PredictorExtensionSpec `json:"huggingface,omitempty"`
	// +optional
	PMML *PredictorExtensionSpec `json:"pmml,omitempty"`
	// +optional
	LightGBM *PredictorExtensionSpec `json:"lightgbm,omitempty"`
	// +optional
	Paddle *PredictorExtensionSpec `json:"paddle,omitempty"`
	// Model is a model of any format, served by the runtime named, or picked by format and
	// protocol.
	// +optional
	Model *ModelSpec `json:"model,omitempty"`

	// StorageUris are more models, each fetched to its mount path.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +optional
	StorageUris []StorageURI `json:"storageUris,omitempty"`
	// StorageContainerName names a ClusterStorageContainer (KServe's), which kiln does not use.
	// +optional
	StorageContainerName *string `json:"storageContainerName,omitempty"`
	// WorkerSpec is KServe's multi-node serving: refused.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	WorkerSpec *runtime.RawExtension `json:"workerSpec,omitempty"`

	PodSpec                `json:",inline"`
	ComponentExtensionSpec `json:",inline"`
}

// StorageURI is one more model and where it is mounted.
type StorageURI struct {
	// +kubebuilder:validation:MinLength=1
	URI string `json:"uri"`
	// MountPath is an absolute path (default /mnt/models).
	// +kubebuilder:default="/mnt/models"
	// +kubebuilder:validation:Pattern=`^/.*`
	// +kubebuilder:validation:MaxLength=255
	// +optional
	MountPath string `json:"mountPath,omitempty"`
}

// PredictorExtensionSpec is a framework's model: where it is, the protocol and server version, and
// the fields of the kserve-container.
type PredictorExtensionSpec struct {
	// StorageURI is where the model is: gs://, s3://, pvc://<claim>/<path>, http(s)://, hf://,
	// azure blob URLs; fetched into /mnt/models before the server starts (pvc:// is mounted).
	// +optional
	StorageURI *string `json:"storageUri,omitempty"`
	// RuntimeVersion replaces the tag of the runtime's image.
	// +optional
	RuntimeVersion *string `json:"runtimeVersion,omitempty"`
	// ProtocolVersion is the inference protocol: v1 (default), v2, grpc-v1 or grpc-v2.
	// +kubebuilder:validation:Enum=v1;v2;grpc-v1;grpc-v2
	// +optional
	ProtocolVersion *kservev1alpha1.Protocol `json:"protocolVersion,omitempty"`

	corev1.Container `json:",inline"`

	// Storage is KServe's storage spec (a key of its storage-config Secret).
	// +optional
	Storage *ModelStorageSpec `json:"storage,omitempty"`
	// Confidential is KServe's confidential-containers setting, which kiln does not serve.
	// +optional
	Confidential *ConfidentialSpec `json:"confidential,omitempty"`
}

// StorageSpec is KServe's reference to a storage-config entry.
type StorageSpec struct {
	// +optional
	Path *string `json:"path,omitempty"`
	// +optional
	Parameters *map[string]string `json:"parameters,omitempty"`
	// +optional
	StorageKey *string `json:"key,omitempty"`
}

// ModelStorageSpec is a model's storage-config entry.
type ModelStorageSpec struct {
	StorageSpec `json:",inline"`
	// +optional
	SchemaPath *string `json:"schemaPath,omitempty"`
}

// ConfidentialSpec is KServe's confidential-containers setting.
type ConfidentialSpec struct {
	Enabled bool `json:"enabled"`
	// +optional
	ResourceID *string `json:"resourceId,omitempty"`
}

// ModelFormat names a model's format and, optionally, its version.
type ModelFormat struct {
	// Name of the format, e.g. sklearn, xgboost, onnx, tensorflow, pytorch, triton, huggingface.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +optional
	Version *string `json:"version,omitempty"`
}

// ModelSpec is a model of any format and the runtime that serves it.
type ModelSpec struct {
	// ModelFormat is the model's format, which the runtime must list.
	ModelFormat ModelFormat `json:"modelFormat"`
	// Runtime names the ServingRuntime (in the namespace) or ClusterServingRuntime; unset, kiln
	// picks one as KServe does.
	// +optional
	Runtime *string `json:"runtime,omitempty"`

	PredictorExtensionSpec `json:",inline"`
}

// ScaleMetric is what the autoscaler scales on.
// +kubebuilder:validation:Enum=cpu;memory;concurrency;rps
type ScaleMetric string

// MetricTargetType is how a metric's target is given.
// +kubebuilder:validation:Enum=Utilization;Value;AverageValue
type MetricTargetType string

// ComponentExtensionSpec is a predictor's replicas, autoscaling and rollout.
type ComponentExtensionSpec struct {
	// MinReplicas (default 1; 0 is 1, as under KServe's HPA).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MinReplicas *int32 `json:"minReplicas,omitempty"`
	// MaxReplicas for autoscaling; 0 is unset.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxReplicas int32 `json:"maxReplicas,omitempty"`
	// ScaleTarget is the autoscaler's target for scaleMetric (a CPU or memory percentage by
	// default).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	ScaleTarget *int32 `json:"scaleTarget,omitempty"`
	// +optional
	ScaleMetric *ScaleMetric `json:"scaleMetric,omitempty"`
	// +optional
	ScaleMetricType *MetricTargetType `json:"scaleMetricType,omitempty"`
	// +optional
	AutoScaling *AutoScalingSpec `json:"autoScaling,omitempty"`
	// ContainerConcurrency is Knative's; ignored in Standard mode, as by KServe.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	ContainerConcurrency *int64 `json:"containerConcurrency,omitempty"`
	// TimeoutSeconds of a request at the route.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +optional
	TimeoutSeconds *int64 `json:"timeout,omitempty"`
	// CanaryTrafficPercent is the share of requests the spec's pods take while the pods rolled
	// out before keep the rest (Knative's revision split).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	CanaryTrafficPercent *int64 `json:"canaryTrafficPercent,omitempty"`
	// Logger is KServe's request logger (its agent sidecar).
	// +optional
	Logger *LoggerSpec `json:"logger,omitempty"`
	// Batcher is KServe's request batcher (its agent sidecar).
	// +optional
	Batcher *Batcher `json:"batcher,omitempty"`
	// Labels added to the predictor's objects and pods.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations added to the predictor's objects and pods.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// DeploymentStrategy of the predictor's Deployment.
	// +optional
	DeploymentStrategy *appsv1.DeploymentStrategy `json:"deploymentStrategy,omitempty"`
}

// AutoScalingSpec is the autoscaler's metrics and behavior.
type AutoScalingSpec struct {
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Metrics []MetricsSpec `json:"metrics,omitempty"`
	// +optional
	Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
}

// MetricsSpec is one metric the autoscaler scales on.
type MetricsSpec struct {
	// +kubebuilder:validation:Enum=Resource;External;PodMetric
	Type string `json:"type"`
	// +optional
	Resource *ResourceMetricSource `json:"resource,omitempty"`
	// +optional
	External *ExternalMetricSource `json:"external,omitempty"`
	// +optional
	PodMetric *PodMetricSource `json:"podmetric,omitempty"`
}

// ResourceMetricSource is a resource of the pods (cpu or memory) and its target.
type ResourceMetricSource struct {
	// +kubebuilder:validation:Enum=cpu;memory
	Name   string       `json:"name"`
	Target MetricTarget `json:"target"`
}

// ExternalMetricSource is a metric from a metrics backend.
type ExternalMetricSource struct {
	Metric ExternalMetrics `json:"metric"`
	// +optional
	Authentication *ExtMetricAuthentication `json:"authenticationRef,omitempty"`
	Target         MetricTarget             `json:"target"`
}

// ExternalMetrics is a metrics backend's query.
type ExternalMetrics struct {
	// +kubebuilder:validation:Enum=prometheus;graphite
	// +optional
	Backend string `json:"backend"`
	// +optional
	ServerAddress string `json:"serverAddress,omitempty"`
	// +optional
	Query string `json:"query,omitempty"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// ExtMetricAuthentication is KEDA's authentication reference for a metrics backend.
type ExtMetricAuthentication struct {
	AuthenticationRef AuthenticationRef `json:"authenticationRef"`
	// +optional
	AuthModes string `json:"authModes,omitempty"`
}

// AuthenticationRef names a KEDA TriggerAuthentication.
type AuthenticationRef struct {
	Name string `json:"name"`
}

// PodMetricSource is a per-pod metric from OpenTelemetry.
type PodMetricSource struct {
	Metric PodMetrics   `json:"metric"`
	Target MetricTarget `json:"target"`
}

// PodMetrics is an OpenTelemetry metric query.
type PodMetrics struct {
	// +kubebuilder:validation:Enum=opentelemetry
	// +optional
	Backend string `json:"backend"`
	// +optional
	ServerAddress string `json:"serverAddress,omitempty"`
	// +optional
	MetricNames []string `json:"metricNames,omitempty"`
	// +optional
	Query string `json:"query,omitempty"`
	// +optional
	OperationOverTime string `json:"operationOverTime,omitempty"`
}

// MetricTarget is a metric's target value, average value or average utilization.
type MetricTarget struct {
	// +optional
	Type MetricTargetType `json:"type"`
	// +optional
	Value *resource.Quantity `json:"value,omitempty"`
	// +optional
	AverageValue *resource.Quantity `json:"averageValue,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	AverageUtilization *int32 `json:"averageUtilization,omitempty"`
}

// LoggerSpec is KServe's request logger.
type LoggerSpec struct {
	// +optional
	URL *string `json:"url,omitempty"`
	// +kubebuilder:validation:Enum=all;request;response
	// +optional
	Mode string `json:"mode,omitempty"`
	// +optional
	MetadataHeaders []string `json:"metadataHeaders,omitempty"`
	// +optional
	MetadataAnnotations []string `json:"metadataAnnotations,omitempty"`
	// +optional
	Storage *LoggerStorageSpec `json:"storage,omitempty"`
	// +optional
	MarshallerURL *string `json:"marshallerUrl,omitempty"`
	// +optional
	BatchSize *int32 `json:"batchSize,omitempty"`
	// +optional
	BatchInterval *string `json:"batchInterval,omitempty"`
}

// LoggerStorageSpec is where the request logger writes.
type LoggerStorageSpec struct {
	StorageSpec `json:",inline"`
	// +optional
	ServiceAccountName *string `json:"serviceAccountName,omitempty"`
}

// Batcher is KServe's request batcher.
type Batcher struct {
	// +optional
	MaxBatchSize *int32 `json:"maxBatchSize,omitempty"`
	// +optional
	MaxLatency *int32 `json:"maxLatency,omitempty"`
	// +optional
	Timeout *int32 `json:"timeout,omitempty"`
}

// InferenceService is KServe's model endpoint, served by kiln in Standard mode: a Deployment,
// Service and autoscaler <name>-predictor running the model's runtime.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=inferenceservices,shortName=isvc
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Prev",type=integer,JSONPath=`.status.components.predictor.traffic[?(@.tag=="prev")].percent`
// +kubebuilder:printcolumn:name="Latest",type=integer,JSONPath=`.status.components.predictor.traffic[?(@.latestRevision==true)].percent`
// +kubebuilder:printcolumn:name="PrevRolledoutRevision",type=string,JSONPath=`.status.components.predictor.traffic[?(@.tag=="prev")].revisionName`
// +kubebuilder:printcolumn:name="LatestReadyRevision",type=string,JSONPath=`.status.components.predictor.traffic[?(@.latestRevision==true)].revisionName`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 48 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label of at most 48 characters (its pods are labelled app=isvc.<name>-predictor, at most 63), e.g. sklearn-iris"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.predictor.name) || size(self.metadata.name) + size(self.spec.predictor.name) <= 47",message="spec.predictor.name: the pods are labelled app=isvc.<name>-<predictor.name>-predictor, at most 63 characters: shorten the predictor's name or the InferenceService's"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.canary) || self.spec.canary.all(c, size(self.metadata.name) + size(c.predictor.name) <= 47)",message="spec.canary[].predictor.name: the pods are labelled app=isvc.<name>-<predictor.name>-predictor, at most 63 characters: shorten the canary's name or the InferenceService's"
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
