package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// Kinds of training runtime a TrainJob's runtimeRef names.
const (
	TrainingRuntimeKind        = "TrainingRuntime"
	ClusterTrainingRuntimeKind = "ClusterTrainingRuntime"
)

// ClusterTrainingRuntime is a training runtime every namespace's TrainJobs may name.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterTrainingRuntime struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec TrainingRuntimeSpec `json:"spec,omitzero"`
}

// ClusterTrainingRuntimeList is a list of ClusterTrainingRuntimes.
// +kubebuilder:object:root=true
type ClusterTrainingRuntimeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterTrainingRuntime `json:"items"`
}

// TrainingRuntime is a training runtime the TrainJobs of its own namespace may name.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TrainingRuntime struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec TrainingRuntimeSpec `json:"spec,omitempty,omitzero"`
}

// TrainingRuntimeList is a list of TrainingRuntimes.
// +kubebuilder:object:root=true
type TrainingRuntimeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrainingRuntime `json:"items"`
}

// TrainingRuntimeSpec is how a runtime trains: the framework, the gang and the JobSet to make.
// +kubebuilder:validation:MinProperties=1
type TrainingRuntimeSpec struct {
	// MLPolicy is the framework (torch, mpi, jax, xgboost or flux) and the number of nodes.
	// +optional
	MLPolicy *MLPolicy `json:"mlPolicy,omitempty"`
	// PodGroupPolicy gang-schedules the TrainJob's pods: coscheduling (scheduler-plugins) or
	// volcano. kiln runs it on the gang backend its manager was started with.
	// +optional
	PodGroupPolicy *PodGroupPolicy `json:"podGroupPolicy,omitempty"`
	// Template is the JobSet each TrainJob on this runtime becomes, before the TrainJob's own
	// trainer, initializer and patches are applied.
	// +optional
	Template JobSetTemplateSpec `json:"template,omitzero"`
}

// JobSetTemplateSpec is a JobSet's labels, annotations and spec; its name and namespace are the
// TrainJob's.
// +kubebuilder:validation:MinProperties=1
type JobSetTemplateSpec struct {
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec jobsetv1alpha2.JobSetSpec `json:"spec,omitempty"`
}

// PodGroupPolicy chooses a gang scheduler; at most one member is set.
type PodGroupPolicy struct {
	PodGroupPolicySource `json:",inline"`
}

// PodGroupPolicySource holds the gang schedulers a runtime may ask for.
type PodGroupPolicySource struct {
	// Coscheduling gang-schedules through scheduler-plugins' coscheduling plugin.
	// +optional
	Coscheduling *CoschedulingPodGroupPolicySource `json:"coscheduling,omitempty"`
	// Volcano gang-schedules through Volcano.
	// +optional
	Volcano *VolcanoPodGroupPolicySource `json:"volcano,omitempty"`
}

// CoschedulingPodGroupPolicySource: the group's minimum is every node's pod.
type CoschedulingPodGroupPolicySource struct {
	// ScheduleTimeoutSeconds is how long the scheduler waits for the whole group; 0 or unset is
	// 60 seconds.
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2592000
	// +optional
	ScheduleTimeoutSeconds *int32 `json:"scheduleTimeoutSeconds,omitempty"`
}

// VolcanoPodGroupPolicySource configures a Volcano PodGroup.
type VolcanoPodGroupPolicySource struct {
	// NetworkTopology bounds how far apart in the network Volcano may place the pods (Volcano's
	// hyperNode feature).
	// +optional
	NetworkTopology *NetworkTopologySpec `json:"networkTopology,omitempty"`
}

// NetworkTopologySpec is Volcano's PodGroup networkTopology.
type NetworkTopologySpec struct {
	// Mode is hard (the bound must hold) or soft (preferred).
	// +kubebuilder:validation:Enum=hard;soft
	// +kubebuilder:default=hard
	// +optional
	Mode string `json:"mode,omitempty"`
	// HighestTierAllowed is the highest network tier the pods may span.
	// +kubebuilder:default=1
	// +optional
	HighestTierAllowed *int `json:"highestTierAllowed,omitempty"`
}

// MLPolicy is a runtime's framework and node count.
// +kubebuilder:validation:XValidation:rule="[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost), has(self.flux)].filter(x, x).size() <= 1",message="mlPolicy sets more than one of torch, mpi, jax, xgboost and flux: keep one"
type MLPolicy struct {
	// NumNodes is how many nodes (pods of the trainer step) train; default 1. A TrainJob's
	// trainer.numNodes overrides it.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	NumNodes *int32 `json:"numNodes,omitempty"`

	MLPolicySource `json:",inline"`
}

// MLPolicySource holds the frameworks; at most one is set.
type MLPolicySource struct {
	// +optional
	Torch *TorchMLPolicySource `json:"torch,omitempty"`
	// +optional
	MPI *MPIMLPolicySource `json:"mpi,omitempty"`
	// Flux is accepted so Trainer's manifests apply; kiln does not run it (the TrainJob fails
	// with TrainingRuntimeNotSupported).
	// +optional
	Flux *FluxMLPolicySource `json:"flux,omitempty"`
	// +optional
	JAX *JAXMLPolicySource `json:"jax,omitempty"`
	// +optional
	XGBoost *XGBoostMLPolicySource `json:"xgboost,omitempty"`
}

// TorchMLPolicySource: torchrun's PET_* variables go to the trainer container "node".
type TorchMLPolicySource struct {
	// EnvInjection names other containers that get the PET_* variables too.
	// +optional
	EnvInjection *EnvInjection `json:"envInjection,omitempty"`
}

// EnvInjection lists the containers, per replicated job, that get a framework's variables.
type EnvInjection struct {
	// +listType=map
	// +listMapKey=jobName
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Targets []EnvInjectionTarget `json:"targets,omitempty"`
}

// EnvInjectionTarget is one replicated job's containers that get a framework's variables.
type EnvInjectionTarget struct {
	// JobName is the replicated job.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	JobName string `json:"jobName,omitempty"`
	// ContainerNames are its containers (init containers too); "node" always gets them.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="!self.exists(c, c == 'node')",message="containerNames lists node, which always gets the variables: remove it"
	// +required
	ContainerNames []string `json:"containerNames,omitempty"`
}

// JAXMLPolicySource: JAX's distributed variables go to the trainer container.
type JAXMLPolicySource struct{}

// XGBoostMLPolicySource: the DMLC_* (Rabit tracker) variables go to the trainer container; one
// worker per GPU of resourcesPerNode, else one per node.
type XGBoostMLPolicySource struct{}

// MPIMLPolicySource: a launcher runs mpirun over SSH on the nodes listed in a hostfile.
type MPIMLPolicySource struct {
	// NumProcPerNode is each node's slots in the hostfile; default 1.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4096
	// +optional
	NumProcPerNode *int32 `json:"numProcPerNode,omitempty"`
	// MPIImplementation shapes the hostfile; OpenMPI, the default, is the one Trainer runs.
	// +kubebuilder:default=OpenMPI
	// +kubebuilder:validation:Enum=OpenMPI;""
	// +optional
	MPIImplementation *MPIImplementation `json:"mpiImplementation,omitempty"`
	// SSHAuthMountPath is where the SSH keys are mounted; default /root/.ssh.
	// +kubebuilder:default=/root/.ssh
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	SSHAuthMountPath *string `json:"sshAuthMountPath,omitempty"`
	// RunLauncherAsNode makes the launcher one of the training nodes; default false.
	// +kubebuilder:default=false
	// +optional
	RunLauncherAsNode *bool `json:"runLauncherAsNode,omitempty"`
}

// FluxMLPolicySource is Trainer's Flux HPC runtime.
type FluxMLPolicySource struct {
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4096
	// +optional
	NumProcPerNode *int32 `json:"numProcPerNode,omitempty"`
}

// MPIImplementation is an MPI implementation.
type MPIImplementation string

// MPIImplementationOpenMPI is Open MPI.
const MPIImplementationOpenMPI MPIImplementation = "OpenMPI"
