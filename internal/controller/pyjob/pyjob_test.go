package pyjob

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
)

func pyJob(workers, gpu int32) *trainingv1alpha1.PyJob {
	return &trainingv1alpha1.PyJob{
		ObjectMeta: metav1.ObjectMeta{Name: "bert", Namespace: "ml", UID: "uid", Annotations: map[string]string{
			"kiln.dev/simulate-duration": "1s", "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
		Spec: trainingv1alpha1.PyJobSpec{Image: "img", Command: []string{"python", "train.py"}, GPU: gpu, Workers: workers,
			DatasetPath: "/mnt/dataset", OutputPath: "/mnt/output",
			Dataset: &trainingv1alpha1.DatasetStorage{ClaimName: "data"},
			Output:  &trainingv1alpha1.OutputStorage{Size: ptr.To(resource.MustParse("10Gi")), ReclaimPolicy: trainingv1alpha1.OutputRetain}},
	}
}

// Every worker gets a memory-backed /dev/shm: spec.shmSize, else half its memory, else 1Gi; 0
// leaves the container runtime's.
func TestSharedMemory(t *testing.T) {
	shm := func(edit func(*trainingv1alpha1.PyJobSpec)) string {
		job := pyJob(2, 1)
		edit(&job.Spec)
		pod := desiredJob(job).Spec.Template.Spec
		var size string
		for _, v := range pod.Volumes {
			if v.Name == shmVolume {
				if v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory {
					t.Errorf("/dev/shm volume %+v: want a memory-backed emptyDir", v)
				}
				size = v.EmptyDir.SizeLimit.String()
			}
		}
		mounted := false
		for _, m := range pod.Containers[0].VolumeMounts {
			mounted = mounted || (m.Name == shmVolume && m.MountPath == "/dev/shm")
		}
		if mounted != (size != "") {
			t.Errorf("volume of size %q, mounted at /dev/shm: %v", size, mounted)
		}
		return size
	}
	for _, c := range []struct {
		name string
		edit func(*trainingv1alpha1.PyJobSpec)
		want string
	}{
		{"default", func(*trainingv1alpha1.PyJobSpec) {}, "1Gi"},
		{"half the memory", func(s *trainingv1alpha1.PyJobSpec) { s.Resources.Memory = ptr.To(resource.MustParse("32Gi")) }, "16Gi"},
		{"given", func(s *trainingv1alpha1.PyJobSpec) { s.ShmSize = ptr.To(resource.MustParse("8Gi")) }, "8Gi"},
		{"off", func(s *trainingv1alpha1.PyJobSpec) { s.ShmSize = ptr.To(resource.MustParse("0")) }, ""},
	} {
		if got := shm(c.edit); got != c.want {
			t.Errorf("%s: /dev/shm of %q, want %q", c.name, got, c.want)
		}
	}
}

// The claim kiln creates is ReadWriteMany when several workers (on several nodes) mount it.
func TestOutputClaimAccessMode(t *testing.T) {
	for _, c := range []struct {
		workers int32
		mode    corev1.PersistentVolumeAccessMode
		want    corev1.PersistentVolumeAccessMode
	}{
		{1, "", corev1.ReadWriteOnce},
		{4, "", corev1.ReadWriteMany},
		{1, corev1.ReadWriteOncePod, corev1.ReadWriteOncePod},
		{4, corev1.ReadWriteMany, corev1.ReadWriteMany},
	} {
		job := pyJob(c.workers, 0)
		job.Spec.Output.AccessMode = c.mode
		if got := desiredClaim(job).Spec.AccessModes; len(got) != 1 || got[0] != c.want {
			t.Errorf("%d workers, accessMode %q: claim modes %v, want %s", c.workers, c.mode, got, c.want)
		}
	}
}

// GPUs of another vendor or a MIG profile: the limit is that resource, and workers tolerate the
// NoSchedule taint GPU nodes carry under its name (unless they tolerate it already).
func TestGPUResourceAndPlacement(t *testing.T) {
	job := pyJob(1, 2)
	job.Spec.GPUResource = "amd.com/gpu"
	job.Spec.Tolerations = []corev1.Toleration{{Key: "team", Operator: corev1.TolerationOpEqual, Value: "vision", Effect: corev1.TaintEffectNoSchedule}}
	job.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpIn, Values: []string{"mi300x"}}}}}}}}
	job.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), FSGroup: ptr.To[int64](1000)}
	pod := desiredJob(job).Spec.Template.Spec
	if got := pod.Containers[0].Resources.Limits["amd.com/gpu"]; got.Value() != 2 || len(pod.Containers[0].Resources.Limits) != 1 {
		t.Errorf("limits %v: want 2 amd.com/gpu only", pod.Containers[0].Resources.Limits)
	}
	want := append(slices.Clone(job.Spec.Tolerations), corev1.Toleration{Key: "amd.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	if diff := cmp.Diff(want, pod.Tolerations); diff != "" {
		t.Errorf("tolerations (-want +got):\n%s", diff)
	}
	if pod.Affinity != job.Spec.Affinity || pod.SecurityContext != job.Spec.SecurityContext {
		t.Errorf("affinity %v and security context %v: want the PyJob's", pod.Affinity, pod.SecurityContext)
	}

	job.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} // tolerates every taint
	if got := desiredJob(job).Spec.Template.Spec.Tolerations; len(got) != 1 {
		t.Errorf("tolerations %v: the PyJob's tolerates the GPU taint already, want it alone", got)
	}
	cpu := pyJob(1, 0)
	if got := desiredJob(cpu).Spec.Template.Spec.Tolerations; len(got) != 0 {
		t.Errorf("a CPU run tolerates %v, want nothing", got)
	}
	if got := desiredJob(pyJob(1, 1)).Spec.Template.Spec.Containers[0].Resources.Limits; got.Name("nvidia.com/gpu", resource.DecimalSI).Value() != 1 {
		t.Errorf("default GPU limits %v: want 1 nvidia.com/gpu", got)
	}
}

// spec.script runs without an image build: a ConfigMap the PyJob owns, mounted read-only, run
// with python, or torchrun when several workers or GPUs share the run; a command still wins.
func TestInlineScript(t *testing.T) {
	job := pyJob(1, 1)
	job.Spec.Command, job.Spec.Script = nil, "print('hello')\n"
	cm := desiredScript(job)
	if cm.Name != "bert-script" || cm.Data[ScriptFile] != job.Spec.Script || !ptr.Deref(cm.Immutable, false) || !metav1.IsControlledBy(cm, job) {
		t.Errorf("ConfigMap %s (immutable %v, owners %v): want bert-script holding the script, immutable, owned", cm.Name, cm.Immutable, cm.OwnerReferences)
	}
	c := desiredJob(job).Spec.Template.Spec.Containers[0]
	if diff := cmp.Diff([]string{"python", "/opt/kiln/script/main.py"}, c.Command); diff != "" {
		t.Errorf("one worker, one GPU (-want +got):\n%s", diff)
	}
	var mounted bool
	for _, m := range c.VolumeMounts {
		mounted = mounted || (m.Name == scriptVolume && m.MountPath == ScriptDir && m.ReadOnly)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if !mounted || env["SCRIPT_PATH"] != "/opt/kiln/script/main.py" {
		t.Errorf("mounts %+v, SCRIPT_PATH %q: want the script read-only at %s", c.VolumeMounts, env["SCRIPT_PATH"], ScriptDir)
	}
	for _, j := range []*trainingv1alpha1.PyJob{pyJob(2, 1), pyJob(1, 4)} {
		j.Spec.Command, j.Spec.Script = nil, "x"
		if got := desiredJob(j).Spec.Template.Spec.Containers[0].Command; got[0] != "torchrun" {
			t.Errorf("%d workers of %d GPUs run %v, want torchrun", j.Spec.Workers, j.Spec.GPU, got)
		}
	}
	job.Spec.Command = []string{"python", "-u", "/opt/kiln/script/main.py", "--lr", "3e-4"}
	if got := desiredJob(job).Spec.Template.Spec.Containers[0].Command; len(got) != 5 {
		t.Errorf("a given command was replaced: %v", got)
	}
	if got := desiredJob(pyJob(1, 0)).Spec.Template.Spec.Containers[0].VolumeMounts; len(got) != 3 {
		t.Errorf("without a script the mounts are %+v: want dataset, output and /dev/shm", got)
	}
}

// A quota or an admission policy refusing the workers: the PyJob stays Pending, says why, and its
// PodsRefused condition is True; a run whose workers partly exist says it too.
func TestStatusOfRefusedWorkers(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC))
	quota := `pods "bert-0-x" is forbidden: exceeded quota: team-a, requested: nvidia.com/gpu=1, used: nvidia.com/gpu=8, limited: nvidia.com/gpu=8`
	st := status(pyJob(4, 1), observed{job: &batchv1.Job{}, refused: quota}, now)
	c := meta.FindStatusCondition(st.Conditions, ConditionPodsRefused)
	if st.Phase != trainingv1alpha1.PyJobPending || !strings.HasPrefix(st.Message, "the batch Job cannot create workers: "+quota+"; it retries") || c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("phase %s %q, PodsRefused %+v: want Pending, the quota named, the condition True", st.Phase, st.Message, c)
	}
	st = status(pyJob(4, 1), observed{job: &batchv1.Job{}, pods: []corev1.Pod{{Status: corev1.PodStatus{Phase: corev1.PodRunning}}}, refused: quota}, now)
	if st.Phase != trainingv1alpha1.PyJobRunning || !strings.Contains(st.Message, "1 of 4 workers running; the batch Job cannot create workers: pods") {
		t.Errorf("phase %s %q: want Running with the refusal named", st.Phase, st.Message)
	}
	st = status(pyJob(4, 1), observed{job: &batchv1.Job{}}, now)
	if meta.IsStatusConditionTrue(st.Conditions, ConditionPodsRefused) {
		t.Errorf("PodsRefused is True with nothing refused")
	}
}

func TestDesiredJob(t *testing.T) {
	j := desiredJob(pyJob(4, 2))
	if *j.Spec.Completions != 4 || *j.Spec.Parallelism != 4 || *j.Spec.CompletionMode != batchv1.IndexedCompletion || j.Spec.Template.Spec.Subdomain != "bert" {
		t.Errorf("job spec %+v: want 4 indexed completions with subdomain bert", j.Spec)
	}
	pod := j.Spec.Template
	if _, ok := pod.Annotations["kubectl.kubernetes.io/last-applied-configuration"]; ok || pod.Annotations["kiln.dev/simulate-duration"] != "1s" {
		t.Errorf("pod annotations %v: want the PyJob's, without kubectl's", pod.Annotations)
	}
	if pod.Labels[LabelPyJob] != "bert" || pod.Labels["pyjob-name"] != "bert" {
		t.Errorf("pod labels %v: want %s and pyjob-name (kubectl logs -l pyjob-name=bert) naming the PyJob", pod.Labels, LabelPyJob)
	}
	c := pod.Spec.Containers[0]
	if got := c.Resources.Limits["nvidia.com/gpu"]; got.Value() != 2 {
		t.Errorf("gpu limit %v, want 2", got.String())
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	if !mounts["/mnt/dataset"].ReadOnly || mounts["/mnt/output"].ReadOnly {
		t.Errorf("mounts %+v: want the dataset read-only, the output writable", mounts)
	}
	var claims []string
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims = append(claims, v.PersistentVolumeClaim.ClaimName)
		}
	}
	if diff := cmp.Diff([]string{"data", "bert-output"}, claims); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
	if len(desiredClaim(pyJob(1, 0)).OwnerReferences) != 0 {
		t.Error("a Retain claim must have no owner, so that it outlives the PyJob")
	}
}

func TestEnv(t *testing.T) {
	got := map[string]string{}
	for _, e := range Env(pyJob(4, 2)) {
		v := e.Value
		if e.ValueFrom != nil {
			v = "from:" + e.ValueFrom.FieldRef.FieldPath
		}
		got[e.Name] = v
	}
	index := "from:metadata.annotations['batch.kubernetes.io/job-completion-index']"
	want := map[string]string{"DATASET_PATH": "/mnt/dataset", "OUTPUT_PATH": "/mnt/output", "PYTHONUNBUFFERED": "1",
		"MASTER_ADDR": "bert-0.bert", "MASTER_PORT": "29500", "WORLD_SIZE": "4", "RANK": index, "NPROC_PER_NODE": "2",
		"PET_MASTER_ADDR": "bert-0.bert", "PET_MASTER_PORT": "29500", "PET_NNODES": "4", "PET_NODE_RANK": index, "PET_NPROC_PER_NODE": "2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
}

func TestStatus(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC))
	failedPod := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{completionIndexAnnotation: "1"}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: ContainerName,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}},
	}
	pending := corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/6 nodes are available: 6 Insufficient nvidia.com/gpu."}}}}
	pulling := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{completionIndexAnnotation: "2"}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: ContainerName,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "pytorch/pytorh:2.0"`}}}}}}
	running := corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	cond := func(t batchv1.JobConditionType, reason, msg string) *batchv1.Job {
		return &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg}}}}
	}
	tests := []struct {
		name    string
		bj      *batchv1.Job
		pods    []corev1.Pod
		phase   trainingv1alpha1.PyJobPhase
		message string
	}{
		{"no job yet", nil, nil, trainingv1alpha1.PyJobPending, "creating the batch Job"},
		{"unschedulable", &batchv1.Job{}, []corev1.Pod{pending}, trainingv1alpha1.PyJobPending, "Insufficient nvidia.com/gpu"},
		{"failed with an exit code", cond(batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit"), []corev1.Pod{failedPod},
			trainingv1alpha1.PyJobFailed, "worker 1 exited with code 137 (OOMKilled); BackoffLimitExceeded"},
		{"image pull back-off", &batchv1.Job{}, []corev1.Pod{pulling}, trainingv1alpha1.PyJobPending,
			`worker 2 cannot start: container trainer is ImagePullBackOff: Back-off pulling image "pytorch/pytorh:2.0"; check the image name`},
		{"one running, one blocked", &batchv1.Job{}, []corev1.Pod{running, pulling}, trainingv1alpha1.PyJobRunning, "1 of 4 workers running; worker 2 cannot start"},
		{"complete", cond(batchv1.JobComplete, "CompletionsReached", ""), nil, trainingv1alpha1.PyJobSucceeded, "all 4 workers completed"},
		{"suspended", &batchv1.Job{Spec: batchv1.JobSpec{Suspend: ptr.To(true)}}, nil, trainingv1alpha1.PyJobSuspended, "set spec.suspend to false"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := status(pyJob(4, 1), observed{job: tc.bj, pods: tc.pods}, now)
			if st.Phase != tc.phase || !strings.Contains(st.Message, tc.message) {
				t.Errorf("phase %s message %q, want %s containing %q", st.Phase, st.Message, tc.phase, tc.message)
			}
			trues := 0
			for _, c := range st.Conditions {
				if c.Status == metav1.ConditionTrue {
					trues++
				}
			}
			if want := map[bool]int{true: 0, false: 1}[tc.phase == trainingv1alpha1.PyJobPending]; trues != want {
				t.Errorf("%d True conditions, want %d: %+v", trues, want, st.Conditions)
			}
		})
	}
}

// The CRD's bound on spec.workers is MaxWorkers, which the reconciler holds to PyJobs stored
// before it.
func TestWorkersBoundIsTheCRDs(t *testing.T) {
	b, err := os.ReadFile("../../../config/crd/bases/training.kiln.dev_pyjobs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	workers := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["workers"]
	if workers.Maximum == nil || *workers.Maximum != MaxWorkers {
		t.Errorf("the CRD bounds spec.workers at %v, the reconciler at %d", workers.Maximum, MaxWorkers)
	}
}
