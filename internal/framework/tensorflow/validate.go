package tensorflow

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
)

// validate checks a defaulted TFJob: at most one of Chief and Master, the two names of one role.
func validate(job *kubeflowv1.TFJob, specsPath *field.Path) field.ErrorList {
	specs := job.Spec.TFReplicaSpecs
	if specs[kubeflowv1.TFJobReplicaTypeChief] != nil && specs[kubeflowv1.TFJobReplicaTypeMaster] != nil {
		return field.ErrorList{field.Forbidden(specsPath, "must not have more than 1 Chief or Master role: keep one of them")}
	}
	return nil
}
