package v1

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PaddleJob replica types.
const (
	PaddleJobReplicaTypeMaster ReplicaType = "Master"
	PaddleJobReplicaTypeWorker ReplicaType = "Worker"
	PaddleJobKind                          = "PaddleJob"
)

// PaddleElasticPolicy bounds an elastic PaddleJob's workers. As in Kubeflow v1.9, kiln defaults
// the bounds but runs the job with its Worker replicas: neither sets elastic env or an autoscaler.
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",message="spec.elasticPolicy.minReplicas must not exceed maxReplicas"
type PaddleElasticPolicy struct {
	// MinReplicas is the lower bound of workers; default maxReplicas, else Worker replicas.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MinReplicas *int32 `json:"minReplicas,omitempty"`
	// MaxReplicas is the upper bound of workers; default minReplicas, else Worker replicas.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxReplicas *int32 `json:"maxReplicas,omitempty"`
	// MaxRestarts bounds the restarts of an elastic job.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MaxRestarts *int32 `json:"maxRestarts,omitempty"`
	// Metrics are kept for Kubeflow compatibility; kiln creates no autoscaler from them.
	// +optional
	Metrics []autoscalingv2.MetricSpec `json:"metrics,omitempty"`
}

// PaddleJobSpec is the desired state of a PaddlePaddle training job.
// +kubebuilder:validation:XValidation:rule="!('Master' in self.paddleReplicaSpecs) || !has(self.paddleReplicaSpecs['Master'].replicas) || self.paddleReplicaSpecs['Master'].replicas == 1",message="spec.paddleReplicaSpecs[Master].replicas must be 1: a job has one master; add replicas to Worker instead"
type PaddleJobSpec struct {
	// RunPolicy holds the run-time rules: clean-up, TTL, deadline, backoff, suspend, managedBy.
	// +kubebuilder:validation:Optional
	RunPolicy RunPolicy `json:"runPolicy"`

	// ElasticPolicy bounds an elastic job's workers (see PaddleElasticPolicy).
	// +optional
	ElasticPolicy *PaddleElasticPolicy `json:"elasticPolicy,omitempty"`

	// PaddleReplicaSpecs maps Master (parameter-server mode) and Worker to their specs. Every
	// container gets PADDLE_MASTER, PADDLE_NNODES and PADDLE_JOB_ID; without a Master (collective
	// mode) worker 0 is the endpoint.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=2
	// +kubebuilder:validation:XValidation:rule="self.all(k, has(self[k].template.spec) && self[k].template.spec.containers.exists(c, c.name == 'paddle'))",message="every replica type must have a container named paddle: it gets the job's port and its exit code decides restarts"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k].template.spec.containers.all(c, has(c.image) && size(c.image) > 0))",message="every container needs an image"
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.lowerAscii() in ['master', 'worker'])",message="replica types must be Master, Worker"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self.filter(j, j.lowerAscii() == k.lowerAscii()).size() == 1)",message="replica types must differ by more than case (Worker and worker name the same type): keep one"
	// +kubebuilder:validation:XValidation:rule="self.map(k, has(self[k].replicas) ? self[k].replicas : 1).sum() <= 10000",message="a PaddleJob has at most 10000 replicas in all; see docs/limits.md"
	PaddleReplicaSpecs map[ReplicaType]*ReplicaSpec `json:"paddleReplicaSpecs"`
}

// PaddleJob runs distributed PaddlePaddle training: one pod and one headless service per replica.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.paddleReplicaSpecs.Worker.replicas,statuspath=.status.replicaStatuses.Worker.active,selectorpath=.status.replicaStatuses.Worker.selector
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
type PaddleJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the job.
	// +optional
	Spec PaddleJobSpec `json:"spec,omitempty"`
	// Status is the observed state of the job, written by kiln.
	// +optional
	Status JobStatus `json:"status,omitempty"`
}

// PaddleJobList is a list of PaddleJobs.
// +kubebuilder:object:root=true
type PaddleJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PaddleJob `json:"items"`
}

func init() { SchemeBuilder.Register(&PaddleJob{}, &PaddleJobList{}) }

func (j *PaddleJob) GetRunPolicy() *RunPolicy                       { return &j.Spec.RunPolicy }
func (j *PaddleJob) GetReplicaSpecs() map[ReplicaType]*ReplicaSpec  { return j.Spec.PaddleReplicaSpecs }
func (j *PaddleJob) SetReplicaSpecs(m map[ReplicaType]*ReplicaSpec) { j.Spec.PaddleReplicaSpecs = m }
func (j *PaddleJob) GetJobStatus() *JobStatus                       { return &j.Status }
