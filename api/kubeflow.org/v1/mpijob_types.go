package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// MPIJob replica types.
const (
	MPIJobReplicaTypeLauncher ReplicaType = "Launcher"
	MPIJobReplicaTypeWorker   ReplicaType = "Worker"
	MPIJobKind                            = "MPIJob"
)

// How an MPIJob's launcher starts the ranks on its workers, set by AnnotationMPIRemoteStart.
const (
	// AnnotationMPIRemoteStart chooses the remote start of one MPIJob: MPIRemoteStartSSH or
	// MPIRemoteStartKubectlExec. Unset, the operator's default applies (--mpi-remote-start).
	AnnotationMPIRemoteStart = "kiln.dev/mpi-remote-start"
	// MPIRemoteStartSSH: the launcher reaches the workers' sshd with a key pair kiln generates per
	// job (images built for mpi-operator v2 or Kubeflow Trainer).
	MPIRemoteStartSSH = "ssh"
	// MPIRemoteStartKubectlExec: the launcher runs `kubectl exec` into the workers, as Kubeflow
	// Training Operator v1 does (images built for it). kiln must hold pods/exec to grant it.
	MPIRemoteStartKubectlExec = "kubectl-exec"
	// AnnotationMPISSHAuthMountPath is where the SSH key pair is mounted (default /root/.ssh);
	// images whose MPI runs as another user set that user's ~/.ssh.
	AnnotationMPISSHAuthMountPath = "kiln.dev/mpi-ssh-auth-mount-path"
	// AnnotationMPIImplementation is the job's MPI: OpenMPI (default), Intel or MPICH (v2beta1's
	// spec.mpiImplementation). It decides the hostfile's form and the launcher's environment.
	AnnotationMPIImplementation = "kiln.dev/mpi-implementation"
	// AnnotationMPIRunLauncherAsWorker "true" lists the launcher in the hostfile too (v2beta1's
	// spec.runLauncherAsWorker).
	AnnotationMPIRunLauncherAsWorker = "kiln.dev/mpi-run-launcher-as-worker"
	// AnnotationMPILauncherCreationPolicy is AtStartup (default) or WaitForWorkersReady (v2beta1's
	// spec.launcherCreationPolicy).
	AnnotationMPILauncherCreationPolicy = "kiln.dev/mpi-launcher-creation-policy"
	// AnnotationAPIVersion names the version a job was written at when it is not the stored one
	// (kubeflow.org/v2beta1 for an MPIJob written by mpi-operator's API): the conversion webhook
	// sets it, and such an MPIJob runs as mpi-operator runs it (SSH, whatever --mpi-remote-start).
	AnnotationAPIVersion = "kiln.dev/api-version"
	// APIVersionV2beta1 is mpi-operator's MPIJob API version, the value of AnnotationAPIVersion
	// on an MPIJob written at it.
	APIVersionV2beta1 = "kubeflow.org/v2beta1"
)

// The MPI implementations of AnnotationMPIImplementation.
const (
	MPIImplementationOpenMPI = "OpenMPI"
	MPIImplementationIntel   = "Intel"
	MPIImplementationMPICH   = "MPICH"
)

// The launcher creation policies of AnnotationMPILauncherCreationPolicy.
const (
	LauncherCreationAtStartup           = "AtStartup"
	LauncherCreationWaitForWorkersReady = "WaitForWorkersReady"
)

// MPIJobSpec is the desired state of an MPI job (Kubeflow's v1 MPIJob).
type MPIJobSpec struct {
	// SlotsPerWorker is the number of slots of each host in the hostfile (processes per worker).
	// Default 1, at most 4096.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4096
	// +optional
	SlotsPerWorker *int32 `json:"slotsPerWorker,omitempty"`

	// CleanPodPolicy is deprecated: use runPolicy.cleanPodPolicy. When only this one is set, it
	// is copied there; when both are, runPolicy's wins (as in Kubeflow) and the webhook warns.
	// +optional
	CleanPodPolicy *CleanPodPolicy `json:"cleanPodPolicy,omitempty"`

	// MPIReplicaSpecs maps Launcher (exactly one, which runs mpirun and decides the job's outcome)
	// and Worker to their specs. The launcher's first container gets the hostfile at
	// /etc/mpi/hostfile and OMPI_MCA_*/I_MPI_HYDRA_* to use it.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=2
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.lowerAscii() in ['launcher', 'worker'])",message="replica types must be Launcher, Worker"
	// +kubebuilder:validation:XValidation:rule="self.exists(k, k.lowerAscii() == 'launcher')",message="a Launcher is required: it runs mpirun and decides the job's outcome"
	// +kubebuilder:validation:XValidation:rule="self.all(k, has(self[k].template.spec) && size(self[k].template.spec.containers) > 0)",message="every replica type needs a container: the first one runs MPI"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k].template.spec.containers.all(c, has(c.image) && size(c.image) > 0))",message="every container needs an image"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self.filter(j, j.lowerAscii() == k.lowerAscii()).size() == 1)",message="replica types must differ by more than case (Worker and worker name the same type): keep one"
	// +kubebuilder:validation:XValidation:rule="self.map(k, has(self[k].replicas) ? self[k].replicas : 1).sum() <= 5000",message="a MPIJob has at most 5000 replicas in all: the hostfile lists every worker; see docs/limits.md"
	MPIReplicaSpecs map[ReplicaType]*ReplicaSpec `json:"mpiReplicaSpecs"`

	// MainContainer is the worker container the ranks run in (kubectl-exec remote start); default
	// the first container.
	// +optional
	MainContainer string `json:"mainContainer,omitempty"`

	// RunPolicy holds the run-time rules: clean-up, TTL, deadline, backoff, suspend, managedBy.
	// +kubebuilder:validation:Optional
	RunPolicy RunPolicy `json:"runPolicy"`
}

// MPIJob runs an MPI program: one launcher pod running mpirun and worker pods it starts ranks on,
// with a hostfile in the ConfigMap <name>-config. The stored version: kubeflow.org/v2beta1 (mpi-operator's
// API) is served too, converted by kiln's conversion webhook.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.conditions[-1:].type`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Launcher-Active",type=integer,JSONPath=`.status.replicaStatuses.Launcher.active`
// +kubebuilder:printcolumn:name="Workers-Active",type=integer,JSONPath=`.status.replicaStatuses.Worker.active`
// +kubebuilder:printcolumn:name="Started",type=date,JSONPath=`.status.startTime`,priority=1
// +kubebuilder:printcolumn:name="Completed",type=date,JSONPath=`.status.completionTime`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[-1:].message`,priority=1
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label: at most 63 lowercase letters, digits and -, starting with a letter, e.g. mnist-train"
type MPIJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the job.
	// +optional
	Spec MPIJobSpec `json:"spec,omitempty"`
	// Status is the observed state of the job, written by kiln.
	// +optional
	Status JobStatus `json:"status,omitempty"`
}

// MPIJobList is a list of MPIJobs.
// +kubebuilder:object:root=true
type MPIJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MPIJob `json:"items"`
}

func init() { SchemeBuilder.Register(&MPIJob{}, &MPIJobList{}) }

// Hub marks kubeflow.org/v1 as the MPIJob version every other converts to and from (the stored one).
func (*MPIJob) Hub() {}

func (j *MPIJob) GetRunPolicy() *RunPolicy                       { return &j.Spec.RunPolicy }
func (j *MPIJob) GetReplicaSpecs() map[ReplicaType]*ReplicaSpec  { return j.Spec.MPIReplicaSpecs }
func (j *MPIJob) SetReplicaSpecs(m map[ReplicaType]*ReplicaSpec) { j.Spec.MPIReplicaSpecs = m }
func (j *MPIJob) GetJobStatus() *JobStatus                       { return &j.Status }
