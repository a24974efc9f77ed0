package xgboost

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
)

// validate checks a defaulted XGBoostJob: the Master, which runs the tracker, exists and is one.
func validate(job *kubeflowv1.XGBoostJob, specsPath *field.Path) field.ErrorList {
	specs := job.Spec.XGBReplicaSpecs
	if specs[kubeflowv1.XGBoostJobReplicaTypeMaster] == nil {
		return field.ErrorList{field.Required(specsPath.Key("Master"), "must be present: the Master runs the rabit tracker")}
	}
	return framework.ValidateSingleMaster(specs, specsPath)
}
