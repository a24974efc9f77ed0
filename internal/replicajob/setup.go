package replicajob

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// What the engine needs, and nothing more: no Secrets, no pods/exec, no update on jobs.
// +kubebuilder:rbac:groups=kubeflow.org,resources=tfjobs;pytorchjobs;xgboostjobs,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=kubeflow.org,resources=tfjobs/status;pytorchjobs/status;xgboostjobs/status,verbs=get;patch
// +kubebuilder:rbac:groups=kubeflow.org,resources=tfjobs/finalizers;pytorchjobs/finalizers;xgboostjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;delete;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler: it watches the jobs of its kind (spec changes only;
// its own status writes do not wake it) and the pods and services they control.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(strings.ToLower(r.fw.Kind)).
		For(r.fw.NewJob(), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.Pod{}).
		Owns(&corev1.Service{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, workers)}).
		Complete(r)
}
