package admission

// A principal bound to kiln-edit alone may create jobs but not pods: kiln creates the pods with
// its own rights, so such a principal may not ask, through a job, for what a pod of their own
// could not have. A principal who may create pods (the built-in edit role) may.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/test/testenv"
)

// as is a client of user, bound in ns to the ClusterRoles roles.
func as(t *testing.T, ns, user string, roles ...string) client.Client {
	t.Helper()
	ctx := context.Background()
	for _, role := range roles {
		binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role, Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
		if err := env.Client.Create(ctx, binding); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// installKilnEdit creates the kiln-edit ClusterRole as config/rbac has it.
func installKilnEdit(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "edit_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(b, &role); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(context.Background(), &role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func TestJobsCannotBorrowRightsTheirAuthorLacks(t *testing.T) {
	ready(t)
	installKilnEdit(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	jobsOnly := as(t, ns, "alice", "kiln-edit") // may create jobs, not pods
	// The built-in edit role is aggregated (from system:aggregate-to-edit and kiln-edit) by the
	// controller-manager, which envtest does not run: bob gets its parts.
	editor := as(t, ns, "bob", "system:aggregate-to-edit", "kiln-edit") // may create pods too
	withSA := func(j framework.Job) { spec(j, "Worker").Template.Spec.ServiceAccountName = "deployer" }
	for _, c := range []struct {
		name  string
		obj   client.Object
		field string
	}{
		{"another ServiceAccount", job(tf, withSA)(ns), "spec.tfReplicaSpecs[Worker].template.spec.serviceAccountName"},
		{"a Secret as env", job(tf, func(j framework.Job) {
			spec(j, "Worker").Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "prod-db"}, Key: "password"}}}}
		})(ns), "spec.tfReplicaSpecs[Worker].template.spec.containers[0].env[0].valueFrom.secretKeyRef"},
		{"a Secret volume", job(tf, func(j framework.Job) {
			spec(j, "Worker").Template.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "prod-db"}}}}
		})(ns), "spec.tfReplicaSpecs[Worker].template.spec.volumes[0].secret"},
		{"the node's filesystem", job(tf, func(j framework.Job) {
			spec(j, "Worker").Template.Spec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		})(ns), "spec.tfReplicaSpecs[Worker].template.spec.volumes[0].hostPath"},
		{"the node's network", job(tf, func(j framework.Job) { spec(j, "Worker").Template.Spec.HostNetwork = true })(ns), "spec.tfReplicaSpecs[Worker].template.spec.hostNetwork"},
		{"a privileged container", job(tf, func(j framework.Job) {
			spec(j, "Worker").Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		})(ns), "spec.tfReplicaSpecs[Worker].template.spec.containers[0].securityContext.privileged"},
		{"a PyJob as another ServiceAccount", pyJob(func(p *trainingv1alpha1.PyJob) { p.Spec.ServiceAccountName = "deployer" })(ns), "spec.serviceAccountName"},
		{"a TrainJob's patch as another ServiceAccount", trainJob(func(j *trainerv1alpha1.TrainJob) {
			j.Spec.RuntimePatches = []trainerv1alpha1.RuntimePatch{nodePatch(&trainerv1alpha1.PodSpecPatch{ServiceAccountName: ptr.To("deployer")})}
		})(ns), "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.serviceAccountName"},
		{"a TrainJob's initializer reading a Secret", trainJob(func(j *trainerv1alpha1.TrainJob) {
			j.Spec.Initializer = &trainerv1alpha1.Initializer{Model: &trainerv1alpha1.ModelInitializer{SecretRef: &corev1.LocalObjectReference{Name: "hf-token"}}}
		})(ns), "spec.initializer.model.secretRef"},
		{"a TrainingRuntime mounting the node", func() client.Object {
			rt := &trainerv1alpha1.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "host"}}
			rt.Spec.Template.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{{Name: "node"}}
			rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec = corev1.PodSpec{Containers: []corev1.Container{{Name: "node", Image: "x"}},
				Volumes: []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}}
			return rt
		}(), "spec.template.spec.replicatedJobs[0].template.spec.template.spec.volumes[0].hostPath"},
		{"an InferenceService reading a Secret", isvc(func(i *servingv1alpha1.InferenceService) {
			i.Spec.Storage = &servingv1alpha1.ModelStorage{SecretName: "prod-s3"}
		})(ns), "spec.storage.secretName"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := jobsOnly.Create(ctx, c.obj.DeepCopyObject().(client.Object), client.DryRunAll)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.field) || !strings.Contains(err.Error(), "alice may not create pods in namespace "+ns) {
				t.Errorf("alice (kiln-edit): %v, want it refused naming %s and the right she lacks", err, c.field)
			}
			if err := editor.Create(ctx, c.obj.DeepCopyObject().(client.Object), client.DryRunAll); err != nil {
				t.Errorf("bob (edit, may create pods): %v, want it accepted", err)
			}
		})
	}
	// A plain job is alice's to create; one bob made with his rights stays alice's to change.
	if err := jobsOnly.Create(ctx, tf(ns).Obj(), client.DryRunAll); err != nil {
		t.Errorf("alice creating a plain TFJob: %v", err)
	}
	bobs := job(tf, withSA)(ns)
	if err := editor.Create(ctx, bobs); err != nil {
		t.Fatal(err)
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error { // kiln writes its status meanwhile
		if err := jobsOnly.Get(ctx, client.ObjectKeyFromObject(bobs), bobs); err != nil {
			return err
		}
		bobs.SetLabels(map[string]string{"team": "a"})
		return jobsOnly.Update(ctx, bobs)
	})
	if err != nil {
		t.Errorf("alice relabelling bob's job: %v, want it accepted (nothing new borrowed)", err)
	}
}
