package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	"github.com/kiln-ml/kiln/internal/controller/inferenceservice"
	"github.com/kiln-ml/kiln/internal/controller/pyjob"
	"github.com/kiln-ml/kiln/internal/controller/trainjob"
	"github.com/kiln-ml/kiln/internal/framework/jax"
	"github.com/kiln-ml/kiln/internal/framework/paddle"
	"github.com/kiln-ml/kiln/internal/framework/pytorch"
	"github.com/kiln-ml/kiln/internal/framework/tensorflow"
	"github.com/kiln-ml/kiln/internal/framework/xgboost"
	"github.com/kiln-ml/kiln/internal/kserve"
)

func obj(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func kindOf(t *testing.T, name, group string) kind {
	t.Helper()
	for _, k := range kinds {
		if k.name == name && k.gvr.Group == group {
			return k
		}
	}
	t.Fatalf("no kind %s.%s", name, group)
	return kind{}
}

func TestSummaries(t *testing.T) {
	tfjob, pyJobKind, trainJob := kindOf(t, "TFJob", "kubeflow.org"), kindOf(t, "PyJob", "training.kiln.dev"), kindOf(t, "TrainJob", "trainer.kubeflow.org")
	kserveISVC := kindOf(t, "InferenceService", "serving.kserve.io")
	tests := []struct {
		name string
		kind kind
		doc  string
		want summary
	}{
		{"new", tfjob, `{}`, summary{state: statePending}},
		{"waiting gang: the Created message says why", tfjob, `status: {conditions: [
			{type: Created, status: "True", message: "gang waits: 2 of 5 pods fit"}]}`,
			summary{state: "Created", why: "gang waits: 2 of 5 pods fit"}},
		{"running", tfjob, `status: {conditions: [{type: Created, status: "True", message: m}, {type: Running, status: "True"}]}`,
			summary{state: "Running"}},
		{"succeeded after running", tfjob, `status: {conditions: [{type: Created, status: "True"}, {type: Running, status: "False"}, {type: Succeeded, status: "True", message: done}]}`,
			summary{state: "Succeeded", ended: true}},
		{"failed says why", tfjob, `status: {conditions: [{type: Created, status: "True"}, {type: Failed, status: "True", message: "worker 1 exited 1"}]}`,
			summary{state: "Failed", why: "worker 1 exited 1", ended: true, failed: true}},
		{"pyjob pending says why", pyJobKind, `status: {phase: Pending, message: "image pull failed"}`,
			summary{state: "Pending", why: "image pull failed"}},
		{"pyjob running", pyJobKind, `status: {phase: Running, message: "2 of 2 running"}`, summary{state: "Running"}},
		{"pyjob failed", pyJobKind, `status: {phase: Failed, message: "worker 0 exited 2"}`,
			summary{state: "Failed", why: "worker 0 exited 2", ended: true, failed: true}},
		{"trainjob complete", trainJob, `status: {conditions: [{type: Complete, status: "True"}]}`, summary{state: "Complete", ended: true}},
		{"trainjob new", trainJob, `{}`, summary{state: statePending}},
		{"trainjob without its runtime says why", trainJob, `status: {conditions: [
			{type: Created, status: "False", message: "ClusterTrainingRuntime torch-distributed does not exist"}]}`,
			summary{state: statePending, why: "ClusterTrainingRuntime torch-distributed does not exist"}},
		{"trainjob waiting gang says why", trainJob, `status: {conditions: [{type: Running, status: "False", message: "gang waits"}],
			jobsStatus: [{name: node, active: 1, ready: 0, succeeded: 0}]}`, summary{state: "Created", why: "gang waits"}},
		{"trainjob starting", trainJob, `status: {jobsStatus: [{name: node, active: 1, ready: 0, succeeded: 0}]}`, summary{state: "Created"}},
		{"trainjob running, resumed", trainJob, `status: {conditions: [{type: Suspended, status: "False"}],
			jobsStatus: [{name: initializer, active: 0, ready: 0, succeeded: 1}, {name: node, active: 1, ready: 1, succeeded: 0}]}`, summary{state: "Running"}},
		{"isvc not ready", kserveISVC, `status: {conditions: [{type: Ready, status: "False", message: "no runtime serves caffe"}]}`,
			summary{state: stateNotReady, why: "no runtime serves caffe"}},
		{"isvc ready", kserveISVC, `status: {conditions: [{type: Ready, status: "True"}]}`, summary{state: stateReady}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, tt.kind.summarize(obj(t, tt.doc)), cmp.AllowUnexported(summary{})); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestDesiredReplicas(t *testing.T) {
	tests := []struct {
		kind kind
		doc  string
		want int64
	}{
		{kindOf(t, "TFJob", "kubeflow.org"), `spec: {tfReplicaSpecs: {PS: {replicas: 1}, Worker: {replicas: 4}, Chief: {}}}`, 6},
		{kindOf(t, "PyJob", "training.kiln.dev"), `spec: {workers: 3}`, 3},
		{kindOf(t, "PyJob", "training.kiln.dev"), `spec: {}`, 1},
		{kindOf(t, "TrainJob", "trainer.kubeflow.org"), `spec: {trainer: {numNodes: 2}}`, 2},
		{kindOf(t, "TrainJob", "trainer.kubeflow.org"), `spec: {runtimeRef: {name: torch-distributed}}`, 0},
	}
	for _, tt := range tests {
		if got := tt.kind.desired(obj(t, tt.doc)); got != tt.want {
			t.Errorf("%s %s: %d replicas, want %d", tt.kind.name, tt.doc, got, tt.want)
		}
	}
}

func TestReplicaNames(t *testing.T) {
	pod := func(labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-abc", Labels: labels}}
	}
	tests := []struct {
		kind kind
		pod  *corev1.Pod
		want string
	}{
		{kindOf(t, "PyTorchJob", "kubeflow.org"), pod(map[string]string{"training.kubeflow.org/replica-type": "Worker", "training.kubeflow.org/replica-index": "1"}), "worker-1"},
		{kindOf(t, "TrainJob", "trainer.kubeflow.org"), pod(map[string]string{"jobset.sigs.k8s.io/replicatedjob-name": "node", "batch.kubernetes.io/job-completion-index": "0"}), "node-0"},
		{kindOf(t, "PyJob", "training.kiln.dev"), pod(map[string]string{"batch.kubernetes.io/job-completion-index": "2"}), "worker-2"},
		{kindOf(t, "PyJob", "training.kiln.dev"), pod(nil), "worker-0"},
		{kindOf(t, "InferenceService", "serving.kserve.io"), pod(nil), "p-abc"},
	}
	for _, tt := range tests {
		if got := tt.kind.replicaName(tt.pod); got != tt.want {
			t.Errorf("%s pod %v: %q, want %q", tt.kind.name, tt.pod.Labels, got, tt.want)
		}
	}
	o := logOptions{replica: "worker"}
	if !o.wanted("worker-1") || o.wanted("ps-0") || !(logOptions{replica: "worker-1"}).wanted("worker-1") || (logOptions{replica: "worker-1"}).wanted("worker-10") {
		t.Error("--replica worker selects every worker, --replica worker-1 that one alone")
	}
}

// The containers logs reads are the ones kiln's builders name.
func TestServerContainersAreKilns(t *testing.T) {
	names := []string{tensorflow.ContainerName, pytorch.ContainerName, xgboost.ContainerName, jax.ContainerName, paddle.ContainerName,
		pyjob.ContainerName, trainjob.ContainerNode, kserve.ContainerName}
	isvc := &servingv1alpha1.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: "iris", Namespace: "a"},
		Spec: servingv1alpha1.InferenceServiceSpec{ModelURI: "pvc://models/iris", Framework: servingv1alpha1.FrameworkTriton}}
	for _, o := range inferenceservice.Children(isvc, inferenceservice.Options{}) {
		if d, ok := o.(*appsv1.Deployment); ok {
			names = append(names, d.Spec.Template.Spec.Containers[0].Name)
			break
		}
	}
	for _, n := range names {
		pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "istio-proxy"}, {Name: n}}}}
		if got := mainContainer(pod, ""); got != n {
			t.Errorf("a pod with a sidecar and %s: logs reads %s", n, got)
		}
	}
}

func TestReached(t *testing.T) {
	training, serving := kindOf(t, "PyTorchJob", "kubeflow.org"), kindOf(t, "InferenceService", "serving.kiln.dev")
	tests := []struct {
		name    string
		kind    kind
		sum     summary
		pr      progress
		until   string
		want    bool
		wantErr string
	}{
		{"running", training, summary{state: "Running"}, progress{}, "running", true, ""},
		{"not yet succeeded", training, summary{state: "Running"}, progress{}, "succeeded", false, ""},
		{"succeeded counts as having run", training, summary{state: "Succeeded", ended: true}, progress{}, "running", true, ""},
		{"failed fails the wait", training, summary{state: "Failed", ended: true, failed: true, why: "worker-0 exited 1"}, progress{}, "succeeded", false, "failed: worker-0 exited 1"},
		{"ready: every replica", training, summary{state: "Running"}, progress{ready: 2, total: 3}, "ready", false, ""},
		{"ready", training, summary{state: "Running"}, progress{ready: 3, total: 3}, "ready", true, ""},
		{"isvc ready", serving, summary{state: stateReady}, progress{}, "ready", true, ""},
		{"isvc never succeeds", serving, summary{state: stateReady}, progress{}, "succeeded", false, "wait --for=ready"},
	}
	for _, tt := range tests {
		got, err := reached(tt.kind, tt.sum, tt.pr, tt.until)
		if got != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: %t, %v; want %t, %q", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestSuspendPatches(t *testing.T) {
	tests := []struct {
		kind    kind
		suspend bool
		want    string
	}{
		{kindOf(t, "TFJob", "kubeflow.org"), true, `{"spec":{"runPolicy":{"suspend":true}}}`},
		{kindOf(t, "PyJob", "training.kiln.dev"), false, `{"spec":{"suspend":false}}`},
		{kindOf(t, "TrainJob", "trainer.kubeflow.org"), true, `{"spec":{"suspend":true}}`},
		{kindOf(t, "InferenceService", "serving.kserve.io"), true, `{"metadata":{"annotations":{"serving.kserve.io/stop":"true"}}}`},
		{kindOf(t, "InferenceService", "serving.kserve.io"), false, `{"metadata":{"annotations":{"serving.kserve.io/stop":null}}}`},
	}
	for _, tt := range tests {
		got, err := suspendPatch(tt.kind, tt.suspend)
		if err != nil || string(got) != tt.want {
			t.Errorf("%s suspend=%t: %s, %v; want %s", tt.kind.name, tt.suspend, got, err, tt.want)
		}
	}
	if _, err := suspendPatch(kindOf(t, "InferenceService", "serving.kiln.dev"), true); err == nil {
		t.Error("kiln's InferenceService has no suspend: want an error saying what to do instead")
	}
}

func TestRunBuildsThePyJob(t *testing.T) {
	o := runOptions{image: "python:3.12", gpus: 1, workers: 2, backoffLimit: -1, dataset: "imagenet:/data", output: "20Gi", env: []string{"LR=0.1"},
		labels: []string{"kueue.x-k8s.io/queue-name=team-a"}, annotations: []string{"kiln.dev/simulate-duration=3s"}}
	got, err := pyJobFor("scripts/Train_MNIST.py", "print(1)\n", []string{"--epochs", "3"}, "team-a", o)
	if err != nil {
		t.Fatal(err)
	}
	want := obj(t, `
apiVersion: training.kiln.dev/v1beta1
kind: PyJob
metadata: {generateName: train-mnist-, namespace: team-a, labels: {kueue.x-k8s.io/queue-name: team-a},
  annotations: {kiln.dev/simulate-duration: 3s}}
spec:
  image: python:3.12
  script: "print(1)\n"
  args: ["--epochs", "3"]
  workers: 2
  gpus: {count: 1}
  dataset: {claimName: imagenet, path: /data}
  output: {size: 20Gi, path: /mnt/output}
  env: [{name: LR, value: "0.1"}]
`)
	b, err := yaml.Marshal(got.Object)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.Object, obj(t, string(b)).Object); diff != "" {
		t.Errorf("PyJob (-want +got):\n%s", diff)
	}
	for _, bad := range []runOptions{{dataset: "imagenet"}, {dataset: "imagenet:data"}, {output: "lots"}, {env: []string{"LR"}}, {labels: []string{"=x"}}} {
		if _, err := pyJobFor("t.py", "", nil, "a", bad); err == nil {
			t.Errorf("%+v: want an error naming the flag", bad)
		}
	}
	for path, want := range map[string]string{"train.py": "train", "2nd_try.py": "run-2nd-try", "__.py": "run"} {
		if got := nameFrom(path); got != want {
			t.Errorf("nameFrom(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestDescribeSaysWhyItWaits(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	j := job{kind: kindOf(t, "PyTorchJob", "kubeflow.org"), obj: obj(t, `
metadata: {name: mnist, namespace: a, creationTimestamp: "2026-12-03T11:58:00Z"}
spec: {pytorchReplicaSpecs: {Master: {replicas: 1}, Worker: {replicas: 2}}}
status: {conditions: [{type: Created, status: "True", reason: PyTorchJobCreated, lastTransitionTime: "2026-12-03T11:58:00Z",
  message: "the gang waits: 1 of 3 pods fit"}]}`)}
	pull := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "mnist-worker-0", Labels: map[string]string{
		"training.kubeflow.org/replica-type": "Worker", "training.kubeflow.org/replica-index": "0"}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "pytorch",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "no such image"}}}}}}
	restarted := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "mnist-master-0", Labels: map[string]string{
		"training.kubeflow.org/replica-type": "Master", "training.kubeflow.org/replica-index": "0"}},
		Spec: corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "pytorch", RestartCount: 2,
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}}}
	events := []corev1.Event{{Type: "Normal", Reason: "SuccessfulCreatePod", Message: "Created pod: mnist-master-0", LastTimestamp: metav1.NewTime(now.Add(-time.Minute))}}
	var out bytes.Buffer
	if err := describe(&out, j, []corev1.Pod{restarted, pull}, events, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"State:      Created", "Replicas:   3", "Why it waits:", "the gang waits: 1 of 3 pods fit", "ImagePullBackOff",
		"master-0  mnist-master-0", "exit 137 (OOMKilled)", "worker-0  mnist-worker-0  ImagePullBackOff",
		"SuccessfulCreatePod", "Created pod: mnist-master-0",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("describe lacks %q:\n%s", want, out.String())
		}
	}
}

func TestKindsNamed(t *testing.T) {
	for typed, want := range map[string]int{"all": len(kinds), "pytorchjobs": 1, "PyTorchJob": 1, "isvc": 2, "kserve-isvc": 1,
		"inferenceservices.serving.kserve.io": 1, "pyjob": 1} {
		got, err := kindsNamed(typed)
		if err != nil || len(got) != want {
			t.Errorf("kindsNamed(%q): %d kinds, %v; want %d", typed, len(got), err, want)
		}
	}
	if _, err := kindsNamed("pods"); err == nil || !strings.Contains(err.Error(), "pytorchjob") {
		t.Errorf("an unknown kind: %v, want an error listing kiln's kinds", err)
	}
}

// A line longer than lineLimit is cut, and the lines after it are read.
func TestLongLinesAreCut(t *testing.T) {
	var out, errs bytes.Buffer
	p := &prefixed{w: &out, errs: &errs}
	long := strings.Repeat("x", 3*lineLimit)
	if err := p.copy("worker-0", strings.NewReader("first\n"+long+"\r\nnext\nlast")); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 4 || lines[0] != "[worker-0] first" || !strings.HasSuffix(lines[1], "[cut: the line is longer than 64 KiB]") ||
		len(lines[1]) > lineLimit+100 || lines[2] != "[worker-0] next" || lines[3] != "[worker-0] last" {
		t.Errorf("%d lines, the second %d bytes: %q ... want first, the long one cut, next, last", len(lines), len(lines[1]), lines[0])
	}
}

// Kubeflow's kinds share the job-name label; their operator-name tells them apart.
func TestPodSelectors(t *testing.T) {
	for _, tt := range []struct {
		kind       kind
		name, want string
	}{
		{kindOf(t, "TFJob", "kubeflow.org"), "mnist", "training.kubeflow.org/job-name=mnist,training.kubeflow.org/operator-name=tfjob-controller"},
		{kindOf(t, "PyTorchJob", "kubeflow.org"), "", "training.kubeflow.org/job-name,training.kubeflow.org/operator-name=pytorchjob-controller"},
		{kindOf(t, "PyJob", "training.kiln.dev"), "bert", "training.kiln.dev/pyjob-name=bert"},
	} {
		if got := tt.kind.podSelector(tt.name); got != tt.want {
			t.Errorf("%s %q: %q, want %q", tt.kind.name, tt.name, got, tt.want)
		}
	}
}
