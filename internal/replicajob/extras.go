package replicajob

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/netpol"
)

// Extras are read (whose they are) before they are applied or deleted; Secrets only ever created
// (never read: see Framework.Secrets). The frameworks' packages grant the kinds of their extras;
// the network policy is every framework's.
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;create;patch;delete

// fieldManager owns the fields kiln applies to a job's extras (the InferenceService controller's
// manager has the same name: both are kiln).
const fieldManager = "kiln"

// syncExtras applies the framework's extras of a job when what they are built into differs from
// what this process last applied for the job (so a running job whose extras stay the same costs
// no request per reconcile; a restart syncs every job once). An extra's Wanted turning false
// deletes it. Both go through owned.Kit: an object of an extra's name that the job does not
// control is neither taken over nor deleted, and comes back as an *owned.Conflict.
func (r *Reconciler) syncExtras(ctx context.Context, job framework.Job, mem jobMemory, p *Plan) error {
	var extras []framework.Extra
	if r.fw.Extras != nil {
		state := framework.State{Active: !isFinished(&p.Status) && !isSuspended(job), Running: p.Running}
		extras = r.fw.Extras(job, state)
	}
	if e, ok := r.networkPolicy(job); ok {
		extras = append(extras, e)
	}
	if len(extras) == 0 {
		return nil
	}
	for _, e := range extras {
		e.Object.SetNamespace(job.GetNamespace())
		if e.Wanted {
			r.own(e.Object, job)
		}
	}
	built, err := json.Marshal(extras)
	if err != nil {
		return fmt.Errorf("building the extras of %s %s: %w", r.fw.Kind, job.GetName(), err)
	}
	sum := sha256.Sum256(built)
	if mem.extras == sum {
		return nil
	}
	var wanted []client.Object
	for _, e := range extras {
		if e.Wanted {
			wanted = append(wanted, e.Object)
		}
	}
	if err := r.kit.ApplyAll(ctx, job, wanted, nil); err != nil {
		return err
	}
	for _, e := range extras {
		if !e.Wanted {
			if err := r.kit.Delete(ctx, job, e.Object); err != nil {
				return err
			}
		}
	}
	r.mem.update(types.NamespacedName{Namespace: job.GetNamespace(), Name: job.GetName()}, job.GetUID(), func(j *jobMemory) { j.extras = sum })
	return nil
}

// own makes o the job's: in its namespace, controlled by it, with the job's identity labels
// (over any the framework set).
func (r *Reconciler) own(o metav1.Object, job framework.Job) {
	o.SetNamespace(job.GetNamespace())
	o.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(job, kubeflowv1.GroupVersion.WithKind(r.fw.Kind))})
	labels := maps.Clone(o.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	labels[kubeflowv1.LabelJobName], labels[kubeflowv1.LabelOperatorName] = job.GetName(), r.fw.ControllerName
	o.SetLabels(labels)
}

// createSecrets creates the framework's secrets of a job once per process; AlreadyExists means an
// earlier reconcile (or process) created them. Finished jobs need none.
func (r *Reconciler) createSecrets(ctx context.Context, job framework.Job, mem jobMemory, p *Plan) error {
	if r.fw.Secrets == nil || isFinished(&p.Status) || mem.secretsCreated {
		return nil
	}
	secrets, err := r.fw.Secrets(job)
	if err != nil {
		return fmt.Errorf("building the secrets of %s %s: %w", r.fw.Kind, job.GetName(), err)
	}
	for _, s := range secrets {
		r.own(s, job)
		if err := r.kit.CreateUnread(ctx, job, s); err != nil {
			return err
		}
	}
	r.mem.update(types.NamespacedName{Namespace: job.GetNamespace(), Name: job.GetName()}, job.GetUID(), func(j *jobMemory) { j.secretsCreated = true })
	return nil
}

// networkPolicy is the job's NetworkPolicy when it is isolated (its annotation or the operator's
// default), or its deletion when the annotation says none; a job that says nothing under a
// default of none has none, and costs nothing.
func (r *Reconciler) networkPolicy(job framework.Job) (framework.Extra, bool) {
	isolated := netpol.Mode(job.GetAnnotations(), r.opts.DefaultNetworkPolicy) == netpol.Isolated
	if !isolated && job.GetAnnotations()[netpol.Annotation] != netpol.None {
		return framework.Extra{}, false
	}
	np := netpol.ForJob(job.GetName(), job.GetNamespace(), jobLabels(r.fw, job), netpol.EgressOf(job.GetAnnotations()))
	return framework.Extra{Object: np, Wanted: isolated}, true
}
