// Package statuspatch writes the status of kiln's own kinds the cheap way: a merge patch of the
// status alone, guarded by the resourceVersion the caller read, that asks the apiserver for the
// object's metadata only in return.
package statuspatch

import (
	"context"
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Write patches the status of obj (of kind gvk) from old to new, where old is the status of the
// version of obj the caller read. A merge patch of whole objects costs kiln two encodings of the
// spec (pod templates and all) and the decoding of the whole object the apiserver sends back, for
// every write; this encodes two statuses and decodes the metadata. obj is not changed. A conflict
// (the object changed since it was read) comes back as the apiserver's Conflict error.
func Write(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, obj client.Object, old, new any) error {
	patch, err := Patch(obj.GetResourceVersion(), old, new)
	if err != nil {
		return err
	}
	written := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
	written.SetGroupVersionKind(gvk)
	return c.Status().Patch(ctx, written, client.RawPatch(types.MergePatchType, patch))
}

// Patch is the merge patch that turns status old into new on the version resourceVersion.
func Patch(resourceVersion string, old, new any) ([]byte, error) {
	before, err := json.Marshal(old)
	if err != nil {
		return nil, fmt.Errorf("encoding the status read: %w", err)
	}
	after, err := json.Marshal(new)
	if err != nil {
		return nil, fmt.Errorf("encoding the new status: %w", err)
	}
	diff, err := jsonpatch.CreateMergePatch(before, after)
	if err != nil {
		return nil, fmt.Errorf("diffing the status: %w", err)
	}
	rv, err := json.Marshal(resourceVersion)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, `{"metadata":{"resourceVersion":%s},"status":%s}`, rv, diff), nil
}
