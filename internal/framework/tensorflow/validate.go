package tensorflow

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
)

// maxEnvValue is the longest environment variable Linux passes to a program (MAX_ARG_STRLEN,
// 32 pages, counting "NAME=" and the final NUL): a longer TF_CONFIG makes the container fail to
// start with "argument list too long".
const maxEnvValue = 32*4096 - len("TF_CONFIG=") - 1

func validate(cfg Config, job *kubeflowv1.TFJob, specsPath *field.Path) field.ErrorList {
	specs := job.Spec.TFReplicaSpecs
	if specs[kubeflowv1.TFJobReplicaTypeChief] != nil && specs[kubeflowv1.TFJobReplicaTypeMaster] != nil {
		return field.ErrorList{field.Forbidden(specsPath, "must not have more than 1 Chief or Master role: keep one of them")}
	}
	total := framework.TotalReplicas(specs)
	if total <= 1 || total > MaxReplicas || job.Spec.EnableDynamicWorker {
		return nil // no TF_CONFIG, refused for its size already, or each pod lists only its peers
	}
	// Every pod's TF_CONFIG lists every replica; the task part differs by a few bytes only.
	value, err := TFConfig(cfg, job, kubeflowv1.TFJobReplicaTypeWorker, int(total))
	if err == nil && len(value) > maxEnvValue {
		return field.ErrorList{field.Invalid(specsPath, total, fmt.Sprintf(
			"the TF_CONFIG of each pod would be %d bytes, listing all %d replicas, and Linux passes at most %d to a program: use fewer replicas, or a shorter job name or namespace",
			len(value), total, maxEnvValue))}
	}
	return nil
}
