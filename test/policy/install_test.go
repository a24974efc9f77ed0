package policy

import (
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/kiln-ml/kiln/internal/release"
	"github.com/kiln-ml/kiln/test/testenv"
)

// TestDefaultInstallHasNoExec checks what `kubectl apply -k config/default` and the chart's
// defaults install: no role grants pods/exec, and Secrets are only ever created (MPIJob's SSH
// remote start needs nothing more); the manager runs without --mpi-remote-start=kubectl-exec.
func TestDefaultInstallHasNoExec(t *testing.T) {
	manifest, err := release.InstallManifest(testenv.RepoRoot(), "v0.0.0-test")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := release.Objects(manifest)
	if err != nil {
		t.Fatal(err)
	}
	rendered := chart(t, release.Namespace, nil)
	for name, objs := range map[string][]*unstructured.Unstructured{"config/default": objs, "the chart's defaults": rendered} {
		secretsCreate := false
		for _, r := range rules(t, objs) {
			if slices.Contains(r.Resources, "pods/exec") {
				t.Errorf("%s grants pods/exec: %+v", name, r)
			}
			if slices.Contains(r.Resources, "secrets") && createOnlySecretRule(r) {
				secretsCreate = true
			}
		}
		if !secretsCreate {
			t.Errorf("%s: no rule lets kiln create Secrets (MPIJob SSH keys)", name)
		}
		if slices.Contains(managerArgs(t, objs), "--mpi-remote-start=kubectl-exec") {
			t.Errorf("%s: the manager runs with --mpi-remote-start=kubectl-exec", name)
		}
	}
}

// TestKubectlExecOptIn checks the opt-in: the kustomize component (config/mpi-kubectl-exec uses
// it) and the Helm value both add
// the ClusterRole holding pods/exec (bound to kiln's service account) and the manager flag.
func TestKubectlExecOptIn(t *testing.T) {
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(testenv.RepoRoot(), "config", "mpi-kubectl-exec"))
	if err != nil {
		t.Fatal(err)
	}
	built, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	kustomized, err := release.Objects(built)
	if err != nil {
		t.Fatal(err)
	}
	rendered := chart(t, "ml-ops", map[string]any{"mpi": map[string]any{"kubectlExec": true}})
	for name, c := range map[string]struct {
		objs []*unstructured.Unstructured
		ns   string
	}{"the component": {kustomized, release.Namespace}, "mpi.kubectlExec=true": {rendered, "ml-ops"}} {
		exec := false
		for _, r := range rules(t, c.objs) {
			exec = exec || (slices.Contains(r.Resources, "pods/exec") && slices.Equal(r.Verbs, []string{"create"}))
		}
		if !exec {
			t.Errorf("%s grants no pods/exec create", name)
		}
		bound := false
		for _, o := range c.objs {
			if o.GetKind() != "ClusterRoleBinding" || o.GetName() != "kiln-mpi-kubectl-exec" {
				continue
			}
			var b rbacv1.ClusterRoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
				t.Fatal(err)
			}
			bound = len(b.Subjects) == 1 && b.Subjects[0].Name == "kiln-manager" && b.Subjects[0].Namespace == c.ns
		}
		if !bound {
			t.Errorf("%s: no ClusterRoleBinding kiln-mpi-kubectl-exec to kiln-manager in %s", name, c.ns)
		}
		if !slices.Contains(managerArgs(t, c.objs), "--mpi-remote-start=kubectl-exec") {
			t.Errorf("%s: the manager runs without --mpi-remote-start=kubectl-exec: %v", name, managerArgs(t, c.objs))
		}
	}
}

// chart renders kiln's chart into namespace with values.
func chart(t *testing.T, namespace string, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	ch, err := release.LoadChart(filepath.Join(testenv.RepoRoot(), "charts", "kiln"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := release.RenderChart(ch, namespace, values)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// rules are the rules of every Role and ClusterRole among objs.
func rules(t *testing.T, objs []*unstructured.Unstructured) []rbacv1.PolicyRule {
	t.Helper()
	var out []rbacv1.PolicyRule
	for _, o := range objs {
		if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
			continue
		}
		var r rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r.Rules...)
	}
	return out
}

// managerArgs are the arguments of the kiln-manager Deployment's container.
func managerArgs(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetName() != "kiln-manager" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if len(containers) == 0 {
			break
		}
		args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		return args
	}
	t.Fatal("no Deployment kiln-manager")
	return nil
}
