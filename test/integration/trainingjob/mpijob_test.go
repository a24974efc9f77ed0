package trainingjob

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

// mpiConfig waits until the job's ConfigMap has a discover_hosts.sh for which ok holds.
func mpiConfig(t *testing.T, ns, name string, ok func(*corev1.ConfigMap) error) *corev1.ConfigMap {
	t.Helper()
	var cm corev1.ConfigMap
	testenv.Eventually(t, func() error {
		if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name + "-config"}, &cm); err != nil {
			return err
		}
		return ok(&cm)
	})
	return &cm
}

func discoverHosts(want string) func(*corev1.ConfigMap) error {
	return func(cm *corev1.ConfigMap) error {
		if got := cm.Data["discover_hosts.sh"]; got != want {
			return fmt.Errorf("discover_hosts.sh is %q, want %q", got, want)
		}
		return nil
	}
}

// TestMPIJobSSH: the default remote start. Launcher and workers with the job's key pair, headless
// services under the hostfile's names, the ConfigMap following the running workers, and the
// launcher deciding the outcome.
func TestMPIJobSSH(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := builder.MPIJob("pi", ns).Replicas("Launcher", 1).Replicas("Worker", 2).Obj().(*kubeflowv1.MPIJob)
	job.Spec.SlotsPerWorker = ptr.To[int32](2)
	job.Spec.CleanPodPolicy = ptr.To(kubeflowv1.CleanPodPolicyAll) // the deprecated field still applies
	create(t, job)
	pods := waitPods(t, job, 3)
	launcher, w0, w1 := pods[0], pods[1], pods[2]
	if launcher.Name != "pi-launcher" || w0.Name != "pi-worker-0" || w1.Name != "pi-worker-1" {
		t.Fatalf("pods %s %s %s, want pi-launcher pi-worker-0 pi-worker-1", launcher.Name, w0.Name, w1.Name)
	}
	if launcher.Labels[kubeflowv1.LabelJobRole] != "master" || launcher.Labels[kubeflowv1.LabelReplicaType] != "launcher" ||
		launcher.Labels[kubeflowv1.LabelOperatorName] != "mpijob-controller" || launcher.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("launcher labels %v restartPolicy %s", launcher.Labels, launcher.Spec.RestartPolicy)
	}
	wantEnv := map[string]string{
		"OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile", "I_MPI_HYDRA_HOST_FILE": "/etc/mpi/hostfile", "I_MPI_HYDRA_BOOTSTRAP": "ssh",
		"OMPI_MCA_plm_rsh_args":                 "-o ConnectionAttempts=10 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
		"I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS": "-o ConnectionAttempts=10 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
		"NVIDIA_VISIBLE_DEVICES":                "", "NVIDIA_DRIVER_CAPABILITIES": "", "K_MPI_JOB_ROLE": "launcher",
	}
	if diff := cmp.Diff(wantEnv, envOf(launcher, "mpi")); diff != "" {
		t.Errorf("launcher env (-want +got):\n%s", diff)
	}
	if got := w0.Spec.Containers[0].Command; !slices.Equal(got, []string{"/usr/sbin/sshd", "-De"}) {
		t.Errorf("worker command %v, want sshd", got)
	}

	// The key pair: created once, owned by the job, mounted on every pod; kiln never reads it.
	var secret corev1.Secret
	name := "pi-ssh-" + string(job.UID)[:8]
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &secret); err != nil {
		t.Fatalf("the SSH secret: %v", err)
	}
	if secret.Type != corev1.SecretTypeSSHAuth || !strings.HasPrefix(string(secret.Data["ssh-privatekey"]), "-----BEGIN OPENSSH PRIVATE KEY-----") ||
		!strings.HasPrefix(string(secret.Data["ssh-publickey"]), "ssh-ed25519 ") || !metav1.IsControlledBy(&secret, job) {
		t.Errorf("secret %s: type %s, keys %d, owners %v", name, secret.Type, len(secret.Data), secret.OwnerReferences)
	}
	for _, p := range pods {
		if v := volume(p, "ssh-auth"); v == nil || v.Secret.SecretName != name {
			t.Errorf("%s does not mount %s", p.Name, name)
		}
	}
	var svcNames []string
	testenvEventuallyServices(t, job, 3, &svcNames)
	if diff := cmp.Diff([]string{"pi-launcher", "pi-worker-0", "pi-worker-1"}, svcNames); diff != "" {
		t.Errorf("services (-want +got):\n%s", diff)
	}

	cm := mpiConfig(t, ns, "pi", discoverHosts("#!/bin/sh\n"))
	if want := "pi-worker-0 slots=2\npi-worker-1 slots=2\n"; cm.Data["hostfile"] != want {
		t.Errorf("hostfile %q, want %q", cm.Data["hostfile"], want)
	}
	env.Run(t, &w1)
	mpiConfig(t, ns, "pi", discoverHosts("#!/bin/sh\necho pi-worker-1:2\n"))
	env.Run(t, &w0)
	env.Run(t, &launcher)
	mpiConfig(t, ns, "pi", discoverHosts("#!/bin/sh\necho pi-worker-0:2\necho pi-worker-1:2\n"))
	running := waitCondition(t, job, kubeflowv1.JobRunning)
	if got := lastCondition(running).Message; got != "MPIJob pi is running." {
		t.Errorf("Running message %q", got)
	}
	env.Exit(t, &launcher, 0)
	done := waitCondition(t, job, kubeflowv1.JobSucceeded)
	if got := lastCondition(done).Message; got != "MPIJob pi is successfully completed." {
		t.Errorf("Succeeded message %q", got)
	}
	// cleanPodPolicy All from the deprecated field: every pod goes.
	testenv.Eventually(t, func() error { return testenv.Count("pods of pi", len(jobPods(t, job)), 0) })
}

// TestMPIJobOutcomeIsTheLaunchers: a worker that fails leaves the job to its launcher; the
// launcher failing fails it.
func TestMPIJobOutcomeIsTheLaunchers(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.MPIJob("mpifail", ns).Replicas("Launcher", 1).Replicas("Worker", 2).Obj())
	pods := waitPods(t, job, 3)
	runAll(t, pods)
	waitCondition(t, job, kubeflowv1.JobRunning)
	env.Exit(t, &pods[2], 137)
	testenv.Consistently(t, func() error {
		if c := lastCondition(get(t, job)); c.Type != kubeflowv1.JobRunning {
			return fmt.Errorf("a worker failed and the job is %s: the launcher decides", c.Type)
		}
		return nil
	})
	env.Exit(t, &pods[0], 1)
	failed := waitCondition(t, job, kubeflowv1.JobFailed)
	if got := lastCondition(failed).Message; got != "MPIJob mpifail is failed because 1 Launcher replica(s) failed." {
		t.Errorf("Failed message %q", got)
	}
}

// TestMPIJobKubectlExecNeedsTheInstallToAllowIt: without the opt-in, a job asking for kubectl
// exec fails with the reason (the webhook refuses it at admission; here, without webhooks, the
// controller does), and nothing is created.
func TestMPIJobKubectlExecNeedsTheInstallToAllowIt(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := builder.MPIJob("exec", ns).Replicas("Launcher", 1).Replicas("Worker", 1).Obj()
	job.SetAnnotations(map[string]string{kubeflowv1.AnnotationMPIRemoteStart: kubeflowv1.MPIRemoteStartKubectlExec})
	create(t, job)
	failed := waitCondition(t, job, kubeflowv1.JobFailed)
	if got := lastCondition(failed).Message; !strings.Contains(got, "kubectl-exec is not enabled in this kiln install") {
		t.Errorf("Failed message %q", got)
	}
	if n := len(jobPods(t, job)); n != 0 {
		t.Errorf("%d pods, want none", n)
	}
}

func volume(p corev1.Pod, name string) *corev1.Volume {
	for i := range p.Spec.Volumes {
		if p.Spec.Volumes[i].Name == name {
			return &p.Spec.Volumes[i]
		}
	}
	return nil
}

// TestMPIJobLauncherWaitsForReadyWorkers: under WaitForWorkersReady the launcher is created once
// every worker is Ready, seen through kiln's trimmed pod cache, and not before.
func TestMPIJobLauncherWaitsForReadyWorkers(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := builder.MPIJob("wait", ns).Replicas("Launcher", 1).Replicas("Worker", 2).Obj().(*kubeflowv1.MPIJob)
	job.Annotations = map[string]string{kubeflowv1.AnnotationMPILauncherCreationPolicy: kubeflowv1.LauncherCreationWaitForWorkersReady}
	create(t, job)
	workers := waitPods(t, job, 2)
	env.Ready(t, &workers[0])
	env.Run(t, &workers[1]) // running, not ready yet
	testenv.Eventually(t, func() error {
		fresh := &kubeflowv1.MPIJob{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), fresh); err != nil {
			return err
		}
		if c := testenv.Condition(fresh, kubeflowv1.JobCreated); !strings.Contains(c.Message, "the launcher waits for every worker to be ready (1 of 2 are)") {
			return fmt.Errorf("Created says %q, want that the launcher waits for 1 of 2 workers", c.Message)
		}
		return nil
	})
	if pods := jobPods(t, job); len(pods) != 2 {
		t.Fatalf("%d pods while a worker is not ready, want the 2 workers only", len(pods))
	}
	env.Ready(t, &workers[1])
	pods := waitPods(t, job, 3)
	if pods[0].Name != "wait-launcher" {
		t.Errorf("pods %s, want the launcher among them", pods[0].Name)
	}
}

// TestV2beta1LauncherIsABatchJob: written at mpi-operator's API, the launcher is a batch Job the
// apiserver accepts with the job's run policies and ExitCode's pod failure policy; kiln reads the
// launcher from the Job's pod (this suite has no Job controller: the test plays it) and ends the
// job as the Job ends, with its reason, leaving the finished Job.
func TestV2beta1LauncherIsABatchJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	written := builder.MPIJobV2beta1("v2", ns, 2)
	written.Spec.RunPolicy.BackoffLimit = ptr.To[int32](2)
	written.Spec.MPIReplicaSpecs[kubeflowv1.MPIJobReplicaTypeLauncher].RestartPolicy = kubeflowv1.RestartPolicyExitCode
	if err := env.Client.Create(ctx, written); err != nil {
		t.Fatalf("creating the v2beta1 MPIJob: %v", err)
	}
	job := &kubeflowv1.MPIJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "v2"}}
	workers := waitPods(t, job, 2)
	var launcher batchv1.Job
	env.Await(t, ns, "v2-launcher", &launcher)
	spec := launcher.Spec
	if *spec.BackoffLimit != 2 || *spec.PodReplacementPolicy != batchv1.Failed || spec.PodFailurePolicy == nil ||
		spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever || spec.Template.Labels[kubeflowv1.LabelReplicaType] != "launcher" {
		t.Errorf("the launcher Job: backoffLimit %v, replacement %v, failure policy %v, restart %s, labels %v",
			spec.BackoffLimit, spec.PodReplacementPolicy, spec.PodFailurePolicy, spec.Template.Spec.RestartPolicy, spec.Template.Labels)
	}

	// The Job's pod, as the Job controller makes it, running with the workers: the job runs.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "v2-launcher-x7k2p", Labels: spec.Template.Labels, Annotations: spec.Template.Annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&launcher, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: spec.Template.Spec,
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatalf("creating the launcher Job's pod: %v", err)
	}
	runAll(t, workers)
	env.Run(t, pod)
	waitCondition(t, job, kubeflowv1.JobRunning)

	// The program exits 3: the Job fails by its pod failure policy, and so does the MPIJob.
	env.Exit(t, pod, 3)
	testenv.Eventually(t, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&launcher), &launcher); err != nil {
			return err
		}
		now := metav1.Now()
		launcher.Status = batchv1.JobStatus{StartTime: &now, Failed: 1, Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "PodFailurePolicy", Message: "Container mpi-launcher for pod exited with code 3", LastTransitionTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "PodFailurePolicy", Message: "Container mpi-launcher for pod exited with code 3", LastTransitionTime: now},
		}}
		return env.Client.Status().Update(ctx, &launcher)
	})
	failed := waitCondition(t, job, kubeflowv1.JobFailed)
	c := testenv.Condition(failed, kubeflowv1.JobFailed)
	if c.Reason != "PodFailurePolicy" || !strings.HasSuffix(c.Message, "the launcher's last pod v2-launcher-x7k2p exited with code 3") {
		t.Errorf("Failed: %s %q, want the Job's reason and the pod's exit code", c.Reason, c.Message)
	}
	// cleanPodPolicy Running: the workers go, the finished Job stays.
	testenv.Eventually(t, func() error {
		return testenv.Count("workers of v2", len(env.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: "v2", kubeflowv1.LabelReplicaType: "worker"})), 0)
	})
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&launcher), &launcher); err != nil || launcher.DeletionTimestamp != nil {
		t.Errorf("the finished launcher Job: %v, deleting %v; want it kept", err, launcher.DeletionTimestamp)
	}
}
