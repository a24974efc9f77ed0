package v2beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
)

// MPIImplementation is the MPI a job's image runs: it decides the hostfile's form and the
// launcher's environment.
// +kubebuilder:validation:Enum=OpenMPI;Intel;MPICH
type MPIImplementation string

const (
	// MPIImplementationOpenMPI: hostfile lines `<host> slots=<n>`, OMPI_MCA_* environment.
	MPIImplementationOpenMPI MPIImplementation = kubeflowv1.MPIImplementationOpenMPI
	// MPIImplementationIntel: hostfile lines `<host>:<n>`, I_MPI_HYDRA_* environment.
	MPIImplementationIntel MPIImplementation = kubeflowv1.MPIImplementationIntel
	// MPIImplementationMPICH: hostfile lines `<host>:<n>`, HYDRA_* environment.
	MPIImplementationMPICH MPIImplementation = kubeflowv1.MPIImplementationMPICH
)

// LauncherCreationPolicy says when the launcher is created.
// +kubebuilder:validation:Enum=AtStartup;WaitForWorkersReady
type LauncherCreationPolicy string

const (
	// LauncherCreationPolicyAtStartup creates the launcher with the workers.
	LauncherCreationPolicyAtStartup LauncherCreationPolicy = kubeflowv1.LauncherCreationAtStartup
	// LauncherCreationPolicyWaitForWorkersReady creates the launcher once every worker is ready.
	LauncherCreationPolicyWaitForWorkersReady LauncherCreationPolicy = kubeflowv1.LauncherCreationWaitForWorkersReady
)

// MPIController is the manager value of runPolicy.managedBy that leaves a v2beta1 MPIJob to
// kiln, as it leaves it to mpi-operator (kubeflow.org/training-operator at v1).
const MPIController = "kubeflow.org/mpi-operator"

// MPIJobSpec is the desired state of an MPI job (mpi-operator's v2beta1 MPIJob).
type MPIJobSpec struct {
	// SlotsPerWorker is the number of slots of each host in the hostfile (processes per worker).
	// Default 1, at most 4096.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4096
	// +optional
	SlotsPerWorker *int32 `json:"slotsPerWorker,omitempty"`

	// RunLauncherAsWorker lists the launcher in the hostfile too, so ranks run on it. Default false.
	// +optional
	RunLauncherAsWorker *bool `json:"runLauncherAsWorker,omitempty"`

	// RunPolicy holds the run-time rules: clean-up, TTL, deadline, backoff, suspend, managedBy.
	// +optional
	RunPolicy RunPolicy `json:"runPolicy,omitempty"`

	// MPIReplicaSpecs maps Launcher (exactly one, which runs mpirun and decides the job's outcome)
	// and Worker to their specs.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=2
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['Launcher', 'Worker'])",message="replica types must be Launcher, Worker"
	// +kubebuilder:validation:XValidation:rule="'Launcher' in self",message="a Launcher is required: it runs mpirun and decides the job's outcome"
	// +kubebuilder:validation:XValidation:rule="self.all(k, has(self[k].template.spec) && size(self[k].template.spec.containers) > 0)",message="every replica type needs a container: the first one runs MPI"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k].template.spec.containers.all(c, has(c.image) && size(c.image) > 0))",message="every container needs an image"
	// +kubebuilder:validation:XValidation:rule="self.map(k, has(self[k].replicas) ? self[k].replicas : 1).sum() <= 5000",message="a MPIJob has at most 5000 replicas in all: the hostfile lists every worker; see docs/limits.md"
	MPIReplicaSpecs map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec `json:"mpiReplicaSpecs"`

	// SSHAuthMountPath is where the job's SSH key pair is mounted on launcher and workers.
	// Default /root/.ssh; images whose MPI runs as another user name that user's ~/.ssh.
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="spec.sshAuthMountPath must be an absolute path, e.g. /home/mpiuser/.ssh"
	// +optional
	SSHAuthMountPath string `json:"sshAuthMountPath,omitempty"`

	// LauncherCreationPolicy is AtStartup (default: the launcher is created with the workers) or
	// WaitForWorkersReady (once every worker is ready).
	// +optional
	LauncherCreationPolicy LauncherCreationPolicy `json:"launcherCreationPolicy,omitempty"`

	// MPIImplementation is OpenMPI (default), Intel or MPICH: the hostfile's form and the
	// launcher's environment follow it.
	// +optional
	MPIImplementation MPIImplementation `json:"mpiImplementation,omitempty"`
}

// RunPolicy holds the run-time rules of a v2beta1 MPIJob: kubeflow.org/v1's, with mpi-operator's
// name for kiln in managedBy.
// +kubebuilder:validation:XValidation:rule="has(self.managedBy) == has(oldSelf.managedBy) && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)",message="spec.runPolicy.managedBy is immutable: create a new job to hand it to another controller"
type RunPolicy struct {
	// CleanPodPolicy says which pods are deleted once the job has finished: All, Running (pods
	// still running or pending; the default in kiln) or None.
	// +optional
	CleanPodPolicy *kubeflowv1.CleanPodPolicy `json:"cleanPodPolicy,omitempty"`

	// TTLSecondsAfterFinished deletes the job this many seconds after it finished.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=315360000
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// ActiveDeadlineSeconds fails the job this many seconds after its start time (reset on
	// resume). At most 315360000 (ten years).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=315360000
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// BackoffLimit is the number of retries before the job is marked Failed.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`

	// SchedulingPolicy configures gang scheduling.
	// +optional
	SchedulingPolicy *kubeflowv1.SchedulingPolicy `json:"schedulingPolicy,omitempty"`

	// Suspend deletes the job's pods and keeps the job until it is set back to false.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`

	// ManagedBy names the controller that reconciles this job: unset or
	// "kubeflow.org/mpi-operator" for kiln, "kueue.x-k8s.io/multikueue" to hand it to Kueue's
	// MultiKueue. Immutable.
	// +kubebuilder:validation:XValidation:rule="self in ['kubeflow.org/mpi-operator', 'kueue.x-k8s.io/multikueue']",message="spec.runPolicy.managedBy must be kubeflow.org/mpi-operator (kiln) or kueue.x-k8s.io/multikueue"
	// +optional
	ManagedBy *string `json:"managedBy,omitempty"`
}

// MPIJob runs an MPI program: one launcher running mpirun and worker pods it starts ranks on,
// with a hostfile in the ConfigMap <name>-config. Stored as a kubeflow.org/v1 MPIJob.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.conditions[-1:].type`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label: at most 63 lowercase letters, digits and -, starting with a letter, e.g. mnist-train"
type MPIJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the job.
	// +optional
	Spec MPIJobSpec `json:"spec,omitempty"`
	// Status is the observed state of the job, written by kiln.
	// +optional
	Status kubeflowv1.JobStatus `json:"status,omitempty"`
}

// MPIJobList is a list of MPIJobs.
// +kubebuilder:object:root=true
type MPIJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MPIJob `json:"items"`
}

func init() { SchemeBuilder.Register(&MPIJob{}, &MPIJobList{}) }
