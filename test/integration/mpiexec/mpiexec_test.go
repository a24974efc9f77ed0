// Package mpiexec runs kiln with MPIJob's kubectl-exec remote start enabled (what the
// mpi-kubectl-exec component installs) against the real kube-apiserver.
package mpiexec

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, func(e *testenv.Env) (stop func(), err error) {
		o := testenv.ManagerOptions()
		o.Kinds, o.MPIRemoteStart, o.PyTorchInitImage = []string{"mpijob"}, kubeflowv1.MPIRemoteStartKubectlExec, "ghcr.io/kiln-ml/kiln:test"
		return e.StartManager(o)
	}))
}

func get(t *testing.T, ns, name string, obj client.Object) error {
	t.Helper()
	return env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj)
}

// TestKubectlExecMode: Kubeflow v1's objects. The launcher runs as its own ServiceAccount, whose
// Role allows exec into this job's workers only; kubexec.sh is in the ConfigMap; no Services and
// no key pair.
func TestKubectlExecMode(t *testing.T) {
	ns := env.Namespace(t)
	job := builder.MPIJob("pi", ns).Replicas("Launcher", 1).Replicas("Worker", 2).Obj().(*kubeflowv1.MPIJob)
	job.Spec.MainContainer = "mpi"
	if err := env.Client.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	testenv.Eventually(t, func() error {
		pods = env.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: "pi"})
		return testenv.Count("pods", len(pods), 3)
	})
	launcher := pods[0]
	if launcher.Name != "pi-launcher" || launcher.Spec.ServiceAccountName != "pi-launcher" {
		t.Errorf("launcher %s runs as %q, want pi-launcher as pi-launcher", launcher.Name, launcher.Spec.ServiceAccountName)
	}
	if ic := launcher.Spec.InitContainers; len(ic) != 1 || ic[0].Image != "ghcr.io/kiln-ml/kiln:test" ||
		!cmp.Equal(ic[0].Command, []string{"/kiln", "install-kubectl", "/opt/kube/kubectl"}) {
		t.Errorf("launcher init containers %+v: want kiln's kubectl-delivery", ic)
	}
	vars := map[string]string{}
	for _, e := range launcher.Spec.Containers[0].Env {
		vars[e.Name] = e.Value
	}
	if vars["OMPI_MCA_plm_rsh_agent"] != "/etc/mpi/kubexec.sh" || vars["I_MPI_HYDRA_BOOTSTRAP"] != "rsh" || vars["I_MPI_HYDRA_BOOTSTRAP_EXEC"] != "/etc/mpi/kubexec.sh" {
		t.Errorf("launcher env %v", vars)
	}
	if cmd := pods[1].Spec.Containers[0].Command; !cmp.Equal(cmd, []string{"sleep", "365d"}) {
		t.Errorf("worker command %v, want sleep 365d", cmd)
	}

	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	var sa corev1.ServiceAccount
	var cm corev1.ConfigMap
	testenv.Eventually(t, func() error {
		for name, obj := range map[string]client.Object{"pi-launcher": &role, "pi-config": &cm} {
			if err := get(t, ns, name, obj); err != nil {
				return err
			}
		}
		if err := get(t, ns, "pi-launcher", &binding); err != nil {
			return err
		}
		return get(t, ns, "pi-launcher", &sa)
	})
	wantRules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}, ResourceNames: []string{"pi-worker-0", "pi-worker-1"}},
		{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"create"}, ResourceNames: []string{"pi-worker-0", "pi-worker-1"}},
	}
	testenv.Eventually(t, func() error { // the Role follows the workers' pods as they come
		if err := get(t, ns, "pi-launcher", &role); err != nil {
			return err
		}
		if diff := cmp.Diff(wantRules, role.Rules); diff != "" {
			return fmt.Errorf("role (-want +got):\n%s", diff)
		}
		return nil
	})
	if s := binding.Subjects; len(s) != 1 || s[0].Name != "pi-launcher" || s[0].Namespace != ns || binding.RoleRef.Name != "pi-launcher" {
		t.Errorf("binding %+v", binding)
	}
	for _, o := range []metav1.Object{&role, &binding, &sa, &cm} {
		if !metav1.IsControlledBy(o, job) {
			t.Errorf("%s is not owned by the job: %v", o.GetName(), o.GetOwnerReferences())
		}
	}
	want := "#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n/opt/kube/kubectl exec ${POD_NAME} --container mpi -- /bin/sh -c \"$*\"\n"
	if cm.Data["kubexec.sh"] != want || cm.Data["hostfile"] != "pi-worker-0 slots=1\npi-worker-1 slots=1\n" {
		t.Errorf("config map %v", cm.Data)
	}
	var services corev1.ServiceList
	var secrets corev1.SecretList
	if err := env.Client.List(context.Background(), &services, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.List(context.Background(), &secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(services.Items) != 0 || len(secrets.Items) != 0 {
		t.Errorf("%d services and %d secrets, want none in kubectl-exec mode", len(services.Items), len(secrets.Items))
	}

	// Scaling the workers follows in the Role and the hostfile.
	testenv.Eventually(t, func() error {
		if err := get(t, ns, "pi", job); err != nil {
			return err
		}
		three := int32(3)
		job.Spec.MPIReplicaSpecs["Worker"].Replicas = &three
		return env.Client.Update(context.Background(), job)
	})
	testenv.Eventually(t, func() error {
		if err := get(t, ns, "pi-launcher", &role); err != nil {
			return err
		}
		return testenv.Count("workers the launcher may exec into", len(role.Rules[1].ResourceNames), 3)
	})
}

// TestSSHStillChosenPerJob: with kubectl-exec the install's default, a job can still ask for SSH.
func TestSSHStillChosenPerJob(t *testing.T) {
	ns := env.Namespace(t)
	job := builder.MPIJob("ssh", ns).Replicas("Launcher", 1).Replicas("Worker", 1).Obj()
	job.SetAnnotations(map[string]string{kubeflowv1.AnnotationMPIRemoteStart: kubeflowv1.MPIRemoteStartSSH})
	if err := env.Client.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() error {
		var secrets corev1.SecretList
		if err := env.Client.List(context.Background(), &secrets, client.InNamespace(ns)); err != nil {
			return err
		}
		var services corev1.ServiceList
		if err := env.Client.List(context.Background(), &services, client.InNamespace(ns)); err != nil {
			return err
		}
		if err := testenv.Count("secrets", len(secrets.Items), 1); err != nil {
			return err
		}
		return testenv.Count("services", len(services.Items), 2)
	})
	var role rbacv1.Role
	if err := get(t, ns, "ssh-launcher", &role); err == nil {
		t.Error("an SSH job got a Role: want none")
	}
}

// TestBackoffLimitHoldsWithoutServices: with no service to keep it on, a replica's retry count
// rides on its replacement pod, so a launcher killed again and again fails the job at the limit.
func TestBackoffLimitHoldsWithoutServices(t *testing.T) {
	ns := env.Namespace(t)
	job := builder.MPIJob("killed", ns).Replicas("Launcher", 1).Replicas("Worker", 1).
		RestartPolicy("Launcher", kubeflowv1.RestartPolicyExitCode).BackoffLimit(1).Obj()
	if err := env.Client.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	launcher := func(not types.UID) *corev1.Pod {
		var p corev1.Pod
		testenv.Eventually(t, func() error {
			if err := get(t, ns, "killed-launcher", &p); err != nil {
				return err
			}
			if p.UID == not || p.DeletionTimestamp != nil {
				return fmt.Errorf("no new launcher yet")
			}
			return nil
		})
		return &p
	}
	first := launcher("")
	env.Exit(t, first, 137)
	second := launcher(first.UID)
	if got := second.Annotations["kiln.dev/restarts"]; got != "1" {
		t.Errorf("the replacement carries %q retries, want 1", got)
	}
	env.Run(t, second)
	env.Exit(t, second, 137)
	failed := env.WaitCondition(t, job, kubeflowv1.JobFailed, testenv.Timeout)
	if c := failed.GetJobStatus().Conditions; !strings.Contains(c[len(c)-1].Message, "backoff limit") {
		t.Errorf("Failed %q, want the backoff limit", c[len(c)-1].Message)
	}
}

// TestDeletedLauncherRightsComeBack: the launcher's ServiceAccount, Role and RoleBinding are
// watched, so one deleted while the job runs is made again (and mpirun can still reach the
// workers).
func TestDeletedLauncherRightsComeBack(t *testing.T) {
	ns := env.Namespace(t)
	job := builder.MPIJob("rights", ns).Replicas("Launcher", 1).Replicas("Worker", 1).Obj()
	if err := env.Client.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{&corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}} {
		env.Await(t, ns, "rights-launcher", obj)
		if err := env.Client.Delete(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
		was := obj.GetUID()
		testenv.Eventually(t, func() error {
			if err := get(t, ns, "rights-launcher", obj); err != nil {
				return err
			}
			if obj.GetUID() == was || !metav1.IsControlledBy(obj, job) {
				return fmt.Errorf("%T rights-launcher uid %s (deleted %s), owners %v", obj, obj.GetUID(), was, obj.GetOwnerReferences())
			}
			return nil
		})
	}
}

// TestExecCannotBeBorrowed: an MPIJob named like another job shares its workers' pod names
// (<job>-worker-<i>). Its launcher may exec only into the pods the MPIJob itself made, and a
// launcher template naming another ServiceAccount (one the user could run a pod as) is refused.
func TestExecCannotBeBorrowed(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	// Another owner's pod of a worker's name: a TFJob "x"'s worker, say.
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x-worker-0", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "tensorflow", Image: "tf:1"}}}}
	if err := env.Client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	job := builder.MPIJob("x", ns).Replicas("Launcher", 1).Replicas("Worker", 2).Obj()
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	var role rbacv1.Role
	testenv.Eventually(t, func() error {
		if err := get(t, ns, "x-launcher", &role); err != nil {
			return err
		}
		if len(role.Rules) != 2 || !cmp.Equal(role.Rules[1].ResourceNames, []string{"x-worker-1"}) {
			return fmt.Errorf("role rules %+v, want get and exec on x-worker-1 only", role.Rules)
		}
		return nil
	})
	may := func(pod string) bool {
		t.Helper()
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + ns + ":x-launcher", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Subresource: "exec", Namespace: ns, Name: pod}}}
		if err := env.Client.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed
	}
	if may("x-worker-0") {
		t.Error("the launcher may exec into x-worker-0, another owner's pod")
	}
	if !may("x-worker-1") {
		t.Error("the launcher may not exec into x-worker-1, its own worker")
	}

	borrowed := builder.MPIJob("y", ns).Replicas("Launcher", 1).Replicas("Worker", 1).Obj()
	borrowed.GetReplicaSpecs()["Launcher"].Template.Spec.ServiceAccountName = "default"
	// This suite runs without webhooks (which refuse it): the engine fails the job, naming the field.
	if err := env.Client.Create(ctx, borrowed); err != nil {
		t.Fatal(err)
	}
	failed := env.WaitCondition(t, borrowed, kubeflowv1.JobFailed, testenv.Timeout)
	if c := failed.GetJobStatus().Conditions; !strings.Contains(c[len(c)-1].Message, "spec.mpiReplicaSpecs[Launcher].template.spec.serviceAccountName") {
		t.Errorf("Failed %q, want it to name the launcher's serviceAccountName", c[len(c)-1].Message)
	}
	if pods := env.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: "y"}); len(pods) != 0 {
		t.Errorf("%d pods of the refused job, want none", len(pods))
	}
}
