package replicajob

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/tracing"
)

// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=create;patch;delete

// fieldManager owns the fields kiln applies to a job's extras (the InferenceService controller's
// manager has the same name: both are kiln).
const fieldManager = "kiln"

// syncExtras applies the framework's extras of a job whose generation or activity changed since
// they were last synced by this process (so a running job costs no request per reconcile; a
// restart syncs every job once). An extra's Wanted turning false deletes it.
func (r *Reconciler) syncExtras(ctx context.Context, job framework.Job, status *kubeflowv1.JobStatus) error {
	if r.fw.Extras == nil {
		return nil
	}
	active := !isFinished(status) && !isSuspended(job)
	synced := extrasState{uid: job.GetUID(), key: strconv.FormatInt(job.GetGeneration(), 10) + "/" + strconv.FormatBool(active)}
	name := types.NamespacedName{Namespace: job.GetNamespace(), Name: job.GetName()}
	if v, ok := r.extrasSynced.Load(name); ok && v.(extrasState) == synced {
		return nil
	}
	owner := metav1.NewControllerRef(job, kubeflowv1.GroupVersion.WithKind(r.fw.Kind))
	for _, e := range r.fw.Extras(job, active) {
		o := e.Object
		o.SetNamespace(job.GetNamespace())
		ctx, end := tracing.Start(ctx, "sync "+fmt.Sprintf("%T", o), tracing.Object(r.fw.Kind, job.GetNamespace(), o.GetName())...)
		var err error
		if e.Wanted {
			o.SetOwnerReferences([]metav1.OwnerReference{*owner})
			labels := map[string]string{}
			maps.Copy(labels, o.GetLabels())
			labels[kubeflowv1.LabelJobName], labels[kubeflowv1.LabelOperatorName] = job.GetName(), r.fw.ControllerName
			o.SetLabels(labels)
			err = r.client.Patch(ctx, o, client.Apply, client.FieldOwner(fieldManager), client.ForceOwnership) //nolint:staticcheck // typed apply of a built object
		} else {
			err = client.IgnoreNotFound(r.client.Delete(ctx, o))
		}
		end(err)
		if err != nil {
			return fmt.Errorf("syncing %s %s of %s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), r.fw.Kind, job.GetName(), err)
		}
	}
	r.extrasSynced.Store(name, synced)
	return nil
}

// extrasState is what a job's extras were last synced for: its UID, generation and activity.
type extrasState struct {
	uid types.UID
	key string
}
