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

// TestRolesGrantLeastPrivilege fails if any role kiln installs grants Secrets, pods/exec,
// escalate, bind or a wildcard.
func TestRolesGrantLeastPrivilege(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "rbac", "*role.yaml"))
	if len(files) < 2 {
		t.Fatalf("found %d role files in config/rbac, want the ClusterRole and the leader-election Role", len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var role rbacv1.ClusterRole // a Role has the same rules
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
				{"Secrets", slices.Contains(r.Resources, "secrets")},
				{"pods/exec", slices.Contains(r.Resources, "pods/exec")},
				{"escalate", slices.Contains(r.Verbs, "escalate")},
				{"bind", slices.Contains(r.Verbs, "bind")},
				{"impersonate", slices.Contains(r.Verbs, "impersonate")},
			} {
				if bad.hit {
					t.Errorf("%s (%s) grants %s: %+v", filepath.Base(f), role.Name, bad.what, r)
				}
			}
		}
	}
}
