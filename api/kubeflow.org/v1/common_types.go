package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Label keys written on every pod and service of a job. The Kubeflow Python SDK selects pods with them.
const (
	LabelJobName      = "training.kubeflow.org/job-name"
	LabelOperatorName = "training.kubeflow.org/operator-name"
	LabelReplicaType  = "training.kubeflow.org/replica-type"
	LabelReplicaIndex = "training.kubeflow.org/replica-index"
	LabelJobRole      = "training.kubeflow.org/job-role"
	JobRoleMaster     = "master"
)

// Values of runPolicy.managedBy.
const (
	// KubeflowJobsController is the manager kiln answers to, as Kubeflow's Training Operator does.
	KubeflowJobsController = "kubeflow.org/training-operator"
	// MultiKueueController hands the job to Kueue's MultiKueue; kiln then leaves it alone.
	MultiKueueController = "kueue.x-k8s.io/multikueue"
)

// ReplicaType names a role in a job, such as Worker or PS. Keys of the replica-spec maps.
type ReplicaType string

// RestartPolicy says what happens when a replica's pod fails.
// +kubebuilder:validation:Enum=Always;OnFailure;Never;ExitCode
type RestartPolicy string

const (
	// RestartPolicyAlways restarts containers in place, whatever their exit code.
	RestartPolicyAlways RestartPolicy = "Always"
	// RestartPolicyOnFailure restarts failed containers in place and recreates failed pods.
	RestartPolicyOnFailure RestartPolicy = "OnFailure"
	// RestartPolicyNever leaves a failed pod failed; the job fails with it.
	RestartPolicyNever RestartPolicy = "Never"
	// RestartPolicyExitCode recreates a pod whose main container exited with a retryable code
	// (128 and above, i.e. killed by a signal) and fails the job on codes 1-127.
	RestartPolicyExitCode RestartPolicy = "ExitCode"
)

// CleanPodPolicy says which pods are deleted once a job has finished.
// +kubebuilder:validation:Enum=All;Running;None
type CleanPodPolicy string

const (
	// CleanPodPolicyAll deletes every pod of the finished job.
	CleanPodPolicyAll CleanPodPolicy = "All"
	// CleanPodPolicyRunning deletes the pods still running or pending; completed pods and their logs stay.
	CleanPodPolicyRunning CleanPodPolicy = "Running"
	// CleanPodPolicyNone deletes no pod.
	CleanPodPolicyNone CleanPodPolicy = "None"
)

// RunPolicy holds the run-time rules common to every distributed training job.
// +kubebuilder:validation:XValidation:rule="has(self.managedBy) == has(oldSelf.managedBy) && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)",message="spec.runPolicy.managedBy is immutable: create a new job to hand it to another controller"
type RunPolicy struct {
	// CleanPodPolicy says which pods are deleted once the job has finished: All, Running (pods still
	// running or pending; the default in kiln) or None. Suspending a job always deletes all its pods.
	// +optional
	CleanPodPolicy *CleanPodPolicy `json:"cleanPodPolicy,omitempty"`

	// TTLSecondsAfterFinished deletes the job (and through garbage collection everything it owns)
	// this many seconds after it finished. Unset: the job is kept.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=315360000
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// ActiveDeadlineSeconds fails the job this many seconds after its start time (reset on resume).
	// At most 315360000 (ten years).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=315360000
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// BackoffLimit is the number of retries before the job is marked Failed. Every pod kiln
	// recreates after a failure and every in-place container restart counts as one retry.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`

	// SchedulingPolicy configures gang scheduling.
	// +optional
	SchedulingPolicy *SchedulingPolicy `json:"schedulingPolicy,omitempty"`

	// Suspend deletes the job's pods and keeps the job until it is set back to false, when the
	// pods are recreated and the start time reset (as batch/v1 Job's suspend does).
	// +kubebuilder:default:=false
	// +optional
	Suspend *bool `json:"suspend,omitempty"`

	// ManagedBy names the controller that reconciles this job: unset or
	// "kubeflow.org/training-operator" for kiln, "kueue.x-k8s.io/multikueue" to hand it to
	// Kueue's MultiKueue. kiln never touches a job managed by another controller. Immutable.
	// +kubebuilder:validation:XValidation:rule="self in ['kubeflow.org/training-operator', 'kueue.x-k8s.io/multikueue']",message="spec.runPolicy.managedBy must be kubeflow.org/training-operator (kiln) or kueue.x-k8s.io/multikueue"
	// +optional
	ManagedBy *string `json:"managedBy,omitempty"`
}

// SchedulingPolicy configures gang scheduling of a job's pods.
type SchedulingPolicy struct {
	// MinAvailable is the number of pods that must be placed together; default all of them.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MinAvailable *int32 `json:"minAvailable,omitempty"`
	// Queue is the gang scheduler's queue. Immutable once set.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.runPolicy.schedulingPolicy.queue is immutable"
	// +optional
	Queue string `json:"queue,omitempty"`
	// MinResources are the resources the gang needs before any pod starts.
	// +optional
	MinResources *map[corev1.ResourceName]resource.Quantity `json:"minResources,omitempty"`
	// PriorityClass of the pod group.
	// +optional
	PriorityClass string `json:"priorityClass,omitempty"`
	// ScheduleTimeoutSeconds is how long the gang may wait to be placed.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=315360000
	// +optional
	ScheduleTimeoutSeconds *int32 `json:"scheduleTimeoutSeconds,omitempty"`
}

// ReplicaSpec describes one role of the job: how many pods, from which template, restarted how.
type ReplicaSpec struct {
	// Replicas is the number of pods of this role. Default 1. At most 10000, and a job's
	// replicas together at most its kind's limit (docs/limits.md).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Template is the pod template. Its restartPolicy is replaced by this spec's restartPolicy.
	// +optional
	Template corev1.PodTemplateSpec `json:"template,omitempty"`

	// RestartPolicy is Always, OnFailure, Never or ExitCode. Default per kind (TFJob and
	// XGBoostJob Never, PyTorchJob OnFailure).
	// +optional
	RestartPolicy RestartPolicy `json:"restartPolicy,omitempty"`
}

// JobConditionType is the type of a job condition.
type JobConditionType string

const (
	// JobCreated means kiln has seen the job.
	JobCreated JobConditionType = "Created"
	// JobRunning means the replicas that drive the job are running.
	JobRunning JobConditionType = "Running"
	// JobRestarting means failed pods are being recreated.
	JobRestarting JobConditionType = "Restarting"
	// JobSucceeded means the job finished successfully.
	JobSucceeded JobConditionType = "Succeeded"
	// JobSuspended means the job is suspended and has no pods.
	JobSuspended JobConditionType = "Suspended"
	// JobFailed means the job failed; it will not be retried.
	JobFailed JobConditionType = "Failed"
)

// JobCondition is one observation of the job's state.
type JobCondition struct {
	// Type is Created, Running, Restarting, Succeeded, Suspended or Failed.
	Type JobConditionType `json:"type"`
	// Status is True, False or Unknown.
	Status corev1.ConditionStatus `json:"status"`
	// Reason is a CamelCase word, "<Kind><Reason>" such as TFJobRunning.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message says what happened, for people.
	// +optional
	Message string `json:"message,omitempty"`
	// LastUpdateTime is when the condition was last written.
	// +optional
	LastUpdateTime metav1.Time `json:"lastUpdateTime,omitempty"`
	// LastTransitionTime is when the condition last changed status.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// ReplicaStatus counts the pods of one role, as seen at the last reconcile.
type ReplicaStatus struct {
	// Active is the number of running pods.
	// +optional
	Active int32 `json:"active,omitempty"`
	// Succeeded is the number of pods that completed successfully.
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`
	// Failed is the number of failed pods.
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// LabelSelector is deprecated and never set; use selector.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// Selector is the label selector of this role's pods, for the scale subresource.
	// +optional
	Selector string `json:"selector,omitempty"`
	// CompletedIndexes are the replica indexes whose pod succeeded, in the batch Job's text form
	// ("0,2-4"): kiln never runs such an index again, even when its pod is gone before the job
	// ends (pod garbage collection, a node removed, a deletion by hand). kiln's addition to
	// Kubeflow's status.
	// +optional
	CompletedIndexes string `json:"completedIndexes,omitempty"`
}

// JobStatus is the observed state of a training job.
type JobStatus struct {
	// Conditions, the most recent last. The State column shows the type of the last one.
	// +optional
	Conditions []JobCondition `json:"conditions,omitempty"`
	// ReplicaStatuses counts pods per role, keyed by replica type (e.g. "Worker").
	// +optional
	ReplicaStatuses map[ReplicaType]*ReplicaStatus `json:"replicaStatuses,omitempty"`
	// StartTime is when kiln started the job's pods (reset on resume).
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime is when the job succeeded or failed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// LastReconcileTime is kept for compatibility; kiln does not write it.
	// +optional
	LastReconcileTime *metav1.Time `json:"lastReconcileTime,omitempty"`
}

// Job is what every kubeflow.org/v1 training job offers the replica-job engine.
// +kubebuilder:object:generate=false
type Job interface {
	metav1.Object
	runtime.Object
	GetRunPolicy() *RunPolicy
	GetReplicaSpecs() map[ReplicaType]*ReplicaSpec
	SetReplicaSpecs(map[ReplicaType]*ReplicaSpec)
	GetJobStatus() *JobStatus
}
