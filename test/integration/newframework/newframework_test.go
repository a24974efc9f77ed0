// Package newframework registers a framework written in the test, for a kind kiln does not ship,
// and runs a job of it on the real kube-apiserver: a new framework is one package and one
// registration, with nothing else in the engine to change.
package newframework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/manager"
	"github.com/kiln-ml/kiln/test/testenv"
)

// SleepJob is the suite's kind: workers that each sleep, done when all of them are.
type SleepJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SleepJobSpec         `json:"spec,omitempty"`
	Status            kubeflowv1.JobStatus `json:"status,omitempty"`
}

type SleepJobSpec struct {
	RunPolicy    kubeflowv1.RunPolicy                               `json:"runPolicy,omitempty"`
	ReplicaSpecs map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec `json:"sleepReplicaSpecs"`
}

func (j *SleepJob) GetRunPolicy() *kubeflowv1.RunPolicy { return &j.Spec.RunPolicy }
func (j *SleepJob) GetReplicaSpecs() map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec {
	return j.Spec.ReplicaSpecs
}
func (j *SleepJob) SetReplicaSpecs(m map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec) {
	j.Spec.ReplicaSpecs = m
}
func (j *SleepJob) GetJobStatus() *kubeflowv1.JobStatus { return &j.Status }

func (j *SleepJob) DeepCopyObject() runtime.Object {
	out := &SleepJob{TypeMeta: j.TypeMeta, Status: *j.Status.DeepCopy()}
	j.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	j.Spec.RunPolicy.DeepCopyInto(&out.Spec.RunPolicy)
	if j.Spec.ReplicaSpecs != nil {
		out.Spec.ReplicaSpecs = map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{}
		for k, v := range j.Spec.ReplicaSpecs {
			out.Spec.ReplicaSpecs[k] = v.DeepCopy()
		}
	}
	return out
}

type SleepJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SleepJob `json:"items"`
}

func (l *SleepJobList) DeepCopyObject() runtime.Object {
	out := &SleepJobList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	for i := range l.Items {
		out.Items = append(out.Items, *l.Items[i].DeepCopyObject().(*SleepJob))
	}
	return out
}

const worker kubeflowv1.ReplicaType = "Worker"

// sleep is the framework: every worker learns how many there are; the job runs while one does
// and succeeds when all have.
func sleep() framework.Framework {
	return framework.Framework{
		Kind: "SleepJob", Name: "sleep", ControllerName: "sleepjob-controller", ReplicaSpecsField: "sleepReplicaSpecs",
		ReplicaTypes: []kubeflowv1.ReplicaType{worker}, DefaultContainer: "sleep",
		DefaultRestartPolicy: kubeflowv1.RestartPolicyNever,
		NewJob:               func() framework.Job { return &SleepJob{} },
		NewJobList:           func() client.ObjectList { return &SleepJobList{} },
		SetClusterSpec: func(job framework.Job, t *corev1.PodTemplateSpec, rtype kubeflowv1.ReplicaType, index int) error {
			n := framework.NumReplicas(job.GetReplicaSpecs()[rtype])
			for i := range t.Spec.Containers {
				t.Spec.Containers[i].Env = append(t.Spec.Containers[i].Env,
					corev1.EnvVar{Name: "SLEEPERS", Value: strconv.Itoa(int(n))}, corev1.EnvVar{Name: "SLEEPER", Value: strconv.Itoa(index)})
			}
			return nil
		},
		IsMasterRole: func(_ framework.Job, _ kubeflowv1.ReplicaType, index int) bool { return index == 0 },
		Outcome: func(job framework.Job, r framework.Replicas) framework.Outcome {
			w := r[worker]
			switch {
			case w.Succeeded >= w.Replicas:
				return framework.Outcome{Succeeded: true, Message: "every sleeper woke"}
			case w.Active > 0:
				return framework.Outcome{Running: true, Message: "sleeping"}
			}
			return framework.Outcome{}
		},
	}
}

var (
	env *testenv.Env
	// c knows the SleepJob kind (env.Client knows kiln's own).
	c client.Client
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, func(e *testenv.Env) (func(), error) {
		if _, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join("testdata", "sleepjobs.yaml")}, ErrorIfPathMissing: true}); err != nil {
			return nil, err
		}
		s := manager.Scheme()
		s.AddKnownTypeWithName(kubeflowv1.GroupVersion.WithKind("SleepJob"), &SleepJob{})
		s.AddKnownTypeWithName(kubeflowv1.GroupVersion.WithKind("SleepJobList"), &SleepJobList{})
		var err error
		if c, err = client.New(e.Config, client.Options{Scheme: s}); err != nil {
			return nil, err
		}
		o := testenv.ManagerOptions()
		o.Kinds, o.Frameworks = []string{"sleepjob"}, []framework.Framework{sleep()}
		return e.StartManager(o)
	}))
}

func TestAJobOfAFrameworkWrittenHereRuns(t *testing.T) {
	ns := env.Namespace(t)
	job := &SleepJob{ObjectMeta: metav1.ObjectMeta{Name: "nap", Namespace: ns}, Spec: SleepJobSpec{
		ReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{worker: {Replicas: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sleep", Image: "busybox"}}}}}},
	}}
	if err := c.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	testenv.Eventually(t, func() error {
		pods = env.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: "nap"})
		return testenv.Count("pods of nap", len(pods), 2)
	})
	for i, p := range pods {
		vars := map[string]string{}
		for _, e := range p.Spec.Containers[0].Env {
			vars[e.Name] = e.Value
		}
		if p.Name != fmt.Sprintf("nap-worker-%d", i) || vars["SLEEPERS"] != "2" || vars["SLEEPER"] != strconv.Itoa(i) {
			t.Errorf("pod %s has SLEEPERS=%q SLEEPER=%q, want nap-worker-%d told it is %d of 2", p.Name, vars["SLEEPERS"], vars["SLEEPER"], i, i)
		}
		if got := p.Labels[kubeflowv1.LabelOperatorName]; got != "sleepjob-controller" {
			t.Errorf("pod %s operator label %q", p.Name, got)
		}
	}
	env.Run(t, &pods[0])
	waitCondition(t, job, kubeflowv1.JobRunning, "sleeping")
	for i := range pods {
		env.Exit(t, &pods[i], 0)
	}
	waitCondition(t, job, kubeflowv1.JobSucceeded, "every sleeper woke")
}

// waitCondition waits until the job's condition ct is True with the framework's message.
func waitCondition(t *testing.T, job *SleepJob, ct kubeflowv1.JobConditionType, message string) {
	t.Helper()
	testenv.Eventually(t, func() error {
		got := fetch(job)
		if cond := testenv.Condition(got, ct); cond.Status != corev1.ConditionTrue || cond.Message != message {
			return fmt.Errorf("%s condition %+v, want True saying %q", ct, cond, message)
		}
		return nil
	})
}

// fetch is job as the apiserver has it now (a copy, so job keeps its spec).
func fetch(job *SleepJob) *SleepJob {
	got := &SleepJob{}
	_ = c.Get(context.Background(), client.ObjectKeyFromObject(job), got)
	return got
}
