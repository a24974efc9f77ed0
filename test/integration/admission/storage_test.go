package admission

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	trainingv1beta1 "github.com/kiln-ml/kiln/api/training/v1beta1"
	"github.com/kiln-ml/kiln/internal/migration"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

// TestMigrateStorageRewritesOldObjects: a PyJob stored at v1alpha1, as every PyJob was before
// v1beta1 became the storage version, keeps working after the upgrade, and kiln migrate-storage
// (its own rewrite: envtest runs no storage version migrator) stores it at v1beta1 unchanged and
// leaves v1beta1 alone in the CRD's storedVersions.
func TestMigrateStorageRewritesOldObjects(t *testing.T) {
	ready(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	const crdName, group, resource = "pyjobs.training.kiln.dev", "training.kiln.dev", "pyjobs"
	storeAt := func(version string) { testenv.StoreAt(t, env.Client, crdName, version) }
	// written has the object re-written until etcd holds it at version: the apiserver takes a
	// moment to store at a new storage version.
	written := func(obj client.Object, version string) {
		t.Helper()
		testenv.Eventually(t, func() error {
			got := env.StoredAPIVersion(t, group, resource, obj.GetNamespace(), obj.GetName())
			if got == group+"/"+version {
				return nil
			}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			obj.SetAnnotations(map[string]string{"touched": time.Now().String()})
			if err := env.Client.Update(ctx, obj); err != nil {
				return err
			}
			return fmt.Errorf("stored at %s, want %s/%s", got, group, version)
		})
	}

	t.Cleanup(func() { storeAt("v1beta1") })
	old := builder.PyJob("before-upgrade", ns, func(s *trainingv1alpha1.PyJobSpec) {
		s.DatasetPath, s.Dataset = "/mnt/data", &trainingv1alpha1.DatasetStorage{ClaimName: "imagenet"}
	})
	probe := builder.PyJob("after-upgrade", ns)
	for _, job := range []*trainingv1alpha1.PyJob{old, probe} {
		if err := env.Client.Create(ctx, job); err != nil {
			t.Fatal(err)
		}
	}
	// Each status write of kiln's stores the PyJob at the storage version of the moment: wait
	// until kiln wrote the old one's and nothing more for a second (envtest runs no Job controller
	// to move it further).
	testenv.Eventually(t, func() error {
		var a, b trainingv1beta1.PyJob
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(old), &a); err != nil || a.Status.Phase == "" {
			return fmt.Errorf("no status yet: %v", err)
		}
		time.Sleep(time.Second)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(old), &b); err != nil || a.ResourceVersion != b.ResourceVersion {
			return fmt.Errorf("kiln still writes the PyJob: %v", err)
		}
		return nil
	})
	// Before the upgrade the old PyJob is stored at v1alpha1; after it a PyJob written is stored at
	// v1beta1 (the probe shows the apiserver switched), the old one still at v1alpha1. Done again
	// if kiln wrote the old one meanwhile.
	testenv.Eventually(t, func() error {
		storeAt("v1alpha1")
		written(old, "v1alpha1")
		storeAt("v1beta1") // the upgrade
		written(probe, "v1beta1")
		if got := env.StoredAPIVersion(t, group, resource, ns, old.Name); got != group+"/v1alpha1" {
			return fmt.Errorf("before the migration, the old PyJob is stored at %s, want v1alpha1", got)
		}
		return nil
	})
	var before trainingv1beta1.PyJob
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(old), &before); err != nil {
		t.Fatalf("reading a PyJob stored at v1alpha1 at v1beta1: %v", err)
	}

	// The CRD is written by someone else just before the migration trims its stored versions (as
	// the cluster's migrator and kiln's CA injection write it): the trim reads it again.
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	raced := false
	racing := interceptor.NewClient(base, interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if !raced {
				raced = true
				crd := &apiextensionsv1.CustomResourceDefinition{}
				if err := c.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
					return err
				}
				metav1.SetMetaDataAnnotation(&crd.ObjectMeta, "kiln.dev/test-touched", "true")
				if err := c.Update(ctx, crd); err != nil {
					return err
				}
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
	var out bytes.Buffer
	if err := migration.Run(ctx, racing, migration.Options{CRDs: []string{crdName}, Method: migration.Rewrite, Out: &out}); err != nil || !raced {
		t.Fatalf("kiln migrate-storage (raced %v): %v\n%s", raced, err, out.String())
	}
	if got := env.StoredAPIVersion(t, group, resource, ns, old.Name); got != group+"/v1beta1" {
		t.Errorf("after the migration, the old PyJob is stored at %s, want v1beta1", got)
	}
	var after trainingv1beta1.PyJob
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(old), &after); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(before.Spec, after.Spec) || !apiequality.Semantic.DeepEqual(before.Labels, after.Labels) {
		t.Errorf("the migration changed the PyJob:\nbefore %+v\nafter  %+v", before.Spec, after.Spec)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		t.Fatal(err)
	}
	if got := crd.Status.StoredVersions; len(got) != 1 || got[0] != "v1beta1" {
		t.Errorf("stored versions after the migration: %v, want [v1beta1]", got)
	}
	if !strings.Contains(out.String(), "stored versions [v1beta1 v1alpha1] -> [v1beta1] (rewrite)") {
		t.Errorf("kiln migrate-storage said:\n%s", out.String())
	}

	// A second run finds nothing to do.
	out.Reset()
	if err := migration.Run(ctx, env.Client, migration.Options{CRDs: []string{crdName}, Method: migration.Rewrite, Out: &out}); err != nil ||
		!strings.Contains(out.String(), "stored at v1beta1 only, nothing to migrate") {
		t.Errorf("kiln migrate-storage again: %v\n%s", err, out.String())
	}
}
