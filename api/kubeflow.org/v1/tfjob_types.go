package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// TFJob replica types.
const (
	TFJobReplicaTypeChief  ReplicaType = "Chief"
	TFJobReplicaTypeMaster ReplicaType = "Master" // legacy alias of Chief
	TFJobReplicaTypePS     ReplicaType = "PS"
	TFJobReplicaTypeWorker ReplicaType = "Worker"
	TFJobReplicaTypeEval   ReplicaType = "Evaluator"
	TFJobKind                          = "TFJob"
)

// SuccessPolicy says when a TFJob without a chief has succeeded.
type SuccessPolicy string

const (
	// SuccessPolicyDefault: the job succeeds when worker 0 completes.
	SuccessPolicyDefault SuccessPolicy = ""
	// SuccessPolicyAllWorkers: the job succeeds when every worker completes.
	SuccessPolicyAllWorkers SuccessPolicy = "AllWorkers"
)

// TFJobSpec is the desired state of a TensorFlow training job.
// +kubebuilder:validation:XValidation:rule="!('Chief' in self.tfReplicaSpecs && 'Master' in self.tfReplicaSpecs)",message="spec.tfReplicaSpecs must not have more than 1 Chief or Master role: keep one of them"
type TFJobSpec struct {
	// RunPolicy holds the run-time rules: clean-up, TTL, deadline, backoff, suspend, managedBy.
	// +kubebuilder:validation:Optional
	RunPolicy RunPolicy `json:"runPolicy"`

	// SuccessPolicy, for a job without Chief: "" (worker 0 completing ends the job) or "AllWorkers".
	// +kubebuilder:validation:Enum="";AllWorkers
	// +optional
	SuccessPolicy *SuccessPolicy `json:"successPolicy,omitempty"`

	// TFReplicaSpecs maps a replica type (Chief, Master, PS, Worker, Evaluator) to its spec.
	// Every pod gets TF_CONFIG describing the whole cluster when the job has more than one replica.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=5
	// +kubebuilder:validation:XValidation:rule="self.all(k, has(self[k].template.spec) && self[k].template.spec.containers.exists(c, c.name == 'tensorflow'))",message="every replica type must have a container named tensorflow: it gets the job's port and its exit code decides restarts"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k].template.spec.containers.all(c, has(c.image) && size(c.image) > 0))",message="every container needs an image"
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.lowerAscii() in ['chief', 'evaluator', 'master', 'ps', 'worker'])",message="replica types must be Chief, Evaluator, Master, PS, Worker"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self.filter(j, j.lowerAscii() == k.lowerAscii()).size() == 1)",message="replica types must differ by more than case (Worker and worker name the same type): keep one"
	// +kubebuilder:validation:XValidation:rule="self.map(k, has(self[k].replicas) ? self[k].replicas : 1).sum() <= 1000",message="a TFJob has at most 1000 replicas in all: each pod's TF_CONFIG lists every replica; see docs/limits.md"
	TFReplicaSpecs map[ReplicaType]*ReplicaSpec `json:"tfReplicaSpecs"`

	// EnableDynamicWorker gives each pod a sparse TF_CONFIG (itself and the PS) and ignores worker
	// failures, so workers can come and go.
	// +optional
	EnableDynamicWorker bool `json:"enableDynamicWorker,omitempty"`
}

// TFJob runs distributed TensorFlow training: one pod and one headless service per replica.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.conditions[-1:].type`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Workers-Active",type=integer,JSONPath=`.status.replicaStatuses.Worker.active`
// +kubebuilder:printcolumn:name="Workers-Succeeded",type=integer,JSONPath=`.status.replicaStatuses.Worker.succeeded`
// +kubebuilder:printcolumn:name="Workers-Failed",type=integer,JSONPath=`.status.replicaStatuses.Worker.failed`
// +kubebuilder:printcolumn:name="Started",type=date,JSONPath=`.status.startTime`,priority=1
// +kubebuilder:printcolumn:name="Completed",type=date,JSONPath=`.status.completionTime`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[-1:].message`,priority=1
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label: at most 63 lowercase letters, digits and -, starting with a letter, e.g. mnist-train"
type TFJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the job.
	// +optional
	Spec TFJobSpec `json:"spec,omitempty"`
	// Status is the observed state of the job, written by kiln.
	// +optional
	Status JobStatus `json:"status,omitempty"`
}

// TFJobList is a list of TFJobs.
// +kubebuilder:object:root=true
type TFJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TFJob `json:"items"`
}

func init() { SchemeBuilder.Register(&TFJob{}, &TFJobList{}) }

func (j *TFJob) GetRunPolicy() *RunPolicy                       { return &j.Spec.RunPolicy }
func (j *TFJob) GetReplicaSpecs() map[ReplicaType]*ReplicaSpec  { return j.Spec.TFReplicaSpecs }
func (j *TFJob) SetReplicaSpecs(m map[ReplicaType]*ReplicaSpec) { j.Spec.TFReplicaSpecs = m }
func (j *TFJob) GetJobStatus() *JobStatus                       { return &j.Status }
