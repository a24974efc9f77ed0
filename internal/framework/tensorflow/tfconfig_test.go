package tensorflow

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/test/builder"
)

func dist() *kubeflowv1.TFJob {
	return builder.TFJob("dist", "default").Replicas("Chief", 1).Replicas("PS", 2).Replicas("Worker", 4).Obj().(*kubeflowv1.TFJob)
}

func TestTFConfigIsByteExact(t *testing.T) {
	cluster := `{"chief":["dist-chief-0.default.svc:2222"],"ps":["dist-ps-0.default.svc:2222","dist-ps-1.default.svc:2222"],"worker":["dist-worker-0.default.svc:2222","dist-worker-1.default.svc:2222","dist-worker-2.default.svc:2222","dist-worker-3.default.svc:2222"]}`
	tests := []struct {
		rtype kubeflowv1.ReplicaType
		index int
		want  string
	}{
		{"Worker", 1, `{"cluster":` + cluster + `,"task":{"type":"worker","index":1},"environment":"cloud"}`},
		{"Chief", 0, `{"cluster":` + cluster + `,"task":{"type":"chief","index":0},"environment":"cloud"}`},
		{"PS", 1, `{"cluster":` + cluster + `,"task":{"type":"ps","index":1},"environment":"cloud"}`},
	}
	for _, tc := range tests {
		got, err := TFConfig(Config{}, dist(), tc.rtype, tc.index)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("TF_CONFIG of %s-%d:\n got %s\nwant %s", tc.rtype, tc.index, got, tc.want)
		}
	}
}

func TestTFConfigHonoursClusterDomainAndPorts(t *testing.T) {
	job := builder.TFJob("dist", "ml").Replicas("PS", 1).Replicas("Worker", 1).
		Template("PS", func(t *corev1.PodTemplateSpec) {
			t.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9090}, {Name: PortName, ContainerPort: 3333}}
		}).Obj().(*kubeflowv1.TFJob)
	got, err := TFConfig(Config{ClusterDomain: "cluster.local"}, job, "Worker", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"cluster":{"ps":["dist-ps-0.ml.svc.cluster.local:3333"],"worker":["dist-worker-0.ml.svc.cluster.local:2222"]},"task":{"type":"worker","index":0},"environment":"cloud"}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestSparseTFConfigForDynamicWorkers(t *testing.T) {
	job := dist()
	job.Spec.EnableDynamicWorker = true
	chief := `"chief":["dist-chief-0.default.svc:2222"]`
	tests := map[string]string{
		"Worker/1": `{"cluster":{"worker":{"1":"dist-worker-1.default.svc:2222"},"ps":["dist-ps-0.default.svc:2222","dist-ps-1.default.svc:2222"],` + chief + `},"task":{"type":"worker","index":1}}`,
		"PS/0":     `{"cluster":{"worker":{},"ps":["dist-ps-0.default.svc:2222"],` + chief + `},"task":{"type":"ps","index":0}}`,
		// Kubeflow leaves the chief out of its own TF_CONFIG; kiln does not (DECISIONS #10).
		"Chief/0": `{"cluster":{"worker":{},"ps":[],` + chief + `},"task":{"type":"chief","index":0}}`,
	}
	for key, want := range tests {
		var rtype string
		var index int
		fmt.Sscanf(strings.Replace(key, "/", " ", 1), "%s %d", &rtype, &index)
		got, err := TFConfig(Config{}, job, kubeflowv1.ReplicaType(rtype), index)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s:\n got %s\nwant %s", key, got, want)
		}
	}
}

func TestSingleReplicaJobGetsNoTFConfig(t *testing.T) {
	job := builder.TFJob("local", "default").Replicas("Worker", 1).Obj().(*kubeflowv1.TFJob)
	tmpl := job.Spec.TFReplicaSpecs["Worker"].Template.DeepCopy()
	if err := setClusterSpec(Config{}, job, tmpl, "Worker", 0); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(job.Spec.TFReplicaSpecs["Worker"].Template, *tmpl); diff != "" {
		t.Errorf("single-worker template changed (-want +got):\n%s", diff)
	}
}

func TestTFConfigGoesToTheTensorflowContainerOnly(t *testing.T) {
	job := builder.TFJob("two", "default").Replicas("Worker", 2).Template("Worker", func(t *corev1.PodTemplateSpec) {
		t.Spec.Containers = append(t.Spec.Containers, corev1.Container{Name: "sidecar", Image: "x"})
	}).Obj().(*kubeflowv1.TFJob)
	tmpl := job.Spec.TFReplicaSpecs["Worker"].Template.DeepCopy()
	if err := setClusterSpec(Config{}, job, tmpl, "Worker", 1); err != nil {
		t.Fatal(err)
	}
	if len(tmpl.Spec.Containers[0].Env) != 1 || tmpl.Spec.Containers[0].Env[0].Name != "TF_CONFIG" || len(tmpl.Spec.Containers[1].Env) != 0 {
		t.Errorf("env: tensorflow %+v, sidecar %+v; want TF_CONFIG on tensorflow only", tmpl.Spec.Containers[0].Env, tmpl.Spec.Containers[1].Env)
	}
}

// FuzzTFConfig checks, for any replica counts, job name and task, that TF_CONFIG is valid JSON
// naming every replica once, with the task in it.
func FuzzTFConfig(f *testing.F) {
	f.Add("dist", uint8(1), uint8(2), uint8(4), uint8(0), uint8(3), false)
	f.Add("a", uint8(0), uint8(0), uint8(1), uint8(1), uint8(0), true)
	f.Fuzz(func(t *testing.T, name string, chiefs, ps, workers, evals, index uint8, dynamic bool) {
		b := builder.TFJob(name, "ns")
		counts := map[kubeflowv1.ReplicaType]uint8{"Chief": chiefs % 2, "PS": ps % 8, "Worker": workers % 32, "Evaluator": evals % 2}
		for rtype, n := range counts {
			if n > 0 {
				b.Replicas(rtype, int32(n))
			}
		}
		job := b.Obj().(*kubeflowv1.TFJob)
		job.Spec.EnableDynamicWorker = dynamic
		if len(job.Spec.TFReplicaSpecs) == 0 {
			return
		}
		worker := kubeflowv1.ReplicaType("Worker")
		if counts[worker] == 0 {
			return
		}
		i := int(index) % int(counts[worker])
		got, err := TFConfig(Config{}, job, worker, i)
		if err != nil {
			t.Fatal(err)
		}
		var parsed struct {
			Cluster map[string]json.RawMessage `json:"cluster"`
			Task    task                       `json:"task"`
		}
		if err := json.Unmarshal([]byte(got), &parsed); err != nil {
			t.Fatalf("TF_CONFIG is not JSON: %v\n%s", err, got)
		}
		if parsed.Task.Type != "worker" || parsed.Task.Index != i {
			t.Errorf("task = %+v, want worker %d", parsed.Task, i)
		}
		if dynamic {
			return
		}
		for rtype, n := range counts {
			var hosts []string
			if raw, ok := parsed.Cluster[strings.ToLower(string(rtype))]; ok {
				if err := json.Unmarshal(raw, &hosts); err != nil {
					t.Fatal(err)
				}
			}
			if len(hosts) != int(n) {
				t.Errorf("%s: %d hosts, want %d", rtype, len(hosts), n)
			}
		}
	})
}
