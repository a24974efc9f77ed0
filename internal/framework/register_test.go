package framework_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
)

func complete() framework.Framework {
	return framework.Framework{
		Kind: "SleepJob", Name: "sleep", ControllerName: "sleepjob-controller", ReplicaSpecsField: "sleepReplicaSpecs",
		ReplicaTypes: []kubeflowv1.ReplicaType{"Worker"}, DefaultRestartPolicy: kubeflowv1.RestartPolicyNever,
		NewJob:     func() framework.Job { return &kubeflowv1.XGBoostJob{} },
		NewJobList: func() client.ObjectList { return &kubeflowv1.XGBoostJobList{} },
		SetClusterSpec: func(framework.Job, *corev1.PodTemplateSpec, kubeflowv1.ReplicaType, int) error {
			return nil
		},
		IsMasterRole: func(framework.Job, kubeflowv1.ReplicaType, int) bool { return false },
		Outcome:      func(framework.Job, framework.Replicas) framework.Outcome { return framework.Outcome{} },
	}
}

func TestAFrameworkMissingARequiredPartIsRefusedByName(t *testing.T) {
	fw := complete()
	fw.Outcome, fw.ReplicaTypes, fw.DefaultPort = nil, nil, 9999
	var set framework.Set
	err := set.Add(fw)
	if err == nil {
		t.Fatal("a framework without Outcome and ReplicaTypes was registered")
	}
	for _, want := range []string{`framework "sleep"`, "ReplicaTypes", "Outcome", "DefaultPortName and DefaultPort"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, ok := set.Get("sleepjob"); ok {
		t.Error("the refused framework is in the set")
	}
}

func TestTwoFrameworksOfOneKindAreRefused(t *testing.T) {
	var set framework.Set
	if err := set.Add(complete()); err != nil {
		t.Fatal(err)
	}
	second := complete()
	second.Name = "other-sleep"
	err := set.Add(second)
	if err == nil || !strings.Contains(err.Error(), `"other-sleep"`) || !strings.Contains(err.Error(), `"sleep"`) {
		t.Fatalf("a second framework of kind SleepJob: got %v, want an error naming both frameworks", err)
	}
	if fw, _ := set.Get("SLEEPJOB"); fw.Name != "sleep" {
		t.Errorf("the set serves SleepJob with %q, want the first one", fw.Name)
	}
	if got := set.Kinds(); len(got) != 1 || got[0] != "sleepjob" {
		t.Errorf("kinds %v, want [sleepjob]", got)
	}
}
