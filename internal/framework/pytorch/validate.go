package pytorch

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
)

// validate checks a defaulted PyTorchJob: one Master replica, at least one of every other type,
// a Worker type and consistent bounds for elastic jobs, and one way of saying nprocPerNode.
func validate(job *kubeflowv1.PyTorchJob, specsPath *field.Path) (field.ErrorList, []string) {
	specs := job.Spec.PyTorchReplicaSpecs
	errs := framework.ValidateSingleMaster(specs, specsPath)
	if w := specs[kubeflowv1.PyTorchJobReplicaTypeWorker]; w != nil && framework.NumReplicas(w) < 1 {
		errs = append(errs, field.Forbidden(specsPath.Key("Worker").Child("replicas"), "must be at least 1: remove the Worker entry for a master-only job"))
	}
	var warnings []string
	if ep := job.Spec.ElasticPolicy; ep != nil {
		epPath := field.NewPath("spec", "elasticPolicy")
		if specs[kubeflowv1.PyTorchJobReplicaTypeWorker] == nil {
			errs = append(errs, field.Required(specsPath.Key("Worker"), "must be configured if elastic policy is used"))
		}
		if ep.MinReplicas != nil && ep.MaxReplicas != nil && *ep.MinReplicas > *ep.MaxReplicas {
			errs = append(errs, field.Invalid(epPath.Child("minReplicas"), *ep.MinReplicas, fmt.Sprintf("must not exceed spec.elasticPolicy.maxReplicas (%d)", *ep.MaxReplicas)))
		}
		errs = append(errs, validateMetrics(ep.Metrics, epPath.Child("metrics"))...)
		if ep.NProcPerNode != nil {
			warnings = append(warnings, "spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead")
			if job.Spec.NprocPerNode != nil {
				errs = append(errs, field.Forbidden(epPath.Child("nProcPerNode"), "must not be used with spec.nprocPerNode: keep spec.nprocPerNode"))
			}
		}
	}
	if n := job.Spec.NprocPerNode; n != nil && !validNproc(*n) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "nprocPerNode"), *n, `must be what torchrun's --nproc-per-node takes: "auto", "cpu", "gpu", "xpu" or a positive number such as "8"`))
	}
	return errs, warnings
}

// validNproc: the values torchrun's --nproc-per-node accepts (Kubeflow passes any string on and
// torchrun refuses the others when the pod starts).
func validNproc(s string) bool {
	switch s {
	case "auto", "cpu", "gpu", "xpu":
		return true
	}
	n, err := strconv.Atoi(s)
	return err == nil && n > 0
}
