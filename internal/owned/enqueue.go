package owned

import (
	"context"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// EnqueueController wakes the parent of kind parent (any version) that controls the object of an
// event: what controller-runtime's Owns and EnqueueRequestForOwner with OnlyControllerOwner do,
// but without asking the RESTMapper whether the parent's kind is namespaced at every event
// (kiln's parents are, in their children's namespace). That lookup was 5 % of what kiln
// allocated serving InferenceServices (docs/performance.md, Measurements behind the code).
func EnqueueController(parent schema.GroupKind) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		ref := metav1.GetControllerOfNoCopy(o)
		if ref == nil || ref.Kind != parent.Kind || groupOf(ref.APIVersion) != parent.Group {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}}}
	})
}

// groupOf is the group of apiVersion ("apps/v1": apps; "v1": the core group, "").
func groupOf(apiVersion string) string {
	group, _, found := strings.Cut(apiVersion, "/")
	if !found {
		return ""
	}
	return group
}
