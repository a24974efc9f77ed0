// Package pyjob checks PyJob admission against the real kube-apiserver: the CRD's schema and CEL
// rules reject bad input with a message that names the field.
package pyjob

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	"github.com/kiln-ml/kiln/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env, nil)) }

func valid(ns string) *trainingv1alpha1.PyJob {
	return &trainingv1alpha1.PyJob{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "p-", Namespace: ns},
		Spec: trainingv1alpha1.PyJobSpec{Image: "pytorch/pytorch:2.0", Command: []string{"python", "train.py"},
			DatasetPath: "/mnt/dataset", OutputPath: "/mnt/output"},
	}
}

func q(s string) *resource.Quantity { v := resource.MustParse(s); return &v }

func TestBadPyJobsAreRejectedNamingTheField(t *testing.T) {
	ns := env.Namespace(t)
	tests := []struct {
		name string
		edit func(*trainingv1alpha1.PyJobSpec)
		want string
	}{
		{"empty image", func(s *trainingv1alpha1.PyJobSpec) { s.Image = "" }, "spec.image"},
		{"negative gpu", func(s *trainingv1alpha1.PyJobSpec) { s.GPU = -1 }, "spec.gpu"},
		{"workers below 1", func(s *trainingv1alpha1.PyJobSpec) { s.Workers = -2 }, "spec.workers"},
		{"relative dataset path", func(s *trainingv1alpha1.PyJobSpec) { s.DatasetPath = "data" }, "spec.datasetPath must be an absolute path"},
		{"relative output path", func(s *trainingv1alpha1.PyJobSpec) { s.OutputPath = "out/" }, "spec.outputPath must be an absolute path"},
		{"output with both claim and size", func(s *trainingv1alpha1.PyJobSpec) {
			s.Output = &trainingv1alpha1.OutputStorage{ClaimName: "c", Size: q("1Gi")}
		}, "set exactly one of claimName"},
		{"negative output size", func(s *trainingv1alpha1.PyJobSpec) {
			s.Output = &trainingv1alpha1.OutputStorage{Size: q("-1Gi")}
		}, "spec.output.size must be a positive quantity"},
		{"zero memory", func(s *trainingv1alpha1.PyJobSpec) { s.Resources.Memory = q("0") }, "spec.resources.memory must be positive"},
		{"single-node output claim for several workers", func(s *trainingv1alpha1.PyJobSpec) {
			s.Workers, s.Output = 2, &trainingv1alpha1.OutputStorage{Size: q("1Gi"), AccessMode: corev1.ReadWriteOnce}
		}, "spec.output.accessMode: workers on different nodes cannot all mount a single-node claim"},
		{"access mode of an existing claim", func(s *trainingv1alpha1.PyJobSpec) {
			s.Output = &trainingv1alpha1.OutputStorage{ClaimName: "results", AccessMode: corev1.ReadWriteMany}
		}, "spec.output.accessMode is for the claim kiln creates"},
		{"GPU resource without a domain", func(s *trainingv1alpha1.PyJobSpec) { s.GPUResource = "gpu" }, "spec.gpuResource must be an extended resource name with a domain"},
		{"script over 900 KiB", func(s *trainingv1alpha1.PyJobSpec) { s.Script = strings.Repeat("#", 921601) }, "spec.script"},
		{"negative shm", func(s *trainingv1alpha1.PyJobSpec) { s.ShmSize = q("-1Gi") }, "spec.shmSize must be 0 or more"},
		{"shm above the memory", func(s *trainingv1alpha1.PyJobSpec) {
			s.Resources.Memory, s.ShmSize = q("8Gi"), q("16Gi")
		}, "spec.shmSize is memory of the worker: make it at most spec.resources.memory"},
		{"dataset without a path", func(s *trainingv1alpha1.PyJobSpec) {
			s.DatasetPath = ""
			s.Dataset = &trainingv1alpha1.DatasetStorage{ClaimName: "data"}
		}, "spec.dataset needs spec.datasetPath"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := valid(ns)
			tc.edit(&j.Spec)
			err := env.Client.Create(context.Background(), j)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

func TestImmutableFieldsCannotChange(t *testing.T) {
	ns := env.Namespace(t)
	j := valid(ns)
	if err := env.Client.Create(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	for field, edit := range map[string]func(*trainingv1alpha1.PyJobSpec){
		"spec.image":        func(s *trainingv1alpha1.PyJobSpec) { s.Image = "other:1" },
		"spec.gpu":          func(s *trainingv1alpha1.PyJobSpec) { s.GPU = 2 },
		"spec.workers":      func(s *trainingv1alpha1.PyJobSpec) { s.Workers = 3 },
		"spec.command":      func(s *trainingv1alpha1.PyJobSpec) { s.Command = []string{"bash"} },
		"spec.datasetPath":  func(s *trainingv1alpha1.PyJobSpec) { s.DatasetPath = "/data2" },
		"spec.outputPath":   func(s *trainingv1alpha1.PyJobSpec) { s.OutputPath = "" },
		"spec.shmSize":      func(s *trainingv1alpha1.PyJobSpec) { s.ShmSize = q("2Gi") },
		"spec.gpuResource":  func(s *trainingv1alpha1.PyJobSpec) { s.GPUResource = "amd.com/gpu" },
		"spec.env":          func(s *trainingv1alpha1.PyJobSpec) { s.Env = []corev1.EnvVar{{Name: "LR", Value: "1e-4"}} },
		"spec.resources":    func(s *trainingv1alpha1.PyJobSpec) { s.Resources.CPU = q("2") },
		"spec.nodeSelector": func(s *trainingv1alpha1.PyJobSpec) { s.NodeSelector = map[string]string{"pool": "a100"} },
		"spec.tolerations": func(s *trainingv1alpha1.PyJobSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}}
		},
		"spec.priorityClassName":  func(s *trainingv1alpha1.PyJobSpec) { s.PriorityClassName = "high" },
		"spec.serviceAccountName": func(s *trainingv1alpha1.PyJobSpec) { s.ServiceAccountName = "trainer" },
		"spec.imagePullSecrets": func(s *trainingv1alpha1.PyJobSpec) {
			s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
		},
		"spec.output":  func(s *trainingv1alpha1.PyJobSpec) { s.Output = &trainingv1alpha1.OutputStorage{ClaimName: "results"} },
		"spec.dataset": func(s *trainingv1alpha1.PyJobSpec) { s.Dataset = &trainingv1alpha1.DatasetStorage{ClaimName: "data"} },
		"spec.affinity": func(s *trainingv1alpha1.PyJobSpec) {
			s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}}
		},
		"spec.securityContext": func(s *trainingv1alpha1.PyJobSpec) {
			s.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: &[]bool{true}[0]}
		},
	} {
		changed := j.DeepCopy()
		edit(&changed.Spec)
		err := env.Client.Update(context.Background(), changed)
		if err == nil || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), "immutable") {
			t.Errorf("changing %s: error = %v, want one saying %s is immutable", field, err, field)
		}
	}
	changeable := j.DeepCopy()
	yes := true
	changeable.Spec.Suspend = &yes
	changeable.Spec.BackoffLimit, changeable.Spec.ActiveDeadlineSeconds = &[]int32{2}[0], &[]int64{3600}[0]
	changeable.Spec.TTLSecondsAfterFinished = &[]int32{60}[0]
	if err := env.Client.Update(context.Background(), changeable); err != nil {
		t.Errorf("suspend, backoffLimit, activeDeadlineSeconds and ttlSecondsAfterFinished must stay changeable: %v", err)
	}
}

func TestTheIssueExampleIsAccepted(t *testing.T) {
	ns := env.Namespace(t)
	j := valid(ns)
	j.Spec.GPU = 1
	j.Spec.Resources = trainingv1alpha1.Resources{CPU: q("4"), Memory: q("8Gi")}
	if err := env.Client.Create(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	if j.Spec.Workers != 1 {
		t.Errorf("workers defaulted to %d, want 1", j.Spec.Workers)
	}
}
