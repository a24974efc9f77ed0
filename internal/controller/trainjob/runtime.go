package trainjob

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
	"github.com/kiln-ml/kiln/internal/owned"
)

// Reasons a TrainJob has no JobSet (its Created condition is False).
const (
	ReasonRuntimeNotFound  = "TrainingRuntimeNotFound"
	ReasonNameConflict     = owned.ReasonNameConflict
	ReasonRefused          = owned.ReasonRefused
	ReasonInvalid          = "Invalid"
	ReasonJobSetNotServed  = "JobSetNotInstalled"
	reasonJobSetCreated    = "JobSetCreated"
	reasonCreatingJobSet   = "CreatingJobSet"
	reasonNotSupported     = trainerv1alpha1.TrainJobRuntimeNotSupportedReason
	reasonDeadlineExceeded = trainerv1alpha1.TrainJobDeadlineExceededReason
)

// Problem is what keeps kiln from making a TrainJob's JobSet; the zero problem is none. A Problem
// of reason TrainingRuntimeNotSupported fails the TrainJob (Trainer's verdict); the others wait.
type Problem struct {
	Reason, Message string
	// Field is the TrainJob's field at fault, when one is ("spec.runtimePatches[0]..."); Message
	// names it too.
	Field string
}

// refKind is the kind of runtime the TrainJob names (ClusterTrainingRuntime by default).
func refKind(job *trainerv1alpha1.TrainJob) string {
	return ptr.Deref(job.Spec.RuntimeRef.Kind, trainerv1alpha1.ClusterTrainingRuntimeKind)
}

// Runtime is the spec of the runtime the TrainJob names, read with c: a TrainingRuntime of its
// namespace or a ClusterTrainingRuntime. One missing is a Problem (the TrainJob waits for it); a
// kind kiln does not know fails the TrainJob. Read from the manager's cache, the spec is the
// cache's own (its runtimes are read-only there): callers only read it, and DesiredJobSet copies
// what it builds on.
func Runtime(ctx context.Context, c client.Reader, job *trainerv1alpha1.TrainJob) (*trainerv1alpha1.TrainingRuntimeSpec, Problem, error) {
	ref := job.Spec.RuntimeRef
	kind, group := refKind(job), ptr.Deref(ref.APIGroup, trainerv1alpha1.GroupVersion.Group)
	var obj client.Object
	var spec *trainerv1alpha1.TrainingRuntimeSpec
	switch {
	case group != trainerv1alpha1.GroupVersion.Group:
		return nil, Problem{Reason: reasonNotSupported, Message: fmt.Sprintf("spec.runtimeRef.apiGroup %q is not a runtime kiln runs: use %s", group, trainerv1alpha1.GroupVersion.Group)}, nil
	case kind == trainerv1alpha1.ClusterTrainingRuntimeKind:
		rt := &trainerv1alpha1.ClusterTrainingRuntime{}
		obj, spec = rt, &rt.Spec
	case kind == trainerv1alpha1.TrainingRuntimeKind:
		rt := &trainerv1alpha1.TrainingRuntime{}
		obj, spec = rt, &rt.Spec
	default:
		return nil, Problem{Reason: reasonNotSupported, Message: fmt.Sprintf("spec.runtimeRef.kind %q is not a runtime kind: use ClusterTrainingRuntime or TrainingRuntime", kind)}, nil
	}
	key := client.ObjectKey{Name: ref.Name}
	where := "the cluster"
	if kind == trainerv1alpha1.TrainingRuntimeKind {
		key.Namespace, where = job.Namespace, "namespace "+job.Namespace
	}
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, Problem{Reason: ReasonRuntimeNotFound, Message: fmt.Sprintf(
				"%s %s does not exist in %s: create it (the TrainJob starts when it does), or name another in spec.runtimeRef", kind, ref.Name, where)}, nil
		}
		return nil, Problem{}, fmt.Errorf("reading %s %s: %w", kind, ref.Name, err)
	}
	return spec, Problem{}, nil
}
