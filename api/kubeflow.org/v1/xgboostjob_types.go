package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// XGBoostJob replica types.
const (
	XGBoostJobReplicaTypeMaster ReplicaType = "Master"
	XGBoostJobReplicaTypeWorker ReplicaType = "Worker"
	XGBoostJobKind                          = "XGBoostJob"
)

// XGBoostJobSpec is the desired state of an XGBoost training job.
// +kubebuilder:validation:XValidation:rule="'Master' in self.xgbReplicaSpecs",message="spec.xgbReplicaSpecs[Master] must be present: the Master runs the rabit tracker"
// +kubebuilder:validation:XValidation:rule="!('Master' in self.xgbReplicaSpecs) || !has(self.xgbReplicaSpecs['Master'].replicas) || self.xgbReplicaSpecs['Master'].replicas == 1",message="spec.xgbReplicaSpecs[Master].replicas must be 1: a job has one master; add replicas to Worker instead"
type XGBoostJobSpec struct {
	// RunPolicy holds the run-time rules: clean-up, TTL, deadline, backoff, suspend, managedBy.
	// +kubebuilder:validation:Optional
	RunPolicy RunPolicy `json:"runPolicy"`

	// XGBReplicaSpecs maps Master (required, one replica) and Worker to their specs. Every
	// container gets MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, WORKER_ADDRS and WORKER_PORT.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=5
	// +kubebuilder:validation:XValidation:rule="self.all(k, has(self[k].template.spec) && self[k].template.spec.containers.exists(c, c.name == 'xgboost'))",message="every replica type must have a container named xgboost: it gets the job's port and its exit code decides restarts"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k].template.spec.containers.all(c, has(c.image) && size(c.image) > 0))",message="every container needs an image"
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.lowerAscii() in ['master', 'worker'])",message="replica types must be Master, Worker"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self.filter(j, j.lowerAscii() == k.lowerAscii()).size() == 1)",message="replica types must differ by more than case (Worker and worker name the same type): keep one"
	// +kubebuilder:validation:XValidation:rule="self.map(k, has(self[k].replicas) ? self[k].replicas : 1).sum() <= 2000",message="a XGBoostJob has at most 2000 replicas in all: each pod's WORKER_ADDRS lists every worker; see docs/limits.md"
	XGBReplicaSpecs map[ReplicaType]*ReplicaSpec `json:"xgbReplicaSpecs"`
}

// XGBoostJob runs distributed XGBoost training: one pod and one headless service per replica.
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
type XGBoostJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the job.
	// +optional
	Spec XGBoostJobSpec `json:"spec,omitempty"`
	// Status is the observed state of the job, written by kiln.
	// +optional
	Status JobStatus `json:"status,omitempty"`
}

// XGBoostJobList is a list of XGBoostJobs.
// +kubebuilder:object:root=true
type XGBoostJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []XGBoostJob `json:"items"`
}

func init() { SchemeBuilder.Register(&XGBoostJob{}, &XGBoostJobList{}) }

func (j *XGBoostJob) GetRunPolicy() *RunPolicy                       { return &j.Spec.RunPolicy }
func (j *XGBoostJob) GetReplicaSpecs() map[ReplicaType]*ReplicaSpec  { return j.Spec.XGBReplicaSpecs }
func (j *XGBoostJob) SetReplicaSpecs(m map[ReplicaType]*ReplicaSpec) { j.Spec.XGBReplicaSpecs = m }
func (j *XGBoostJob) GetJobStatus() *JobStatus                       { return &j.Status }
