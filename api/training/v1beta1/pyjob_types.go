package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
)

// PyJobSpec describes one training run. Everything but suspend, backoffLimit,
// activeDeadlineSeconds and ttlSecondsAfterFinished is fixed once the PyJob exists: create a new
// PyJob to change it. Those four apply to the running batch Job.
// +kubebuilder:validation:XValidation:rule="!has(self.dataset) || !has(self.output) || self.dataset.path != self.output.path",message="spec.output.path must differ from spec.dataset.path: the data and the results each get their own directory"
// +kubebuilder:validation:XValidation:rule="!has(self.output) || !has(self.output.accessMode) || self.output.accessMode == 'ReadWriteMany' || (has(self.workers) ? self.workers : 1) <= 1",message="spec.output.accessMode: workers on different nodes cannot all mount a single-node claim; use ReadWriteMany (the default when workers > 1), or workers: 1"
// +kubebuilder:validation:XValidation:rule="!has(self.shmSize) || !has(self.resources) || !has(self.resources.memory) || !quantity(self.shmSize).isGreaterThan(quantity(self.resources.memory))",message="spec.shmSize is memory of the worker: make it at most spec.resources.memory"
// +kubebuilder:validation:XValidation:rule="(has(self.workers) ? self.workers : 1) == (has(oldSelf.workers) ? oldSelf.workers : 1)",message="spec.workers is immutable: create a new PyJob to change it"
// +kubebuilder:validation:XValidation:rule="(has(self.command) ? self.command : []) == (has(oldSelf.command) ? oldSelf.command : []) && (has(self.args) ? self.args : []) == (has(oldSelf.args) ? oldSelf.args : [])",message="spec.command and spec.args are immutable: create a new PyJob to change them"
// +kubebuilder:validation:XValidation:rule="has(self.script) == has(oldSelf.script) && (!has(self.script) || self.script == oldSelf.script)",message="spec.script is immutable: create a new PyJob to change it"
// +kubebuilder:validation:XValidation:rule="has(self.env) == has(oldSelf.env) && (!has(self.env) || self.env == oldSelf.env)",message="spec.env is immutable: create a new PyJob to change it"
// +kubebuilder:validation:XValidation:rule="(has(self.gpus) && has(self.gpus.count) ? self.gpus.count : 0) == (has(oldSelf.gpus) && has(oldSelf.gpus.count) ? oldSelf.gpus.count : 0) && (has(self.gpus) && has(self.gpus.resource) ? self.gpus.resource : 'nvidia.com/gpu') == (has(oldSelf.gpus) && has(oldSelf.gpus.resource) ? oldSelf.gpus.resource : 'nvidia.com/gpu')",message="spec.gpus is immutable: create a new PyJob to change it"
// +kubebuilder:validation:XValidation:rule="has(self.resources) == has(oldSelf.resources) && (!has(self.resources) || self.resources == oldSelf.resources) && has(self.shmSize) == has(oldSelf.shmSize)",message="spec.resources and spec.shmSize are immutable: create a new PyJob to change them"
// +kubebuilder:validation:XValidation:rule="has(self.dataset) == has(oldSelf.dataset) && (!has(self.dataset) || (self.dataset.path == oldSelf.dataset.path && has(self.dataset.claimName) == has(oldSelf.dataset.claimName) && (!has(self.dataset.claimName) || self.dataset.claimName == oldSelf.dataset.claimName) && has(self.dataset.subPath) == has(oldSelf.dataset.subPath) && (!has(self.dataset.subPath) || self.dataset.subPath == oldSelf.dataset.subPath) && (has(self.dataset.readOnly) ? self.dataset.readOnly : true) == (has(oldSelf.dataset.readOnly) ? oldSelf.dataset.readOnly : true)))",message="spec.dataset is immutable: create a new PyJob to change it"
// +kubebuilder:validation:XValidation:rule="has(self.output) == has(oldSelf.output) && (!has(self.output) || (self.output.path == oldSelf.output.path && has(self.output.claimName) == has(oldSelf.output.claimName) && (!has(self.output.claimName) || self.output.claimName == oldSelf.output.claimName) && has(self.output.size) == has(oldSelf.output.size) && (!has(self.output.size) || quantity(self.output.size).compareTo(quantity(oldSelf.output.size)) == 0) && has(self.output.storageClassName) == has(oldSelf.output.storageClassName) && (!has(self.output.storageClassName) || self.output.storageClassName == oldSelf.output.storageClassName) && has(self.output.accessMode) == has(oldSelf.output.accessMode) && (!has(self.output.accessMode) || self.output.accessMode == oldSelf.output.accessMode) && (has(self.output.reclaimPolicy) ? self.output.reclaimPolicy : 'Retain') == (has(oldSelf.output.reclaimPolicy) ? oldSelf.output.reclaimPolicy : 'Retain')))",message="spec.output is immutable: create a new PyJob to change it"
// +kubebuilder:validation:XValidation:rule="has(self.pod) == has(oldSelf.pod) && (!has(self.pod) || self.pod == oldSelf.pod)",message="spec.pod is immutable: create a new PyJob to change it"
type PyJobSpec struct {
	// Image is the container image that runs the training.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.image is immutable: create a new PyJob to change it"
	Image string `json:"image"`

	// Command is the entrypoint, e.g. ["python", "train.py"] or ["torchrun", "train.py"]. Unset
	// with a script: python runs the script (torchrun when workers > 1 or more than one GPU);
	// unset without one: the image's entrypoint.
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

	// Workers is the number of pods (nodes). More than one makes the run distributed: an Indexed
	// Job and a headless Service, with MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and
	// NPROC_PER_NODE (and torchrun's PET_* equivalents) set. At most 10000 (docs/limits.md).
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Workers int32 `json:"workers,omitempty"`

	// GPUs are the GPUs each worker gets. Unset: none.
	// +optional
	GPUs *GPUs `json:"gpus,omitempty"`

	// Resources are the CPU and memory of each worker (requests and limits alike).
	// +optional
	Resources *Resources `json:"resources,omitempty"`

	// ShmSize is the size of /dev/shm, a memory-backed volume: PyTorch's DataLoader workers and
	// NCCL need far more than the container runtime's 64Mi. Its pages count against the worker's
	// memory. Default: half of resources.memory when that is set, else 1Gi; "0" leaves the
	// runtime's /dev/shm.
	// +kubebuilder:validation:XValidation:rule="!quantity(self).isLessThan(quantity('0'))",message="spec.shmSize must be 0 or more, e.g. 8Gi"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.shmSize is immutable: create a new PyJob to change it"
	// +optional
	ShmSize *resource.Quantity `json:"shmSize,omitempty"`

	// Dataset is where the training reads its data (DATASET_PATH), and the claim mounted there.
	// +optional
	Dataset *Dataset `json:"dataset,omitempty"`

	// Output is where the training writes its results (OUTPUT_PATH), and the storage mounted
	// there. Without a claim or a size it is an emptyDir, lost with the pod.
	// +optional
	Output *Output `json:"output,omitempty"`

	// Pod holds what goes to the pods as it is.
	// +optional
	Pod *Pod `json:"pod,omitempty"`

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
}

// GPUs are a worker's GPUs: how many, of which extended resource.
type GPUs struct {
	// Count is the number of GPUs each worker gets (its limit), at most 128.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	// +optional
	Count int32 `json:"count,omitempty"`

	// Resource is the extended resource a GPU is: nvidia.com/gpu (default), amd.com/gpu,
	// gpu.intel.com/i915, a MIG profile such as nvidia.com/mig-1g.5gb. Workers asking for GPUs
	// tolerate its NoSchedule taint, as Kubernetes' ExtendedResourceToleration admission does.
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)+/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$')",message="spec.gpus.resource must be an extended resource name with a domain, e.g. nvidia.com/gpu or amd.com/gpu"
	// +kubebuilder:default="nvidia.com/gpu"
	// +optional
	Resource corev1.ResourceName `json:"resource,omitempty"`
}

// Resources are a worker's CPU and memory.
// +kubebuilder:validation:MinProperties=1
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

// Dataset is where the data is read, and the existing claim holding it.
// +kubebuilder:validation:XValidation:rule="(!has(self.subPath) && !has(self.readOnly)) || has(self.claimName)",message="spec.dataset.subPath and readOnly are of the claim: set spec.dataset.claimName"
type Dataset struct {
	// Path is where the training reads its data (DATASET_PATH): an absolute path.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="spec.dataset.path must be an absolute path such as /mnt/dataset"
	// +kubebuilder:validation:XValidation:rule="!(self in ['/dev/shm', '/dev/shm/', '/opt/kiln/script', '/opt/kiln/script/'])",message="spec.dataset.path must not be /dev/shm or /opt/kiln/script: kiln mounts shared memory and the script there"
	Path string `json:"path"`
	// ClaimName is the PersistentVolumeClaim mounted at path. Unset: nothing is mounted (the
	// data is in the image).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="spec.dataset.claimName must be the name of a PersistentVolumeClaim: lowercase letters, digits, '-' and '.'"
	// +optional
	ClaimName string `json:"claimName,omitempty"`
	// SubPath within the claim: a relative path inside it.
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.matches('(^|/)[.][.](/|$)')",message="spec.dataset.subPath must be a relative path inside the claim, without '..'"
	// +optional
	SubPath string `json:"subPath,omitempty"`
	// ReadOnly mounts the claim read-only (default true).
	// +optional
	ReadOnly *bool `json:"readOnly,omitempty"`
}

// Output is where results go, and the storage mounted there: an existing claim, a size for kiln
// to create one, or neither (an emptyDir).
// +kubebuilder:validation:XValidation:rule="!(has(self.claimName) && has(self.size))",message="spec.output: set at most one of claimName (an existing claim) or size (kiln creates the claim)"
// +kubebuilder:validation:XValidation:rule="!has(self.size) || quantity(self.size).isGreaterThan(quantity('0'))",message="spec.output.size must be a positive quantity such as 100Gi"
// +kubebuilder:validation:XValidation:rule="!has(self.accessMode) || has(self.size)",message="spec.output.accessMode is for the claim kiln creates (spec.output.size): an existing claim keeps its own access modes"
// +kubebuilder:validation:XValidation:rule="has(self.claimName) || has(self.size) || (!has(self.storageClassName) && !has(self.reclaimPolicy))",message="spec.output.storageClassName and reclaimPolicy are for the claim kiln creates: set spec.output.size (or claimName), or remove them for an emptyDir"
type Output struct {
	// Path is where the training writes its results (OUTPUT_PATH): an absolute path.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="spec.output.path must be an absolute path such as /mnt/output"
	// +kubebuilder:validation:XValidation:rule="!(self in ['/dev/shm', '/dev/shm/', '/opt/kiln/script', '/opt/kiln/script/'])",message="spec.output.path must not be /dev/shm or /opt/kiln/script: kiln mounts shared memory and the script there"
	Path string `json:"path"`
	// ClaimName is an existing PersistentVolumeClaim.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="spec.output.claimName must be the name of a PersistentVolumeClaim: lowercase letters, digits, '-' and '.'"
	// +optional
	ClaimName string `json:"claimName,omitempty"`
	// Size of the claim kiln creates, "<name>-output", e.g. 100Gi.
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// StorageClassName of the claim kiln creates; unset: the cluster's default class.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
	// AccessMode of the claim kiln creates: ReadWriteMany (the default when workers > 1),
	// ReadWriteOnce (the default for one worker) or ReadWriteOncePod.
	// +kubebuilder:validation:Enum=ReadWriteOnce;ReadWriteMany;ReadWriteOncePod
	// +optional
	AccessMode corev1.PersistentVolumeAccessMode `json:"accessMode,omitempty"`
	// ReclaimPolicy of the claim kiln creates: Retain (default) keeps it after the PyJob is
	// deleted, Delete deletes it with the PyJob.
	// +optional
	ReclaimPolicy trainingv1alpha1.OutputReclaimPolicy `json:"reclaimPolicy,omitempty"`
}

// Pod is what goes to the pods as it is (tolerations plus the GPU resource's, when workers ask
// for GPUs).
// +kubebuilder:validation:MinProperties=1
type Pod struct {
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// SecurityContext is the pods' securityContext.
	// +optional
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`
	// ContainerSecurityContext is the training container's securityContext: what a namespace
	// enforcing Pod Security "restricted" asks of it (allowPrivilegeEscalation false,
	// capabilities dropped) is set here.
	// +optional
	ContainerSecurityContext *corev1.SecurityContext `json:"containerSecurityContext,omitempty"`
}

// PyJob runs a training program: one manifest becomes a batch Job (Indexed, with a headless
// Service, when distributed) with its storage mounted, and a clear status. The stored version.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="GPUs",type=integer,JSONPath=`.spec.gpus.count`
// +kubebuilder:printcolumn:name="Workers",type=integer,JSONPath=`.spec.workers`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label: at most 63 lowercase letters, digits and -, starting with a letter, e.g. resnet-train"
type PyJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PyJobSpec                    `json:"spec,omitempty"`
	Status trainingv1alpha1.PyJobStatus `json:"status,omitempty"`
}

// PyJobList is a list of PyJobs.
// +kubebuilder:object:root=true
type PyJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PyJob `json:"items"`
}

func init() { SchemeBuilder.Register(&PyJob{}, &PyJobList{}) }
