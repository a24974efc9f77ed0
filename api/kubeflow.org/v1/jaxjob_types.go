package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// JAXJob replica types.
const (
	JAXJobReplicaTypeWorker ReplicaType = "Worker"
	JAXJobKind                          = "JAXJob"
)

// JAXJobSpec is the desired state of a JAX training job.
type JAXJobSpec struct {
	// RunPolicy holds the run-time rules: clean-up, TTL, deadline, backoff, suspend, managedBy.
	// +kubebuilder:validation:Optional
	RunPolicy RunPolicy `json:"runPolicy"`

	// JAXReplicaSpecs maps Worker to its spec. Every container gets COORDINATOR_ADDRESS (worker
	// 0), COORDINATOR_PORT, NUM_PROCESSES and PROCESS_ID: what jax.distributed.initialize() reads.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=1
	// +kubebuilder:validation:XValidation:rule="self.all(k, has(self[k].template.spec) && self[k].template.spec.containers.exists(c, c.name == 'jax'))",message="every replica type must have a container named jax: it gets the job's port and its exit code decides restarts"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k].template.spec.containers.all(c, has(c.image) && size(c.image) > 0))",message="every container needs an image"
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.lowerAscii() == 'worker')",message="replica types must be Worker"
	JAXReplicaSpecs map[ReplicaType]*ReplicaSpec `json:"jaxReplicaSpecs"`
}

// JAXJob runs distributed JAX training: one pod and one headless service per worker, worker 0
// the coordinator.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.jaxReplicaSpecs.Worker.replicas,statuspath=.status.replicaStatuses.Worker.active,selectorpath=.status.replicaStatuses.Worker.selector
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
type JAXJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the job.
	// +optional
	Spec JAXJobSpec `json:"spec,omitempty"`
	// Status is the observed state of the job, written by kiln.
	// +optional
	Status JobStatus `json:"status,omitempty"`
}

// JAXJobList is a list of JAXJobs.
// +kubebuilder:object:root=true
type JAXJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []JAXJob `json:"items"`
}

func init() { SchemeBuilder.Register(&JAXJob{}, &JAXJobList{}) }

func (j *JAXJob) GetRunPolicy() *RunPolicy                       { return &j.Spec.RunPolicy }
func (j *JAXJob) GetReplicaSpecs() map[ReplicaType]*ReplicaSpec  { return j.Spec.JAXReplicaSpecs }
func (j *JAXJob) SetReplicaSpecs(m map[ReplicaType]*ReplicaSpec) { j.Spec.JAXReplicaSpecs = m }
func (j *JAXJob) GetJobStatus() *JobStatus                       { return &j.Status }
