package jax

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/test/builder"
)

func TestEnv(t *testing.T) {
	job := builder.JAXJob("mnist", "ns").Replicas("Worker", 3).Obj().(*kubeflowv1.JAXJob)
	job.Spec.JAXReplicaSpecs["Worker"].Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: PortName, ContainerPort: 7777}}
	env, err := Env(job, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1.EnvVar{
		{Name: "PYTHONUNBUFFERED", Value: "1"}, {Name: "COORDINATOR_PORT", Value: "7777"}, {Name: "COORDINATOR_ADDRESS", Value: "mnist-worker-0"},
		{Name: "NUM_PROCESSES", Value: "3"}, {Name: "PROCESS_ID", Value: "2"},
	}
	if diff := cmp.Diff(want, env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	job.Spec.JAXReplicaSpecs["Worker"].Template.Spec.Containers[0].Ports = nil
	if _, err := Env(job, 0); err == nil {
		t.Error("no coordinator port: want an error naming jaxjob-port")
	}
}

func TestOutcome(t *testing.T) {
	fw := New()
	job := builder.JAXJob("j", "ns").Replicas("Worker", 2).Obj()
	for _, c := range []struct {
		w    framework.ReplicaCount
		want framework.Outcome
	}{
		{framework.ReplicaCount{Replicas: 2}, framework.Outcome{}},
		{framework.ReplicaCount{Replicas: 2, Active: 1}, framework.Outcome{Running: true, Message: "JAXJob ns/j is running."}},
		{framework.ReplicaCount{Replicas: 2, Active: 1, Succeeded: 1}, framework.Outcome{Running: true, Message: "JAXJob ns/j is running."}},
		{framework.ReplicaCount{Replicas: 2, Succeeded: 2}, framework.Outcome{Succeeded: true, Message: "JAXJob ns/j successfully completed."}},
	} {
		if got := fw.Outcome(job, framework.Replicas{"Worker": c.w}); got != c.want {
			t.Errorf("%+v: outcome %+v, want %+v", c.w, got, c.want)
		}
	}
}
