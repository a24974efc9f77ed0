package v1

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PyTorchJob replica types.
const (
	PyTorchJobReplicaTypeMaster ReplicaType = "Master"
	PyTorchJobReplicaTypeWorker ReplicaType = "Worker"
	PyTorchJobKind                          = "PyTorchJob"
)

// RDZVBackend is a torchrun rendezvous backend.
// +kubebuilder:validation:Enum=c10d;etcd;etcd-v2
type RDZVBackend string

// RDZVConf is one key=value option of the rendezvous backend.
type RDZVConf struct {
	Key   string `json:"key,omitempty"`
	Value string `json:"value,omitempty"`
}

// ElasticPolicy configures elastic (torchrun rendezvous) training.
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",message="spec.elasticPolicy.minReplicas must not exceed maxReplicas"
type ElasticPolicy struct {
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
	// RDZVBackend is c10d (default), etcd or etcd-v2.
	// +optional
	RDZVBackend *RDZVBackend `json:"rdzvBackend,omitempty"`
	// RDZVPort is the rendezvous port; default the Worker container's pytorchjob-port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	RDZVPort *int32 `json:"rdzvPort,omitempty"`
	// RDZVHost is the rendezvous host; default "<job>-worker-0".
	// +optional
	RDZVHost *string `json:"rdzvHost,omitempty"`
	// RDZVID is the rendezvous id (PET_RDZV_ID).
	// +optional
	RDZVID *string `json:"rdzvId,omitempty"`
	// RDZVConf are extra rendezvous options (PET_RDZV_CONF).
	// +optional
	RDZVConf []RDZVConf `json:"rdzvConf,omitempty"`
	// Standalone starts a local rendezvous (PET_STANDALONE).
	// +optional
	Standalone *bool `json:"standalone,omitempty"`
	// NProcPerNode is deprecated: use spec.nprocPerNode.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4096
	// +optional
	NProcPerNode *int32 `json:"nProcPerNode,omitempty"`
	// MaxRestarts is torchrun's --max-restarts (PET_MAX_RESTARTS).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MaxRestarts *int32 `json:"maxRestarts,omitempty"`
	// Metrics for a HorizontalPodAutoscaler of the Worker replicas, as an HPA takes them: each
	// metric sets the one source its type names, with a target of positive values. At most 32.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(m, (!has(m.resource) || !has(m.resource.target.averageUtilization) || m.resource.target.averageUtilization >= 1) && (!has(m.containerResource) || !has(m.containerResource.target.averageUtilization) || m.containerResource.target.averageUtilization >= 1) && (!has(m.pods) || !has(m.pods.target.averageUtilization) || m.pods.target.averageUtilization >= 1) && (!has(m.object) || !has(m.object.target.averageUtilization) || m.object.target.averageUtilization >= 1) && (!has(m.external) || !has(m.external.target.averageUtilization) || m.external.target.averageUtilization >= 1))",message="spec.elasticPolicy.metrics: a target's averageUtilization is a percent of the Worker pods' request and must be at least 1"
	// +optional
	Metrics []autoscalingv2.MetricSpec `json:"metrics,omitempty"`
}

// PyTorchJobSpec is the desired state of a PyTorch training job.
// +kubebuilder:validation:XValidation:rule="!('Master' in self.pytorchReplicaSpecs) || !has(self.pytorchReplicaSpecs['Master'].replicas) || self.pytorchReplicaSpecs['Master'].replicas == 1",message="spec.pytorchReplicaSpecs[Master].replicas must be 1: a job has one master; add replicas to Worker instead"
// +kubebuilder:validation:XValidation:rule="!('Worker' in self.pytorchReplicaSpecs) || !has(self.pytorchReplicaSpecs['Worker'].replicas) || self.pytorchReplicaSpecs['Worker'].replicas >= 1",message="spec.pytorchReplicaSpecs[Worker].replicas must be at least 1: remove the Worker entry for a master-only job"
// +kubebuilder:validation:XValidation:rule="!has(self.elasticPolicy) || 'Worker' in self.pytorchReplicaSpecs",message="spec.pytorchReplicaSpecs[Worker] must be configured if elastic policy is used"
// +kubebuilder:validation:XValidation:rule="!(has(self.elasticPolicy) && has(self.elasticPolicy.nProcPerNode) && has(self.nprocPerNode))",message="spec.elasticPolicy.nProcPerNode must not be used with spec.nprocPerNode: keep spec.nprocPerNode"
type PyTorchJobSpec struct {
	// RunPolicy holds the run-time rules: clean-up, TTL, deadline, backoff, suspend, managedBy.
	// +kubebuilder:validation:Optional
	RunPolicy RunPolicy `json:"runPolicy"`

	// ElasticPolicy makes the job elastic (torchrun rendezvous between minReplicas and maxReplicas).
	// +optional
	ElasticPolicy *ElasticPolicy `json:"elasticPolicy,omitempty"`

	// PyTorchReplicaSpecs maps Master and Worker to their specs. Every container gets
	// MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and torchrun's PET_* variables.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=5
	// +kubebuilder:validation:XValidation:rule="self.all(k, has(self[k].template.spec) && self[k].template.spec.containers.exists(c, c.name == 'pytorch'))",message="every replica type must have a container named pytorch: it gets the job's port and its exit code decides restarts"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k].template.spec.containers.all(c, has(c.image) && size(c.image) > 0))",message="every container needs an image"
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.lowerAscii() in ['master', 'worker'])",message="replica types must be Master, Worker"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self.filter(j, j.lowerAscii() == k.lowerAscii()).size() == 1)",message="replica types must differ by more than case (Worker and worker name the same type): keep one"
	// +kubebuilder:validation:XValidation:rule="self.map(k, has(self[k].replicas) ? self[k].replicas : 1).sum() <= 10000",message="a PyTorchJob has at most 10000 replicas in all; see docs/limits.md"
	PyTorchReplicaSpecs map[ReplicaType]*ReplicaSpec `json:"pytorchReplicaSpecs"`

	// NprocPerNode is the number of processes per node, as torchrun's --nproc-per-node takes it:
	// "auto" (default), "cpu", "gpu", "xpu" or a number.
	// +kubebuilder:validation:XValidation:rule="self.matches('^(auto|cpu|gpu|xpu|[1-9][0-9]*)$')",message="spec.nprocPerNode must be what torchrun takes: auto, cpu, gpu, xpu or a positive number such as 8"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]+$') || int(self) <= 4096",message="spec.nprocPerNode is at most 4096 processes per node"
	// +kubebuilder:validation:MaxLength=4
	// +optional
	NprocPerNode *string `json:"nprocPerNode,omitempty"`
}

// PyTorchJob runs distributed PyTorch training: one pod and one headless service per replica.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.pytorchReplicaSpecs.Worker.replicas,statuspath=.status.replicaStatuses.Worker.active,selectorpath=.status.replicaStatuses.Worker.selector
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
type PyTorchJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the job.
	// +optional
	Spec PyTorchJobSpec `json:"spec,omitempty"`
	// Status is the observed state of the job, written by kiln.
	// +optional
	Status JobStatus `json:"status,omitempty"`
}

// PyTorchJobList is a list of PyTorchJobs.
// +kubebuilder:object:root=true
type PyTorchJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PyTorchJob `json:"items"`
}

func init() { SchemeBuilder.Register(&PyTorchJob{}, &PyTorchJobList{}) }

func (j *PyTorchJob) GetRunPolicy() *RunPolicy { return &j.Spec.RunPolicy }
func (j *PyTorchJob) GetReplicaSpecs() map[ReplicaType]*ReplicaSpec {
	return j.Spec.PyTorchReplicaSpecs
}
func (j *PyTorchJob) SetReplicaSpecs(m map[ReplicaType]*ReplicaSpec) { j.Spec.PyTorchReplicaSpecs = m }
func (j *PyTorchJob) GetJobStatus() *JobStatus                       { return &j.Status }
