package trainjob

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
	"github.com/kiln-ml/kiln/internal/framework/mpi"
)

// An MPI runtime's parts, as Trainer names them: the launcher (the trainer step) runs mpirun
// over SSH on the hosts of a hostfile, the "node" replicated job's pods.
const (
	ReplicatedJobLauncher = "launcher"
	volumeSSHAuth         = "mpi-ssh-auth"
	volumeHostfile        = "mpi-hostfile"
	hostfileDir           = "/etc/mpi"
	hostfileKey           = "hostfile"
)

// SSHAuthSecretName is the Secret of an MPI TrainJob's SSH keys.
func SSHAuthSecretName(job *trainerv1alpha1.TrainJob) string { return job.Name + "-mpi-ssh-auth" }

// HostfileName is the ConfigMap of an MPI TrainJob's hostfile.
func HostfileName(job *trainerv1alpha1.TrainJob) string { return job.Name + "-mpi-hostfile" }

// mpiRuntime is Open MPI's launcher and nodes.
type mpiRuntime struct {
	policy *trainerv1alpha1.MPIMLPolicySource
}

func (m mpiRuntime) launcherIsNode() bool { return ptr.Deref(m.policy.RunLauncherAsNode, false) }

// nodeCount: the "node" replicated job has a pod per node, but the launcher's when it is a node too.
func (m mpiRuntime) nodeCount(name, _ string, nodes int32) (int32, bool) {
	if name != ReplicatedJobNode {
		return 0, false
	}
	if m.launcherIsNode() {
		return max(nodes-1, 1), true
	}
	return nodes, true
}

func (mpiRuntime) reserved() []string {
	return []string{"OMPI_MCA_orte_default_hostfile", "OMPI_MCA_plm_rsh_args", "OMPI_MCA_orte_keep_fqdn_hostnames", "OMPI_MCA_orte_set_default_slots"}
}

// slots is each host's processes: the trainer's numProcPerNode, else the runtime's; a runtime's 1
// becomes the node's GPUs when it has more than one.
func (m mpiRuntime) slots(job *trainerv1alpha1.TrainJob, spec *jobsetv1alpha2.JobSetSpec) int32 {
	if t := job.Spec.Trainer; t != nil && t.NumProcPerNode != nil {
		return *t.NumProcPerNode
	}
	n := ptr.Deref(m.policy.NumProcPerNode, 1)
	if g := gpus(nodeResources(job, spec)); n == 1 && g > 1 {
		n = int32(g)
	}
	return n
}

func (m mpiRuntime) apply(job *trainerv1alpha1.TrainJob, _ *trainerv1alpha1.TrainingRuntimeSpec, spec *jobsetv1alpha2.JobSetSpec, nodes int32) Problem {
	names := make([]string, len(spec.ReplicatedJobs))
	for i, rj := range spec.ReplicatedJobs {
		names[i] = rj.Name
	}
	if m.launcherIsNode() && nodes > 1 && (!slices.Contains(names, ReplicatedJobNode) || !slices.Contains(names, ReplicatedJobLauncher)) {
		return Problem{ReasonInvalid, fmt.Sprintf("spec.trainer.numNodes is %d, but the runtime runs its launcher as a node and lacks a replicated job %s or %s: use numNodes 1, or another runtime", nodes, ReplicatedJobNode, ReplicatedJobLauncher), "spec.trainer.numNodes"}
	}
	mount := ptr.Deref(m.policy.SSHAuthMountPath, "/root/.ssh")
	slots := m.slots(job, spec)
	for i := range spec.ReplicatedJobs {
		rj := &spec.ReplicatedJobs[i]
		pod := &podTemplate(rj).Spec
		c := container(pod, ContainerNode)
		if c == nil {
			continue
		}
		if rj.Name == ReplicatedJobNode || rj.Name == ReplicatedJobLauncher {
			pod.Volumes = append(pod.Volumes, corev1.Volume{Name: volumeSSHAuth, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: SSHAuthSecretName(job), DefaultMode: ptr.To[int32](0o400),
				Items: []corev1.KeyToPath{
					{Key: corev1.SSHAuthPrivateKey, Path: "id_rsa", Mode: ptr.To[int32](0o640)},
					{Key: "ssh-publickey", Path: "id_rsa.pub", Mode: ptr.To[int32](0o644)},
					{Key: "ssh-publickey", Path: "authorized_keys", Mode: ptr.To[int32](0o644)},
				}}}})
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: volumeSSHAuth, MountPath: mount})
		}
		if rj.Template.Labels[LabelAncestorStep] != StepTrainer {
			if rj.Name == ReplicatedJobNode && m.launcherIsNode() && job.Spec.Trainer != nil {
				c.Env = upsertEnv(c.Env, job.Spec.Trainer.Env...) // the launcher's fellow nodes train too
				if r := job.Spec.Trainer.ResourcesPerNode; r != nil {
					c.Resources.Limits, c.Resources.Requests = mergeResources(c.Resources.Limits, r.Limits), mergeResources(c.Resources.Requests, r.Requests)
				}
			}
			continue
		}
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: volumeHostfile, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: HostfileName(job)},
			Items:                []corev1.KeyToPath{{Key: hostfileKey, Path: hostfileKey, Mode: ptr.To[int32](0o444)}}}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: volumeHostfile, MountPath: hostfileDir})
		c.Env = upsertEnv(c.Env,
			corev1.EnvVar{Name: "OMPI_MCA_orte_default_hostfile", Value: hostfileDir + "/" + hostfileKey},
			corev1.EnvVar{Name: "OMPI_MCA_orte_keep_fqdn_hostnames", Value: "true"},
			corev1.EnvVar{Name: "OMPI_MCA_orte_set_default_slots", Value: strconv.Itoa(int(slots))},
			corev1.EnvVar{Name: "OMPI_MCA_plm_rsh_args", Value: "-o ConnectionAttempts=10"})
	}
	return Problem{}
}

// objects are the launcher's hostfile and the ranks' SSH keys, owned by the TrainJob.
func (m mpiRuntime) objects(job *trainerv1alpha1.TrainJob, spec *jobsetv1alpha2.JobSetSpec) ([]client.Object, error) {
	subdomain := job.Name
	if n := spec.Network; n != nil && n.Subdomain != "" {
		subdomain = n.Subdomain
	}
	slots := m.slots(job, spec)
	var hosts strings.Builder
	for _, rj := range spec.ReplicatedJobs {
		if rj.Name != ReplicatedJobNode && !(rj.Name == ReplicatedJobLauncher && m.launcherIsNode()) {
			continue
		}
		for r := range max(rj.Replicas, 1) {
			for p := range ptr.Deref(rj.Template.Spec.Parallelism, 1) {
				fmt.Fprintf(&hosts, "%s-%s-%d-%d.%s slots=%d\n", job.Name, rj.Name, r, p, subdomain, slots)
			}
		}
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: job.Namespace, OwnerReferences: []metav1.OwnerReference{ownerRef(job)}}
	}
	priv, pub, err := mpi.NewSSHKeyPair(job.Namespace + "/" + job.Name)
	if err != nil {
		return nil, err
	}
	return []client.Object{
		&corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: meta(HostfileName(job)),
			Data: map[string]string{hostfileKey: hosts.String()}},
		&corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: meta(SSHAuthSecretName(job)),
			Type: corev1.SecretTypeSSHAuth, Immutable: ptr.To(true),
			Data: map[string][]byte{corev1.SSHAuthPrivateKey: priv, "ssh-publickey": pub}},
	}, nil
}
