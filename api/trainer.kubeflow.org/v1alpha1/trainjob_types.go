package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TrainJobKind is the kind of a TrainJob.
const TrainJobKind = "TrainJob"

// TrainJob is one training run on a training runtime: kiln makes the runtime's JobSet, with the
// TrainJob's trainer, initializers and patches applied, and reports how it runs.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.conditions[-1:].type`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be an RFC 1035 label (lower-case letters, digits and '-', starting with a letter): the JobSet and its pods' host names are made from it"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name is longer than 63 characters: the JobSet's Service is named after it"
type TrainJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec TrainJobSpec `json:"spec,omitzero"`
	// +optional
	Status TrainJobStatus `json:"status,omitzero"`
}

// TrainJobList is a list of TrainJobs.
// +kubebuilder:object:root=true
type TrainJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrainJob `json:"items"`
}

// The TrainJob's condition types (Trainer's three) and kiln's additions.
const (
	TrainJobSuspended = "Suspended"
	TrainJobComplete  = "Complete"
	TrainJobFailed    = "Failed"
	// TrainJobCreated and TrainJobRunning are kiln's, and only ever say why the TrainJob cannot
	// be running: Created while its JobSet cannot be made, Running False while its gang waits.
	// Kubeflow's SDK reports a TrainJob Running from its pods only while it has no condition.
	TrainJobCreated = "Created"
	TrainJobRunning = "Running"
)

// The reasons of the TrainJob's conditions.
const (
	TrainJobSuspendedReason           = "Suspended"
	TrainJobResumedReason             = "Resumed"
	TrainJobRuntimeNotSupportedReason = "TrainingRuntimeNotSupported"
	TrainJobDeadlineExceededReason    = "DeadlineExceeded"
)

// TrainJobSpec is the run: its runtime and what the TrainJob changes in it.
type TrainJobSpec struct {
	// RuntimeRef names the runtime.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="runtimeRef cannot change: create a new TrainJob"
	// +required
	RuntimeRef RuntimeRef `json:"runtimeRef,omitzero"`
	// Initializer fetches the dataset and the model before the trainer starts.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="initializer cannot change: create a new TrainJob"
	// +optional
	Initializer *Initializer `json:"initializer,omitempty"`
	// Trainer overrides the runtime's trainer container and node count.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="trainer cannot change: create a new TrainJob"
	// +optional
	Trainer *Trainer `json:"trainer,omitempty"`
	// RuntimePatches are changes to the runtime's JobSet, one per manager (a tool or a
	// controller such as Kueue), applied in order.
	// +listType=map
	// +listMapKey=manager
	// +kubebuilder:validation:MaxItems=16
	// +optional
	RuntimePatches []RuntimePatch `json:"runtimePatches,omitempty"`
	// Suspend stops the run: its pods are deleted, and resuming starts them again.
	// +kubebuilder:default=false
	// +optional
	Suspend *bool `json:"suspend,omitempty"`
	// ActiveDeadlineSeconds bounds the run's time (at most a year); past it the TrainJob fails
	// with DeadlineExceeded.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=31536000
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="activeDeadlineSeconds cannot change: create a new TrainJob"
	// +optional
	ActiveDeadlineSeconds int64 `json:"activeDeadlineSeconds,omitempty"`
	// ManagedBy is the controller that runs the TrainJob: trainer.kubeflow.org/trainjob-controller
	// (kiln, the default) or kueue.x-k8s.io/multikueue (Kueue sends it to another cluster).
	// +kubebuilder:default="trainer.kubeflow.org/trainjob-controller"
	// +kubebuilder:validation:XValidation:rule="self in ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue']",message="managedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue"
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="managedBy cannot change: create a new TrainJob"
	// +optional
	ManagedBy *string `json:"managedBy,omitempty"`
}

// RuntimeRef names a TrainingRuntime (in the TrainJob's namespace) or a ClusterTrainingRuntime.
type RuntimeRef struct {
	// Name is the runtime's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name,omitempty"`
	// APIGroup is trainer.kubeflow.org, the default.
	// +kubebuilder:default="trainer.kubeflow.org"
	// +kubebuilder:validation:MaxLength=253
	// +optional
	APIGroup *string `json:"apiGroup,omitempty"`
	// Kind is ClusterTrainingRuntime (the default) or TrainingRuntime.
	// +kubebuilder:default="ClusterTrainingRuntime"
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Kind *string `json:"kind,omitempty"`
}

// Initializer is what is fetched before training: a dataset and a model.
type Initializer struct {
	// +optional
	Dataset *DatasetInitializer `json:"dataset,omitempty"`
	// +optional
	Model *ModelInitializer `json:"model,omitempty"`
}

// DatasetInitializer fetches a dataset into the runtime's dataset initializer step.
type DatasetInitializer struct {
	// StorageUri is where the dataset is (for example s3://bucket/path or hf://org/name).
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')",message="storageUri must be empty or a URI (scheme://...)"
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	StorageUri *string `json:"storageUri,omitempty"` //nolint:revive // Trainer's field name
	// Env is added to the initializer's container.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`
	// SecretRef names a Secret whose keys become the initializer's environment (credentials).
	// +optional
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`
}

// ModelInitializer fetches a model into the runtime's model initializer step.
type ModelInitializer struct {
	// StorageUri is where the model is (for example s3://bucket/path or hf://org/name).
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')",message="storageUri must be empty or a URI (scheme://...)"
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	StorageUri *string `json:"storageUri,omitempty"` //nolint:revive // Trainer's field name
	// Env is added to the initializer's container.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`
	// SecretRef names a Secret whose keys become the initializer's environment (credentials).
	// +optional
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`
}

// Trainer overrides the runtime's trainer container ("node") and its node count.
type Trainer struct {
	// Image replaces the trainer container's image.
	// +kubebuilder:validation:MaxLength=500
	// +optional
	Image *string `json:"image,omitempty"`
	// Command replaces the trainer container's command.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:MaxLength=1048576
	// +optional
	Command []string `json:"command,omitempty"`
	// Args replaces the trainer container's args.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:MaxLength=1048576
	// +optional
	Args []string `json:"args,omitempty"`
	// Env is added to the trainer container; the framework's own variables (PET_* for torch,
	// DMLC_* for xgboost, JAX_* for jax) are refused.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`
	// NumNodes replaces the runtime's mlPolicy.numNodes.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	NumNodes *int32 `json:"numNodes,omitempty"`
	// ResourcesPerNode replaces the trainer container's resources.
	// +optional
	ResourcesPerNode *corev1.ResourceRequirements `json:"resourcesPerNode,omitempty"`
	// NumProcPerNode is each node's processes (torch: PET_NPROC_PER_NODE; mpi: its slots).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4096
	// +optional
	NumProcPerNode *int32 `json:"numProcPerNode,omitempty"`
}

// RuntimePatch is one manager's changes to the runtime's JobSet.
type RuntimePatch struct {
	// Manager names who wrote the patch (for example kueue.x-k8s.io/manager).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="manager cannot change: remove the patch and add another"
	// +required
	Manager string `json:"manager,omitempty"`
	// Time is when it was written.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
	// TrainingRuntimeSpec is the patch of the runtime's spec.
	// +optional
	TrainingRuntimeSpec *TrainingRuntimeSpecPatch `json:"trainingRuntimeSpec,omitempty"`
}

// TrainingRuntimeSpecPatch patches a runtime's spec.
type TrainingRuntimeSpecPatch struct {
	// +optional
	Template *JobSetTemplatePatch `json:"template,omitempty"`
}

// JobSetTemplatePatch patches the JobSet: its labels and annotations, and its replicated jobs.
type JobSetTemplatePatch struct {
	// Metadata's labels and annotations are added to the JobSet's.
	// +optional
	Metadata *metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec *JobSetSpecPatch `json:"spec,omitempty"`
}

// JobSetSpecPatch patches replicated jobs by name.
type JobSetSpecPatch struct {
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	// +optional
	ReplicatedJobs []ReplicatedJobPatch `json:"replicatedJobs,omitempty"`
}

// ReplicatedJobPatch patches one replicated job of the runtime.
type ReplicatedJobPatch struct {
	// Name is the replicated job's; a name the runtime lacks is refused.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name,omitempty"`
	// +optional
	Template *JobTemplatePatch `json:"template,omitempty"`
}

// JobTemplatePatch patches a replicated job's Job template.
type JobTemplatePatch struct {
	// Metadata's labels and annotations are added to the Jobs'.
	// +optional
	Metadata *metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec *JobSpecPatch `json:"spec,omitempty"`
}

// JobSpecPatch patches a Job's pod template.
type JobSpecPatch struct {
	// +optional
	Template *PodTemplatePatch `json:"template,omitempty"`
}

// PodTemplatePatch patches a pod template.
type PodTemplatePatch struct {
	// Metadata's labels and annotations are added to the pods'.
	// +optional
	Metadata *metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec *PodSpecPatch `json:"spec,omitempty"`
}

// PodSpecPatch is what a patch may change in a pod, merged as a strategic merge patch: scalars
// replace, containers, volumes and env merge by name, node selectors by key; tolerations replace
// the runtime's.
type PodSpecPatch struct {
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="serviceAccountName cannot change"
	// +optional
	ServiceAccountName *string `json:"serviceAccountName,omitempty"`
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="volumes cannot change"
	// +optional
	Volumes []corev1.Volume `json:"volumes,omitempty"`
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="initContainers cannot change"
	// +optional
	InitContainers []ContainerPatch `json:"initContainers,omitempty"`
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="containers cannot change"
	// +optional
	Containers []ContainerPatch `json:"containers,omitempty"`
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="imagePullSecrets cannot change"
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="securityContext cannot change"
	// +optional
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +optional
	SchedulingGates []corev1.PodSchedulingGate `json:"schedulingGates,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=31536000
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="terminationGracePeriodSeconds cannot change"
	// +optional
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
}

// ContainerPatch patches one container (or init container) by name.
type ContainerPatch struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name,omitempty"`
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	// +optional
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`
	// +optional
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`
}

// TrainJobStatus is how the run goes.
// +kubebuilder:validation:MinProperties=1
type TrainJobStatus struct {
	// Conditions: Suspended, Complete and Failed (Trainer's); Created and Running (kiln's)
	// only while they say why the TrainJob cannot be running.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// JobsStatus counts each replicated job's Jobs by state.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	// +optional
	JobsStatus []JobStatus `json:"jobsStatus,omitempty"`
	// TrainerStatus is the progress the training code reports.
	// +optional
	TrainerStatus *TrainerStatus `json:"trainerStatus,omitempty"`
}

// JobStatus counts one replicated job's Jobs by state.
type JobStatus struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +required
	Ready *int32 `json:"ready,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +required
	Succeeded *int32 `json:"succeeded,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +required
	Failed *int32 `json:"failed,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +required
	Active *int32 `json:"active,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +required
	Suspended *int32 `json:"suspended,omitempty"`
}

// JobsRun says the counts show every Job made so far with its pods ready or done, and one at
// least: the TrainJob runs (what Kubeflow's SDK reports as Running, from the pods).
func JobsRun(counts []JobStatus) bool {
	n := func(p *int32) int32 {
		if p == nil {
			return 0
		}
		return *p
	}
	for _, c := range counts {
		if active := n(c.Active); n(c.Ready) < active || active+n(c.Succeeded) == 0 {
			return false
		}
	}
	return len(counts) > 0
}

// TrainerStatus is the training code's progress.
// +kubebuilder:validation:XValidation:rule="has(self.lastUpdatedTime)",message="trainerStatus needs lastUpdatedTime"
type TrainerStatus struct {
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	ProgressPercentage *int32 `json:"progressPercentage,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	EstimatedRemainingSeconds *int32 `json:"estimatedRemainingSeconds,omitempty"`
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	// +optional
	Metrics []Metric `json:"metrics,omitempty"`
	// +optional
	LastUpdatedTime metav1.Time `json:"lastUpdatedTime,omitempty"`
}

// Metric is one named value the training code reports.
type Metric struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +required
	Name string `json:"name,omitempty"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +required
	Value string `json:"value,omitempty"`
}

func init() {
	SchemeBuilder.Register(&TrainJob{}, &TrainJobList{}, &TrainingRuntime{}, &TrainingRuntimeList{},
		&ClusterTrainingRuntime{}, &ClusterTrainingRuntimeList{})
}
