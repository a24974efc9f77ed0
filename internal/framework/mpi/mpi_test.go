package mpi

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/podsecurity"
	"github.com/kiln-ml/kiln/test/builder"
)

func newJob(workers int32) *kubeflowv1.MPIJob {
	job := builder.MPIJob("pi", "ns").Replicas("Launcher", 1).Replicas("Worker", workers).Obj().(*kubeflowv1.MPIJob)
	job.UID = "0123456789abcdef"
	return job
}

// pod is the template of replica rtype after the framework's SetClusterSpec.
func pod(t *testing.T, fw framework.Framework, job *kubeflowv1.MPIJob, rtype kubeflowv1.ReplicaType) *corev1.PodTemplateSpec {
	t.Helper()
	tmpl := job.Spec.MPIReplicaSpecs[rtype].Template.DeepCopy()
	if err := fw.SetClusterSpec(job, tmpl, rtype, 0); err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func TestNames(t *testing.T) {
	fw, job := New(Config{}), newJob(2)
	for _, c := range []struct {
		rtype kubeflowv1.ReplicaType
		index int
		want  string
	}{{"Launcher", 0, "pi-launcher"}, {"Worker", 0, "pi-worker-0"}, {"Worker", 1, "pi-worker-1"}} {
		if got := fw.PodNameOf(job, c.rtype, c.index); got != c.want {
			t.Errorf("%s %d: %s, want %s", c.rtype, c.index, got, c.want)
		}
	}
	if got := SSHSecretName(job); got != "pi-ssh-01234567" {
		t.Errorf("secret %s, want pi-ssh-01234567", got)
	}
	if !fw.HasServices(job) {
		t.Error("ssh mode: want headless services (the hostfile's names resolve through them)")
	}
	job.Annotations = map[string]string{kubeflowv1.AnnotationMPIRemoteStart: kubeflowv1.MPIRemoteStartKubectlExec}
	if fw.HasServices(job) {
		t.Error("kubectl-exec mode: want no services, as Kubeflow")
	}
}

func TestSSHLauncherAndWorker(t *testing.T) {
	fw, job := New(Config{}), newJob(2)
	job.Spec.MPIReplicaSpecs["Launcher"].Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "I_MPI_HYDRA_BOOTSTRAP", Value: "mine"}}
	l := pod(t, fw, job, "Launcher")
	sshArgs := "-o ConnectionAttempts=10 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
	wantEnv := []corev1.EnvVar{
		{Name: "I_MPI_HYDRA_BOOTSTRAP", Value: "mine"},
		{Name: "K_MPI_JOB_ROLE", Value: "launcher"},
		{Name: "OMPI_MCA_orte_default_hostfile", Value: "/etc/mpi/hostfile"},
		{Name: "I_MPI_HYDRA_HOST_FILE", Value: "/etc/mpi/hostfile"},
		{Name: "OMPI_MCA_plm_rsh_args", Value: sshArgs},
		{Name: "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", Value: sshArgs},
		{Name: "NVIDIA_VISIBLE_DEVICES", Value: ""},
		{Name: "NVIDIA_DRIVER_CAPABILITIES", Value: ""},
	}
	if diff := cmp.Diff(wantEnv, l.Spec.Containers[0].Env); diff != "" {
		t.Errorf("launcher env (-want +got):\n%s", diff)
	}
	wantMounts := []corev1.VolumeMount{{Name: "mpi-job-config", MountPath: "/etc/mpi"}, {Name: "ssh-auth", MountPath: "/root/.ssh"}}
	if diff := cmp.Diff(wantMounts, l.Spec.Containers[0].VolumeMounts); diff != "" {
		t.Errorf("launcher mounts (-want +got):\n%s", diff)
	}
	wantVolumes := []corev1.Volume{
		{Name: "mpi-job-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "pi-config"},
			Items:                []corev1.KeyToPath{{Key: "hostfile", Path: "hostfile", Mode: ptr.To[int32](0o444)}, {Key: "discover_hosts.sh", Path: "discover_hosts.sh", Mode: ptr.To[int32](0o555)}},
		}}},
		{Name: "ssh-auth", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: "pi-ssh-01234567", DefaultMode: ptr.To[int32](0o600),
			Items: []corev1.KeyToPath{{Key: "ssh-privatekey", Path: "id_ed25519"}, {Key: "ssh-publickey", Path: "id_ed25519.pub"},
				{Key: "ssh-privatekey", Path: "id_rsa"}, {Key: "ssh-publickey", Path: "id_rsa.pub"}, {Key: "ssh-publickey", Path: "authorized_keys"}},
		}}},
	}
	if diff := cmp.Diff(wantVolumes, l.Spec.Volumes); diff != "" {
		t.Errorf("launcher volumes (-want +got):\n%s", diff)
	}
	if l.Spec.ServiceAccountName != "" || len(l.Spec.InitContainers) != 0 {
		t.Errorf("ssh launcher: service account %q, init containers %v: want neither", l.Spec.ServiceAccountName, l.Spec.InitContainers)
	}

	w := pod(t, fw, job, "Worker")
	if diff := cmp.Diff([]string{"/usr/sbin/sshd", "-De"}, w.Spec.Containers[0].Command); diff != "" {
		t.Errorf("worker command (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.EnvVar{{Name: "K_MPI_JOB_ROLE", Value: "worker"}}, w.Spec.Containers[0].Env); diff != "" {
		t.Errorf("worker env (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantMounts[1:], w.Spec.Containers[0].VolumeMounts); diff != "" {
		t.Errorf("worker mounts (-want +got):\n%s", diff)
	}

	job.Annotations = map[string]string{kubeflowv1.AnnotationMPISSHAuthMountPath: "/home/mpiuser/.ssh"}
	job.Spec.MPIReplicaSpecs["Worker"].Template.Spec.Containers[0].Args = []string{"/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.sshd_config"}
	w = pod(t, fw, job, "Worker")
	if w.Spec.Containers[0].Command != nil {
		t.Errorf("worker with args got command %v: want the image's entrypoint", w.Spec.Containers[0].Command)
	}
	if m := w.Spec.Containers[0].VolumeMounts[0]; m.MountPath != "/home/mpiuser/.ssh" || w.Spec.Volumes[0].Secret.DefaultMode != nil {
		t.Errorf("non-root mount %+v mode %v: want /home/mpiuser/.ssh with the default mode", m, w.Spec.Volumes[0].Secret.DefaultMode)
	}
}

func TestKubectlExecLauncherAndWorker(t *testing.T) {
	fw := New(Config{RemoteStart: kubeflowv1.MPIRemoteStartKubectlExec, KubectlImage: "kiln:v1"})
	job := newJob(2)
	job.Spec.MainContainer = "mpi"
	job.Spec.MPIReplicaSpecs["Launcher"].Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	l := pod(t, fw, job, "Launcher")
	wantEnv := []corev1.EnvVar{
		{Name: "K_MPI_JOB_ROLE", Value: "launcher"},
		{Name: "OMPI_MCA_orte_default_hostfile", Value: "/etc/mpi/hostfile"},
		{Name: "I_MPI_HYDRA_HOST_FILE", Value: "/etc/mpi/hostfile"},
		{Name: "OMPI_MCA_plm_rsh_agent", Value: "/etc/mpi/kubexec.sh"},
		{Name: "I_MPI_HYDRA_BOOTSTRAP", Value: "rsh"},
		{Name: "I_MPI_HYDRA_BOOTSTRAP_EXEC", Value: "/etc/mpi/kubexec.sh"},
	}
	if diff := cmp.Diff(wantEnv, l.Spec.Containers[0].Env); diff != "" {
		t.Errorf("launcher env (-want +got):\n%s", diff)
	}
	if l.Spec.ServiceAccountName != "pi-launcher" {
		t.Errorf("service account %q, want pi-launcher", l.Spec.ServiceAccountName)
	}
	wantInit := []corev1.Container{{
		Name: "kubectl-delivery", Image: "kiln:v1", ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{"/kiln", "install-kubectl", "/opt/kube/kubectl"},
		VolumeMounts:    []corev1.VolumeMount{{Name: "mpi-job-kubectl", MountPath: "/opt/kube"}},
		SecurityContext: podsecurity.Restricted(),
	}}
	if diff := cmp.Diff(wantInit, l.Spec.InitContainers); diff != "" {
		t.Errorf("init containers (-want +got):\n%s", diff)
	}
	if items := l.Spec.Volumes[1].ConfigMap.Items; len(items) != 3 || items[2].Key != "kubexec.sh" {
		t.Errorf("launcher config items %+v: want hostfile, discover_hosts.sh, kubexec.sh", items)
	}
	w := pod(t, fw, job, "Worker")
	if diff := cmp.Diff([]string{"sleep", "365d"}, w.Spec.Containers[0].Command); diff != "" {
		t.Errorf("worker command (-want +got):\n%s", diff)
	}
	if v := w.Spec.Volumes; len(v) != 1 || v[0].ConfigMap == nil || len(v[0].ConfigMap.Items) != 1 || v[0].ConfigMap.Items[0].Key != "kubexec.sh" {
		t.Errorf("worker volumes %+v: want kubexec.sh only", v)
	}

	// Worker 1's pod is the job's; worker 0's name is held by no pod of the job (another's, or none).
	extras := fw.Extras(job, framework.State{Active: true, Running: map[kubeflowv1.ReplicaType][]int{"Worker": {1}},
		Existing: map[kubeflowv1.ReplicaType][]int{"Launcher": {0}, "Worker": {1}}})
	if len(extras) != 4 {
		t.Fatalf("%d extras, want the ConfigMap, ServiceAccount, Role and RoleBinding", len(extras))
	}
	cm := extras[0].Object.(*corev1.ConfigMap)
	if want := "#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n/opt/kube/kubectl exec ${POD_NAME} --container mpi -- /bin/sh -c \"$*\"\n"; cm.Data["kubexec.sh"] != want {
		t.Errorf("kubexec.sh:\n%s\nwant:\n%s", cm.Data["kubexec.sh"], want)
	}
	if want := "pi-launcher slots=1\npi-worker-0 slots=1\npi-worker-1 slots=1\n"; cm.Data["hostfile"] != want {
		t.Errorf("GPU launcher hostfile %q, want %q", cm.Data["hostfile"], want)
	}
	role := extras[2].Object.(*rbacv1.Role)
	wantRules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}, ResourceNames: []string{"pi-worker-1"}},
		{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"create"}, ResourceNames: []string{"pi-worker-1"}},
	}
	if diff := cmp.Diff(wantRules, role.Rules); diff != "" {
		t.Errorf("role (-want +got):\n%s", diff)
	}
	binding := extras[3].Object.(*rbacv1.RoleBinding)
	if binding.Subjects[0].Name != "pi-launcher" || binding.RoleRef.Name != "pi-launcher" {
		t.Errorf("binding %+v", binding)
	}

	if extras := fw.Extras(job, framework.State{}); len(extras[2].Object.(*rbacv1.Role).Rules) != 0 {
		t.Errorf("with no pod of the job the Role grants %+v, want nothing", extras[2].Object.(*rbacv1.Role).Rules)
	}
	job.Spec.MPIReplicaSpecs["Launcher"].Template.Spec.ServiceAccountName = "mine"
	if errs, _ := fw.Validate(job, field.NewPath("spec", "mpiReplicaSpecs")); len(errs) != 1 || !strings.Contains(errs[0].Error(), "spec.mpiReplicaSpecs[Launcher].template.spec.serviceAccountName: Forbidden: in kubectl-exec mode the launcher runs as pi-launcher") {
		t.Errorf("a launcher naming its own account in kubectl-exec mode: %v, want it refused", errs)
	}
}

func TestHostfileAndDiscoverHosts(t *testing.T) {
	job := newJob(3)
	job.Spec.SlotsPerWorker = ptr.To[int32](4)
	if want := "pi-worker-0 slots=4\npi-worker-1 slots=4\npi-worker-2 slots=4\n"; Hostfile(job) != want {
		t.Errorf("hostfile %q, want %q", Hostfile(job), want)
	}
	extras := New(Config{}).Extras(job, framework.State{Active: true, Running: map[kubeflowv1.ReplicaType][]int{"Launcher": {0}, "Worker": {0, 2}}})
	if len(extras) != 1 {
		t.Fatalf("ssh mode: %d extras, want the ConfigMap only", len(extras))
	}
	cm := extras[0].Object.(*corev1.ConfigMap)
	if cm.Name != "pi-config" || !extras[0].Wanted {
		t.Errorf("config map %s wanted %v", cm.Name, extras[0].Wanted)
	}
	if want := "#!/bin/sh\necho pi-worker-0:4\necho pi-worker-2:4\n"; cm.Data["discover_hosts.sh"] != want {
		t.Errorf("discover_hosts.sh %q, want %q", cm.Data["discover_hosts.sh"], want)
	}
	if _, ok := cm.Data["kubexec.sh"]; ok {
		t.Error("ssh mode: want no kubexec.sh")
	}
}

func TestSSHSecret(t *testing.T) {
	fw, job := New(Config{}), newJob(1)
	secrets, err := fw.Secrets(job)
	if err != nil || len(secrets) != 1 {
		t.Fatalf("secrets %v, %v: want one", secrets, err)
	}
	s := secrets[0]
	if s.Name != "pi-ssh-01234567" || s.Type != corev1.SecretTypeSSHAuth {
		t.Errorf("secret %s of type %s", s.Name, s.Type)
	}
	signer, err := ssh.ParsePrivateKey(s.Data["ssh-privatekey"])
	if err != nil {
		t.Fatalf("private key does not parse as OpenSSH's: %v", err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(s.Data["ssh-publickey"])
	if err != nil {
		t.Fatalf("public key is not in authorized_keys format: %v", err)
	}
	if string(pub.Marshal()) != string(signer.PublicKey().Marshal()) || pub.Type() != ssh.KeyAlgoED25519 {
		t.Errorf("public key %s does not match the private key", pub.Type())
	}
	again, _ := fw.Secrets(job)
	if string(again[0].Data["ssh-privatekey"]) == string(s.Data["ssh-privatekey"]) {
		t.Error("two key pairs are equal: want a new one per job")
	}
	job.Annotations = map[string]string{kubeflowv1.AnnotationMPIRemoteStart: kubeflowv1.MPIRemoteStartKubectlExec}
	if secrets, _ := New(Config{RemoteStart: kubeflowv1.MPIRemoteStartKubectlExec}).Secrets(job); len(secrets) != 0 {
		t.Errorf("kubectl-exec mode: %d secrets, want none", len(secrets))
	}
}

func TestValidate(t *testing.T) {
	specs := field.NewPath("spec", "mpiReplicaSpecs")
	for _, c := range []struct {
		name   string
		cfg    Config
		edit   func(*kubeflowv1.MPIJob)
		errs   []string
		warned bool
	}{
		{name: "valid", edit: func(*kubeflowv1.MPIJob) {}},
		{name: "two launchers", edit: func(j *kubeflowv1.MPIJob) { j.Spec.MPIReplicaSpecs["Launcher"].Replicas = ptr.To[int32](2) },
			errs: []string{"spec.mpiReplicaSpecs[Launcher].replicas: Invalid value: 2: must be 1"}},
		{name: "no launcher", edit: func(j *kubeflowv1.MPIJob) { delete(j.Spec.MPIReplicaSpecs, "Launcher") },
			errs: []string{"spec.mpiReplicaSpecs[Launcher]: Required value"}},
		{name: "kubectl-exec not enabled", edit: func(j *kubeflowv1.MPIJob) {
			j.Annotations = map[string]string{kubeflowv1.AnnotationMPIRemoteStart: "kubectl-exec"}
		}, errs: []string{"metadata.annotations[kiln.dev/mpi-remote-start]: Forbidden: kubectl-exec is not enabled in this kiln install"}},
		{name: "kubectl-exec enabled", cfg: Config{RemoteStart: "kubectl-exec"}, edit: func(j *kubeflowv1.MPIJob) {
			j.Annotations = map[string]string{kubeflowv1.AnnotationMPIRemoteStart: "kubectl-exec"}
		}},
		{name: "unknown remote start", edit: func(j *kubeflowv1.MPIJob) {
			j.Annotations = map[string]string{kubeflowv1.AnnotationMPIRemoteStart: "rsh"}
		}, errs: []string{`metadata.annotations[kiln.dev/mpi-remote-start]: Unsupported value: "rsh"`}},
		{name: "relative ssh path", edit: func(j *kubeflowv1.MPIJob) {
			j.Annotations = map[string]string{kubeflowv1.AnnotationMPISSHAuthMountPath: ".ssh"}
		}, errs: []string{"metadata.annotations[kiln.dev/mpi-ssh-auth-mount-path]: Invalid value"}},
		{name: "unknown main container", edit: func(j *kubeflowv1.MPIJob) { j.Spec.MainContainer = "trainer" },
			errs: []string{`spec.mainContainer: Invalid value: "trainer": names no container of the Worker template`}},
		{name: "unknown MPI", edit: func(j *kubeflowv1.MPIJob) {
			j.Annotations = map[string]string{kubeflowv1.AnnotationMPIImplementation: "MVAPICH"}
		}, errs: []string{`metadata.annotations[kiln.dev/mpi-implementation]: Unsupported value: "MVAPICH": supported values: "OpenMPI", "Intel", "MPICH"`}},
		{name: "launcher as worker not a boolean", edit: func(j *kubeflowv1.MPIJob) {
			j.Annotations = map[string]string{kubeflowv1.AnnotationMPIRunLauncherAsWorker: "yes"}
		}, errs: []string{`metadata.annotations[kiln.dev/mpi-run-launcher-as-worker]: Unsupported value: "yes"`}},
		{name: "unknown launcher creation policy", edit: func(j *kubeflowv1.MPIJob) {
			j.Annotations = map[string]string{kubeflowv1.AnnotationMPILauncherCreationPolicy: "Later"}
		}, errs: []string{`metadata.annotations[kiln.dev/mpi-launcher-creation-policy]: Unsupported value: "Later"`}},
		{name: "5000 workers at v1", edit: func(j *kubeflowv1.MPIJob) {
			j.Name = strings.Repeat("a", 40)
			j.Spec.MPIReplicaSpecs["Worker"].Replicas = ptr.To[int32](5000)
		}},
		{name: "5000 workers at v2beta1: their FQDNs overflow the ConfigMap", edit: func(j *kubeflowv1.MPIJob) {
			j.Name, j.Namespace = strings.Repeat("a", 40), strings.Repeat("n", 63)
			j.Annotations = map[string]string{kubeflowv1.AnnotationAPIVersion: "kubeflow.org/v2beta1"}
			j.Spec.MPIReplicaSpecs["Worker"].Replicas = ptr.To[int32](5000)
		}, errs: []string{"spec.mpiReplicaSpecs[Worker].replicas: Invalid value: 5000: the job's ConfigMap " + strings.Repeat("a", 40) + "-config would list its 5000 workers in"}},
		{name: "both clean-pod policies", edit: func(j *kubeflowv1.MPIJob) {
			j.Spec.CleanPodPolicy = ptr.To(kubeflowv1.CleanPodPolicyAll)
			j.Spec.RunPolicy.CleanPodPolicy = ptr.To(kubeflowv1.CleanPodPolicyNone)
		}, warned: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			job := newJob(2)
			c.edit(job)
			errs, warnings := New(c.cfg).Validate(job, specs)
			if len(errs) != len(c.errs) {
				t.Fatalf("errors %v, want %d", errs, len(c.errs))
			}
			for i, want := range c.errs {
				if !strings.Contains(errs[i].Error(), want) {
					t.Errorf("error %q, want it to contain %q", errs[i].Error(), want)
				}
			}
			if (len(warnings) > 0) != c.warned {
				t.Errorf("warnings %v, want some: %v", warnings, c.warned)
			}
		})
	}
}

func TestDefaultsCopyDeprecatedCleanPodPolicy(t *testing.T) {
	job := newJob(1)
	job.Spec.CleanPodPolicy = ptr.To(kubeflowv1.CleanPodPolicyAll)
	New(Config{}).Default(job)
	if p := job.Spec.RunPolicy.CleanPodPolicy; p == nil || *p != kubeflowv1.CleanPodPolicyAll {
		t.Errorf("runPolicy.cleanPodPolicy %v, want All from spec.cleanPodPolicy", p)
	}
}

func TestLauncherDecides(t *testing.T) {
	fw, job := New(Config{}), newJob(2)
	for _, c := range []struct {
		l    framework.ReplicaCount
		want framework.Outcome
	}{
		{framework.ReplicaCount{Replicas: 1}, framework.Outcome{}},
		{framework.ReplicaCount{Replicas: 1, Active: 1}, framework.Outcome{Running: true, Message: "MPIJob pi is running."}},
		{framework.ReplicaCount{Replicas: 1, Succeeded: 1}, framework.Outcome{Succeeded: true, Message: "MPIJob pi is successfully completed."}},
	} {
		got := fw.Outcome(job, framework.Replicas{"Launcher": c.l, "Worker": {Replicas: 2, Active: 2}})
		if got != c.want {
			t.Errorf("%+v: %+v, want %+v", c.l, got, c.want)
		}
	}
	if !fw.IgnoresFailures(job, "Worker") || fw.IgnoresFailures(job, "Launcher") {
		t.Error("want worker failures left to the launcher, and a launcher failure to fail the job")
	}
}

// The MPI implementation (v2beta1's mpiImplementation) decides the hostfile's form and the
// launcher's environment; runLauncherAsWorker lists the launcher first and leaves it the GPUs.
func TestMPIImplementations(t *testing.T) {
	sshArgs := "-o ConnectionAttempts=10 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
	for _, c := range []struct {
		impl, hostfile string
		env            []corev1.EnvVar
	}{
		{"OpenMPI", "pi-worker-0 slots=2\npi-worker-1 slots=2\n", []corev1.EnvVar{
			{Name: "K_MPI_JOB_ROLE", Value: "launcher"},
			{Name: "OMPI_MCA_orte_default_hostfile", Value: "/etc/mpi/hostfile"},
			{Name: "OMPI_MCA_orte_keep_fqdn_hostnames", Value: "true"},
			{Name: "OMPI_MCA_orte_set_default_slots", Value: "2"},
			{Name: "OMPI_MCA_plm_rsh_args", Value: sshArgs},
			{Name: "NVIDIA_VISIBLE_DEVICES", Value: ""}, {Name: "NVIDIA_DRIVER_CAPABILITIES", Value: ""},
		}},
		{"Intel", "pi-worker-0:2\npi-worker-1:2\n", []corev1.EnvVar{
			{Name: "K_MPI_JOB_ROLE", Value: "launcher"},
			{Name: "I_MPI_HYDRA_HOST_FILE", Value: "/etc/mpi/hostfile"},
			{Name: "I_MPI_PERHOST", Value: "2"},
			{Name: "I_MPI_HYDRA_BOOTSTRAP", Value: "ssh"},
			{Name: "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", Value: sshArgs},
			{Name: "NVIDIA_VISIBLE_DEVICES", Value: ""}, {Name: "NVIDIA_DRIVER_CAPABILITIES", Value: ""},
		}},
		{"MPICH", "pi-worker-0:2\npi-worker-1:2\n", []corev1.EnvVar{
			{Name: "K_MPI_JOB_ROLE", Value: "launcher"},
			{Name: "HYDRA_HOST_FILE", Value: "/etc/mpi/hostfile"},
			{Name: "HYDRA_LAUNCH_EXTRA_ARGS", Value: sshArgs},
			{Name: "NVIDIA_VISIBLE_DEVICES", Value: ""}, {Name: "NVIDIA_DRIVER_CAPABILITIES", Value: ""},
		}},
	} {
		job := newJob(2)
		job.Spec.SlotsPerWorker = ptr.To[int32](2)
		job.Annotations = map[string]string{kubeflowv1.AnnotationMPIImplementation: c.impl}
		if got := Hostfile(job); got != c.hostfile {
			t.Errorf("%s: hostfile %q, want %q", c.impl, got, c.hostfile)
		}
		if diff := cmp.Diff(c.env, pod(t, New(Config{}), job, "Launcher").Spec.Containers[0].Env); diff != "" {
			t.Errorf("%s: launcher env (-want +got):\n%s", c.impl, diff)
		}
	}
	job := newJob(1)
	job.Annotations = map[string]string{kubeflowv1.AnnotationMPIRunLauncherAsWorker: "true"}
	if want := "pi-launcher slots=1\npi-worker-0 slots=1\n"; Hostfile(job) != want {
		t.Errorf("launcher as worker: hostfile %q, want %q", Hostfile(job), want)
	}
	for _, e := range pod(t, New(Config{}), job, "Launcher").Spec.Containers[0].Env {
		if e.Name == "NVIDIA_VISIBLE_DEVICES" {
			t.Error("a launcher that runs ranks has its GPUs hidden")
		}
	}
}

// A job written at v2beta1 runs as mpi-operator runs it, over SSH, whatever the install's
// default, its pods reached through one headless Service of the job's name as
// <pod>.<job>.<ns>.svc; its launcher under WaitForWorkersReady waits for the workers.
func TestWrittenAtV2beta1(t *testing.T) {
	fw := New(Config{RemoteStart: kubeflowv1.MPIRemoteStartKubectlExec})
	job := newJob(2)
	job.Annotations = map[string]string{kubeflowv1.AnnotationAPIVersion: "kubeflow.org/v2beta1"}
	if secrets, _ := fw.Secrets(job); len(secrets) != 1 {
		t.Errorf("a v2beta1 MPIJob in an install defaulting to kubectl-exec: %d secrets, want SSH's key pair", len(secrets))
	}
	if fw.HasServices(job) {
		t.Error("a v2beta1 MPIJob gets a Service per pod, want one of the job's name")
	}
	extras := fw.Extras(job, framework.State{Active: true, Running: map[kubeflowv1.ReplicaType][]int{"Worker": {1}}})
	if len(extras) != 2 {
		t.Fatalf("%d extras, want the ConfigMap and the job's Service", len(extras))
	}
	svc, ok := extras[1].Object.(*corev1.Service)
	if !ok || svc.Name != "pi" || svc.Spec.ClusterIP != corev1.ClusterIPNone || !extras[1].Wanted ||
		svc.Spec.Selector[kubeflowv1.LabelJobName] != "pi" || svc.Spec.Selector[kubeflowv1.LabelOperatorName] != "mpijob-controller" || svc.Spec.PublishNotReadyAddresses {
		t.Errorf("the job's Service: %+v, want headless pi selecting the job's pods", extras[1].Object)
	}
	cm := extras[0].Object.(*corev1.ConfigMap)
	if want := "pi-worker-0.pi.ns.svc slots=1\npi-worker-1.pi.ns.svc slots=1\n"; cm.Data["hostfile"] != want {
		t.Errorf("hostfile %q, want %q", cm.Data["hostfile"], want)
	}
	if want := "#!/bin/sh\necho pi-worker-1.pi.ns.svc\n"; cm.Data["discover_hosts.sh"] != want {
		t.Errorf("discover_hosts.sh %q, want %q (mpi-operator's, without slots)", cm.Data["discover_hosts.sh"], want)
	}
	tmpl := job.Spec.MPIReplicaSpecs["Worker"].Template.DeepCopy()
	if err := fw.SetClusterSpec(job, tmpl, "Worker", 1); err != nil {
		t.Fatal(err)
	}
	if tmpl.Spec.Hostname != "pi-worker-1" || tmpl.Spec.Subdomain != "pi" {
		t.Errorf("worker 1: hostname %q subdomain %q, want pi-worker-1 under pi", tmpl.Spec.Hostname, tmpl.Spec.Subdomain)
	}
	if l := pod(t, fw, job, "Launcher"); l.Spec.Hostname != "pi-launcher" || l.Spec.Subdomain != "pi" {
		t.Errorf("launcher: hostname %q subdomain %q, want pi-launcher under pi", l.Spec.Hostname, l.Spec.Subdomain)
	}
	job.Annotations[kubeflowv1.AnnotationMPIRunLauncherAsWorker] = "true"
	if svc := fw.Extras(job, framework.State{Active: true})[1].Object.(*corev1.Service); !svc.Spec.PublishNotReadyAddresses {
		t.Error("a launcher running ranks is not published before it is ready")
	}
	delete(job.Annotations, kubeflowv1.AnnotationMPIRunLauncherAsWorker)
	if _, waits := fw.WaitsFor(job, "Launcher"); waits {
		t.Error("the launcher waits for the workers under AtStartup")
	}
	job.Annotations[kubeflowv1.AnnotationMPILauncherCreationPolicy] = kubeflowv1.LauncherCreationWaitForWorkersReady
	if other, waits := fw.WaitsFor(job, "Launcher"); !waits || other != "Worker" {
		t.Errorf("WaitForWorkersReady: the launcher waits for %q (%v), want Worker", other, waits)
	}
	if _, waits := fw.WaitsFor(job, "Worker"); waits {
		t.Error("the workers wait")
	}
}
