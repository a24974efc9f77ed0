// Package trainjob runs kiln's TrainJob controller against the real kube-apiserver, with JobSet's
// CRD and Kubeflow Trainer's own runtime manifests installed. No JobSet controller runs here: the
// tests check the JobSet kiln makes and play JobSet's controller by writing its status (the e2e
// suite runs the real one).
package trainjob

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
	"github.com/kiln-ml/kiln/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithJobSet(m, &env, func(e *testenv.Env) (func(), error) {
		return e.StartManager(testenv.ManagerOptions())
	}))
}

// installTrainerRuntimes applies Trainer's own runtime manifests, unchanged, once.
var installed bool

func installTrainerRuntimes(t *testing.T) {
	t.Helper()
	if !installed {
		env.InstallTrainerRuntimes(t)
		installed = true
	}
}

func TestTrainerRuntimeManifestsApplyUnchanged(t *testing.T) {
	installTrainerRuntimes(t)
	var list trainerv1alpha1.ClusterTrainingRuntimeList
	if err := env.Client.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list.Items {
		names = append(names, r.Name)
	}
	for _, want := range []string{"torch-distributed", "jax-distributed", "xgboost-distributed", "deepspeed-distributed", "mlx-distributed"} {
		if !slices.Contains(names, want) {
			t.Errorf("ClusterTrainingRuntimes %v lack %s", names, want)
		}
	}
}

func newTrainJob(ns, name, runtime string, edit func(*trainerv1alpha1.TrainJobSpec)) *trainerv1alpha1.TrainJob {
	j := &trainerv1alpha1.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: trainerv1alpha1.TrainJobSpec{RuntimeRef: trainerv1alpha1.RuntimeRef{Name: runtime}}}
	if edit != nil {
		edit(&j.Spec)
	}
	return j
}

func create(t *testing.T, j *trainerv1alpha1.TrainJob) *trainerv1alpha1.TrainJob {
	t.Helper()
	if err := env.Client.Create(context.Background(), j); err != nil {
		t.Fatalf("creating TrainJob %s: %v", j.Name, err)
	}
	return j
}

func jobSet(t *testing.T, ns, name string) *jobsetv1alpha2.JobSet {
	t.Helper()
	js := &jobsetv1alpha2.JobSet{}
	env.Await(t, ns, name, js)
	return js
}

// waitStatus waits until check passes on the TrainJob's status.
func waitStatus(t *testing.T, j *trainerv1alpha1.TrainJob, check func(*trainerv1alpha1.TrainJob) error) *trainerv1alpha1.TrainJob {
	t.Helper()
	fresh := &trainerv1alpha1.TrainJob{}
	testenv.Eventually(t, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(j), fresh); err != nil {
			return err
		}
		return check(fresh)
	})
	return fresh
}

func conditionIs(typ string, s metav1.ConditionStatus, reason string) func(*trainerv1alpha1.TrainJob) error {
	return func(j *trainerv1alpha1.TrainJob) error {
		c := meta.FindStatusCondition(j.Status.Conditions, typ)
		if c == nil || c.Status != s || (reason != "" && c.Reason != reason) {
			return fmt.Errorf("%s condition %+v, want %s %s", typ, c, s, reason)
		}
		return nil
	}
}

// hasCounts: the TrainJob's status counts its JobSet's Jobs (kiln has seen the JobSet it made).
func hasCounts(j *trainerv1alpha1.TrainJob) error {
	if len(j.Status.JobsStatus) == 0 {
		return fmt.Errorf("no jobsStatus yet (conditions %+v)", j.Status.Conditions)
	}
	return nil
}

// setJobSetStatus writes the JobSet's status as JobSet's controller would.
func setJobSetStatus(t *testing.T, ns, name string, edit func(*jobsetv1alpha2.JobSetStatus)) {
	t.Helper()
	testenv.Eventually(t, func() error {
		js := &jobsetv1alpha2.JobSet{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, js); err != nil {
			return err
		}
		edit(&js.Status)
		return env.Client.Status().Update(context.Background(), js)
	})
}

func envOf(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			v = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
		}
		out[e.Name] = v
	}
	return out
}

func replicatedJob(t *testing.T, js *jobsetv1alpha2.JobSet, name string) jobsetv1alpha2.ReplicatedJob {
	t.Helper()
	for _, rj := range js.Spec.ReplicatedJobs {
		if rj.Name == name {
			return rj
		}
	}
	t.Fatalf("JobSet %s has no replicated job %s", js.Name, name)
	return jobsetv1alpha2.ReplicatedJob{}
}

// A torch TrainJob of 2 nodes on Trainer's torch-distributed runtime: the JobSet as Trainer makes
// it, then Complete with each replicated job's counts when the JobSet completes.
func TestTorchTrainJobRunsToComplete(t *testing.T) {
	installTrainerRuntimes(t)
	ns := env.Namespace(t)
	j := create(t, newTrainJob(ns, "mnist", "torch-distributed", func(s *trainerv1alpha1.TrainJobSpec) {
		s.Trainer = &trainerv1alpha1.Trainer{NumNodes: ptr.To[int32](2), Image: ptr.To("kiln.dev/torch:test"),
			Command: []string{"torchrun", "train.py"}, Env: []corev1.EnvVar{{Name: "EPOCHS", Value: "3"}}}
	}))
	js := jobSet(t, ns, "mnist")
	if !metav1.IsControlledBy(js, j) {
		t.Errorf("JobSet owners %+v, want the TrainJob controlling it", js.OwnerReferences)
	}
	node := replicatedJob(t, js, "node")
	if node.Replicas != 1 || ptr.Deref(node.Template.Spec.Parallelism, 0) != 2 || ptr.Deref(node.Template.Spec.Completions, 0) != 2 {
		t.Errorf("node: replicas %d parallelism %v completions %v, want 1, 2, 2", node.Replicas, node.Template.Spec.Parallelism, node.Template.Spec.Completions)
	}
	c := node.Template.Spec.Template.Spec.Containers[0]
	got := envOf(c)
	want := map[string]string{"EPOCHS": "3", "PET_NNODES": "2", "PET_NPROC_PER_NODE": "1",
		"PET_NODE_RANK":   "fieldRef:metadata.annotations['batch.kubernetes.io/job-completion-index']",
		"PET_MASTER_ADDR": "mnist-node-0-0.mnist", "PET_MASTER_PORT": "29500"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("env %s = %q, want %q (env %v)", k, got[k], v, got)
		}
	}
	if c.Name != "node" || c.Image != "kiln.dev/torch:test" || strings.Join(c.Command, " ") != "torchrun train.py" || len(c.Ports) != 1 || c.Ports[0].ContainerPort != 29500 {
		t.Errorf("container %s image %s command %v ports %v", c.Name, c.Image, c.Command, c.Ports)
	}
	waitStatus(t, j, hasCounts)

	setJobSetStatus(t, ns, "mnist", func(s *jobsetv1alpha2.JobSetStatus) {
		s.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: "node", Ready: 1, Active: 1}}
	})
	waitStatus(t, j, func(j *trainerv1alpha1.TrainJob) error {
		// Kubeflow's SDK reports a TrainJob Running from its pods only while it has no condition.
		if s := j.Status.JobsStatus; len(s) != 1 || ptr.Deref(s[0].Ready, 0) != 1 || len(j.Status.Conditions) > 0 {
			return fmt.Errorf("jobsStatus %+v conditions %+v, want node ready and no condition", s, j.Status.Conditions)
		}
		return nil
	})
	setJobSetStatus(t, ns, "mnist", func(s *jobsetv1alpha2.JobSetStatus) {
		s.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: "node", Succeeded: 1}}
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: "Completed", Status: metav1.ConditionTrue, Reason: "AllJobsCompleted", Message: "jobset completed successfully"})
	})
	done := waitStatus(t, j, conditionIs("Complete", metav1.ConditionTrue, "AllJobsCompleted"))
	if s := done.Status.JobsStatus; len(s) != 1 || s[0].Name != "node" || *s[0].Succeeded != 1 || *s[0].Active != 0 {
		t.Errorf("jobsStatus %+v, want node with 1 succeeded", s)
	}
	if last := done.Status.Conditions[len(done.Status.Conditions)-1]; last.Type != "Complete" {
		t.Errorf("last condition %s, want Complete (the State column shows it)", last.Type)
	}
}

func TestFailedJobSetFailsTheTrainJob(t *testing.T) {
	installTrainerRuntimes(t)
	ns := env.Namespace(t)
	j := create(t, newTrainJob(ns, "broken", "torch-distributed", nil))
	jobSet(t, ns, "broken")
	setJobSetStatus(t, ns, "broken", func(s *jobsetv1alpha2.JobSetStatus) {
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: "Failed", Status: metav1.ConditionTrue, Reason: "FailedJobs", Message: "jobset failed due to one or more job failures"})
	})
	waitStatus(t, j, conditionIs("Failed", metav1.ConditionTrue, "FailedJobs"))
}

func TestSuspendAndResume(t *testing.T) {
	installTrainerRuntimes(t)
	ns := env.Namespace(t)
	j := create(t, newTrainJob(ns, "paused", "torch-distributed", func(s *trainerv1alpha1.TrainJobSpec) { s.Suspend = ptr.To(true) }))
	if js := jobSet(t, ns, "paused"); !ptr.Deref(js.Spec.Suspend, false) {
		t.Error("the JobSet of a suspended TrainJob is not suspended")
	}
	waitStatus(t, j, conditionIs("Suspended", metav1.ConditionTrue, "Suspended"))
	// As Kueue admits it: a patch with its placement, and resumption, in one update.
	testenv.Eventually(t, func() error {
		fresh := &trainerv1alpha1.TrainJob{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(j), fresh); err != nil {
			return err
		}
		fresh.Spec.Suspend = ptr.To(false)
		fresh.Spec.RuntimePatches = []trainerv1alpha1.RuntimePatch{{Manager: "kueue.x-k8s.io/manager", TrainingRuntimeSpec: &trainerv1alpha1.TrainingRuntimeSpecPatch{
			Template: &trainerv1alpha1.JobSetTemplatePatch{Spec: &trainerv1alpha1.JobSetSpecPatch{ReplicatedJobs: []trainerv1alpha1.ReplicatedJobPatch{{
				Name: "node", Template: &trainerv1alpha1.JobTemplatePatch{Spec: &trainerv1alpha1.JobSpecPatch{Template: &trainerv1alpha1.PodTemplatePatch{
					Spec: &trainerv1alpha1.PodSpecPatch{NodeSelector: map[string]string{"pool": "a100"}}}}}}}}}}}}
		return env.Client.Update(context.Background(), fresh)
	})
	testenv.Eventually(t, func() error {
		js := jobSet(t, ns, "paused")
		if ptr.Deref(js.Spec.Suspend, true) || replicatedJob(t, js, "node").Template.Spec.Template.Spec.NodeSelector["pool"] != "a100" {
			return fmt.Errorf("JobSet suspend %v nodeSelector %v, want resumed on pool a100", js.Spec.Suspend, replicatedJob(t, js, "node").Template.Spec.Template.Spec.NodeSelector)
		}
		return nil
	})
	waitStatus(t, j, conditionIs("Suspended", metav1.ConditionFalse, "Resumed"))
}

// runtimePatches reach the pods: metadata, env of a sidecar, tolerations; a patch naming a
// replicated job the runtime lacks is said in the status.
func TestRuntimePatchesReachThePods(t *testing.T) {
	installTrainerRuntimes(t)
	ns := env.Namespace(t)
	patch := func(rj string) []trainerv1alpha1.RuntimePatch {
		return []trainerv1alpha1.RuntimePatch{{Manager: "example.com/placement", TrainingRuntimeSpec: &trainerv1alpha1.TrainingRuntimeSpecPatch{
			Template: &trainerv1alpha1.JobSetTemplatePatch{
				Metadata: &metav1.ObjectMeta{Labels: map[string]string{"team": "vision"}},
				Spec: &trainerv1alpha1.JobSetSpecPatch{ReplicatedJobs: []trainerv1alpha1.ReplicatedJobPatch{{
					Name: rj, Template: &trainerv1alpha1.JobTemplatePatch{Spec: &trainerv1alpha1.JobSpecPatch{Template: &trainerv1alpha1.PodTemplatePatch{
						Metadata: &metav1.ObjectMeta{Annotations: map[string]string{"example.com/trace": "on"}},
						Spec: &trainerv1alpha1.PodSpecPatch{
							Tolerations: []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
							Containers:  []trainerv1alpha1.ContainerPatch{{Name: "node", VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}}},
							Volumes:     []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
						}}}}}}}}}}}
	}
	create(t, newTrainJob(ns, "patched", "torch-distributed", func(s *trainerv1alpha1.TrainJobSpec) { s.RuntimePatches = patch("node") }))
	js := jobSet(t, ns, "patched")
	pod := replicatedJob(t, js, "node").Template.Spec.Template
	if js.Labels["team"] != "vision" || pod.Annotations["example.com/trace"] != "on" || len(pod.Spec.Tolerations) != 1 ||
		len(pod.Spec.Volumes) != 1 || len(pod.Spec.Containers[0].VolumeMounts) != 1 || pod.Spec.Containers[0].Image == "" {
		t.Errorf("patched JobSet labels %v, pod annotations %v, tolerations %v, volumes %v, container %+v", js.Labels, pod.Annotations, pod.Spec.Tolerations, pod.Spec.Volumes, pod.Spec.Containers[0])
	}
	if envOf(pod.Spec.Containers[0])["PET_NNODES"] != "1" {
		t.Errorf("patched container lost the framework's env: %v", pod.Spec.Containers[0].Env)
	}
	bad := create(t, newTrainJob(ns, "mispatched", "torch-distributed", func(s *trainerv1alpha1.TrainJobSpec) { s.RuntimePatches = patch("workers") }))
	st := waitStatus(t, bad, conditionIs("Created", metav1.ConditionFalse, "Invalid"))
	if c := meta.FindStatusCondition(st.Status.Conditions, "Created"); !strings.Contains(c.Message, `spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].name: the runtime has no replicated job "workers"`) {
		t.Errorf("Created %q, want the patch's path and the runtime's jobs", c.Message)
	}
}

// A namespaced TrainingRuntime, created after the TrainJob that names it: the TrainJob waits,
// saying what is missing, and starts when it comes.
func TestNamespacedRuntimeArrivingLater(t *testing.T) {
	ns := env.Namespace(t)
	j := create(t, newTrainJob(ns, "waits", "local-jax", func(s *trainerv1alpha1.TrainJobSpec) {
		s.RuntimeRef.Kind = ptr.To("TrainingRuntime")
		s.Trainer = &trainerv1alpha1.Trainer{NumNodes: ptr.To[int32](3)}
	}))
	st := waitStatus(t, j, conditionIs("Created", metav1.ConditionFalse, "TrainingRuntimeNotFound"))
	if c := meta.FindStatusCondition(st.Status.Conditions, "Created"); !strings.Contains(c.Message, "TrainingRuntime local-jax does not exist in namespace "+ns) {
		t.Errorf("Created %q", c.Message)
	}
	rt := &unstructured.Unstructured{}
	rt.SetAPIVersion("trainer.kubeflow.org/v1alpha1")
	rt.SetKind("TrainingRuntime")
	rt.SetNamespace(ns)
	rt.SetName("local-jax")
	rt.Object["spec"] = map[string]any{"mlPolicy": map[string]any{"numNodes": int64(1), "jax": map[string]any{}},
		"template": map[string]any{"spec": map[string]any{"replicatedJobs": []any{map[string]any{"name": "node",
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
				"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{
					map[string]any{"name": "node", "image": "kiln.dev/jax:test"}}}}}}}}}}}
	if err := env.Client.Create(context.Background(), rt); err != nil {
		t.Fatal(err)
	}
	js := jobSet(t, ns, "waits")
	node := replicatedJob(t, js, "node")
	got := envOf(node.Template.Spec.Template.Spec.Containers[0])
	if ptr.Deref(node.Template.Spec.Parallelism, 0) != 3 || got["JAX_NUM_PROCESSES"] != "3" || got["JAX_COORDINATOR_ADDRESS"] != "waits-node-0-0.waits:29500" ||
		got["JAX_PROCESS_ID"] != "fieldRef:metadata.annotations['batch.kubernetes.io/job-completion-index']" {
		t.Errorf("jax node: parallelism %v env %v", node.Template.Spec.Parallelism, got)
	}
	waitStatus(t, j, hasCounts)
}

func TestDeadlineFailsTheRun(t *testing.T) {
	installTrainerRuntimes(t)
	ns := env.Namespace(t)
	j := create(t, newTrainJob(ns, "late", "torch-distributed", func(s *trainerv1alpha1.TrainJobSpec) { s.ActiveDeadlineSeconds = 2 }))
	st := waitStatus(t, j, conditionIs("Failed", metav1.ConditionTrue, "DeadlineExceeded"))
	if c := meta.FindStatusCondition(st.Status.Conditions, "Failed"); !strings.Contains(c.Message, "spec.activeDeadlineSeconds (2 seconds)") {
		t.Errorf("Failed %q", c.Message)
	}
	noJobSet(t, ns, "late")
}

// resume resumes the TrainJob j (spec.suspend false), as a queue admitting it does.
func resume(t *testing.T, j *trainerv1alpha1.TrainJob) {
	t.Helper()
	testenv.Eventually(t, func() error {
		fresh := &trainerv1alpha1.TrainJob{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(j), fresh); err != nil {
			return err
		}
		fresh.Spec.Suspend = ptr.To(false)
		return env.Client.Update(context.Background(), fresh)
	})
}

func noJobSet(t *testing.T, ns, name string) {
	t.Helper()
	testenv.Eventually(t, func() error {
		js := &jobsetv1alpha2.JobSet{}
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, js)
		if err == nil && js.DeletionTimestamp == nil {
			return fmt.Errorf("JobSet %s remains", name)
		}
		return client.IgnoreNotFound(err)
	})
}

// The deadline counts from the resumption: a TrainJob that waited suspended (in a queue) longer
// than its deadline runs once resumed, and fails its deadline after it.
func TestDeadlineCountsFromTheResumption(t *testing.T) {
	installTrainerRuntimes(t)
	ns := env.Namespace(t)
	j := create(t, newTrainJob(ns, "queued", "torch-distributed", func(s *trainerv1alpha1.TrainJobSpec) {
		s.Suspend, s.ActiveDeadlineSeconds = ptr.To(true), 3
	}))
	waitStatus(t, j, conditionIs("Suspended", metav1.ConditionTrue, "Suspended"))
	time.Sleep(4 * time.Second) // suspended longer than its deadline: the point of the test
	resume(t, j)
	resumed := waitStatus(t, j, conditionIs("Suspended", metav1.ConditionFalse, "Resumed"))
	if c := meta.FindStatusCondition(resumed.Status.Conditions, "Failed"); c != nil {
		t.Fatalf("failed at its resumption: %+v", c)
	}
	if js := jobSet(t, ns, "queued"); ptr.Deref(js.Spec.Suspend, true) {
		t.Error("the JobSet of a resumed TrainJob stays suspended")
	}
	waitStatus(t, j, conditionIs("Failed", metav1.ConditionTrue, "DeadlineExceeded"))
	noJobSet(t, ns, "queued")
}

// Trainer's deepspeed-distributed runtime (MPI, its launcher a node too): the launcher and the
// nodes, the hostfile of every node, the SSH keys mounted where the runtime says, Open MPI's
// variables on the launcher.
func TestMPITrainJobOnDeepSpeedRuntime(t *testing.T) {
	installTrainerRuntimes(t)
	ns := env.Namespace(t)
	create(t, newTrainJob(ns, "ds", "deepspeed-distributed", func(s *trainerv1alpha1.TrainJobSpec) {
		s.Trainer = &trainerv1alpha1.Trainer{NumNodes: ptr.To[int32](3), Command: []string{"deepspeed", "train.py"}}
	}))
	js := jobSet(t, ns, "ds")
	node, launcher := replicatedJob(t, js, "node"), replicatedJob(t, js, "launcher")
	if ptr.Deref(node.Template.Spec.Parallelism, 0) != 2 || ptr.Deref(launcher.Template.Spec.Parallelism, 0) != 1 {
		t.Errorf("parallelism node %v launcher %v, want 2 and 1 (the launcher is the third node)", node.Template.Spec.Parallelism, launcher.Template.Spec.Parallelism)
	}
	lc := launcher.Template.Spec.Template.Spec.Containers[0]
	got := envOf(lc)
	if got["OMPI_MCA_orte_default_hostfile"] != "/etc/mpi/hostfile" || got["OMPI_MCA_orte_set_default_slots"] != "1" || strings.Join(lc.Command, " ") != "deepspeed train.py" {
		t.Errorf("launcher env %v command %v", got, lc.Command)
	}
	mounts := map[string]string{}
	for _, m := range lc.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	if mounts["mpi-ssh-auth"] != "/home/mpiuser/.ssh" || mounts["mpi-hostfile"] != "/etc/mpi" {
		t.Errorf("launcher mounts %v", mounts)
	}
	if nm := node.Template.Spec.Template.Spec.Containers[0].VolumeMounts; len(nm) != 1 || nm[0].Name != "mpi-ssh-auth" {
		t.Errorf("node mounts %v, want the SSH keys", nm)
	}
	hostfile := &corev1.ConfigMap{}
	env.Await(t, ns, "ds-mpi-hostfile", hostfile)
	if want := "ds-node-0-0.ds slots=1\nds-node-0-1.ds slots=1\nds-launcher-0-0.ds slots=1\n"; hostfile.Data["hostfile"] != want {
		t.Errorf("hostfile %q, want %q", hostfile.Data["hostfile"], want)
	}
	keys := &corev1.Secret{}
	env.Await(t, ns, "ds-mpi-ssh-auth", keys)
	if keys.Type != corev1.SecretTypeSSHAuth || len(keys.Data["ssh-privatekey"]) == 0 || !strings.HasPrefix(string(keys.Data["ssh-publickey"]), "ssh-ed25519 ") {
		t.Errorf("SSH Secret type %s, keys %v", keys.Type, keys.Data)
	}
}

// A runtime of a framework kiln does not run (Flux) fails the TrainJob, as Trainer's unsupported
// runtimes do.
func TestUnsupportedFrameworkFails(t *testing.T) {
	ns := env.Namespace(t)
	rt := &trainerv1alpha1.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flux"}}
	rt.Spec.MLPolicy = &trainerv1alpha1.MLPolicy{MLPolicySource: trainerv1alpha1.MLPolicySource{Flux: &trainerv1alpha1.FluxMLPolicySource{}}}
	rt.Spec.Template.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{{Name: "node"}}
	rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: "node", Image: "flux"}}
	if err := env.Client.Create(context.Background(), rt); err != nil {
		t.Fatal(err)
	}
	j := create(t, newTrainJob(ns, "hpc", "flux", func(s *trainerv1alpha1.TrainJobSpec) { s.RuntimeRef.Kind = ptr.To("TrainingRuntime") }))
	waitStatus(t, j, conditionIs("Failed", metav1.ConditionTrue, "TrainingRuntimeNotSupported"))
}

// A TrainJob MultiKueue manages (sent to another cluster) is not kiln's to run: no JobSet, no
// status.
func TestMultiKueueTrainJobIsLeftAlone(t *testing.T) {
	installTrainerRuntimes(t)
	ns := env.Namespace(t)
	j := create(t, newTrainJob(ns, "remote", "torch-distributed", func(s *trainerv1alpha1.TrainJobSpec) {
		s.ManagedBy = ptr.To("kueue.x-k8s.io/multikueue")
	}))
	// A TrainJob kiln runs, created after it, gets its status: by then kiln has seen both.
	ours := create(t, newTrainJob(ns, "local", "torch-distributed", nil))
	waitStatus(t, ours, hasCounts)
	testenv.Consistently(t, func() error {
		fresh := &trainerv1alpha1.TrainJob{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(j), fresh); err != nil {
			return err
		}
		js := &jobsetv1alpha2.JobSet{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(j), js); err == nil || len(fresh.Status.Conditions) > 0 {
			return fmt.Errorf("kiln ran a TrainJob MultiKueue manages: JobSet error %v, conditions %+v", err, fresh.Status.Conditions)
		}
		return nil
	})
}

// A TrainJob whose runtime asks for a gang the cluster cannot form (scheduler-plugins' PodGroups
// are not served here, and kiln runs no gang scheduler of its own): its JobSet is made suspended
// and stays so at every later reconcile, while its status says why; no pods are made.
func TestGangThatCannotFormHoldsTheJobSet(t *testing.T) {
	ns := env.Namespace(t)
	rt := &trainerv1alpha1.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gang-torch"}}
	rt.Spec.MLPolicy = &trainerv1alpha1.MLPolicy{NumNodes: ptr.To[int32](2), MLPolicySource: trainerv1alpha1.MLPolicySource{Torch: &trainerv1alpha1.TorchMLPolicySource{}}}
	rt.Spec.PodGroupPolicy = &trainerv1alpha1.PodGroupPolicy{PodGroupPolicySource: trainerv1alpha1.PodGroupPolicySource{
		Coscheduling: &trainerv1alpha1.CoschedulingPodGroupPolicySource{}}}
	rt.Spec.Template.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{{Name: "node"}}
	rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Labels = map[string]string{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
	rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: "node", Image: "pytorch/pytorch:2.0"}}
	if err := env.Client.Create(context.Background(), rt); err != nil {
		t.Fatal(err)
	}
	j := create(t, newTrainJob(ns, "held", "gang-torch", func(s *trainerv1alpha1.TrainJobSpec) { s.RuntimeRef.Kind = ptr.To("TrainingRuntime") }))
	waitStatus(t, j, func(j *trainerv1alpha1.TrainJob) error {
		if c := meta.FindStatusCondition(j.Status.Conditions, "Running"); c == nil || c.Reason != "WaitingForGang" || !strings.Contains(c.Message, "which this cluster does not serve") {
			return fmt.Errorf("Running %+v, want the gang's wait", c)
		}
		return nil
	})
	// Each write of the JobSet's status reconciles the TrainJob, which keeps the JobSet as it
	// should be before it writes its own status: once that status shows the write, the
	// reconcile that followed it has run.
	setJobSetStatus(t, ns, "held", func(s *jobsetv1alpha2.JobSetStatus) {
		s.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: "node", Suspended: 1}}
	})
	waitStatus(t, j, func(j *trainerv1alpha1.TrainJob) error {
		if len(j.Status.JobsStatus) != 1 || ptr.Deref(j.Status.JobsStatus[0].Suspended, 0) != 1 {
			return fmt.Errorf("jobsStatus %+v, want the JobSet's one suspended Job", j.Status.JobsStatus)
		}
		return nil
	})
	if js := jobSet(t, ns, "held"); !ptr.Deref(js.Spec.Suspend, false) {
		t.Error("the JobSet of a TrainJob whose gang cannot form was resumed: its pods would run without the gang")
	}
}

// kiln reads a TrainJob's runtime whenever it builds the JobSet (Trainer builds from a snapshot
// it took first: docs/trainjob.md, Not yet): a queued TrainJob resumed after its runtime changed
// runs the changed runtime; a running one keeps its JobSet, and runs on, when the runtime goes.
func TestRuntimeIsReadWhenTheJobSetIsBuilt(t *testing.T) {
	ns := env.Namespace(t)
	rt := &trainerv1alpha1.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "live"}}
	rt.Spec.MLPolicy = &trainerv1alpha1.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainerv1alpha1.MLPolicySource{Torch: &trainerv1alpha1.TorchMLPolicySource{}}}
	rt.Spec.Template.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{{Name: "node"}}
	rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Labels = map[string]string{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
	rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: "node", Image: "trainer:1"}}
	if err := env.Client.Create(context.Background(), rt); err != nil {
		t.Fatal(err)
	}
	j := create(t, newTrainJob(ns, "queued", "live", func(s *trainerv1alpha1.TrainJobSpec) {
		s.RuntimeRef.Kind, s.Suspend = ptr.To("TrainingRuntime"), ptr.To(true)
	}))
	jobSet(t, ns, "queued")
	testenv.Eventually(t, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(rt), rt); err != nil {
			return err
		}
		rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Image = "trainer:2"
		return env.Client.Update(context.Background(), rt)
	})
	resume(t, j)
	testenv.Eventually(t, func() error {
		js := jobSet(t, ns, "queued")
		if image := js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Image; ptr.Deref(js.Spec.Suspend, true) || image != "trainer:2" {
			return fmt.Errorf("JobSet suspend %v image %s, want resumed on the changed runtime's trainer:2", js.Spec.Suspend, image)
		}
		return nil
	})
	if err := env.Client.Delete(context.Background(), rt); err != nil {
		t.Fatal(err)
	}
	// A write of the JobSet's status reconciles the TrainJob.
	setJobSetStatus(t, ns, "queued", func(s *jobsetv1alpha2.JobSetStatus) {
		s.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: "node", Active: 1}}
	})
	// Its JobSet runs on: nothing keeps the TrainJob from running, so no condition of kiln's says
	// otherwise (Kubeflow's SDK would then report it Created).
	waitStatus(t, j, func(j *trainerv1alpha1.TrainJob) error {
		if s := j.Status.JobsStatus; len(s) != 1 || ptr.Deref(s[0].Active, 0) != 1 {
			return fmt.Errorf("jobsStatus %+v, want node active", s)
		}
		for _, typ := range []string{"Created", "Running"} {
			if c := meta.FindStatusCondition(j.Status.Conditions, typ); c != nil {
				return fmt.Errorf("condition %+v on a TrainJob whose JobSet runs", c)
			}
		}
		return nil
	})
	if js := jobSet(t, ns, "queued"); ptr.Deref(js.Spec.Suspend, false) || js.DeletionTimestamp != nil {
		t.Errorf("the running JobSet of a TrainJob whose runtime went was suspended or deleted")
	}
}
