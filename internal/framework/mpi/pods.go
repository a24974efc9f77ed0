package mpi

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/podsecurity"
)

// Where the launcher and workers find what kiln gives them.
const (
	// ConfigMountPath holds the ConfigMap's files: hostfile, discover_hosts.sh, kubexec.sh.
	ConfigMountPath = "/etc/mpi"
	// HostfileName lists the hosts mpirun starts ranks on, one "<host> slots=<n>" per line.
	HostfileName = "hostfile"
	// DiscoverHostsName prints the hosts running now, one "<host>:<slots>" per line (Horovod's
	// elastic --host-discovery-script).
	DiscoverHostsName = "discover_hosts.sh"
	// KubexecName is the rsh agent of kubectl-exec mode: it runs a command in a worker pod.
	KubexecName = "kubexec.sh"
	// DefaultSSHAuthMountPath is where the job's SSH key pair is mounted unless the job says.
	DefaultSSHAuthMountPath = "/root/.ssh"
	// KubectlMountPath is where kubectl-exec mode's kubectl is delivered.
	KubectlMountPath = "/opt/kube"

	// roleEnv tells a pod its role, launcher or worker (as mpi-operator does).
	roleEnv = "K_MPI_JOB_ROLE"

	configVolume  = "mpi-job-config"
	sshVolume     = "ssh-auth"
	kubectlVolume = "mpi-job-kubectl"
	kubectlInit   = "kubectl-delivery"
)

// sshArgs make the ssh client retry workers whose sshd is not up yet, and accept host keys it
// cannot know in advance (the workers' are made when their pods start).
const sshArgs = "-o ConnectionAttempts=10 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"

// setClusterSpec adds to a launcher's or worker's template what the remote start needs, on its
// first container (the one that runs MPI, as in Kubeflow).
func setClusterSpec(cfg Config, job *kubeflowv1.MPIJob, t *corev1.PodTemplateSpec, rtype kubeflowv1.ReplicaType) {
	if len(t.Spec.Containers) == 0 {
		return // refused by validation
	}
	mode := remoteStart(cfg, job)
	c := &t.Spec.Containers[0]
	c.Env = append(c.Env, unlessSet(c.Env, framework.Env(roleEnv, strings.ToLower(string(rtype))))...)
	if rtype == launcher {
		setLauncher(cfg, job, t, mode)
	} else if len(c.Command) == 0 && len(c.Args) == 0 {
		// What the workers do until the launcher starts ranks on them.
		c.Command = []string{"sleep", "365d"}
		if mode == kubeflowv1.MPIRemoteStartSSH {
			c.Command = []string{"/usr/sbin/sshd", "-De"}
		}
	}
	if mode == kubeflowv1.MPIRemoteStartSSH {
		mountSSHAuth(job, t)
	} else if rtype == worker {
		// Open MPI checks that the rsh agent exists on every host.
		mountConfig(job, t, c, corev1.KeyToPath{Key: KubexecName, Path: KubexecName, Mode: fileMode(0o555)})
	}
}

// setLauncher points the launcher's MPI at the hostfile and the remote start.
func setLauncher(cfg Config, job *kubeflowv1.MPIJob, t *corev1.PodTemplateSpec, mode string) {
	c := &t.Spec.Containers[0]
	hostfile := ConfigMountPath + "/" + HostfileName
	impl := implementation(job)
	openMPI := impl == "" || impl == kubeflowv1.MPIImplementationOpenMPI
	intel := impl == "" || impl == kubeflowv1.MPIImplementationIntel
	var env []corev1.EnvVar
	if openMPI {
		env = append(env, framework.Env("OMPI_MCA_orte_default_hostfile", hostfile))
	}
	if intel {
		env = append(env, framework.Env("I_MPI_HYDRA_HOST_FILE", hostfile))
	}
	slotCount := strconv.Itoa(slots(job))
	switch impl {
	case kubeflowv1.MPIImplementationOpenMPI:
		env = append(env, unlessSet(c.Env, framework.Env("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
			framework.Env("OMPI_MCA_orte_set_default_slots", slotCount))...)
	case kubeflowv1.MPIImplementationIntel:
		env = append(env, unlessSet(c.Env, framework.Env("I_MPI_PERHOST", slotCount))...)
	case kubeflowv1.MPIImplementationMPICH:
		env = append(env, framework.Env("HYDRA_HOST_FILE", hostfile))
	}
	items := []corev1.KeyToPath{
		{Key: HostfileName, Path: HostfileName, Mode: fileMode(0o444)},
		{Key: DiscoverHostsName, Path: DiscoverHostsName, Mode: fileMode(0o555)},
	}
	if mode == kubeflowv1.MPIRemoteStartSSH {
		if openMPI {
			env = append(env, unlessSet(c.Env, framework.Env("OMPI_MCA_plm_rsh_args", sshArgs))...)
		}
		if intel {
			env = append(env, unlessSet(c.Env, framework.Env("I_MPI_HYDRA_BOOTSTRAP", "ssh"),
				framework.Env("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", sshArgs))...)
		}
		if impl == kubeflowv1.MPIImplementationMPICH {
			env = append(env, unlessSet(c.Env, framework.Env("HYDRA_LAUNCH_EXTRA_ARGS", sshArgs))...)
		}
	} else {
		kubexec := ConfigMountPath + "/" + KubexecName
		env = append(env, framework.Env("OMPI_MCA_plm_rsh_agent", kubexec))
		env = append(env, unlessSet(c.Env,
			framework.Env("I_MPI_HYDRA_BOOTSTRAP", "rsh"),
			framework.Env("I_MPI_HYDRA_BOOTSTRAP_EXEC", kubexec))...)
		items = append(items, corev1.KeyToPath{Key: KubexecName, Path: KubexecName, Mode: fileMode(0o555)})
		t.Spec.ServiceAccountName = launcherAccount(job) // validate refuses another
		deliverKubectl(cfg, t, c)
	}
	if !launcherRunsRanks(job) {
		// Keep a launcher that runs no ranks from seeing the node's GPUs (as Kubeflow does).
		env = append(env, framework.Env("NVIDIA_VISIBLE_DEVICES", ""), framework.Env("NVIDIA_DRIVER_CAPABILITIES", ""))
	}
	c.Env = append(c.Env, env...)
	mountConfig(job, t, c, items...)
}

// deliverKubectl copies kiln, which serves as `kubectl exec`, to KubectlMountPath/kubectl in an
// init container on kiln's image.
func deliverKubectl(cfg Config, t *corev1.PodTemplateSpec, c *corev1.Container) {
	t.Spec.Volumes = append(t.Spec.Volumes, corev1.Volume{Name: kubectlVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	mount := corev1.VolumeMount{Name: kubectlVolume, MountPath: KubectlMountPath}
	t.Spec.InitContainers = append(t.Spec.InitContainers, corev1.Container{
		Name:            kubectlInit,
		Image:           cfg.KubectlImage,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{"/kiln", "install-kubectl", KubectlMountPath + "/kubectl"},
		VolumeMounts:    []corev1.VolumeMount{mount},
		SecurityContext: podsecurity.Restricted(),
	})
	c.VolumeMounts = append(c.VolumeMounts, mount)
}

func mountConfig(job *kubeflowv1.MPIJob, t *corev1.PodTemplateSpec, c *corev1.Container, items ...corev1.KeyToPath) {
	t.Spec.Volumes = append(t.Spec.Volumes, corev1.Volume{Name: configVolume, VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapName(job.Name)}, Items: items},
	}})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: configVolume, MountPath: ConfigMountPath})
}

// mountSSHAuth mounts the job's key pair as the private key, public key and authorized_keys of
// the .ssh folder: every pod can reach every other.
func mountSSHAuth(job *kubeflowv1.MPIJob, t *corev1.PodTemplateSpec) {
	path := job.Annotations[kubeflowv1.AnnotationMPISSHAuthMountPath]
	if path == "" {
		path = DefaultSSHAuthMountPath
	}
	var mode *int32
	if path == DefaultSSHAuthMountPath {
		// root's ssh refuses a private key others can read; another user's could not read a
		// root-owned 0600 file, and ssh does not check files it does not own.
		mode = fileMode(0o600)
	}
	t.Spec.Volumes = append(t.Spec.Volumes, corev1.Volume{Name: sshVolume, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: SSHSecretName(job), DefaultMode: mode, Items: []corev1.KeyToPath{
			{Key: corev1.SSHAuthPrivateKey, Path: privateKeyFile},
			{Key: sshPublicKey, Path: privateKeyFile + ".pub"},
			// The names mpi-operator mounts its key as: its images' sshd_config name
			// ~/.ssh/id_rsa their host key (OpenSSH reads the key's type from the file).
			{Key: corev1.SSHAuthPrivateKey, Path: "id_rsa"},
			{Key: sshPublicKey, Path: "id_rsa.pub"},
			{Key: sshPublicKey, Path: "authorized_keys"},
		}},
	}})
	c := &t.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: sshVolume, MountPath: path})
}

// unlessSet returns the variables of env the container does not set itself.
func unlessSet(set []corev1.EnvVar, env ...corev1.EnvVar) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range env {
		if !hasEnv(set, e.Name) {
			out = append(out, e)
		}
	}
	return out
}

func hasEnv(env []corev1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}

// isGPULauncher says whether a launcher container limits a GPU resource (nvidia.com/gpu,
// amd.com/gpu, …): it then runs ranks too, and the hostfile lists it.
func isGPULauncher(job *kubeflowv1.MPIJob) bool {
	l := job.Spec.MPIReplicaSpecs[launcher]
	if l == nil {
		return false
	}
	for _, c := range l.Template.Spec.Containers {
		for name := range c.Resources.Limits {
			if strings.Contains(string(name), "gpu") {
				return true
			}
		}
	}
	return false
}

func fileMode(mode int32) *int32 { return &mode }
