// Package pyjob is the PyJob controller: a PyJob becomes a batch Job (Indexed, with a headless
// Service, when it has several workers) with its dataset and output storage mounted, and a
// status read from the Job and its pods.
package pyjob

import (
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	trainingv1beta1 "github.com/kiln-ml/kiln/api/training/v1beta1"
	"github.com/kiln-ml/kiln/internal/gpu"
	"github.com/kiln-ml/kiln/internal/kueue"
	"github.com/kiln-ml/kiln/internal/netpol"
)

const (
	// ControllerName marks the pods and services kiln manages for PyJobs, under the same label key
	// as the Kubeflow kinds' (kiln's informer cache holds only pods with that label).
	ControllerName = "pyjob-controller"
	// LabelPyJob names the PyJob of a Job, pod, service or claim.
	LabelPyJob = "training.kiln.dev/pyjob-name"
	// LabelPyJobShort names a pod's PyJob too, so that `kubectl logs -l pyjob-name=<name>` finds
	// its pods.
	LabelPyJobShort = "pyjob-name"
	// ContainerName is the training container.
	ContainerName = "trainer"
	// MasterPort is torch.distributed's default port, on worker 0.
	MasterPort = 29500
	// completionIndexAnnotation is where a pod of an Indexed Job finds its index.
	completionIndexAnnotation = "batch.kubernetes.io/job-completion-index"
	outputVolume              = "output"
	datasetVolume             = "dataset"
	shmVolume                 = "dshm"
	scriptVolume              = "script"
)

// OutputClaimName is the claim mounted at outputPath: the user's, or the one kiln creates.
func OutputClaimName(job *trainingv1alpha1.PyJob) string {
	switch {
	case job.Spec.Output == nil:
		return ""
	case job.Spec.Output.ClaimName != "":
		return job.Spec.Output.ClaimName
	}
	return job.Name + "-output"
}

func labels(job *trainingv1alpha1.PyJob) map[string]string {
	return map[string]string{LabelPyJob: job.Name, kubeflowv1.LabelOperatorName: ControllerName}
}

// podLabels are a worker pod's labels: the PyJob's, and the short one users select with.
func podLabels(job *trainingv1alpha1.PyJob) map[string]string {
	l := labels(job)
	l[LabelPyJobShort] = job.Name
	return l
}

func ownerRef(job *trainingv1alpha1.PyJob) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: trainingv1beta1.GroupVersion.String(), Kind: "PyJob", // the stored version
		Name: job.Name, UID: job.UID, Controller: &yes, BlockOwnerDeletion: &yes}
}

func objectMeta(job *trainingv1alpha1.PyJob, name string, owned bool) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Namespace: job.Namespace, Labels: labels(job)}
	if owned {
		m.OwnerReferences = []metav1.OwnerReference{ownerRef(job)}
	}
	return m
}

// Where a PyJob's spec.script is mounted, and the ConfigMap key that holds it.
const (
	ScriptDir  = "/opt/kiln/script"
	ScriptFile = "main.py"
)

// ScriptName is the ConfigMap holding a PyJob's spec.script.
func ScriptName(job *trainingv1alpha1.PyJob) string { return job.Name + "-script" }

// desiredScript is the immutable ConfigMap holding spec.script, owned by the PyJob.
func desiredScript(job *trainingv1alpha1.PyJob) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: objectMeta(job, ScriptName(job), true),
		Immutable:  ptr.To(true),
		Data:       map[string]string{ScriptFile: job.Spec.Script},
	}
}

// desiredNetworkPolicy fences the PyJob's workers: they reach each other, DNS, and the egress its
// annotation lists.
func desiredNetworkPolicy(job *trainingv1alpha1.PyJob) *networkingv1.NetworkPolicy {
	np := netpol.ForJob(job.Name, job.Namespace, map[string]string{LabelPyJob: job.Name}, netpol.EgressOf(job.Annotations))
	np.ObjectMeta = objectMeta(job, np.Name, true)
	return np
}

// command is spec.command; with none, a script runs through python, or torchrun (which reads
// the PET_* variables kiln sets) when the run has several workers or GPUs.
func command(job *trainingv1alpha1.PyJob) []string {
	s := job.Spec
	if len(s.Command) > 0 || s.Script == "" {
		return s.Command
	}
	if distributed(job) || s.GPU > 1 {
		return []string{"torchrun", ScriptDir + "/" + ScriptFile}
	}
	return []string{"python", ScriptDir + "/" + ScriptFile}
}

// distributed says whether the run has several workers.
func distributed(job *trainingv1alpha1.PyJob) bool { return job.Spec.Workers > 1 }

// desiredService is the headless service that gives worker i the name <name>-<i>.<name>.
func desiredService(job *trainingv1alpha1.PyJob) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: objectMeta(job, job.Name, true),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 labels(job),
			PublishNotReadyAddresses: true,
			Ports:                    []corev1.ServicePort{{Name: "torch-dist", Port: MasterPort}},
		},
	}
}

// desiredClaim is the output claim kiln creates from spec.output.size; with reclaimPolicy Retain
// it has no owner, so that deleting the PyJob keeps the data.
func desiredClaim(job *trainingv1alpha1.PyJob) *corev1.PersistentVolumeClaim {
	out := job.Spec.Output
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: objectMeta(job, OutputClaimName(job), out.ReclaimPolicy == trainingv1alpha1.OutputDelete),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{outputAccessMode(job)},
			StorageClassName: out.StorageClassName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *out.Size}},
		},
	}
}

// outputAccessMode is spec.output.accessMode, by default ReadWriteMany when several workers
// (on several nodes) mount the claim.
func outputAccessMode(job *trainingv1alpha1.PyJob) corev1.PersistentVolumeAccessMode {
	switch {
	case job.Spec.Output.AccessMode != "":
		return job.Spec.Output.AccessMode
	case job.Spec.Workers > 1:
		return corev1.ReadWriteMany
	}
	return corev1.ReadWriteOnce
}

// child is one object a PyJob's batch Job mounts or reaches: whether the job has it, its
// builder (called only when it does) and an empty object of its type.
type child struct {
	want  bool
	build func(*trainingv1alpha1.PyJob) client.Object
	empty func() client.Object
}

// mounted are what a PyJob's batch Job mounts and reaches, in the order they are made: its script,
// its output claim, its NetworkPolicy (defaultPolicy where the job chooses none) and its Service.
func mounted(job *trainingv1alpha1.PyJob, defaultPolicy string) []child {
	return []child{
		{job.Spec.Script != "", func(j *trainingv1alpha1.PyJob) client.Object { return desiredScript(j) }, func() client.Object { return &corev1.ConfigMap{} }},
		{job.Spec.Output != nil && job.Spec.Output.Size != nil, func(j *trainingv1alpha1.PyJob) client.Object { return desiredClaim(j) },
			func() client.Object { return &corev1.PersistentVolumeClaim{} }},
		{netpol.Mode(job.Annotations, defaultPolicy) == netpol.Isolated, func(j *trainingv1alpha1.PyJob) client.Object { return desiredNetworkPolicy(j) },
			func() client.Object { return &networkingv1.NetworkPolicy{} }},
		{distributed(job), func(j *trainingv1alpha1.PyJob) client.Object { return desiredService(j) }, func() client.Object { return &corev1.Service{} }},
	}
}

// Children are every object a PyJob makes, as the reconciler builds them, its batch Job last.
func Children(job *trainingv1alpha1.PyJob, defaultPolicy string) []client.Object {
	var out []client.Object
	for _, c := range mounted(job, defaultPolicy) {
		if c.want {
			out = append(out, c.build(job))
		}
	}
	return append(out, desiredJob(job))
}

// desiredJob is the batch Job that runs the workers.
func desiredJob(job *trainingv1alpha1.PyJob) *batchv1.Job {
	s := job.Spec
	n := s.Workers
	pod := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: podLabels(job), Annotations: podAnnotations(job)},
		Spec: corev1.PodSpec{
			RestartPolicy:      corev1.RestartPolicyNever,
			Containers:         []corev1.Container{trainer(job)},
			NodeSelector:       s.NodeSelector,
			Tolerations:        gpu.Tolerations(s.Tolerations, GPUResource(job), s.GPU),
			Affinity:           s.Affinity,
			SecurityContext:    s.SecurityContext,
			PriorityClassName:  s.PriorityClassName,
			ServiceAccountName: s.ServiceAccountName,
			ImagePullSecrets:   s.ImagePullSecrets,
			Volumes:            volumes(job),
		},
	}
	spec := batchv1.JobSpec{
		Parallelism:           &n,
		Completions:           &n,
		BackoffLimit:          s.BackoffLimit,
		ActiveDeadlineSeconds: s.ActiveDeadlineSeconds,
		Suspend:               s.Suspend,
		Template:              pod,
	}
	if distributed(job) {
		indexed := batchv1.IndexedCompletion
		spec.CompletionMode = &indexed
		spec.Template.Spec.Subdomain = job.Name
	}
	meta := objectMeta(job, job.Name, true)
	// Kueue's queue and priority labels put the batch Job in a LocalQueue: Kueue suspends it
	// until it admits it.
	kueue.CopyLabels(job.Labels, meta.Labels)
	return &batchv1.Job{ObjectMeta: meta, Spec: spec}
}

// queued says whether Kueue decides when the batch Job runs.
func queued(bj *batchv1.Job) bool { return bj.Labels[kueue.QueueLabel] != "" }

// podAnnotations passes the PyJob's annotations on to its pods (kiln.dev/simulate-* among them),
// except kubectl's bookkeeping.
func podAnnotations(job *trainingv1alpha1.PyJob) map[string]string {
	out := map[string]string{}
	for k, v := range job.Annotations {
		if !strings.HasPrefix(k, "kubectl.kubernetes.io/") {
			out[k] = v
		}
	}
	return out
}

func trainer(job *trainingv1alpha1.PyJob) corev1.Container {
	s := job.Spec
	res := corev1.ResourceList{}
	if s.Resources.CPU != nil {
		res[corev1.ResourceCPU] = *s.Resources.CPU
	}
	if s.Resources.Memory != nil {
		res[corev1.ResourceMemory] = *s.Resources.Memory
	}
	limits := res.DeepCopy()
	if s.GPU > 0 {
		limits[GPUResource(job)] = *resource.NewQuantity(int64(s.GPU), resource.DecimalSI)
	}
	c := corev1.Container{
		Name: ContainerName, Image: s.Image, Command: command(job), Args: s.Args,
		Env:             append(Env(job), s.Env...),
		Resources:       corev1.ResourceRequirements{Requests: res, Limits: limits},
		SecurityContext: s.ContainerSecurityContext,
	}
	if s.DatasetPath != "" && s.Dataset != nil {
		ro := s.Dataset.ReadOnly == nil || *s.Dataset.ReadOnly
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: datasetVolume, MountPath: s.DatasetPath, SubPath: s.Dataset.SubPath, ReadOnly: ro})
	}
	if s.OutputPath != "" {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: outputVolume, MountPath: s.OutputPath})
	}
	if size := ShmSize(job); size.Sign() > 0 {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: shmVolume, MountPath: "/dev/shm"})
	}
	if s.Script != "" {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: scriptVolume, MountPath: ScriptDir, ReadOnly: true})
	}
	return c
}

// GPUResource is the extended resource the PyJob's GPUs are.
func GPUResource(job *trainingv1alpha1.PyJob) corev1.ResourceName {
	return gpu.Resource(job.Spec.GPUResource)
}

// DefaultShmSize is /dev/shm's size when spec.shmSize and spec.resources.memory are unset.
var DefaultShmSize = resource.MustParse("1Gi")

// ShmSize is the size of the run's /dev/shm: spec.shmSize, else half of its memory, else
// DefaultShmSize. Zero: the container runtime's own.
func ShmSize(job *trainingv1alpha1.PyJob) resource.Quantity {
	s := job.Spec
	switch {
	case s.ShmSize != nil:
		return *s.ShmSize
	case s.Resources.Memory != nil:
		return *resource.NewQuantity(s.Resources.Memory.Value()/2, resource.BinarySI)
	}
	return DefaultShmSize
}

func volumes(job *trainingv1alpha1.PyJob) []corev1.Volume {
	s := job.Spec
	var vs []corev1.Volume
	if s.DatasetPath != "" && s.Dataset != nil {
		vs = append(vs, corev1.Volume{Name: datasetVolume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: s.Dataset.ClaimName, ReadOnly: s.Dataset.ReadOnly == nil || *s.Dataset.ReadOnly}}})
	}
	if s.OutputPath != "" {
		src := corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
		if claim := OutputClaimName(job); claim != "" {
			src = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}
		}
		vs = append(vs, corev1.Volume{Name: outputVolume, VolumeSource: src})
	}
	if size := ShmSize(job); size.Sign() > 0 {
		vs = append(vs, corev1.Volume{Name: shmVolume, VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size}}})
	}
	if s.Script != "" {
		vs = append(vs, corev1.Volume{Name: scriptVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ScriptName(job)}, DefaultMode: ptr.To[int32](0o444)}}})
	}
	return vs
}

// Env tells the training where its data is and, for torchrun, where it stands: MASTER_ADDR is
// worker 0 through the headless service, RANK the pod's completion index.
func Env(job *trainingv1alpha1.PyJob) []corev1.EnvVar {
	s := job.Spec
	var env []corev1.EnvVar
	if s.DatasetPath != "" {
		env = append(env, corev1.EnvVar{Name: "DATASET_PATH", Value: s.DatasetPath})
	}
	if s.OutputPath != "" {
		env = append(env, corev1.EnvVar{Name: "OUTPUT_PATH", Value: s.OutputPath})
	}
	if s.Script != "" {
		env = append(env, corev1.EnvVar{Name: "SCRIPT_PATH", Value: ScriptDir + "/" + ScriptFile})
	}
	nproc := strconv.Itoa(int(max(1, s.GPU)))
	workers := strconv.Itoa(int(s.Workers))
	master, rank := "localhost", corev1.EnvVar{Name: "RANK", Value: "0"}
	if distributed(job) {
		master = job.Name + "-0." + job.Name
		rank = corev1.EnvVar{Name: "RANK", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
			FieldPath: "metadata.annotations['" + completionIndexAnnotation + "']"}}}
	}
	port := strconv.Itoa(MasterPort)
	nodeRank := rank
	nodeRank.Name = "PET_NODE_RANK"
	return append(env,
		corev1.EnvVar{Name: "PYTHONUNBUFFERED", Value: "1"},
		corev1.EnvVar{Name: "MASTER_ADDR", Value: master},
		corev1.EnvVar{Name: "MASTER_PORT", Value: port},
		corev1.EnvVar{Name: "WORLD_SIZE", Value: workers},
		rank,
		corev1.EnvVar{Name: "NPROC_PER_NODE", Value: nproc},
		corev1.EnvVar{Name: "PET_MASTER_ADDR", Value: master},
		corev1.EnvVar{Name: "PET_MASTER_PORT", Value: port},
		corev1.EnvVar{Name: "PET_NNODES", Value: workers},
		nodeRank,
		corev1.EnvVar{Name: "PET_NPROC_PER_NODE", Value: nproc},
	)
}
