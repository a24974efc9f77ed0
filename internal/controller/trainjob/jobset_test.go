package trainjob

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
	"github.com/kiln-ml/kiln/internal/gang"
)

// runtimeOf is a runtime of one trainer step "node" under policy, its container requesting r.
func runtimeOf(policy trainerv1alpha1.MLPolicySource, r corev1.ResourceList) *trainerv1alpha1.TrainingRuntimeSpec {
	rt := &trainerv1alpha1.TrainingRuntimeSpec{MLPolicy: &trainerv1alpha1.MLPolicy{MLPolicySource: policy}}
	rj := jobsetv1alpha2.ReplicatedJob{Name: "node"}
	rj.Template.Labels = map[string]string{LabelAncestorStep: StepTrainer}
	rj.Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: "node", Image: "runtime:1",
		Resources: corev1.ResourceRequirements{Requests: r}}}
	rj.Template.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "runtime", Operator: corev1.TolerationOpExists}}
	rt.Template.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{rj}
	return rt
}

func trainJobOf(nodes int32, edit func(*trainerv1alpha1.TrainJob)) *trainerv1alpha1.TrainJob {
	j := &trainerv1alpha1.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: "team"},
		Spec: trainerv1alpha1.TrainJobSpec{Trainer: &trainerv1alpha1.Trainer{NumNodes: ptr.To(nodes)}}}
	if edit != nil {
		edit(j)
	}
	return j
}

func nodeEnv(t *testing.T, js *jobsetv1alpha2.JobSet) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom != nil {
			out[e.Name] = e.ValueFrom.FieldRef.FieldPath
			continue
		}
		out[e.Name] = e.Value
	}
	return out
}

func TestFrameworkVariables(t *testing.T) {
	cpu := func(n string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(n)}
	}
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}
	index := "metadata.annotations['batch.kubernetes.io/job-completion-index']"
	for _, c := range []struct {
		name   string
		policy trainerv1alpha1.MLPolicySource
		r      corev1.ResourceList
		edit   func(*trainerv1alpha1.TrainJob)
		want   map[string]string
	}{
		{"torch on CPUs: a process per CPU", trainerv1alpha1.MLPolicySource{Torch: &trainerv1alpha1.TorchMLPolicySource{}}, cpu("3"), nil, map[string]string{
			"PET_NNODES": "2", "PET_NPROC_PER_NODE": "3", "PET_NODE_RANK": index, "PET_MASTER_ADDR": "mnist-node-0-0.mnist", "PET_MASTER_PORT": "29500"}},
		{"torch on GPUs: auto", trainerv1alpha1.MLPolicySource{Torch: &trainerv1alpha1.TorchMLPolicySource{}}, gpu, nil, map[string]string{
			"PET_NNODES": "2", "PET_NPROC_PER_NODE": "auto", "PET_NODE_RANK": index, "PET_MASTER_ADDR": "mnist-node-0-0.mnist", "PET_MASTER_PORT": "29500"}},
		{"torch: numProcPerNode wins", trainerv1alpha1.MLPolicySource{Torch: &trainerv1alpha1.TorchMLPolicySource{}}, gpu, func(j *trainerv1alpha1.TrainJob) {
			j.Spec.Trainer.NumProcPerNode = ptr.To[int32](2)
		}, map[string]string{"PET_NNODES": "2", "PET_NPROC_PER_NODE": "2", "PET_NODE_RANK": index, "PET_MASTER_ADDR": "mnist-node-0-0.mnist", "PET_MASTER_PORT": "29500"}},
		{"torch on fractional CPUs: at least one", trainerv1alpha1.MLPolicySource{Torch: &trainerv1alpha1.TorchMLPolicySource{}}, cpu("500m"), nil, map[string]string{
			"PET_NNODES": "2", "PET_NPROC_PER_NODE": "1", "PET_NODE_RANK": index, "PET_MASTER_ADDR": "mnist-node-0-0.mnist", "PET_MASTER_PORT": "29500"}},
		{"torch: the TrainJob's resourcesPerNode alone count, not merged with the runtime's (as Trainer counts)", trainerv1alpha1.MLPolicySource{Torch: &trainerv1alpha1.TorchMLPolicySource{}}, gpu, func(j *trainerv1alpha1.TrainJob) {
			j.Spec.Trainer.ResourcesPerNode = &corev1.ResourceRequirements{Requests: cpu("6")}
		}, map[string]string{"PET_NNODES": "2", "PET_NPROC_PER_NODE": "6", "PET_NODE_RANK": index, "PET_MASTER_ADDR": "mnist-node-0-0.mnist", "PET_MASTER_PORT": "29500"}},
		{"xgboost: the TrainJob's resourcesPerNode alone count", trainerv1alpha1.MLPolicySource{XGBoost: &trainerv1alpha1.XGBoostMLPolicySource{}}, gpu, func(j *trainerv1alpha1.TrainJob) {
			j.Spec.Trainer.ResourcesPerNode = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Gi")}}
		}, map[string]string{"DMLC_TRACKER_URI": "mnist-node-0-0.mnist", "DMLC_TRACKER_PORT": "29500", "DMLC_TASK_ID": index, "DMLC_NUM_WORKER": "2"}},
		{"jax", trainerv1alpha1.MLPolicySource{JAX: &trainerv1alpha1.JAXMLPolicySource{}}, nil, nil, map[string]string{
			"JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": index, "JAX_COORDINATOR_ADDRESS": "mnist-node-0-0.mnist:29500"}},
		{"xgboost: a worker per GPU", trainerv1alpha1.MLPolicySource{XGBoost: &trainerv1alpha1.XGBoostMLPolicySource{}}, gpu, nil, map[string]string{
			"DMLC_TRACKER_URI": "mnist-node-0-0.mnist", "DMLC_TRACKER_PORT": "29500", "DMLC_TASK_ID": index, "DMLC_NUM_WORKER": "8"}},
		{"xgboost on CPUs: a worker per node", trainerv1alpha1.MLPolicySource{XGBoost: &trainerv1alpha1.XGBoostMLPolicySource{}}, cpu("8"), nil, map[string]string{
			"DMLC_TRACKER_URI": "mnist-node-0-0.mnist", "DMLC_TRACKER_PORT": "29500", "DMLC_TASK_ID": index, "DMLC_NUM_WORKER": "2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			js, p := DesiredJobSet(trainJobOf(2, c.edit), runtimeOf(c.policy, c.r))
			if p.Reason != "" {
				t.Fatal(p.Message)
			}
			if diff := cmp.Diff(c.want, nodeEnv(t, js)); diff != "" {
				t.Errorf("node env (-want +got):\n%s", diff)
			}
			if n := js.Spec.ReplicatedJobs[0].Template.Spec.Parallelism; *n != 2 {
				t.Errorf("parallelism %d, want 2", *n)
			}
		})
	}
}

// Patches apply in order, as strategic merge patches: a later one wins, lists merge by name,
// tolerations replace the runtime's, and what the framework sets stays.
func TestRuntimePatchesMergeInOrder(t *testing.T) {
	patch := func(manager string, pod trainerv1alpha1.PodSpecPatch, labels map[string]string) trainerv1alpha1.RuntimePatch {
		return trainerv1alpha1.RuntimePatch{Manager: manager, TrainingRuntimeSpec: &trainerv1alpha1.TrainingRuntimeSpecPatch{Template: &trainerv1alpha1.JobSetTemplatePatch{
			Metadata: &metav1.ObjectMeta{Labels: labels},
			Spec: &trainerv1alpha1.JobSetSpecPatch{ReplicatedJobs: []trainerv1alpha1.ReplicatedJobPatch{{Name: "node",
				Template: &trainerv1alpha1.JobTemplatePatch{Spec: &trainerv1alpha1.JobSpecPatch{Template: &trainerv1alpha1.PodTemplatePatch{Spec: &pod}}}}}}}}}
	}
	job := trainJobOf(1, func(j *trainerv1alpha1.TrainJob) {
		j.Spec.RuntimePatches = []trainerv1alpha1.RuntimePatch{
			patch("a.io/one", trainerv1alpha1.PodSpecPatch{NodeSelector: map[string]string{"pool": "a", "zone": "1"},
				Tolerations: []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}}, map[string]string{"team": "a"}),
			patch("b.io/two", trainerv1alpha1.PodSpecPatch{NodeSelector: map[string]string{"pool": "b"}}, map[string]string{"team": "b"}),
		}
	})
	js, p := DesiredJobSet(job, runtimeOf(trainerv1alpha1.MLPolicySource{Torch: &trainerv1alpha1.TorchMLPolicySource{}}, nil))
	if p.Reason != "" {
		t.Fatal(p.Message)
	}
	pod := js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
	if diff := cmp.Diff(map[string]string{"pool": "b", "zone": "1"}, pod.NodeSelector); diff != "" {
		t.Errorf("nodeSelector (-want +got):\n%s", diff)
	}
	if len(pod.Tolerations) != 1 || pod.Tolerations[0].Key != "gpu" {
		t.Errorf("tolerations %v, want the patch's alone", pod.Tolerations)
	}
	if js.Labels["team"] != "b" || nodeEnv(t, js)["PET_NNODES"] != "1" || pod.Containers[0].Image != "runtime:1" {
		t.Errorf("labels %v, env %v, image %s", js.Labels, nodeEnv(t, js), pod.Containers[0].Image)
	}
	again, _ := DesiredJobSet(job, runtimeOf(trainerv1alpha1.MLPolicySource{Torch: &trainerv1alpha1.TorchMLPolicySource{}}, nil))
	if again.Annotations[AnnotationSpecHash] != js.Annotations[AnnotationSpecHash] {
		t.Error("the same TrainJob builds JobSets of different hashes")
	}
	job.Spec.RuntimePatches[1].TrainingRuntimeSpec.Template.Spec.ReplicatedJobs[0].Name = "workers"
	if _, p := DesiredJobSet(job, runtimeOf(trainerv1alpha1.MLPolicySource{Torch: &trainerv1alpha1.TorchMLPolicySource{}}, nil)); p.Reason != ReasonInvalid ||
		!strings.HasPrefix(p.Message, "spec.runtimePatches[1].trainingRuntimeSpec.template.spec.replicatedJobs[0].name") {
		t.Errorf("a patch of a replicated job the runtime lacks: %+v", p)
	}
}

// The runtime a reconcile reads is the cache's own: building the JobSet (every framework, with
// patches and initializers) and its gang group leaves it as it was.
func TestBuildingLeavesTheRuntimeAsItIs(t *testing.T) {
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}
	for _, policy := range []trainerv1alpha1.MLPolicySource{
		{Torch: &trainerv1alpha1.TorchMLPolicySource{}}, {JAX: &trainerv1alpha1.JAXMLPolicySource{}},
		{XGBoost: &trainerv1alpha1.XGBoostMLPolicySource{}}, {MPI: &trainerv1alpha1.MPIMLPolicySource{NumProcPerNode: ptr.To[int32](2)}},
	} {
		rt := runtimeOf(policy, gpu)
		rt.Template.Labels, rt.Template.Annotations = map[string]string{"team": "runtime"}, map[string]string{"note": "runtime"}
		rt.PodGroupPolicy = &trainerv1alpha1.PodGroupPolicy{PodGroupPolicySource: trainerv1alpha1.PodGroupPolicySource{
			Coscheduling: &trainerv1alpha1.CoschedulingPodGroupPolicySource{ScheduleTimeoutSeconds: ptr.To[int32](60)}}}
		before := rt.DeepCopy()
		job := trainJobOf(3, func(j *trainerv1alpha1.TrainJob) {
			j.Spec.Trainer.Env = []corev1.EnvVar{{Name: "EPOCHS", Value: "3"}}
			j.Spec.Trainer.Args = []string{"--lr=0.1"}
			j.Spec.RuntimePatches = []trainerv1alpha1.RuntimePatch{{Manager: "a.io/one", TrainingRuntimeSpec: &trainerv1alpha1.TrainingRuntimeSpecPatch{
				Template: &trainerv1alpha1.JobSetTemplatePatch{Metadata: &metav1.ObjectMeta{Labels: map[string]string{"patched": "yes"}},
					Spec: &trainerv1alpha1.JobSetSpecPatch{ReplicatedJobs: []trainerv1alpha1.ReplicatedJobPatch{{Name: "node",
						Template: &trainerv1alpha1.JobTemplatePatch{Spec: &trainerv1alpha1.JobSpecPatch{Template: &trainerv1alpha1.PodTemplatePatch{
							Spec: &trainerv1alpha1.PodSpecPatch{NodeSelector: map[string]string{"pool": "gpu"}}}}}}}}}}}}
		})
		js, p := DesiredJobSet(job, rt)
		if p.Reason != "" {
			t.Fatalf("%+v: %s", policy, p.Message)
		}
		groupOf(gang.Volcano{}, job, rt, js)
		ReservedEnv(rt)
		if diff := cmp.Diff(before, rt); diff != "" {
			t.Errorf("%+v: building changed the runtime (-before +after):\n%s", policy, diff)
		}
	}
}

// A patch merges into each replicated job as a strategic merge patch of the whole JobSet spec
// does (what kiln did until it merged part by part): metadata alone, metadata beyond labels and
// annotations, pod specs with lists merged by name and lists replaced, on a runtime of two
// replicated jobs, one of them untouched.
func TestPatchesMergeAsAWholeSpecMergeWould(t *testing.T) {
	rt := runtimeOf(trainerv1alpha1.MLPolicySource{Torch: &trainerv1alpha1.TorchMLPolicySource{}}, nil)
	node := &rt.Template.Spec.ReplicatedJobs[0]
	node.Template.Annotations = map[string]string{"runtime": "job"}
	pod := podTemplate(node)
	pod.Labels = map[string]string{"runtime": "pod", "kept": "yes"}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "runtime"}, {Name: "B", Value: "runtime"}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), FSGroup: ptr.To[int64](2000)}
	initializer := jobsetv1alpha2.ReplicatedJob{Name: "dataset-initializer"}
	initializer.Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: "dataset-initializer", Image: "init:1"}}
	rt.Template.Spec.ReplicatedJobs = append([]jobsetv1alpha2.ReplicatedJob{initializer}, *node)

	for name, rp := range map[string]trainerv1alpha1.ReplicatedJobPatch{
		"labels and annotations": {Name: "node", Template: &trainerv1alpha1.JobTemplatePatch{
			Metadata: &metav1.ObjectMeta{Labels: map[string]string{"queue": "a"}, Annotations: map[string]string{"runtime": "patched"}},
			Spec: &trainerv1alpha1.JobSpecPatch{Template: &trainerv1alpha1.PodTemplatePatch{
				Metadata: &metav1.ObjectMeta{Labels: map[string]string{"runtime": "patched"}, Annotations: map[string]string{"new": ""}}}}}},
		"metadata beyond labels": {Name: "node", Template: &trainerv1alpha1.JobTemplatePatch{
			Metadata: &metav1.ObjectMeta{Finalizers: []string{"a.io/keep"}, Labels: map[string]string{"queue": "a"}}}},
		"a pod spec": {Name: "node", Template: &trainerv1alpha1.JobTemplatePatch{Spec: &trainerv1alpha1.JobSpecPatch{Template: &trainerv1alpha1.PodTemplatePatch{
			Spec: &trainerv1alpha1.PodSpecPatch{
				ServiceAccountName: ptr.To("trainer"),
				Volumes:            []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				Containers: []trainerv1alpha1.ContainerPatch{{Name: "node", Env: []corev1.EnvVar{{Name: "B", Value: "patched"}, {Name: "C", Value: "patched"}},
					VolumeMounts: []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}}}},
				SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)},
				NodeSelector:    map[string]string{"pool": "gpu"},
				Tolerations:     []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}},
			}}}}},
		"nothing": {Name: "dataset-initializer"},
	} {
		patch := trainerv1alpha1.RuntimePatch{Manager: "a.io/one", TrainingRuntimeSpec: &trainerv1alpha1.TrainingRuntimeSpecPatch{Template: &trainerv1alpha1.JobSetTemplatePatch{
			Spec: &trainerv1alpha1.JobSetSpecPatch{ReplicatedJobs: []trainerv1alpha1.ReplicatedJobPatch{rp}}}}}
		got := rt.Template.Spec.DeepCopy()
		var labels, annotations map[string]string
		if p := applyPatch(got, patch, "spec.runtimePatches[0]", &labels, &annotations); p.Reason != "" {
			t.Fatalf("%s: %s", name, p.Message)
		}
		src, err := json.Marshal(rt.Template.Spec)
		if err != nil {
			t.Fatal(err)
		}
		pb, err := json.Marshal(patch.TrainingRuntimeSpec.Template.Spec)
		if err != nil {
			t.Fatal(err)
		}
		merged, err := strategicpatch.StrategicMergePatch(src, pb, jobsetv1alpha2.JobSetSpec{})
		if err != nil {
			t.Fatal(err)
		}
		var want jobsetv1alpha2.JobSetSpec
		if err := json.Unmarshal(merged, &want); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, *got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: the merge differs from the whole spec's (-whole +kiln's):\n%s", name, diff)
		}
	}
}

// A runtime without mlPolicy keeps its trainer step's parallelism unless the TrainJob gives
// numNodes, as Trainer's does; an mlPolicy without numNodes gives one node.
func TestTrainerNodesOfARuntimeWithoutMLPolicy(t *testing.T) {
	plainRuntime := func(policy *trainerv1alpha1.MLPolicy) *trainerv1alpha1.TrainingRuntimeSpec {
		rt := runtimeOf(trainerv1alpha1.MLPolicySource{}, nil)
		rt.MLPolicy = policy
		rt.Template.Spec.ReplicatedJobs[0].Template.Spec.Parallelism = ptr.To[int32](4)
		return rt
	}
	noNodes := func(j *trainerv1alpha1.TrainJob) { j.Spec.Trainer.NumNodes = nil }
	for _, tc := range []struct {
		name string
		job  *trainerv1alpha1.TrainJob
		rt   *trainerv1alpha1.TrainingRuntimeSpec
		want int32
	}{
		{"no mlPolicy: the template's", trainJobOf(0, noNodes), plainRuntime(nil), 4},
		{"no mlPolicy, the TrainJob's numNodes", trainJobOf(2, nil), plainRuntime(nil), 2},
		{"an mlPolicy without numNodes: one", trainJobOf(0, noNodes), plainRuntime(&trainerv1alpha1.MLPolicy{}), 1},
		{"an mlPolicy's numNodes", trainJobOf(0, noNodes), plainRuntime(&trainerv1alpha1.MLPolicy{NumNodes: ptr.To[int32](3)}), 3},
	} {
		js, p := DesiredJobSet(tc.job, tc.rt)
		if p.Reason != "" {
			t.Fatalf("%s: %+v", tc.name, p)
		}
		rj := js.Spec.ReplicatedJobs[0].Template.Spec
		if ptr.Deref(rj.Parallelism, 0) != tc.want || ptr.Deref(rj.Completions, 0) != tc.want {
			t.Errorf("%s: parallelism %v completions %v, want %d", tc.name, rj.Parallelism, rj.Completions, tc.want)
		}
	}
}

// An initializer the TrainJob sets needs its step in the runtime (Trainer refuses it too): kiln
// does not run the trainer without the data it was told to fetch.
func TestAnInitializerNeedsItsStep(t *testing.T) {
	job := trainJobOf(1, func(j *trainerv1alpha1.TrainJob) {
		j.Spec.Initializer = &trainerv1alpha1.Initializer{Dataset: &trainerv1alpha1.DatasetInitializer{StorageUri: ptr.To("hf://tatsu-lab/alpaca")}}
	})
	rt := runtimeOf(trainerv1alpha1.MLPolicySource{Torch: &trainerv1alpha1.TorchMLPolicySource{}}, nil)
	if _, p := DesiredJobSet(job, rt); p.Reason != ReasonInvalid || p.Field != "spec.initializer.dataset" || !strings.Contains(p.Message, "no dataset-initializer step") {
		t.Errorf("a runtime without the step: problem %+v, want Invalid at spec.initializer.dataset", p)
	}
	step := jobsetv1alpha2.ReplicatedJob{Name: StepDataset}
	step.Template.Labels = map[string]string{LabelAncestorStep: StepDataset}
	step.Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: "fetch", Image: "init:1"}}
	rt.Template.Spec.ReplicatedJobs = append([]jobsetv1alpha2.ReplicatedJob{step}, rt.Template.Spec.ReplicatedJobs...)
	if _, p := DesiredJobSet(job, rt); p.Reason != ReasonInvalid {
		t.Errorf("a step without its container: problem %+v, want Invalid", p)
	}
	rt.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Name = StepDataset
	js, p := DesiredJobSet(job, rt)
	if p.Reason != "" {
		t.Fatalf("a runtime with the step: %s", p.Message)
	}
	if c := js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0]; len(c.Env) != 1 || c.Env[0].Value != "hf://tatsu-lab/alpaca" {
		t.Errorf("dataset initializer env %v, want its STORAGE_URI", c.Env)
	}
}

// A TrainJob's Volcano group has its pods' priority class, as Trainer gives it.
func TestTheGroupHasThePodsPriority(t *testing.T) {
	rt := runtimeOf(trainerv1alpha1.MLPolicySource{Torch: &trainerv1alpha1.TorchMLPolicySource{}}, nil)
	rt.PodGroupPolicy = &trainerv1alpha1.PodGroupPolicy{PodGroupPolicySource: trainerv1alpha1.PodGroupPolicySource{Volcano: &trainerv1alpha1.VolcanoPodGroupPolicySource{}}}
	podTemplate(&rt.Template.Spec.ReplicatedJobs[0]).Spec.PriorityClassName = "training-high"
	job := trainJobOf(2, nil)
	js, p := DesiredJobSet(job, rt)
	if p.Reason != "" {
		t.Fatal(p.Message)
	}
	if g := groupOf(gang.Volcano{}, job, rt, js); g.PriorityClass != "training-high" || g.MinMember != 2 {
		t.Errorf("Volcano group priority class %q, min member %d; want training-high and 2", g.PriorityClass, g.MinMember)
	}
	if g := groupOf(gang.Native{}, job, rt, js); g.PriorityClass != "" {
		t.Errorf("native group priority class %q, want none (Trainer gives one to Volcano's alone; a native PodGroup's cannot change)", g.PriorityClass)
	}
}
