package v1beta1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Condition types of an InferenceService, KServe's: Ready is PredictorReady and IngressReady.
const (
	ConditionReady                = "Ready"
	ConditionPredictorReady       = "PredictorReady"
	ConditionIngressReady         = "IngressReady"
	ConditionCanaryPredictorReady = "CanaryPredictorReady"
	ConditionStopped              = "Stopped"
)

// InferenceServiceStatus is what kiln observed of the service, in KServe's fields.
type InferenceServiceStatus struct {
	// ObservedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready (PredictorReady and IngressReady), PredictorReady, IngressReady,
	// CanaryPredictorReady while canaries are set, and Stopped.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Annotations KServe keeps on its status.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// URL is where clients outside the cluster reach the service, once its predictor is ready.
	// +optional
	URL string `json:"url,omitempty"`
	// Address is the service's address inside the cluster.
	// +optional
	Address *Addressable `json:"address,omitempty"`
	// Components holds the predictor's status under "predictor".
	// +optional
	Components map[string]ComponentStatusSpec `json:"components,omitempty"`
	// ModelStatus is the model's loading state.
	// +optional
	ModelStatus ModelStatus `json:"modelStatus,omitempty"`
	// CanaryStatuses are the canaries' readiness and traffic.
	// +optional
	CanaryStatuses []CanaryStatus `json:"canaryStatuses,omitempty"`
	// DeploymentMode is the mode the service runs in: Standard.
	// +optional
	DeploymentMode string `json:"deploymentMode,omitempty"`
	// ServingRuntimeName is the ServingRuntime picked for the model, when namespaced.
	// +optional
	ServingRuntimeName string `json:"servingRuntimeName,omitempty"`
	// ClusterServingRuntimeName is the ClusterServingRuntime picked for the model.
	// +optional
	ClusterServingRuntimeName string `json:"clusterServingRuntimeName,omitempty"`
}

// Addressable is an address: a URL.
type Addressable struct {
	// +optional
	Name *string `json:"name,omitempty"`
	// +optional
	URL string `json:"url,omitempty"`
	// +optional
	CACerts *string `json:"CACerts,omitempty"`
	// +optional
	Audience *string `json:"audience,omitempty"`
}

// ComponentStatusSpec is a component's status.
type ComponentStatusSpec struct {
	// +optional
	LatestReadyRevision string `json:"latestReadyRevision,omitempty"`
	// +optional
	LatestCreatedRevision string `json:"latestCreatedRevision,omitempty"`
	// +optional
	PreviousRolledoutRevision string `json:"previousRolledoutRevision,omitempty"`
	// +optional
	LatestRolledoutRevision string `json:"latestRolledoutRevision,omitempty"`
	// Traffic is the split of requests between the component's revisions.
	// +optional
	Traffic []TrafficTarget `json:"traffic,omitempty"`
	// +optional
	URL string `json:"url,omitempty"`
	// +optional
	RestURL string `json:"restUrl,omitempty"`
	// +optional
	GRPCURL string `json:"grpcUrl,omitempty"`
	// +optional
	Address *Addressable `json:"address,omitempty"`
}

// TrafficTarget is a revision's share of requests.
type TrafficTarget struct {
	// +optional
	Tag string `json:"tag,omitempty"`
	// +optional
	RevisionName string `json:"revisionName,omitempty"`
	// +optional
	ConfigurationName string `json:"configurationName,omitempty"`
	// +optional
	LatestRevision *bool `json:"latestRevision,omitempty"`
	// +optional
	Percent *int64 `json:"percent,omitempty"`
	// +optional
	URL string `json:"url,omitempty"`
}

// CanaryStatus is a canary's readiness and share.
type CanaryStatus struct {
	Name           string `json:"name"`
	Ready          bool   `json:"ready"`
	TrafficPercent int32  `json:"trafficPercent"`
	// +optional
	ModelStatus ModelStatus `json:"modelStatus,omitempty"`
}

// TransitionStatus says whether the serving endpoints reflect the current spec.
// +kubebuilder:validation:Enum="";UpToDate;InProgress;BlockedByFailedLoad;InvalidSpec
type TransitionStatus string

// The transition statuses.
const (
	UpToDate            TransitionStatus = "UpToDate"
	InProgress          TransitionStatus = "InProgress"
	BlockedByFailedLoad TransitionStatus = "BlockedByFailedLoad"
	InvalidSpec         TransitionStatus = "InvalidSpec"
)

// ModelState is a model's loading state.
// +kubebuilder:validation:Enum="";Pending;Standby;Loading;Loaded;FailedToLoad
type ModelState string

// The model states.
const (
	Pending      ModelState = "Pending"
	Standby      ModelState = "Standby"
	Loading      ModelState = "Loading"
	Loaded       ModelState = "Loaded"
	FailedToLoad ModelState = "FailedToLoad"
)

// FailureReason is why a model is not served.
// +kubebuilder:validation:Enum=ModelLoadFailed;RuntimeUnhealthy;RuntimeDisabled;NoSupportingRuntime;RuntimeNotRecognized;InvalidPredictorSpec
type FailureReason string

// The failure reasons.
const (
	ModelLoadFailed      FailureReason = "ModelLoadFailed"
	RuntimeUnhealthy     FailureReason = "RuntimeUnhealthy"
	RuntimeDisabled      FailureReason = "RuntimeDisabled"
	NoSupportingRuntime  FailureReason = "NoSupportingRuntime"
	RuntimeNotRecognized FailureReason = "RuntimeNotRecognized"
	InvalidPredictorSpec FailureReason = "InvalidPredictorSpec"
)

// ModelStatus is the model's loading state and its last failure.
type ModelStatus struct {
	// +optional
	TransitionStatus TransitionStatus `json:"transitionStatus,omitempty"`
	// +optional
	ModelRevisionStates *ModelRevisionStates `json:"states,omitempty"`
	// +optional
	LastFailureInfo *FailureInfo `json:"lastFailureInfo,omitempty"`
	// +optional
	ModelCopies *ModelCopies `json:"copies,omitempty"`
}

// ModelRevisionStates are the active and the target model's states.
type ModelRevisionStates struct {
	// +optional
	ActiveModelState ModelState `json:"activeModelState,omitempty"`
	// +optional
	TargetModelState ModelState `json:"targetModelState,omitempty"`
}

// FailureInfo is a model's last failure.
type FailureInfo struct {
	// +optional
	Location string `json:"location,omitempty"`
	// +optional
	Reason FailureReason `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	ModelRevisionName string `json:"modelRevisionName,omitempty"`
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
	// +optional
	ExitCode int32 `json:"exitCode,omitempty"`
}

// ModelCopies counts the model's copies.
type ModelCopies struct {
	// +optional
	FailedCopies int32 `json:"failedCopies"`
	// +optional
	TotalCopies int32 `json:"totalCopies,omitempty"`
}
