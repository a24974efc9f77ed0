package replicajob

import (
	"context"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/owned"
)

// The engine watches its extras' metadata, to make one that was deleted again (the frameworks'
// packages grant the watch of their ExtraKinds).
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=list;watch

// networkPolicyKind is the extra every kind may have (Options.DefaultNetworkPolicy, the job's
// annotation).
var networkPolicyKind = networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy")

// NewExtrasCache is the engine's cache of what it makes beside pods and services: the objects of
// the frameworks' ExtraKinds and NetworkPolicies that carry the operator-name label of one of the
// frameworks (as every extra does), in the manager's namespaces, and the batch Jobs of replicas
// that run as Jobs (Framework.RunsAsJob), which carry it too. The extras' metadata only: all the
// engine reads of them is that they are gone; the batch Jobs without their spec (ChildEvents
// keeps them, and the engine reads their metadata and status).
func NewExtrasCache(mgr ctrl.Manager, namespaces []string, frameworks []framework.Framework) (cache.Cache, error) {
	names := make([]string, 0, len(frameworks))
	for _, fw := range frameworks {
		names = append(names, fw.ControllerName)
	}
	slices.Sort(names)
	req, err := labels.NewRequirement(kubeflowv1.LabelOperatorName, selection.In, names)
	if err != nil {
		return nil, err
	}
	jobs := cache.ByObject{Transform: func(obj any) (any, error) {
		if j, ok := obj.(*batchv1.Job); ok {
			j.ManagedFields, j.Spec = nil, batchv1.JobSpec{}
		}
		return obj, nil
	}}
	return owned.NewCache(mgr, namespaces, labels.NewSelector().Add(*req), map[client.Object]cache.ByObject{&batchv1.Job{}: jobs})
}

// RunJobs says whether one of the frameworks runs replicas as batch Jobs, which the engine then
// watches (NewChildEvents).
func RunJobs(frameworks []framework.Framework) bool {
	return slices.ContainsFunc(frameworks, func(fw framework.Framework) bool { return fw.RunsAsJob != nil })
}

// extraSources are the watches of the reconciler's extras in c: a deletion plans the job again,
// having forgotten what its extras were last synced for, so syncExtras applies them anew.
func (r *Reconciler) extraSources(c cache.Cache) []source.Source {
	kinds := append([]schema.GroupVersionKind{networkPolicyKind}, r.fw.ExtraKinds...)
	out := make([]source.Source, 0, len(kinds))
	for _, gvk := range kinds {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(gvk)
		out = append(out, source.Kind[client.Object](c, obj, handler.Funcs{DeleteFunc: r.extraDeleted}))
	}
	return out
}

func (r *Reconciler) extraDeleted(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	ref := metav1.GetControllerOf(e.Object)
	if ref == nil || ref.Kind != r.fw.Kind || ref.APIVersion != kubeflowv1.GroupVersion.String() {
		return
	}
	key := types.NamespacedName{Namespace: e.Object.GetNamespace(), Name: ref.Name}
	r.mem.extraLost(key, ref.UID)
	q.Add(reconcile.Request{NamespacedName: key})
}
