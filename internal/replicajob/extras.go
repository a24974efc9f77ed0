package replicajob

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
)

// Extras are read (whose they are) before they are applied or deleted; Secrets only ever created
// (never read: see Framework.Secrets). The frameworks' packages grant the kinds of their extras;
// the network policy is every framework's.
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;create;patch;delete

// fieldManager owns the fields kiln applies to a job's extras (the InferenceService controller's
// manager has the same name: both are kiln).
const fieldManager = "kiln"

// beforePods plans what the job's pods need before they are created: its gang group, its
// secrets, its extras. The extras are planned only when what they are built into differs from
// what this process last synced (so a running job whose extras stay the same costs no request
// per reconcile; a restarted kiln syncs every job's once).
func (p *planner) beforePods() error {
	job, st := p.job, &p.plan.Status
	runs := !isFinished(st) && !isSuspended(job)
	if p.in.Group != nil {
		p.plan.Group, p.plan.GroupKeep = p.in.Group, runs
	}
	p.plan.CreateSecrets = p.fw.Secrets != nil && !isFinished(st) && !p.in.SecretsCreated
	var extras []framework.Extra
	state := framework.State{Active: runs, Running: p.plan.Running, Existing: p.kids.indexes()}
	if p.fw.Extras != nil {
		extras = p.fw.Extras(job, state)
	}
	extras = append(extras, p.plugins.objects(p.fw, job, state)...)
	if len(extras) == 0 {
		if p.in.Conflict != "" {
			p.plan.Extras = []framework.Extra{} // nothing left in the way: syncing none ends the hold
		}
		return nil
	}
	for _, e := range extras {
		e.Object.SetNamespace(job.GetNamespace())
		if e.Wanted {
			own(p.fw, e.Object, job)
		}
	}
	built, err := json.Marshal(extras)
	if err != nil {
		return fmt.Errorf("building the extras of %s %s: %w", p.fw.Kind, job.GetName(), err)
	}
	// Planned again while one is in the way, whatever the digest: only a sync ends the hold. A
	// Service among them is planned again when the cache has none of its name: the engine watches
	// services for the replicas' sake, so one deleted is seen as a child, not as a lost extra.
	if p.plan.ExtrasDigest = sha256.Sum256(built); p.plan.ExtrasDigest != p.in.ExtrasSynced || p.in.Conflict != "" || p.jobServiceMissing(extras) {
		p.plan.Extras = extras
	}
	return nil
}

// jobServiceMissing says whether a wanted extra is a Service the job's children lack.
func (p *planner) jobServiceMissing(extras []framework.Extra) bool {
	for _, e := range extras {
		if _, isService := e.Object.(*corev1.Service); isService && e.Wanted && !p.kids.jobServices[e.Object.GetName()] {
			return true
		}
	}
	return false
}

// own makes o the job's: in its namespace, controlled by it, with the job's identity labels
// (over any the framework set).
func own(fw framework.Framework, o metav1.Object, job framework.Job) {
	o.SetNamespace(job.GetNamespace())
	o.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(job, kubeflowv1.GroupVersion.WithKind(fw.Kind))})
	labels := maps.Clone(o.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	labels[kubeflowv1.LabelJobName], labels[kubeflowv1.LabelOperatorName] = job.GetName(), fw.ControllerName
	o.SetLabels(labels)
}

// syncExtras applies the plan's wanted extras and deletes the others, through owned.Kit: an
// object of an extra's name that the job does not control is neither taken over nor deleted, and
// comes back as an *owned.Conflict (with nothing applied).
func (r *Reconciler) syncExtras(ctx context.Context, job framework.Job, extras []framework.Extra) error {
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
	return nil
}

// createSecrets creates the framework's secrets of a job; AlreadyExists means an earlier
// reconcile (or process) created them.
func (r *Reconciler) createSecrets(ctx context.Context, job framework.Job) error {
	secrets, err := r.fw.Secrets(job)
	if err != nil {
		return fmt.Errorf("building the secrets of %s %s: %w", r.fw.Kind, job.GetName(), err)
	}
	for _, s := range secrets {
		own(r.fw, s, job)
		if err := r.kit.CreateUnread(ctx, job, s); err != nil {
			return err
		}
	}
	return nil
}
