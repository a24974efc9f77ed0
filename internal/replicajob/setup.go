package replicajob

import (
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/gang"
	"github.com/kiln-ml/kiln/internal/owned"
	"github.com/kiln-ml/kiln/internal/statuspatch"
)

// What the engine needs for every framework, and nothing more: no reading Secrets, no pods/exec, no
// update on jobs. Each framework's package grants what its kind and its extras need.
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;delete;patch

// SetupWithManager registers the reconciler: it watches the jobs of its kind and, through
// children (one for every kind of the manager), the pods and services they control, which it
// reads from children too. Status updates are not filtered out: the reconciler waits for the
// cache to show its own status write, and that event is what wakes it.
// Its extras' deletions are watched in extras (NewExtrasCache). A gang scheduler's groups are watched too, when the cluster serves them: their state is
// why a job waits.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int, children *ChildEvents, extras cache.Cache) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named(strings.ToLower(r.fw.Kind)).
		For(r.fw.NewJob(), builder.WithPredicates(r.arrivals())).
		WatchesRawSource(children.Source(r.fw.Kind)).
		WatchesRawSource(r.wakes.Source())
	for _, s := range r.extraSources(extras) {
		b = b.WatchesRawSource(s)
	}
	if g := r.opts.Gang; g != nil && gang.Served(mgr.GetRESTMapper(), g) {
		b = b.Watches(g.NewObject(), owned.EnqueueController(kubeflowv1.GroupVersion.WithKind(r.fw.Kind).GroupKind()))
	}
	r.kids = children
	var err error
	if r.kit.Wire, err = newChildWriter(mgr.GetConfig(), mgr.GetHTTPClient()); err != nil {
		return err
	}
	if r.status, err = statuspatch.NewWriter(mgr.GetConfig(), mgr.GetHTTPClient(), mgr.GetRESTMapper(), kubeflowv1.GroupVersion.WithKind(r.fw.Kind)); err != nil {
		return err
	}
	if err := b.WithOptions(controller.Options{MaxConcurrentReconciles: max(1, workers)}).Complete(r); err != nil {
		return err
	}
	return r.setupCreatedWriter(mgr, workers)
}
