package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Protocol is an inference protocol a model server speaks: v1 (KServe's V1 REST), v2 (the Open
// Inference Protocol over REST), grpc-v1 or grpc-v2.
type Protocol string

// The protocols, from the one a runtime is picked for first to the last.
const (
	ProtocolV1     Protocol = "v1"
	ProtocolV2     Protocol = "v2"
	ProtocolGRPCV1 Protocol = "grpc-v1"
	ProtocolGRPCV2 Protocol = "grpc-v2"
)

// SupportedModelFormat is a model format, and optionally its version, that a runtime serves.
type SupportedModelFormat struct {
	// Name of the model format, e.g. sklearn, onnx, tensorflow; compared as written.
	Name string `json:"name"`
	// Version of the format the runtime serves ("major", "major.minor" or "major.minor.patch");
	// an InferenceService that names a format version needs a runtime that lists it.
	// +optional
	Version *string `json:"version,omitempty"`
	// AutoSelect lets an InferenceService that names this format but no runtime be served by this
	// runtime.
	// +optional
	AutoSelect *bool `json:"autoSelect,omitempty"`
	// Priority orders the runtimes that could serve a format the InferenceService names without a
	// runtime: the highest wins, a runtime with a priority before one without. At least 1.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Priority *int32 `json:"priority,omitempty"`
}

// StorageHelper is ModelMesh's model puller setting; kiln accepts and ignores it.
type StorageHelper struct {
	// +optional
	Disabled bool `json:"disabled,omitempty"`
}

// ServingRuntimePodSpec is the part of a model server's pod a runtime fixes.
type ServingRuntimePodSpec struct {
	// Containers of the model server; the one named kserve-container runs the model, merged with
	// the InferenceService's own container fields. Its args, command, image and env may use Go
	// templates of the InferenceService's metadata, e.g. --model_name={{.Name}}.
	Containers []corev1.Container `json:"containers"`
	// Volumes the containers mount.
	// +optional
	Volumes []corev1.Volume `json:"volumes,omitempty"`
	// NodeSelector of the model server's pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Affinity of the model server's pods.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// Tolerations of the model server's pods.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// Labels added to the model server's objects and pods.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations added to the model server's objects and pods.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// ImagePullSecrets of the model server's pods.
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// HostIPC is accepted for compatibility; as in KServe, it does not reach the pods.
	// +optional
	HostIPC bool `json:"hostIPC,omitempty"`
	// SchedulerName of the model server's pods.
	// +optional
	SchedulerName string `json:"schedulerName,omitempty"`
}

// WorkerSpec is KServe's multi-node serving, which kiln does not serve: a runtime with one is never
// picked for an InferenceService.
type WorkerSpec struct {
	ServingRuntimePodSpec `json:",inline"`
	// +optional
	PipelineParallelSize *int32 `json:"pipelineParallelSize,omitempty"`
	// +optional
	TensorParallelSize *int32 `json:"tensorParallelSize,omitempty"`
}

// BuiltInAdapter is ModelMesh's runtime adapter; kiln accepts and ignores it.
type BuiltInAdapter struct {
	// +optional
	ServerType string `json:"serverType,omitempty"`
	// +optional
	RuntimeManagementPort int32 `json:"runtimeManagementPort,omitempty"`
	// +optional
	MemBufferBytes int64 `json:"memBufferBytes,omitempty"`
	// +optional
	ModelLoadingTimeoutMillis int32 `json:"modelLoadingTimeoutMillis,omitempty"`
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`
}

// ServingRuntimeSpec is a model server: the formats and protocols it serves and its pod.
type ServingRuntimeSpec struct {
	// SupportedModelFormats are the formats the runtime serves.
	// +optional
	SupportedModelFormats []SupportedModelFormat `json:"supportedModelFormats,omitempty"`
	// MultiModel marks a ModelMesh runtime, which kiln never picks.
	// +optional
	MultiModel *bool `json:"multiModel,omitempty"`
	// Disabled keeps the runtime from being picked; an InferenceService that names it says so.
	// +optional
	Disabled *bool `json:"disabled,omitempty"`
	// ProtocolVersions the runtime speaks; none listed means any.
	// +optional
	ProtocolVersions []Protocol `json:"protocolVersions,omitempty"`
	// WorkerSpec is multi-node serving, which kiln does not serve.
	// +optional
	WorkerSpec *WorkerSpec `json:"workerSpec,omitempty"`

	ServingRuntimePodSpec `json:",inline"`

	// ModelMesh's fields, accepted for compatibility and not used by kiln.
	// +optional
	GRPCMultiModelManagementEndpoint *string `json:"grpcEndpoint,omitempty"`
	// +optional
	GRPCDataEndpoint *string `json:"grpcDataEndpoint,omitempty"`
	// +optional
	HTTPDataEndpoint *string `json:"httpDataEndpoint,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// +optional
	StorageHelper *StorageHelper `json:"storageHelper,omitempty"`
	// +optional
	BuiltInAdapter *BuiltInAdapter `json:"builtInAdapter,omitempty"`
}

// ServingRuntimeStatus is empty, as KServe's.
type ServingRuntimeStatus struct{}

// ServingRuntime is a model server an InferenceService of its namespace can run on, picked by model
// format and protocol (or by name). kiln looks in the InferenceService's namespace before the
// ClusterServingRuntimes.
// +kubebuilder:object:root=true
// +kubebuilder:printcolumn:name="Disabled",type=boolean,JSONPath=`.spec.disabled`
// +kubebuilder:printcolumn:name="ModelType",type=string,JSONPath=`.spec.supportedModelFormats[*].name`
// +kubebuilder:printcolumn:name="Containers",type=string,JSONPath=`.spec.containers[*].name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ServingRuntime struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ServingRuntimeSpec   `json:"spec,omitempty"`
	Status ServingRuntimeStatus `json:"status,omitempty"`
}

// ServingRuntimeList is a list of ServingRuntimes.
// +kubebuilder:object:root=true
type ServingRuntimeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ServingRuntime `json:"items"`
}

// ClusterServingRuntime is a model server every namespace's InferenceServices can run on.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="Disabled",type=boolean,JSONPath=`.spec.disabled`
// +kubebuilder:printcolumn:name="ModelType",type=string,JSONPath=`.spec.supportedModelFormats[*].name`
// +kubebuilder:printcolumn:name="Containers",type=string,JSONPath=`.spec.containers[*].name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterServingRuntime struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ServingRuntimeSpec   `json:"spec,omitempty"`
	Status ServingRuntimeStatus `json:"status,omitempty"`
}

// ClusterServingRuntimeList is a list of ClusterServingRuntimes.
// +kubebuilder:object:root=true
type ClusterServingRuntimeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterServingRuntime `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ServingRuntime{}, &ServingRuntimeList{}, &ClusterServingRuntime{}, &ClusterServingRuntimeList{})
}
