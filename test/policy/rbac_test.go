// Package policy checks kiln's install manifests against its security promises.
package policy

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/kiln-ml/kiln/test/testenv"
)

// TestRolesGrantLeastPrivilege fails if any role kiln installs grants pods/exec, escalate, bind
// or a wildcard, if the ClusterRole grants more on Secrets than creating them (MPIJobs' SSH keys,
// never read back), or if a namespaced Role grants more on Secrets than creating one and reading,
// watching and renewing the webhook certificate by name.
func TestRolesGrantLeastPrivilege(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "rbac", "*role.yaml"))
	if len(files) < 3 {
		t.Fatalf("found %d role files in config/rbac, want the ClusterRole, the leader-election and the webhook-certificate Role", len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var role struct {
			Kind     string
			Metadata struct{ Name, Namespace string }
			Rules    []rbacv1.PolicyRule
		}
		if err := yaml.Unmarshal(data, &role); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(role.Rules) == 0 {
			t.Errorf("%s: no rules read", f)
		}
		for _, r := range role.Rules {
			for _, bad := range []struct {
				what string
				hit  bool
			}{
				{"a wildcard resource", slices.Contains(r.Resources, "*")},
				{"a wildcard verb", slices.Contains(r.Verbs, "*")},
				{"a wildcard API group", slices.Contains(r.APIGroups, "*")},
				{"Secrets", slices.Contains(r.Resources, "secrets") && !createOnlySecretRule(r) && !certificateSecretRule(role.Kind, r)},
				{"pods/exec", slices.Contains(r.Resources, "pods/exec")},
				{"escalate", slices.Contains(r.Verbs, "escalate")},
				{"bind", slices.Contains(r.Verbs, "bind")},
				{"impersonate", slices.Contains(r.Verbs, "impersonate")},
			} {
				if bad.hit {
					t.Errorf("%s (%s) grants %s: %+v", filepath.Base(f), role.Metadata.Name, bad.what, r)
				}
			}
		}
	}
}

// createOnlySecretRule allows creating Secrets and nothing else on them.
func createOnlySecretRule(r rbacv1.PolicyRule) bool {
	return slices.Equal(r.Resources, []string{"secrets"}) && slices.Equal(r.Verbs, []string{"create"}) && len(r.ResourceNames) == 0
}

// certificateSecretRule allows, in a namespaced Role only, creating Secrets and getting, watching
// (list and watch, by name) or updating the one named kiln-webhook-cert: the webhook certificate
// kiln keeps itself.
func certificateSecretRule(kind string, r rbacv1.PolicyRule) bool {
	if kind != "Role" || !slices.Equal(r.Resources, []string{"secrets"}) {
		return false
	}
	if slices.Equal(r.Verbs, []string{"create"}) && len(r.ResourceNames) == 0 {
		return true
	}
	return slices.Equal(r.ResourceNames, []string{"kiln-webhook-cert"}) &&
		!slices.ContainsFunc(r.Verbs, func(v string) bool { return !slices.Contains([]string{"get", "list", "watch", "update"}, v) })
}

// TestInstallListsEveryCRD fails when a generated CRD is missing from config/crd's kustomization.
func TestInstallListsEveryCRD(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "crd", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct{ Resources []string }
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "*.yaml"))
	for _, f := range files {
		if !slices.Contains(k.Resources, "bases/"+filepath.Base(f)) {
			t.Errorf("config/crd/kustomization.yaml does not list bases/%s: `kubectl apply -k config/default` would not install it", filepath.Base(f))
		}
	}
}

// TestNamespacedComponentGrantsNoClusterRightsOnJobs fails if the namespaced install's ClusterRole
// (config/components/namespaced) grants anything but the cluster-scoped APIs kiln uses.
func TestNamespacedComponentGrantsNoClusterRightsOnJobs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "components", "namespaced", "cluster_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(b, &role); err != nil {
		t.Fatal(err)
	}
	if role.Name != "kiln-manager" || len(role.Rules) == 0 {
		t.Fatalf("cluster_role.yaml holds %q with %d rules, want the kiln-manager ClusterRole's cluster-scoped rules", role.Name, len(role.Rules))
	}
	runtimes := map[string]string{"trainer.kubeflow.org": "clustertrainingruntimes", "serving.kserve.io": "clusterservingruntimes"}
	for _, r := range role.Rules {
		if len(r.APIGroups) == 1 && slices.Equal(r.Resources, []string{runtimes[r.APIGroups[0]]}) && slices.Equal(r.Verbs, []string{"get", "list", "watch"}) {
			continue // TrainJobs and KServe's InferenceServices of every namespace name cluster runtimes: read only
		}
		for _, g := range r.APIGroups {
			if !slices.Contains([]string{"admissionregistration.k8s.io", "apiextensions.k8s.io", "authentication.k8s.io", "authorization.k8s.io"}, g) {
				t.Errorf("the namespaced install's ClusterRole grants %v", r)
			}
		}
	}
}
