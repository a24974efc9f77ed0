package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/test/testenv"
)

// kiln-edit and kiln-view reach the users of the built-in edit and view roles and of Kubeflow's
// kubeflow-edit, through kube-controller-manager's ClusterRole aggregation.
func TestUserRolesAggregate(t *testing.T) {
	ctx := context.Background()
	roles, err := devcluster.ReadObjects(filepath.Join(testenv.RepoRoot(), "config", "rbac", "edit_role.yaml"),
		filepath.Join(testenv.RepoRoot(), "config", "rbac", "view_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := devcluster.Apply(ctx, cluster.Client, "", roles); err != nil {
		t.Fatal(err)
	}
	// Kubeflow's own kubeflow-edit, as its manifests define it: an aggregation of labelled roles.
	kubeflowEdit := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeflow-edit"},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{
			MatchLabels: map[string]string{"rbac.authorization.kubeflow.org/aggregate-to-kubeflow-edit": "true"},
		}}},
	}
	if err := cluster.Client.Create(ctx, kubeflowEdit); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	ns := cluster.Namespace(t)
	notebook := "system:serviceaccount:" + ns + ":default-editor"
	for user, role := range map[string]string{"alice": "edit", "bob": "view", notebook: "kubeflow-edit"} {
		b := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role, Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
		}
		if err := cluster.Client.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	checks := []struct {
		user, verb, group, resource string
		allowed                     bool
	}{
		{"alice", "create", "kubeflow.org", "tfjobs", true},
		{"alice", "delete", "training.kiln.dev", "pyjobs", true},
		{"alice", "create", "serving.kiln.dev", "inferenceservices", true},
		{"bob", "list", "kubeflow.org", "pytorchjobs", true},
		{"bob", "get", "serving.kiln.dev", "inferenceservices", true},
		{"bob", "create", "kubeflow.org", "pytorchjobs", false},
		{notebook, "create", "kubeflow.org", "pytorchjobs", true},
		{notebook, "create", "kubeflow.org", "mpijobs", true},
		{"bob", "get", "kubeflow.org", "mpijobs", true},
		{notebook, "create", "training.kiln.dev", "pyjobs", true},
	}
	testenv.EventuallyWithin(t, timeout, func() error {
		for _, c := range checks {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:               c.user,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: c.verb, Group: c.group, Resource: c.resource},
			}}
			if err := cluster.Client.Create(ctx, sar); err != nil {
				return err
			}
			if sar.Status.Allowed != c.allowed {
				return fmt.Errorf("%s may %s %s.%s: %v, want %v (%s)", c.user, c.verb, c.resource, c.group, sar.Status.Allowed, c.allowed, sar.Status.Reason)
			}
		}
		return nil
	})
}
