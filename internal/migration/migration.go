// Package migration rewrites the objects of kiln's CRDs that are stored at an older version to the
// storage version, then drops the older versions from the CRD's status.storedVersions, so that a
// later kiln can stop serving them (docs/install.md, Upgrade). Where the cluster serves the
// StorageVersionMigration API (storagemigration.k8s.io/v1, Kubernetes 1.37 and later, with its
// controller in kube-controller-manager) the cluster does both; elsewhere kiln rewrites each object
// itself, as that controller would.
package migration

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Method is how objects are rewritten.
type Method string

const (
	// Auto is StorageVersionMigration where the cluster serves it, else Rewrite.
	Auto Method = "auto"
	// StorageVersionMigration asks the cluster's storage version migrator.
	StorageVersionMigration Method = "storageversionmigration"
	// Rewrite has kiln write every object back unchanged: the apiserver stores what it writes at
	// the storage version.
	Rewrite Method = "rewrite"
)

// Options are what Run migrates and how.
type Options struct {
	// CRDs are the names of the CustomResourceDefinitions to migrate.
	CRDs   []string
	Method Method
	// Timeout bounds the wait for each StorageVersionMigration.
	Timeout time.Duration
	// Out gets one line per CRD: what was done.
	Out io.Writer
}

// Run migrates each CRD of o whose storedVersions hold more than its storage version. c needs
// to read CRDs and update their status, and to list and update the CRDs' objects (Rewrite) or
// create StorageVersionMigrations (StorageVersionMigration).
func Run(ctx context.Context, c client.Client, o Options) error {
	method := o.Method
	switch method {
	case Auto, StorageVersionMigration, Rewrite:
	default:
		return fmt.Errorf("unknown method %q: use %s, %s or %s", method, Auto, StorageVersionMigration, Rewrite)
	}
	if method == Auto {
		method = Rewrite
		if served(c.RESTMapper()) {
			method = StorageVersionMigration
		}
	}
	for _, name := range o.CRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return fmt.Errorf("reading CRD %s: %w", name, err)
		}
		storage := storageVersion(crd)
		if slices.Equal(crd.Status.StoredVersions, []string{storage}) {
			fmt.Fprintf(o.Out, "%s: stored at %s only, nothing to migrate\n", name, storage)
			continue
		}
		old := crd.Status.StoredVersions
		var err error
		if method == StorageVersionMigration {
			err = viaCluster(ctx, c, crd, o.Timeout)
		} else {
			var n int
			n, err = rewrite(ctx, c, crd, storage)
			fmt.Fprintf(o.Out, "%s: rewrote %d objects at %s\n", name, n, storage)
			if err == nil {
				err = trimStoredVersions(ctx, c, name, storage)
			}
		}
		if apierrors.IsForbidden(err) {
			err = fmt.Errorf("%w (it needs: get and update/status of customresourcedefinitions; list and update of %s, or create, get and delete of storageversionmigrations)",
				err, crd.Spec.Names.Plural)
		}
		if err != nil {
			return fmt.Errorf("migrating %s to %s: %w", name, storage, err)
		}
		fmt.Fprintf(o.Out, "%s: stored versions %v -> [%s] (%s)\n", name, old, storage, method)
	}
	return nil
}

// served says whether the cluster serves StorageVersionMigrations.
func served(mapper meta.RESTMapper) bool {
	_, err := mapper.RESTMapping(schema.GroupKind{Group: storagemigrationv1.GroupName, Kind: "StorageVersionMigration"}, "v1")
	return err == nil
}

func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

// rewrite writes every object of the CRD back as it is read, at the storage version; an object
// changed or deleted meanwhile was written by someone else, or needs no writing. It returns how
// many objects it wrote.
func rewrite(ctx context.Context, c client.Client, crd *apiextensionsv1.CustomResourceDefinition, storage string) (int, error) {
	gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: storage, Kind: crd.Spec.Names.ListKind}
	written := 0
	for cont := ""; ; {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk)
		err := c.List(ctx, list, client.Limit(500), client.Continue(cont))
		if apierrors.IsResourceExpired(err) && cont != "" {
			cont = "" // the list took longer than etcd keeps its revision: from the start again (a rewrite is harmless)
			continue
		}
		if err != nil {
			return written, fmt.Errorf("listing %s (objects stored at another version are read through kiln's conversion webhook: is kiln running?): %w",
				crd.Spec.Names.Plural, err)
		}
		for i := range list.Items {
			switch err := c.Update(ctx, &list.Items[i]); {
			case err == nil:
				written++
			case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			default:
				return written, fmt.Errorf("rewriting %s %s/%s: %w", crd.Spec.Names.Kind, list.Items[i].GetNamespace(), list.Items[i].GetName(), err)
			}
		}
		if cont = list.GetContinue(); cont == "" {
			return written, nil
		}
	}
}

// trimStoredVersions leaves only the storage version in the CRD's storedVersions, unless the
// storage version changed meanwhile. A CRD written meanwhile (the migrator's own condition, kiln
// injecting its CA) is read again.
func trimStoredVersions(ctx context.Context, c client.Client, name, storage string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		if storageVersion(crd) != storage {
			return fmt.Errorf("the storage version of %s changed to %s during the migration: run it again", name, storageVersion(crd))
		}
		if slices.Equal(crd.Status.StoredVersions, []string{storage}) {
			return nil
		}
		crd.Status.StoredVersions = []string{storage}
		return c.Status().Update(ctx, crd)
	})
	if err != nil {
		return fmt.Errorf("setting the stored versions of %s: %w", name, err)
	}
	return nil
}

// viaCluster creates a StorageVersionMigration of the CRD's resource (replacing one of an earlier
// run) and waits until it succeeded and the migrator trimmed the stored versions.
func viaCluster(ctx context.Context, c client.Client, crd *apiextensionsv1.CustomResourceDefinition, timeout time.Duration) error {
	svm := &storagemigrationv1.StorageVersionMigration{
		ObjectMeta: metav1.ObjectMeta{Name: "kiln-" + crd.Name},
		Spec:       storagemigrationv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural}},
	}
	if err := c.Delete(ctx, svm, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the StorageVersionMigration %s of an earlier run: %w", svm.Name, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		switch err := c.Create(ctx, svm.DeepCopy()); {
		case err == nil:
			return true, nil
		case apierrors.IsAlreadyExists(err): // the earlier one is still going away
			return false, nil
		default:
			return false, err
		}
	})
	if err != nil {
		return fmt.Errorf("creating StorageVersionMigration %s: %w", svm.Name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(svm), svm); err != nil {
			return false, err
		}
		if f := meta.FindStatusCondition(svm.Status.Conditions, string(storagemigrationv1.MigrationFailed)); f != nil && f.Status == metav1.ConditionTrue {
			return false, fmt.Errorf("StorageVersionMigration %s failed: %s", svm.Name, f.Message)
		}
		return meta.IsStatusConditionTrue(svm.Status.Conditions, string(storagemigrationv1.MigrationSucceeded)), nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return fmt.Errorf("StorageVersionMigration %s did not succeed within %s: is kube-controller-manager's storage-version-migrator-controller running? (--method=%s does without it)",
			svm.Name, timeout, Rewrite)
	}
	if err != nil {
		return err
	}
	// The migrator trims the stored versions itself unless the CRD changed meanwhile; every object
	// is rewritten either way.
	return trimStoredVersions(ctx, c, crd.Name, storageVersion(crd))
}
