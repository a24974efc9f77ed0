package xgboost

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/test/builder"
)

// withPorts gives every replica the default port, as defaulting does.
func withPorts(b *builder.Job) *kubeflowv1.XGBoostJob {
	job := b.Obj().(*kubeflowv1.XGBoostJob)
	for _, s := range job.Spec.XGBReplicaSpecs {
		s.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: PortName, ContainerPort: Port}}
	}
	return job
}

func TestEnv(t *testing.T) {
	job := withPorts(builder.XGBoostJob("xgb", "ns").Replicas("Master", 1).Replicas("Worker", 2))
	tests := []struct {
		rtype kubeflowv1.ReplicaType
		index int
		want  []string
	}{
		{"Master", 0, []string{"MASTER_PORT=9999", "MASTER_ADDR=xgb-master-0", "WORLD_SIZE=3", "RANK=0", "PYTHONUNBUFFERED=1", "WORKER_PORT=9999", "WORKER_ADDRS=xgb-worker-0,xgb-worker-1"}},
		{"Worker", 1, []string{"MASTER_PORT=9999", "MASTER_ADDR=xgb-master-0", "WORLD_SIZE=3", "RANK=2", "PYTHONUNBUFFERED=1", "WORKER_PORT=9999", "WORKER_ADDRS=xgb-worker-0,xgb-worker-1"}},
	}
	for _, tc := range tests {
		env, err := Env(job, tc.rtype, tc.index)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range env {
			got = append(got, e.Name+"="+e.Value)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s-%d env (-want +got):\n%s", tc.rtype, tc.index, diff)
		}
	}
	alone := withPorts(builder.XGBoostJob("one", "ns").Replicas("Master", 1))
	env, _ := Env(alone, "Master", 0)
	if len(env) != 5 {
		t.Errorf("master-only job env = %+v, want no WORKER_* variables", env)
	}
	if _, err := Env(builder.XGBoostJob("nomaster", "ns").Replicas("Worker", 1).Obj().(*kubeflowv1.XGBoostJob), "Worker", 0); err == nil {
		t.Error("a job without Master got an environment; want an error naming spec.xgbReplicaSpecs[Master]")
	}
}
