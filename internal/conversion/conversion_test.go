package conversion

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// Every generated CRD that serves more than one version is in CRDs and calls kiln's webhook, and
// kiln's ClusterRole may update exactly the CRDs of CRDs (it keeps their caBundle).
func TestCRDsAndRightsAgree(t *testing.T) {
	paths, err := filepath.Glob("../../config/crd/bases/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no CRDs: %v", err)
	}
	var multi []string
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatal(err)
		}
		if len(crd.Spec.Versions) < 2 {
			continue
		}
		multi = append(multi, crd.Name)
		c := crd.Spec.Conversion
		if c == nil || c.Strategy != apiextensionsv1.WebhookConverter || c.Webhook.ClientConfig.Service == nil ||
			c.Webhook.ClientConfig.Service.Name != Service || *c.Webhook.ClientConfig.Service.Path != Path {
			t.Errorf("CRD %s serves %d versions but does not call kiln's webhook: %+v", crd.Name, len(crd.Spec.Versions), c)
		}
	}
	slices.Sort(multi)
	want := slices.Sorted(slices.Values(CRDs))
	if !slices.Equal(multi, want) {
		t.Errorf("CRDs serving several versions %v, conversion.CRDs %v", multi, want)
	}
	data, err := os.ReadFile("../../config/rbac/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatal(err)
	}
	var updatable []string
	for _, r := range role.Rules {
		if slices.Contains(r.Resources, "customresourcedefinitions") && slices.Contains(r.Verbs, "update") {
			updatable = append(updatable, r.ResourceNames...)
		}
	}
	slices.Sort(updatable)
	if !slices.Equal(updatable, want) {
		t.Errorf("kiln may update CRDs %v, want exactly %v (the marker in internal/manager/webhook.go)", updatable, want)
	}
}
