package owned

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func child(refs ...metav1.OwnerReference) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc", OwnerReferences: refs}}
}

func ref(apiVersion, kind, name string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("u-" + name), Controller: ptr.To(controller)}
}

// queued is what the handler puts in a fresh queue for ev.
func queued(t *testing.T, parent schema.GroupKind, ev any) []string {
	t.Helper()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	h := EnqueueController(parent)
	ctx := context.Background()
	switch e := ev.(type) {
	case event.CreateEvent:
		h.Create(ctx, e, q)
	case event.UpdateEvent:
		h.Update(ctx, e, q)
	case event.DeleteEvent:
		h.Delete(ctx, e, q)
	}
	var out []string
	for q.Len() > 0 {
		r, _ := q.Get()
		out = append(out, r.String())
		q.Done(r)
	}
	slices.Sort(out)
	return out
}

func TestEnqueueControllerWakesTheControllingParentOfItsKind(t *testing.T) {
	isvc := schema.GroupKind{Group: "serving.kserve.io", Kind: "InferenceService"}
	for _, tc := range []struct {
		name string
		ev   any
		want []string
	}{
		{"the controller of its kind", event.CreateEvent{Object: child(ref("serving.kserve.io/v1beta1", "InferenceService", "a", true))}, []string{"ns/a"}},
		{"any version of the group", event.DeleteEvent{Object: child(ref("serving.kserve.io/v1alpha9", "InferenceService", "a", true))}, []string{"ns/a"}},
		{"an owner that is not the controller", event.CreateEvent{Object: child(ref("serving.kserve.io/v1beta1", "InferenceService", "a", false))}, nil},
		{"the same kind of another group", event.CreateEvent{Object: child(ref("serving.kiln.dev/v1alpha1", "InferenceService", "a", true))}, nil},
		{"another kind of the group", event.CreateEvent{Object: child(ref("serving.kserve.io/v1beta1", "ServingRuntime", "a", true))}, nil},
		{"no owner", event.CreateEvent{Object: child()}, nil},
		{"both sides of an update", event.UpdateEvent{
			ObjectOld: child(ref("serving.kserve.io/v1beta1", "InferenceService", "old", true)),
			ObjectNew: child(ref("serving.kserve.io/v1beta1", "InferenceService", "new", true))}, []string{"ns/new", "ns/old"}},
	} {
		if got := queued(t, isvc, tc.ev); !slices.Equal(got, tc.want) {
			t.Errorf("%s: queued %v, want %v", tc.name, got, tc.want)
		}
	}
	// The core group ("v1") and a kind in it.
	if got := queued(t, schema.GroupKind{Kind: "Pod"}, event.CreateEvent{Object: child(ref("v1", "Pod", "p", true))}); !slices.Equal(got, []string{"ns/p"}) {
		t.Errorf("a core parent: queued %v", got)
	}
	if got := queued(t, schema.GroupKind{Kind: "Pod"}, event.CreateEvent{Object: child(ref("apps/v1", "Pod", "p", true))}); got != nil {
		t.Errorf("a core parent named by another group: queued %v", got)
	}
}
