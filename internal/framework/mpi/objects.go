package mpi

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
)

const (
	// sshPublicKey is the Secret's key of the public key (ssh-privatekey is the type's own).
	sshPublicKey = "ssh-publickey"
	// privateKeyFile is the private key's file name in the .ssh folder, one ssh tries by default.
	privateKeyFile = "id_ed25519"
)

// ConfigMapName is the job's hostfile ConfigMap, "<job>-config".
func ConfigMapName(job string) string { return job + "-config" }

// SSHSecretName is the job's key-pair Secret, "<job>-ssh-<first 8 of its UID>": kiln never reads
// it back, so a Secret of a deleted job of the same name, not yet collected, must not pass for it.
func SSHSecretName(job *kubeflowv1.MPIJob) string {
	uid := string(job.UID)
	if len(uid) > 8 {
		uid = uid[:8]
	}
	return strings.TrimSuffix(job.Name+"-ssh-"+uid, "-")
}

// launcherAccount is the launcher's service account in kubectl-exec mode, which kiln creates for
// the job and alone binds to the exec Role: a template naming another is refused (validate), so
// no account a user chose borrows the Role.
func launcherAccount(job *kubeflowv1.MPIJob) string {
	return podName(job.Name, launcher, 0)
}

// extras are the job's ConfigMap (hostfile and discover_hosts.sh; kubexec.sh in kubectl-exec
// mode) and, in kubectl-exec mode, the launcher's ServiceAccount, Role and RoleBinding. The Role
// grants get and exec on this job's own worker pods only, by name: those that exist and the job
// controls (State.Existing). A pod of a worker's name that another job made (a TFJob of the
// same name has pods <job>-worker-<i> too) is not among them; RBAC names pods, not owners, so
// between a worker's deletion and the reconcile it starts the Role still names the freed name.
func extras(cfg Config, job *kubeflowv1.MPIJob, s framework.State) []framework.Extra {
	data := map[string]string{
		HostfileName:      Hostfile(job),
		DiscoverHostsName: DiscoverHosts(job, s.Running[worker]),
	}
	if remoteStart(cfg, job) != kubeflowv1.MPIRemoteStartKubectlExec {
		out := []framework.Extra{{Object: configMap(job, data), Wanted: true}}
		if jobService(job) {
			out = append(out, framework.Extra{Object: service(job), Wanted: true})
		}
		return out
	}
	data[KubexecName] = Kubexec(job)
	name := podName(job.Name, launcher, 0)
	var workers []string
	n := int(framework.NumReplicas(job.Spec.MPIReplicaSpecs[worker]))
	for _, i := range s.Existing[worker] {
		if i < n {
			workers = append(workers, podName(job.Name, worker, i))
		}
	}
	out := []framework.Extra{{Object: configMap(job, data), Wanted: true}, {Object: &corev1.ServiceAccount{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: metav1.ObjectMeta{Name: name},
	}, Wanted: true}}
	role := &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}
	if len(workers) > 0 {
		// kubectl exec reads the pod, then execs into it.
		role.Rules = []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}, ResourceNames: workers},
			{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"create"}, ResourceNames: workers},
		}
	}
	binding := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: launcherAccount(job), Namespace: job.Namespace}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
	}
	return append(out, framework.Extra{Object: role, Wanted: true}, framework.Extra{Object: binding, Wanted: true})
}

func configMap(job *kubeflowv1.MPIJob, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName(job.Name)},
		Data:       data,
	}
}

// service is the headless Service of a job whose pods are reached as mpi-operator reaches them
// (jobService): it selects every pod of the job, and publishes a launcher that runs ranks before
// it is ready, as the workers must reach it then.
func service(job *kubeflowv1.MPIJob) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: job.Name},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 map[string]string{kubeflowv1.LabelJobName: job.Name, kubeflowv1.LabelOperatorName: controllerName},
			PublishNotReadyAddresses: launcherRunsRanks(job),
		},
	}
}

// host is how the hostfile names a pod: its name, which its own Service resolves, or
// <pod>.<job>.<ns>.svc under the job's Service (jobService).
func host(job *kubeflowv1.MPIJob, rtype kubeflowv1.ReplicaType, index int) string {
	if jobService(job) {
		return podName(job.Name, rtype, index) + "." + job.Name + "." + job.Namespace + ".svc"
	}
	return podName(job.Name, rtype, index)
}

func slots(job *kubeflowv1.MPIJob) int {
	if s := job.Spec.SlotsPerWorker; s != nil && *s > 0 {
		return int(*s)
	}
	return 1
}

// Hostfile lists every worker, "<host> slots=<n>" per line (Intel MPI and MPICH:
// "<host>:<n>"), after the launcher when it runs ranks too (launcherRunsRanks); a host is named
// as host says.
func Hostfile(job *kubeflowv1.MPIJob) string {
	var b strings.Builder
	slotsOf := " slots=" + strconv.Itoa(slots(job))
	if impl := implementation(job); impl == kubeflowv1.MPIImplementationIntel || impl == kubeflowv1.MPIImplementationMPICH {
		slotsOf = ":" + strconv.Itoa(slots(job))
	}
	if launcherRunsRanks(job) {
		b.WriteString(host(job, launcher, 0) + slotsOf + "\n")
	}
	for i := range int(framework.NumReplicas(job.Spec.MPIReplicaSpecs[worker])) {
		b.WriteString(host(job, worker, i) + slotsOf + "\n")
	}
	return b.String()
}

// DiscoverHosts is a script printing the hosts that run now, "<host>:<slots>" per line (a job
// written at v2beta1: "<host>", as mpi-operator prints them): the launcher when it runs ranks
// too, and the running workers (indexes ascending).
func DiscoverHosts(job *kubeflowv1.MPIJob, running []int) string {
	var b strings.Builder
	suffix := ":" + strconv.Itoa(slots(job))
	if jobService(job) {
		suffix = ""
	}
	b.WriteString("#!/bin/sh\n")
	if launcherRunsRanks(job) {
		b.WriteString("echo " + host(job, launcher, 0) + suffix + "\n")
	}
	for _, i := range running {
		b.WriteString("echo " + host(job, worker, i) + suffix + "\n")
	}
	return b.String()
}

// Kubexec is kubectl-exec mode's rsh agent: it runs its arguments in the pod named first, in the
// main container when the job names one.
func Kubexec(job *kubeflowv1.MPIJob) string {
	container := ""
	if job.Spec.MainContainer != "" {
		container = " --container " + job.Spec.MainContainer
	}
	return fmt.Sprintf("#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n%s/kubectl exec ${POD_NAME}%s -- /bin/sh -c \"$*\"\n", KubectlMountPath, container)
}

// sshAuthSecret is a new key pair for the job (NewSSHKeyPair).
func sshAuthSecret(job *kubeflowv1.MPIJob) (*corev1.Secret, error) {
	priv, pub, err := NewSSHKeyPair(job.Namespace + "/" + job.Name)
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: SSHSecretName(job)},
		Type:       corev1.SecretTypeSSHAuth,
		Data:       map[string][]byte{corev1.SSHAuthPrivateKey: priv, sshPublicKey: pub},
	}, nil
}

// NewSSHKeyPair is a new key pair for the ranks of one MPI run: an Ed25519 private key in
// OpenSSH's format (comment names the job) and its public key in authorized_keys format.
func NewSSHKeyPair(comment string) (private, public []byte, _ error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating the SSH key pair: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the SSH private key: %w", err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the SSH public key: %w", err)
	}
	return pem.EncodeToMemory(block), ssh.MarshalAuthorizedKey(sshPub), nil
}
