package replicajob

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/framework/pytorch"
	"github.com/kiln-ml/kiln/internal/framework/tensorflow"
	"github.com/kiln-ml/kiln/internal/framework/xgboost"
)

func replica(container string, n int32) *kubeflowv1.ReplicaSpec {
	return &kubeflowv1.ReplicaSpec{Replicas: ptr.To(n), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: container, Image: "trainer:1"}},
	}}}
}

// TestValidate checks each rule of the validating webhook on defaulted jobs, with the exact
// field path and the fixed order of errors.
func TestValidate(t *testing.T) {
	tf, pt, xgb := tensorflow.New(tensorflow.Config{}), pytorch.New(pytorch.Config{}), xgboost.New()
	newTF := func(specs map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec) framework.Job {
		j := &kubeflowv1.TFJob{Spec: kubeflowv1.TFJobSpec{TFReplicaSpecs: specs}}
		j.Name = "mnist"
		return j
	}
	newPT := func(specs map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec, edit func(*kubeflowv1.PyTorchJob)) framework.Job {
		j := &kubeflowv1.PyTorchJob{Spec: kubeflowv1.PyTorchJobSpec{PyTorchReplicaSpecs: specs}}
		j.Name = "bert"
		if edit != nil {
			edit(j)
		}
		return j
	}
	newXGB := func(specs map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec) framework.Job {
		j := &kubeflowv1.XGBoostJob{Spec: kubeflowv1.XGBoostJobSpec{XGBReplicaSpecs: specs}}
		j.Name = "iris"
		return j
	}
	noImage := replica("tensorflow", 1)
	noImage.Template.Spec.Containers[0].Image = ""
	type rs = map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec
	for _, c := range []struct {
		name     string
		fw       framework.Framework
		job, old framework.Job
		want     []string // error texts, in order
		warning  string
	}{
		{name: "valid TFJob", fw: tf, job: newTF(rs{"worker": replica("tensorflow", 2), "PS": replica("tensorflow", 1)})},
		{name: "lowercase type is normalised, not refused", fw: tf, job: newTF(rs{"chief": replica("tensorflow", 1)})},
		{name: "unknown type", fw: tf, job: newTF(rs{"Launcher": replica("tensorflow", 1)}), want: []string{`spec.tfReplicaSpecs[Launcher]: Unsupported value: "Launcher"`}},
		{name: "no types", fw: tf, job: newTF(rs{}), want: []string{"spec.tfReplicaSpecs: Required value"}},
		{name: "no image and no default container, in order", fw: tf, job: newTF(rs{"Worker": noImage, "PS": replica("main", 1)}), want: []string{
			"spec.tfReplicaSpecs[PS].template.spec.containers: Required value: must have at least one container with name tensorflow",
			"spec.tfReplicaSpecs[Worker].template.spec.containers[0].image: Required value",
		}},
		{name: "Chief and Master", fw: tf, job: newTF(rs{"Chief": replica("tensorflow", 1), "Master": replica("tensorflow", 1)}), want: []string{"spec.tfReplicaSpecs: Forbidden: must not have more than 1 Chief or Master role"}},
		{name: "name too long for the last worker's Service", fw: tf, job: func() framework.Job {
			j := newTF(rs{"Worker": replica("tensorflow", 10)})
			j.SetName(strings.Repeat("n", 55))
			return j
		}(), want: []string{"metadata.name: Invalid value: \"nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn\": must be at most 54 characters"}},
		{name: "managedBy unknown", fw: tf, job: func() framework.Job {
			j := newTF(rs{"Worker": replica("tensorflow", 1)})
			j.GetRunPolicy().ManagedBy = ptr.To("example.com/x")
			return j
		}(), want: []string{`spec.runPolicy.managedBy: Unsupported value: "example.com/x"`}},
		{name: "managedBy set on update", fw: tf, old: newTF(rs{"Worker": replica("tensorflow", 1)}), job: func() framework.Job {
			j := newTF(rs{"Worker": replica("tensorflow", 1)})
			j.GetRunPolicy().ManagedBy = ptr.To(kubeflowv1.MultiKueueController)
			return j
		}(), want: []string{`spec.runPolicy.managedBy: Invalid value: "kueue.x-k8s.io/multikueue": field is immutable`}},
		{name: "a type added on update (Kubeflow allows it; the engine creates its pods)", fw: tf, old: newTF(rs{"worker": replica("tensorflow", 1)}),
			job: newTF(rs{"Worker": replica("tensorflow", 1), "PS": replica("tensorflow", 1)})},
		{name: "a type removed on update (its pods become strays and are deleted)", fw: tf, old: newTF(rs{"Worker": replica("tensorflow", 1), "PS": replica("tensorflow", 1)}),
			job: newTF(rs{"Worker": replica("tensorflow", 1)})},
		{name: "PyTorch two masters", fw: pt, job: newPT(rs{"Master": replica("pytorch", 2), "Worker": replica("pytorch", 1)}, nil), want: []string{"spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1"}},
		{name: "PyTorch zero workers", fw: pt, job: newPT(rs{"Master": replica("pytorch", 1), "Worker": replica("pytorch", 0)}, nil), want: []string{"spec.pytorchReplicaSpecs[Worker].replicas: Forbidden: must be at least 1"}},
		{name: "PyTorch elastic without Worker", fw: pt, job: newPT(rs{"Master": replica("pytorch", 1)}, func(j *kubeflowv1.PyTorchJob) {
			j.Spec.ElasticPolicy = &kubeflowv1.ElasticPolicy{}
		}), want: []string{"spec.pytorchReplicaSpecs[Worker]: Required value: must be configured if elastic policy is used"}},
		{name: "PyTorch deprecated nProcPerNode warns", fw: pt, job: newPT(rs{"Worker": replica("pytorch", 2)}, func(j *kubeflowv1.PyTorchJob) {
			j.Spec.ElasticPolicy = &kubeflowv1.ElasticPolicy{NProcPerNode: ptr.To[int32](2)}
		}), warning: "spec.elasticPolicy.nProcPerNode is deprecated"},
		{name: "PyTorch both nProcPerNode", fw: pt, job: newPT(rs{"Worker": replica("pytorch", 2)}, func(j *kubeflowv1.PyTorchJob) {
			j.Spec.ElasticPolicy = &kubeflowv1.ElasticPolicy{NProcPerNode: ptr.To[int32](2)}
			j.Spec.NprocPerNode = ptr.To("2")
		}), want: []string{"spec.elasticPolicy.nProcPerNode: Forbidden: must not be used with spec.nprocPerNode"}, warning: "deprecated"},
		{name: "PyTorch bad nprocPerNode", fw: pt, job: newPT(rs{"Worker": replica("pytorch", 2)}, func(j *kubeflowv1.PyTorchJob) { j.Spec.NprocPerNode = ptr.To("0") }),
			want: []string{`spec.nprocPerNode: Invalid value: "0"`}},
		{name: "PyTorch nprocPerNode xpu (Intel GPUs, torchrun 2.4+)", fw: pt, job: newPT(rs{"Worker": replica("pytorch", 2)}, func(j *kubeflowv1.PyTorchJob) { j.Spec.NprocPerNode = ptr.To("xpu") })},
		{name: "two keys that differ only in case are refused, not one dropped", fw: tf, job: newTF(rs{"worker": replica("tensorflow", 1), "Worker": replica("tensorflow", 3), "WORKER": replica("tensorflow", 2)}),
			want: []string{
				"spec.tfReplicaSpecs[WORKER]: Duplicate value: \"WORKER names the same replica type as Worker (case does not count): keep one of them\"",
				"spec.tfReplicaSpecs[worker]: Duplicate value",
			}},
		{name: "replicas above the kind's limit", fw: tf, job: newTF(rs{"Worker": replica("tensorflow", 990), "PS": replica("tensorflow", 20)}),
			want: []string{"spec.tfReplicaSpecs[Worker].replicas: Invalid value: 990: the job has 1010 replicas in all, and a TFJob may have at most 1000 (every pod's TF_CONFIG lists every replica)"}},
		{name: "replicas above the default limit, no int32 overflow", fw: pt, job: newPT(rs{"Master": replica("pytorch", 1), "Worker": replica("pytorch", 1<<31-1)}, nil),
			want: []string{"spec.pytorchReplicaSpecs[Worker].replicas: Invalid value: 2147483647: the job has 2147483648 replicas in all, and a PyTorchJob may have at most 10000: see docs/limits.md"}},
		{name: "TF_CONFIG too long for Linux", fw: tf, job: func() framework.Job {
			j := newTF(rs{"Worker": replica("tensorflow", 1000)})
			j.SetName(strings.Repeat("n", 50))
			j.SetNamespace(strings.Repeat("s", 63))
			return j
		}(), want: []string{"spec.tfReplicaSpecs: Invalid value: 1000: the TF_CONFIG of each pod would be"}},
		{name: "XGBoost without Master", fw: xgb, job: newXGB(rs{"Worker": replica("xgboost", 2)}), want: []string{"spec.xgbReplicaSpecs[Master]: Required value"}},
		{name: "XGBoost omitted Master replicas means 1", fw: xgb, job: func() framework.Job {
			m := replica("xgboost", 1)
			m.Replicas = nil
			return newXGB(rs{"Master": m})
		}()},
	} {
		t.Run(c.name, func(t *testing.T) {
			Default(c.fw, c.job, kubeflowv1.CleanPodPolicyRunning)
			errs, warnings := Validate(c.fw, c.job, c.old)
			if len(errs) != len(c.want) {
				t.Fatalf("got %d errors %v, want %d: %q", len(errs), errs, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d is %q, want it to contain %q (errors come in a fixed order)", i, errs[i].Error(), w)
				}
			}
			if got := strings.Join(warnings, "\n"); (c.warning == "") != (got == "") || !strings.Contains(got, c.warning) {
				t.Errorf("warnings %q, want %q", got, c.warning)
			}
		})
	}
}
