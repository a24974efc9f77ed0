package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PyJobSpec describes one training run. Everything but suspend, backoffLimit,
// activeDeadlineSeconds and ttlSecondsAfterFinished is fixed once the PyJob exists (the CRD
// refuses a change, naming the field): create a new PyJob to change it. Those four apply to
// the running batch Job. The rules read an unset dataset.readOnly and output.reclaimPolicy as
// their defaults: a PyJob written at v1beta1 (whose schema defaults neither) and written back
// unchanged at v1alpha1 (whose schema does) changes nothing.
// +kubebuilder:validation:XValidation:rule="!has(self.outputPath) || self.outputPath.startsWith('/')",message="spec.outputPath must be an absolute path such as /mnt/output"
// +kubebuilder:validation:XValidation:rule="!has(self.datasetPath) || self.datasetPath.startsWith('/')",message="spec.datasetPath must be an absolute path such as /mnt/dataset"
// +kubebuilder:validation:XValidation:rule="!has(self.outputPath) || !has(self.datasetPath) || self.outputPath != self.datasetPath",message="spec.outputPath must differ from spec.datasetPath: the data and the results each get their own directory"
// +kubebuilder:validation:XValidation:rule="(!has(self.outputPath) || !(self.outputPath in ['/dev/shm', '/dev/shm/', '/opt/kiln/script', '/opt/kiln/script/'])) && (!has(self.datasetPath) || !(self.datasetPath in ['/dev/shm', '/dev/shm/', '/opt/kiln/script', '/opt/kiln/script/']))",message="spec.outputPath and spec.datasetPath must not be /dev/shm or /opt/kiln/script: kiln mounts shared memory and the script there"
// +kubebuilder:validation:XValidation:rule="!has(self.dataset) || has(self.datasetPath)",message="spec.dataset needs spec.datasetPath, the path to mount it at"
// +kubebuilder:validation:XValidation:rule="!has(self.output) || has(self.outputPath)",message="spec.output needs spec.outputPath, the path to mount it at"
// +kubebuilder:validation:XValidation:rule="(has(self.gpu) ? self.gpu : 0) == (has(oldSelf.gpu) ? oldSelf.gpu : 0)",message="spec.gpu is immutable: create a new PyJob to change it"
// +kubebuilder:validation:XValidation:rule="(has(self.workers) ? self.workers : 1) == (has(oldSelf.workers) ? oldSelf.workers : 1)",message="spec.workers is immutable: create a new PyJob to change it"
// +kubebuilder:validation:XValidation:rule="(has(self.command) ? self.command : []) == (has(oldSelf.command) ? oldSelf.command : [])",message="spec.command is immutable: create a new PyJob to change it"
// +kubebuilder:validation:XValidation:rule="(has(self.args) ? self.args : []) == (has(oldSelf.args) ? oldSelf.args : [])",message="spec.args is immutable: create a new PyJob to change it"
// +kubebuilder:validation:XValidation:rule="has(self.datasetPath) == has(oldSelf.datasetPath) && (!has(self.datasetPath) || self.datasetPath == oldSelf.datasetPath) && has(self.outputPath) == has(oldSelf.outputPath) && (!has(self.outputPath) || self.outputPath == oldSelf.outputPath)",message="spec.datasetPath and spec.outputPath are immutable: create a new PyJob to change them"
// +kubebuilder:validation:XValidation:rule="has(self.shmSize) == has(oldSelf.shmSize)",message="spec.shmSize is immutable: create a new PyJob to change it"
// +kubebuilder:validation:XValidation:rule="!has(self.shmSize) || !has(self.resources) || !has(self.resources.memory) || !quantity(self.shmSize).isGreaterThan(quantity(self.resources.memory))",message="spec.shmSize is memory of the worker: make it at most spec.resources.memory"
// +kubebuilder:validation:XValidation:rule="!has(self.output) || !has(self.output.accessMode) || self.output.accessMode == 'ReadWriteMany' || (has(self.workers) ? self.workers : 1) <= 1",message="spec.output.accessMode: workers on different nodes cannot all mount a single-node claim; use ReadWriteMany (the default when workers > 1), or workers: 1"
// +kubebuilder:validation:XValidation:rule="has(self.affinity) == has(oldSelf.affinity) && (!has(self.affinity) || self.affinity == oldSelf.affinity)",message="spec.affinity is immutable: create a new PyJob to change it"
// +kubebuilder:validation:XValidation:rule="has(self.securityContext) == has(oldSelf.securityContext) && (!has(self.securityContext) || self.securityContext == oldSelf.securityContext)",message="spec.securityContext is immutable: create a new PyJob to change it"
// +kubebuilder:validation:XValidation:rule="has(self.containerSecurityContext) == has(oldSelf.containerSecurityContext) && (!has(self.containerSecurityContext) || self.containerSecurityContext == oldSelf.containerSecurityContext)",message="spec.containerSecurityContext is immutable: create a new PyJob to change it"
// +kubebuilder:validation:XValidation:rule="has(self.script) == has(oldSelf.script) && (!has(self.script) || self.script == oldSelf.script)",message="spec.script is immutable: create a new PyJob to change it"
// +kubebuilder:validation:XValidation:rule="has(self.env) == has(oldSelf.env) && (!has(self.env) || self.env == oldSelf.env)",message="spec.env is immutable: create a new PyJob to change it"
// +kubebuilder:validation:XValidation:rule="has(self.resources) == has(oldSelf.resources) && (!has(self.resources) || self.resources == oldSelf.resources)",message="spec.resources is immutable: create a new PyJob to change it"
// +kubebuilder:validation:XValidation:rule="has(self.dataset) == has(oldSelf.dataset) && (!has(self.dataset) || (self.dataset.claimName == oldSelf.dataset.claimName && has(self.dataset.subPath) == has(oldSelf.dataset.subPath) && (!has(self.dataset.subPath) || self.dataset.subPath == oldSelf.dataset.subPath) && (has(self.dataset.readOnly) ? self.dataset.readOnly : true) == (has(oldSelf.dataset.readOnly) ? oldSelf.dataset.readOnly : true)))",message="spec.dataset is immutable: create a new PyJob to change it"
// +kubebuilder:validation:XValidation:rule="has(self.output) == has(oldSelf.output) && (!has(self.output) || (has(self.output.claimName) == has(oldSelf.output.claimName) && (!has(self.output.claimName) || self.output.claimName == oldSelf.output.claimName) && has(self.output.size) == has(oldSelf.output.size) && (!has(self.output.size) || quantity(self.output.size).compareTo(quantity(oldSelf.output.size)) == 0) && has(self.output.storageClassName) == has(oldSelf.output.storageClassName) && (!has(self.output.storageClassName) || self.output.storageClassName == oldSelf.output.storageClassName) && (has(self.output.reclaimPolicy) ? self.output.reclaimPolicy : 'Retain') == (has(oldSelf.output.reclaimPolicy) ? oldSelf.output.reclaimPolicy : 'Retain')))",message="spec.output is immutable: create a new PyJob to change it"
// +kubebuilder:validation:XValidation:rule="has(self.nodeSelector) == has(oldSelf.nodeSelector) && (!has(self.nodeSelector) || self.nodeSelector == oldSelf.nodeSelector)",message="spec.nodeSelector is immutable: create a new PyJob to change it"
// +kubebuilder:validation:XValidation:rule="has(self.tolerations) == has(oldSelf.tolerations) && (!has(self.tolerations) || self.tolerations == oldSelf.tolerations)",message="spec.tolerations is immutable: create a new PyJob to change it"
// +kubebuilder:validation:XValidation:rule="has(self.priorityClassName) == has(oldSelf.priorityClassName) && (!has(self.priorityClassName) || self.priorityClassName == oldSelf.priorityClassName)",message="spec.priorityClassName is immutable: create a new PyJob to change it"
// +kubebuilder:validation:XValidation:rule="has(self.serviceAccountName) == has(oldSelf.serviceAccountName) && (!has(self.serviceAccountName) || self.serviceAccountName == oldSelf.serviceAccountName)",message="spec.serviceAccountName is immutable: create a new PyJob to change it"
// +kubebuilder:validation:XValidation:rule="has(self.imagePullSecrets) == has(oldSelf.imagePullSecrets) && (!has(self.imagePullSecrets) || self.imagePullSecrets == oldSelf.imagePullSecrets)",message="spec.imagePullSecrets is immutable: create a new PyJob to change it"
type PyJobSpec struct {
	// Image is the container image that runs the training.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.image is immutable: create a new PyJob to change it"
	Image string `json:"image"`

	// Command is the entrypoint, e.g. ["python", "train.py"] or ["torchrun", "train.py"]. Unset
	// with a script: python runs the script (torchrun when workers > 1 or gpu > 1); unset
	// without one: the image's entrypoint.
	// +optional
	Command []string `json:"command,omitempty"`

	// Script is Python source to run without building an image: kiln stores it in a ConfigMap
	// "<name>-script" the PyJob owns and mounts it read-only as /opt/kiln/script/main.py
	// (SCRIPT_PATH). At most 900 KiB.
	// +kubebuilder:validation:MaxLength=921600
	// +optional
	Script string `json:"script,omitempty"`

	// Args are appended to the command.
	// +optional
	Args []string `json:"args,omitempty"`

	// Env are extra environment variables of the training container.
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// GPU is the number of GPUs (of gpuResource) each worker gets (its limit), at most 128.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	// +optional
	GPU int32 `json:"gpu,omitempty"`

	// GPUResource is the extended resource a GPU is: nvidia.com/gpu (default), amd.com/gpu,
	// gpu.intel.com/i915, a MIG profile such as nvidia.com/mig-1g.5gb. Workers asking for GPUs
	// tolerate its NoSchedule taint, as Kubernetes' ExtendedResourceToleration admission does.
	// +kubebuilder:default="nvidia.com/gpu"
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)+/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$')",message="spec.gpuResource must be an extended resource name with a domain, e.g. nvidia.com/gpu or amd.com/gpu"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.gpuResource is immutable: create a new PyJob to change it"
	// +optional
	GPUResource corev1.ResourceName `json:"gpuResource,omitempty"`

	// DatasetPath is where the training reads its data (DATASET_PATH); spec.dataset mounts a
	// volume there.
	// +optional
	DatasetPath string `json:"datasetPath,omitempty"`

	// OutputPath is where the training writes its results (OUTPUT_PATH); spec.output mounts a
	// volume there. Without spec.output it is an emptyDir, lost with the pod.
	// +optional
	OutputPath string `json:"outputPath,omitempty"`

	// Resources are the CPU and memory of each worker (requests and limits alike).
	// +optional
	Resources Resources `json:"resources,omitempty"`

	// ShmSize is the size of /dev/shm, a memory-backed volume: PyTorch's DataLoader workers and
	// NCCL need far more than the container runtime's 64Mi. Its pages count against the worker's
	// memory. Default: half of resources.memory when that is set, else 1Gi; "0" leaves the
	// runtime's /dev/shm.
	// +kubebuilder:validation:XValidation:rule="!quantity(self).isLessThan(quantity('0'))",message="spec.shmSize must be 0 or more, e.g. 8Gi"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.shmSize is immutable: create a new PyJob to change it"
	// +optional
	ShmSize *resource.Quantity `json:"shmSize,omitempty"`

	// Dataset is an existing PersistentVolumeClaim mounted at datasetPath, read-only by default.
	// +optional
	Dataset *DatasetStorage `json:"dataset,omitempty"`

	// Output is the storage mounted at outputPath: an existing claim, or a size from which kiln
	// creates a claim "<name>-output".
	// +optional
	Output *OutputStorage `json:"output,omitempty"`

	// Workers is the number of pods (nodes). More than one makes the run distributed: an Indexed
	// Job and a headless Service, with MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and
	// NPROC_PER_NODE (and torchrun's PET_* equivalents) set. At most 10000 (docs/limits.md).
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Workers int32 `json:"workers,omitempty"`

	// BackoffLimit is the number of retries of failed pods before the run fails (default 6, as
	// for a batch Job).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`

	// ActiveDeadlineSeconds fails the run when it has been active this long; at most 315360000
	// (ten years).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=315360000
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// TTLSecondsAfterFinished deletes the PyJob (and what it owns) this long after it finished.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=315360000
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// Suspend stops the run's pods until set back to false.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`

	// NodeSelector, Tolerations, Affinity, PriorityClassName, ServiceAccountName,
	// ImagePullSecrets and SecurityContext go to the pods as they are (tolerations plus the GPU
	// resource's, when workers ask for GPUs).
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// +optional
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`
	// ContainerSecurityContext is the training container's securityContext: what a namespace
	// enforcing Pod Security "restricted" asks of it (allowPrivilegeEscalation false, capabilities
	// dropped) is set here.
	// +optional
	ContainerSecurityContext *corev1.SecurityContext `json:"containerSecurityContext,omitempty"`
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
}

// Resources are a worker's CPU and memory.
// +kubebuilder:validation:XValidation:rule="!has(self.cpu) || quantity(self.cpu).isGreaterThan(quantity('0'))",message="spec.resources.cpu must be positive, e.g. \"4\" or 500m"
// +kubebuilder:validation:XValidation:rule="!has(self.memory) || quantity(self.memory).isGreaterThan(quantity('0'))",message="spec.resources.memory must be positive, e.g. 8Gi"
type Resources struct {
	// CPU, e.g. "4".
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`
	// Memory, e.g. 8Gi.
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
}

// DatasetStorage is an existing claim holding the dataset.
type DatasetStorage struct {
	// ClaimName is the PersistentVolumeClaim to mount.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="spec.dataset.claimName must be the name of a PersistentVolumeClaim: lowercase letters, digits, '-' and '.'"
	ClaimName string `json:"claimName"`
	// SubPath within the volume: a relative path inside it.
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.matches('(^|/)[.][.](/|$)')",message="spec.dataset.subPath must be a relative path inside the claim, without '..'"
	// +optional
	SubPath string `json:"subPath,omitempty"`
	// ReadOnly mounts the dataset read-only (default true).
	// +kubebuilder:default=true
	// +optional
	ReadOnly *bool `json:"readOnly,omitempty"`
}

// OutputReclaimPolicy says what happens to a claim kiln created when its PyJob is deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type OutputReclaimPolicy string

const (
	// OutputRetain keeps the output claim (and its data) after the PyJob is deleted.
	OutputRetain OutputReclaimPolicy = "Retain"
	// OutputDelete deletes the output claim with the PyJob.
	OutputDelete OutputReclaimPolicy = "Delete"
)

// OutputStorage is where results go: an existing claim, or a size for kiln to create one.
// +kubebuilder:validation:XValidation:rule="has(self.claimName) != has(self.size)",message="spec.output: set exactly one of claimName (an existing claim) or size (kiln creates the claim)"
// +kubebuilder:validation:XValidation:rule="!has(self.size) || quantity(self.size).isGreaterThan(quantity('0'))",message="spec.output.size must be a positive quantity such as 100Gi"
// +kubebuilder:validation:XValidation:rule="!has(self.accessMode) || has(self.size)",message="spec.output.accessMode is for the claim kiln creates (spec.output.size): an existing claim keeps its own access modes"
// +kubebuilder:validation:XValidation:rule="has(self.accessMode) == has(oldSelf.accessMode) && (!has(self.accessMode) || self.accessMode == oldSelf.accessMode)",message="spec.output.accessMode is immutable: create a new PyJob to change it"
type OutputStorage struct {
	// ClaimName is an existing PersistentVolumeClaim.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="spec.output.claimName must be the name of a PersistentVolumeClaim: lowercase letters, digits, '-' and '.'"
	// +optional
	ClaimName string `json:"claimName,omitempty"`
	// Size of the claim kiln creates, e.g. 100Gi.
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// StorageClassName of the claim kiln creates; unset: the cluster's default class.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
	// AccessMode of the claim kiln creates: ReadWriteMany (the default when workers > 1: every
	// worker mounts it, on whatever node), ReadWriteOnce (the default for one worker) or
	// ReadWriteOncePod. The storage class must support it.
	// +kubebuilder:validation:Enum=ReadWriteOnce;ReadWriteMany;ReadWriteOncePod
	// +optional
	AccessMode corev1.PersistentVolumeAccessMode `json:"accessMode,omitempty"`
	// ReclaimPolicy of the claim kiln creates: Retain (default) keeps it after the PyJob is
	// deleted, Delete deletes it with the PyJob.
	// +kubebuilder:default=Retain
	// +optional
	ReclaimPolicy OutputReclaimPolicy `json:"reclaimPolicy,omitempty"`
}

// PyJobPhase is where a run is.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed;Suspended
type PyJobPhase string

const (
	PyJobPending   PyJobPhase = "Pending"
	PyJobRunning   PyJobPhase = "Running"
	PyJobSucceeded PyJobPhase = "Succeeded"
	PyJobFailed    PyJobPhase = "Failed"
	PyJobSuspended PyJobPhase = "Suspended"
)

// WorkerCounts count the run's pods.
type WorkerCounts struct {
	Active    int32 `json:"active,omitempty"`
	Ready     int32 `json:"ready,omitempty"`
	Succeeded int32 `json:"succeeded,omitempty"`
	Failed    int32 `json:"failed,omitempty"`
}

// PyJobStatus is what kiln observed of the run.
type PyJobStatus struct {
	// Phase is Pending, Running, Succeeded, Failed or Suspended.
	// +optional
	Phase PyJobPhase `json:"phase,omitempty"`
	// Message says why, in words: the scheduler's reason while Pending, the exit code on failure.
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Conditions: Running, Succeeded, Failed, Suspended.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Workers counts the pods.
	// +optional
	Workers WorkerCounts `json:"workers,omitempty"`
	// OutputClaimName is the claim mounted at outputPath.
	// +optional
	OutputClaimName string `json:"outputClaimName,omitempty"`
	// ObservedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// PyJob runs a training program: one manifest becomes a batch Job (Indexed, with a headless
// Service, when distributed) with its storage mounted, and a clear status. Served as it was; stored
// as v1beta1, converted by kiln's conversion webhook.
// +kubebuilder:object:root=true
// +kubebuilder:deprecatedversion:warning="training.kiln.dev/v1alpha1 PyJob is deprecated: write training.kiln.dev/v1beta1, which kiln stores (README, API versions); v1alpha1 stays served"
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="GPUs",type=integer,JSONPath=`.spec.gpu`
// +kubebuilder:printcolumn:name="Workers",type=integer,JSONPath=`.spec.workers`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label: at most 63 lowercase letters, digits and -, starting with a letter, e.g. resnet-train"
type PyJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PyJobSpec   `json:"spec,omitempty"`
	Status PyJobStatus `json:"status,omitempty"`
}

// PyJobList is a list of PyJobs.
// +kubebuilder:object:root=true
type PyJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PyJob `json:"items"`
}

func init() { SchemeBuilder.Register(&PyJob{}, &PyJobList{}) }

// Hub marks v1alpha1 as the PyJob version every other converts to and from, in kiln's conversion
// webhook and in its controllers, which read the stored v1beta1 and compute on this form
// (docs/decisions.md, 17).
func (*PyJob) Hub() {}
