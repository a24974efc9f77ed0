package pytorch

import (
	"k8s.io/utils/ptr"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/version"
	"github.com/kiln-ml/kiln/test/builder"
)

func lines(env []corev1.EnvVar) []string {
	out := make([]string, len(env))
	for i, e := range env {
		out[i] = e.Name + "=" + e.Value
	}
	return out
}

func defaulted(b *builder.Job) *kubeflowv1.PyTorchJob {
	job := b.Obj().(*kubeflowv1.PyTorchJob)
	for _, s := range job.Spec.PyTorchReplicaSpecs {
		s.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: PortName, ContainerPort: Port}}
	}
	setDefaults(job)
	return job
}

func TestEnv(t *testing.T) {
	ep := func(j *kubeflowv1.PyTorchJob) *kubeflowv1.PyTorchJob {
		backend, host, id := kubeflowv1.RDZVBackend("c10d"), "localhost", "rdzv-id"
		j.Spec.ElasticPolicy = &kubeflowv1.ElasticPolicy{
			RDZVBackend: &backend, RDZVHost: &host, RDZVPort: ptr.To[int32](1234), RDZVID: &id,
			RDZVConf:    []kubeflowv1.RDZVConf{{Key: "rdzv-conf-name", Value: "rdzv-conf-value"}, {Key: "rdzv-conf-name-1", Value: "rdzv-conf-value-1"}},
			MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](3), MaxRestarts: ptr.To[int32](3),
		}
		return j
	}
	nproc := func(n string) func(*kubeflowv1.PyTorchJob) *kubeflowv1.PyTorchJob {
		return func(j *kubeflowv1.PyTorchJob) *kubeflowv1.PyTorchJob { j.Spec.NprocPerNode = &n; return j }
	}
	tests := []struct {
		name  string
		job   *kubeflowv1.PyTorchJob
		rtype kubeflowv1.ReplicaType
		index int
		want  []string
	}{{
		name: "master", job: defaulted(builder.PyTorchJob("pt", "ns").Replicas("Master", 1).Replicas("Worker", 2)), rtype: "Master",
		want: []string{"PYTHONUNBUFFERED=1", "MASTER_PORT=23456", "PET_MASTER_PORT=23456", "MASTER_ADDR=pt-master-0", "PET_MASTER_ADDR=pt-master-0",
			"WORLD_SIZE=3", "RANK=0", "PET_NODE_RANK=0", "PET_NPROC_PER_NODE=auto", "PET_NNODES=3"},
	}, {
		name: "worker 1 with master", job: defaulted(builder.PyTorchJob("pt", "ns").Replicas("Master", 1).Replicas("Worker", 2)), rtype: "Worker", index: 1,
		want: []string{"PYTHONUNBUFFERED=1", "MASTER_PORT=23456", "PET_MASTER_PORT=23456", "MASTER_ADDR=pt-master-0", "PET_MASTER_ADDR=pt-master-0",
			"WORLD_SIZE=3", "RANK=2", "PET_NODE_RANK=2", "PET_NPROC_PER_NODE=auto", "PET_NNODES=3"},
	}, {
		name: "numeric nprocPerNode multiplies the world size", job: nproc("4")(defaulted(builder.PyTorchJob("pt", "ns").Replicas("Master", 1).Replicas("Worker", 1))), rtype: "Worker",
		want: []string{"PYTHONUNBUFFERED=1", "MASTER_PORT=23456", "PET_MASTER_PORT=23456", "MASTER_ADDR=pt-master-0", "PET_MASTER_ADDR=pt-master-0",
			"WORLD_SIZE=8", "RANK=1", "PET_NODE_RANK=1", "PET_NPROC_PER_NODE=4", "PET_NNODES=2"},
	}, {
		name: "elastic", job: ep(defaulted(builder.PyTorchJob("pt", "ns").Replicas("Worker", 1))), rtype: "Worker",
		want: []string{"PYTHONUNBUFFERED=1", "MASTER_PORT=23456", "PET_MASTER_PORT=23456", "MASTER_ADDR=pt-worker-0", "PET_MASTER_ADDR=pt-worker-0",
			"WORLD_SIZE=1", "RANK=0", "PET_NODE_RANK=0", "PET_NPROC_PER_NODE=auto",
			"PET_RDZV_ENDPOINT=localhost:1234", "PET_RDZV_BACKEND=c10d", "PET_NNODES=1:3", "PET_MAX_RESTARTS=3", "PET_RDZV_ID=rdzv-id",
			"PET_RDZV_CONF=rdzv-conf-name=rdzv-conf-value,rdzv-conf-name-1=rdzv-conf-value-1"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Env(tc.job, tc.rtype, tc.index)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, lines(got)); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEnvWithoutMasterPortSaysWhatToDo(t *testing.T) {
	job := builder.PyTorchJob("pt", "ns").Replicas("Master", 1).Template("Master", func(t *corev1.PodTemplateSpec) {
		t.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "other", ContainerPort: 1}}
	}).Obj().(*kubeflowv1.PyTorchJob)
	_, err := Env(job, "Master", 0)
	if err == nil || err.Error() != `spec.pytorchReplicaSpecs[Master]: container "pytorch" has no port named "pytorchjob-port": add it, or leave the ports empty to get the default 23456` {
		t.Errorf("error = %v", err)
	}
}

func TestElasticDefaults(t *testing.T) {
	tests := []struct {
		name             string
		min, max         *int32
		wantMin, wantMax int32
	}{
		{"neither: the worker replicas", nil, nil, 3, 3},
		{"only max", nil, ptr.To[int32](5), 5, 5},
		{"only min", ptr.To[int32](2), nil, 2, 2},
		{"both kept", ptr.To[int32](1), ptr.To[int32](4), 1, 4},
	}
	for _, tc := range tests {
		job := builder.PyTorchJob("pt", "ns").Replicas("Worker", 3).Obj().(*kubeflowv1.PyTorchJob)
		job.Spec.ElasticPolicy = &kubeflowv1.ElasticPolicy{MinReplicas: tc.min, MaxReplicas: tc.max}
		setDefaults(job)
		if *job.Spec.ElasticPolicy.MinReplicas != tc.wantMin || *job.Spec.ElasticPolicy.MaxReplicas != tc.wantMax {
			t.Errorf("%s: min %d max %d, want %d %d", tc.name, *job.Spec.ElasticPolicy.MinReplicas, *job.Spec.ElasticPolicy.MaxReplicas, tc.wantMin, tc.wantMax)
		}
		if job.Spec.NprocPerNode == nil || *job.Spec.NprocPerNode != "auto" {
			t.Errorf("%s: nprocPerNode = %v, want auto", tc.name, job.Spec.NprocPerNode)
		}
	}
}

// FuzzRanks checks that, for any topology, the replicas' RANKs are exactly 0..n-1, every
// replica agrees on WORLD_SIZE and MASTER_ADDR, and MASTER_ADDR is the rank-0 replica.
func FuzzRanks(f *testing.F) {
	f.Add(true, uint8(3))
	f.Add(false, uint8(1))
	f.Fuzz(func(t *testing.T, master bool, workers uint8) {
		b := builder.PyTorchJob("job", "ns")
		if master {
			b.Replicas("Master", 1)
		}
		if workers%64 > 0 {
			b.Replicas("Worker", int32(workers%64))
		}
		job := defaulted(b)
		if len(job.Spec.PyTorchReplicaSpecs) == 0 {
			return
		}
		ranks := map[int]string{}
		var world, addr string
		for rtype, spec := range job.Spec.PyTorchReplicaSpecs {
			for i := range int(*spec.Replicas) {
				env, err := Env(job, rtype, i)
				if err != nil {
					t.Fatal(err)
				}
				m := map[string]string{}
				for _, e := range env {
					m[e.Name] = e.Value
				}
				r, _ := strconv.Atoi(m["RANK"])
				if prev, dup := ranks[r]; dup {
					t.Fatalf("rank %d given twice (%s and %s-%d)", r, prev, rtype, i)
				}
				ranks[r] = string(rtype) + "-" + strconv.Itoa(i)
				if world != "" && (m["WORLD_SIZE"] != world || m["MASTER_ADDR"] != addr) {
					t.Fatalf("replicas disagree: WORLD_SIZE %s/%s MASTER_ADDR %s/%s", world, m["WORLD_SIZE"], addr, m["MASTER_ADDR"])
				}
				world, addr = m["WORLD_SIZE"], m["MASTER_ADDR"]
			}
		}
		if strconv.Itoa(len(ranks)) != world {
			t.Fatalf("%d ranks, WORLD_SIZE %s", len(ranks), world)
		}
		for r := range len(ranks) {
			if _, ok := ranks[r]; !ok {
				t.Fatalf("rank %d missing", r)
			}
		}
		if want := "job-" + map[bool]string{true: "master", false: "worker"}[master] + "-0"; addr != want {
			t.Fatalf("MASTER_ADDR %s, want %s (rank 0 is %s)", addr, want, ranks[0])
		}
	})
}

// Workers wait for the master with kiln's own image at this build's version, not a shell image.
func TestInitContainerIsKilnsWaitFor(t *testing.T) {
	job := defaulted(builder.PyTorchJob("pt", "ns").Replicas("Master", 1).Replicas("Worker", 1))
	c := initContainer(Config{InitContainerImage: version.Image(), InitContainerMaxTries: 7}, job)
	want := []string{"/kiln", "wait-for", "--tries", "7", "--interval", "2s", "pt-master-0"}
	if diff := cmp.Diff(want, c.Command); diff != "" || c.Image != version.Image() || c.Name != "init-pytorch" {
		t.Errorf("init container %s image %s (-want +got command):\n%s", c.Name, c.Image, diff)
	}
}
