package paddle

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/test/builder"
)

func lines(env []corev1.EnvVar) []string {
	out := make([]string, len(env))
	for i, e := range env {
		out[i] = e.Name + "=" + e.Value
		if e.ValueFrom != nil {
			out[i] = e.Name + " from " + e.ValueFrom.FieldRef.FieldPath
		}
	}
	return out
}

func withPorts(j *kubeflowv1.PaddleJob) *kubeflowv1.PaddleJob {
	for _, s := range j.Spec.PaddleReplicaSpecs {
		s.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: PortName, ContainerPort: Port}}
	}
	return j
}

func TestEnv(t *testing.T) {
	collective := withPorts(builder.PaddleJob("pd", "ns").Replicas("Worker", 3).Obj().(*kubeflowv1.PaddleJob))
	ps := withPorts(builder.PaddleJob("pd", "ns").Replicas("Master", 1).Replicas("Worker", 2).Obj().(*kubeflowv1.PaddleJob))
	for _, c := range []struct {
		name  string
		job   *kubeflowv1.PaddleJob
		rtype kubeflowv1.ReplicaType
		index int
		want  []string
	}{
		{"collective: worker 0 is the endpoint, on its own pod IP", collective, "Worker", 0,
			[]string{"PYTHONUNBUFFERED=1", "PADDLE_JOB_ID=pd", "PADDLE_NNODES=3", "POD_IP_DUMMY from status.podIP", "PADDLE_MASTER=$(POD_IP_DUMMY):36543"}},
		{"collective: other workers reach worker 0", collective, "Worker", 2,
			[]string{"PYTHONUNBUFFERED=1", "PADDLE_JOB_ID=pd", "PADDLE_NNODES=3", "PADDLE_MASTER=pd-worker-0:36543"}},
		{"PS: the master is the endpoint and a server", ps, "Master", 0,
			[]string{"PYTHONUNBUFFERED=1", "PADDLE_JOB_ID=pd", "PADDLE_NNODES=3", "POD_IP_DUMMY from status.podIP", "PADDLE_MASTER=$(POD_IP_DUMMY):36543", "PADDLE_SERVER_NUM=1"}},
		{"PS: workers are trainers reaching the master", ps, "Worker", 0,
			[]string{"PYTHONUNBUFFERED=1", "PADDLE_JOB_ID=pd", "PADDLE_NNODES=3", "PADDLE_MASTER=pd-master-0:36543", "PADDLE_TRAINER_NUM=1"}},
	} {
		env, err := Env(c.job, c.rtype, c.index)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if diff := cmp.Diff(c.want, lines(env)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
}
