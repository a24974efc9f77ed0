package pytorch

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
)

// extras is an elastic job's HorizontalPodAutoscaler, as Kubeflow makes it: named after the job,
// scaling its Worker replicas through the scale subresource between the elastic bounds on
// elasticPolicy.metrics. It is wanted while the job runs with metrics set (Kubeflow deletes it
// when the job is suspended; a finished job has nothing to scale).
func extras(job *kubeflowv1.PyTorchJob, active bool) []framework.Extra {
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: autoscalingv2.SchemeGroupVersion.String(), Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{Name: job.Name, Namespace: job.Namespace},
	}
	ep := job.Spec.ElasticPolicy
	if ep == nil || len(ep.Metrics) == 0 || !active {
		return []framework.Extra{{Object: hpa, Wanted: false}}
	}
	hpa.Spec = autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: kubeflowv1.GroupVersion.String(), Kind: kubeflowv1.PyTorchJobKind, Name: job.Name},
		MinReplicas:    ep.MinReplicas,
		MaxReplicas:    framework.NumReplicas(job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker]),
		Metrics:        ep.Metrics,
	}
	if ep.MaxReplicas != nil {
		hpa.Spec.MaxReplicas = *ep.MaxReplicas
	}
	return []framework.Extra{{Object: hpa, Wanted: true}}
}
