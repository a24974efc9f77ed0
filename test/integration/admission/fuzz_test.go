package admission

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	"github.com/kiln-ml/kiln/internal/controller/pyjob"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/manager"
	"github.com/kiln-ml/kiln/internal/netpol"
	"github.com/kiln-ml/kiln/internal/replicajob"
	"github.com/kiln-ml/kiln/test/testenv"
)

// FuzzAcceptedJobsMakeValidChildren takes random training jobs through the admission kiln
// serves (the CRD schema and its rules, the defaulting and validating webhooks) and, for every
// job accepted, through the engine's pure builders: the real apiserver must accept every pod and
// Service they make (a server-side dry run). An accepted job whose children the apiserver refuses
// would never run. It fails too on a webhook that breaks (an internal error) on any input.
func FuzzAcceptedJobsMakeValidChildren(f *testing.F) {
	f.Add(uint8(0), "mnist", uint8(2), "tensorflow", int32(6006), "", "EPOCHS", "team", "a")
	f.Add(uint8(1), "bert", uint8(3), "pytorch", int32(0), "metrics", "LR", "app.kubernetes.io/name", "bert")
	f.Add(uint8(2), "iris", uint8(1), "xgboost", int32(70000), "xgboostjob-port", "1BAD", "a/b/c", "x")
	f.Add(uint8(3), "jax", uint8(1), "jax", int32(8080), "http", "A=B", "", "")
	f.Add(uint8(4), "paddle", uint8(2), "Paddle", int32(2222), "a-very-long-port-name", "X", "team", "a b")
	f.Add(uint8(5), "pi", uint8(2), "mpi", int32(22), "ssh", "OMPI", "team", "-bad")
	frameworks, err := manager.Frameworks(testenv.ManagerOptions())
	if err != nil {
		f.Fatal(err)
	}
	all := frameworks.All()
	ready(f)
	ns := env.Namespace(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, kind uint8, name string, replicas uint8, container string, port int32, portName, envName, labelKey, labelValue string) {
		fw := all[int(kind)%len(all)]
		job := fuzzJob(fw, ns, name, int32(replicas%4)+1, container, port, portName, envName, labelKey, labelValue)
		err := env.Client.Create(ctx, job, client.DryRunAll)
		switch {
		case apierrors.IsInternalError(err) || (err != nil && strings.Contains(err.Error(), "failed calling webhook")):
			t.Fatalf("the admission of a %s broke: %v", fw.Kind, err)
		case err != nil:
			return // refused: the user is told why
		}
		replicajob.Default(fw, job, kubeflowv1.CleanPodPolicyRunning) // as the manager's cache does
		pods, services, err := replicajob.Children(fw, job)
		if err != nil {
			t.Fatalf("an accepted %s has no children: %v", fw.Kind, err)
		}
		for _, p := range pods {
			if err := env.Client.Create(ctx, p, client.DryRunAll); apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
				t.Fatalf("a %s was accepted, but the apiserver refuses its pod %s: %v\njob: %+v", fw.Kind, p.Name, err, job.GetReplicaSpecs())
			}
		}
		for _, s := range services {
			if err := env.Client.Create(ctx, s, client.DryRunAll); apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
				t.Fatalf("a %s was accepted, but the apiserver refuses its Service %s: %v\njob: %+v", fw.Kind, s.Name, err, job.GetReplicaSpecs())
			}
		}
	})
}

// FuzzAcceptedPyJobsMakeValidChildren does for PyJobs what FuzzAcceptedJobsMakeValidChildren
// does for the training kinds: every PyJob the CRD schema and the webhooks accept must make
// children (its batch Job, Service, output claim, script ConfigMap and NetworkPolicy) that the
// apiserver accepts.
func FuzzAcceptedPyJobsMakeValidChildren(f *testing.F) {
	f.Add("train", "pytorch/pytorch:2.0", uint8(1), uint8(0), "/data", "/output", "EPOCHS", "data", "", "print(1)", "team", "a")
	f.Add("ddp", "trainer:1", uint8(4), uint8(8), "/mnt/data", "/mnt/out", "1BAD", "Bad_Claim", "../x", "", "a/b/c", "x")
	f.Add("shm", "img", uint8(2), uint8(1), "/dev/shm", "/dev/shm", "A=B", "claim", "/abs", "x", "", "")
	f.Add(strings.Repeat("n", 60), "img", uint8(255), uint8(200), "data", "/tmp", "", "c", "sub", "", "app", "-bad")
	ready(f)
	ns := env.Namespace(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, name, image string, workers, gpus uint8, datasetPath, outputPath, envName, claim, subPath, script, labelKey, labelValue string) {
		job := &trainingv1alpha1.PyJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: trainingv1alpha1.PyJobSpec{Image: image, Workers: int32(workers), GPU: int32(gpus), DatasetPath: datasetPath, OutputPath: outputPath}}
		if script != "" {
			job.Spec.Script = script
		} else {
			job.Spec.Command = []string{"python", "train.py"}
		}
		if envName != "" {
			job.Spec.Env = []corev1.EnvVar{{Name: envName, Value: "1"}}
		}
		if claim != "" {
			job.Spec.Dataset = &trainingv1alpha1.DatasetStorage{ClaimName: claim, SubPath: subPath}
			job.Spec.Output = &trainingv1alpha1.OutputStorage{Size: ptr.To(resource.MustParse("1Gi"))}
		}
		if labelKey != "" {
			job.Labels = map[string]string{labelKey: labelValue}
		}
		err := env.Client.Create(ctx, job, client.DryRunAll)
		switch {
		case apierrors.IsInternalError(err) || (err != nil && strings.Contains(err.Error(), "failed calling webhook")):
			t.Fatalf("the admission of a PyJob broke: %v", err)
		case err != nil:
			return // refused: the user is told why
		}
		for _, isolation := range []string{netpol.None, netpol.Isolated} {
			for _, c := range pyjob.Children(job, isolation) {
				if err := env.Client.Create(ctx, c, client.DryRunAll); apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
					t.Fatalf("a PyJob was accepted, but the apiserver refuses its %T %s: %v\njob: %+v", c, c.GetName(), err, job.Spec)
				}
			}
		}
	})
}

// fuzzJob is a job of fw whose every replica type has the fuzzed replicas and one container of
// the fuzzed name, port, environment variable and pod label.
func fuzzJob(fw framework.Framework, ns, name string, replicas int32, container string, port int32, portName, envName, labelKey, labelValue string) framework.Job {
	job := fw.NewJob()
	job.SetName(name)
	job.SetNamespace(ns)
	specs := map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{}
	for i, rtype := range fw.ReplicaTypes {
		if i > 1 {
			break // two types are enough to meet the kinds' rules (a master or launcher, workers)
		}
		c := corev1.Container{Name: container, Image: "trainer:1"}
		if port != 0 || portName != "" {
			c.Ports = []corev1.ContainerPort{{Name: portName, ContainerPort: port}}
		}
		if envName != "" {
			c.Env = []corev1.EnvVar{{Name: envName, Value: "1"}}
		}
		s := &kubeflowv1.ReplicaSpec{Replicas: ptr.To(replicas), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}}
		if labelKey != "" {
			s.Template.Labels = map[string]string{labelKey: labelValue}
		}
		if i == 0 && len(fw.ReplicaTypes) > 1 {
			s.Replicas = ptr.To[int32](1) // the master, chief or launcher
		}
		specs[rtype] = s
	}
	job.SetReplicaSpecs(specs)
	return job
}
