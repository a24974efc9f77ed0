package e2e

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	kubeflowv2beta1 "github.com/kiln-ml/kiln/api/kubeflow.org/v2beta1"
	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	servingv1beta1 "github.com/kiln-ml/kiln/api/serving/v1beta1"
	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/internal/migration"
	"github.com/kiln-ml/kiln/test/testenv"
)

// mpi-operator's own v2beta1 example, unchanged, runs on kiln: launcher and workers over SSH as
// mpi-operator runs them, the launcher a batch Job, Succeeded when mpirun exits 0 (kwok ends the
// pods of every batch Job so, as soon as they run: the test checks what ran once it has ended),
// and the same job read at v1 is the one written at v2beta1.
func TestMPIOperatorPiExample(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t)
	objs, err := devcluster.ReadObjects(filepath.Join(testenv.RepoRoot(), "test", "e2e", "testdata", "mpi-operator-pi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	manifest := objs[0]
	manifest.SetNamespace(ns)
	if err := cluster.Client.Create(ctx, manifest.DeepCopy()); err != nil {
		t.Fatalf("applying mpi-operator's pi.yaml: %v", err)
	}
	key := client.ObjectKey{Namespace: ns, Name: "pi"}
	var done kubeflowv2beta1.MPIJob
	testenv.EventuallyWithin(t, timeout, func() error {
		if err := cluster.Client.Get(ctx, key, &done); err != nil {
			return err
		}
		if c := testenv.StatusCondition(done.Status, kubeflowv1.JobSucceeded); c.Status != corev1.ConditionTrue {
			return fmt.Errorf("pi at v2beta1 is not Succeeded: %+v", done.Status.Conditions)
		}
		return nil
	})
	if c := testenv.StatusCondition(done.Status, kubeflowv1.JobSucceeded); c.Reason != "MPIJobSucceeded" {
		t.Errorf("Succeeded reason %q, want mpi-operator's MPIJobSucceeded", c.Reason)
	}
	if l, w := done.Status.ReplicaStatuses[kubeflowv1.MPIJobReplicaTypeLauncher], done.Status.ReplicaStatuses[kubeflowv1.MPIJobReplicaTypeWorker]; l == nil || l.Succeeded != 1 || w == nil || w.Succeeded != 2 {
		t.Errorf("replica statuses: launcher %+v, workers %+v; want the launcher and both workers to the end", l, w)
	}
	var at1 kubeflowv1.MPIJob
	if err := cluster.Client.Get(ctx, key, &at1); err != nil {
		t.Fatal(err)
	}
	if got := at1.Annotations[kubeflowv1.AnnotationMPISSHAuthMountPath]; got != "/home/mpiuser/.ssh" {
		t.Errorf("at v1, the SSH mount path annotation is %q, want sshAuthMountPath's /home/mpiuser/.ssh", got)
	}
	if n := *at1.Spec.MPIReplicaSpecs[kubeflowv1.MPIJobReplicaTypeWorker].Replicas; n != 2 || *at1.Spec.SlotsPerWorker != 1 ||
		*at1.Spec.RunPolicy.CleanPodPolicy != kubeflowv1.CleanPodPolicyRunning || *at1.Spec.RunPolicy.TTLSecondsAfterFinished != 60 {
		t.Errorf("at v1: %d workers, %d slots, %+v: want the manifest's", n, *at1.Spec.SlotsPerWorker, at1.Spec.RunPolicy)
	}

	// The launcher is a batch Job pi-launcher, as mpi-operator's, with the job's run policies; it
	// stays, finished, with its pod (until its TTL of 60 s).
	var launcherJob batchv1.Job
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pi-launcher"}, &launcherJob); err != nil {
		t.Fatalf("the launcher's Job: %v", err)
	}
	if ref := metav1.GetControllerOf(&launcherJob); ref == nil || ref.APIVersion != "kubeflow.org/v2beta1" || ref.Kind != "MPIJob" || ref.Name != "pi" {
		t.Errorf("the launcher Job is controlled by %v, want MPIJob pi at v2beta1 (as Kueue finds its ancestor)", ref)
	}
	if spec := launcherJob.Spec; *spec.TTLSecondsAfterFinished != 60 || *spec.BackoffLimit != 6 || *spec.PodReplacementPolicy != batchv1.Failed {
		t.Errorf("the launcher Job's TTL %d, backoffLimit %d, pod replacement %s: want the manifest's 60, the Job's default 6, Failed",
			*spec.TTLSecondsAfterFinished, *spec.BackoffLimit, *spec.PodReplacementPolicy)
	}
	launchers := cluster.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: "pi", kubeflowv1.LabelReplicaType: "launcher"})
	if len(launchers) != 1 {
		t.Fatalf("%d launcher pods, want the Job's one", len(launchers))
	}
	launcher := launchers[0]
	if ref := metav1.GetControllerOf(&launcher); ref == nil || ref.Kind != "Job" || ref.UID != launcherJob.UID {
		t.Errorf("the launcher pod %s is controlled by %v, want its Job pi-launcher", launcher.Name, ref)
	}
	var mount string
	for _, m := range launcher.Spec.Containers[0].VolumeMounts {
		if m.Name == "ssh-auth" {
			mount = m.MountPath
		}
	}
	if mount != "/home/mpiuser/.ssh" {
		t.Errorf("the launcher's key pair is mounted at %q, want /home/mpiuser/.ssh", mount)
	}
	// As mpi-operator reaches them: one headless Service pi, each pod <pod>.pi.<ns>.svc.
	var svc corev1.Service
	if err := cluster.Client.Get(ctx, key, &svc); err != nil || svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("the job's Service pi: %v, clusterIP %q, want a headless one", err, svc.Spec.ClusterIP)
	}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pi-worker-0"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Service per pod (pi-worker-0): %v, want none", err)
	}
	if launcher.Spec.Hostname != "pi-launcher" || launcher.Spec.Subdomain != "pi" {
		t.Errorf("the launcher's hostname %q, subdomain %q: want pi-launcher under pi", launcher.Spec.Hostname, launcher.Spec.Subdomain)
	}
	var config corev1.ConfigMap
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pi-config"}, &config); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("pi-worker-0.pi.%[1]s.svc slots=1\npi-worker-1.pi.%[1]s.svc slots=1\n", ns); config.Data["hostfile"] != want {
		t.Errorf("hostfile %q, want %q", config.Data["hostfile"], want)
	}
	// cleanPodPolicy Running: the workers' sshd never exits; they go once the launcher is done.
	testenv.EventuallyWithin(t, timeout, func() error {
		return testenv.Count("pods of pi", len(cluster.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: "pi", kubeflowv1.LabelReplicaType: "worker"})), 0)
	})
}

// kubectl explain documents every served version of kiln's kinds, the field docs of each.
func TestExplainDocumentsEveryVersion(t *testing.T) {
	for _, c := range []struct{ field, version, want string }{
		{"pyjob.spec.datasetPath", "training.kiln.dev/v1alpha1", "DATASET_PATH"},
		{"pyjob.spec.dataset.path", "training.kiln.dev/v1beta1", "DATASET_PATH"},
		{"isvc.spec.modelUri", "serving.kiln.dev/v1alpha1", "pvc://"},
		{"isvc.spec.model.uri", "serving.kiln.dev/v1beta1", "pvc://"},
		{"mpijob.spec.mainContainer", "kubeflow.org/v1", "kubectl-exec"},
		{"mpijob.spec.sshAuthMountPath", "kubeflow.org/v2beta1", "/root/.ssh"},
	} {
		if out := kubectl(t, "explain", c.field, "--api-version="+c.version); !strings.Contains(out, c.want) {
			t.Errorf("kubectl explain %s --api-version=%s does not say %q:\n%s", c.field, c.version, c.want, out)
		}
	}
	// What kubectl reads by default (README, API versions): the newest version of a kind.
	out := kubectl(t, "api-resources", "--no-headers")
	for kind, want := range map[string]string{"pyjobs": "training.kiln.dev/v1beta1", "inferenceservices": "serving.kiln.dev/v1beta1", "mpijobs": "kubeflow.org/v1"} {
		found := false
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == kind && slices.Contains(f, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("kubectl api-resources does not prefer %s for %s:\n%s", want, kind, out)
		}
	}
}

// An InferenceService stored at v1alpha1, as before v1beta1 became the storage version, is
// rewritten by the cluster's own storage version migrator (kube-controller-manager's, for
// StorageVersionMigrations, served from Kubernetes 1.37) when kiln migrate-storage asks, and
// v1alpha1 leaves the CRD's storedVersions. Not parallel: it changes the storage version of a
// CRD every test uses, while no other test runs.
func TestMigrateStorageWithTheClustersMigrator(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t)
	const crdName = "inferenceservices.serving.kiln.dev"
	storeAt := func(version string) { testenv.StoreAt(t, cluster.Client, crdName, version) }
	storeAt("v1alpha1")
	t.Cleanup(func() { storeAt("v1beta1") })
	isvc := &servingv1alpha1.InferenceService{
		ObjectMeta: metav1.ObjectMeta{Name: "before-upgrade", Namespace: ns},
		Spec:       servingv1alpha1.InferenceServiceSpec{ModelURI: "pvc://models/iris", Framework: servingv1alpha1.FrameworkSKLearn},
	}
	if err := cluster.Client.Create(ctx, isvc); err != nil {
		t.Fatal(err)
	}
	storeAt("v1beta1") // the upgrade

	var out bytes.Buffer
	// The migrator starts only once the garbage collector's informer of the resource has reached
	// the resource version it listed, which an idle resource's watch learns from a bookmark: the
	// apiserver sends one about once a minute, and the migrator's retries back off meanwhile. One
	// minute, the wait of every other test here, is a coin toss; kiln migrate-storage waits 10.
	const migratorWait = 5 * time.Minute
	if err := migration.Run(ctx, cluster.Client, migration.Options{CRDs: []string{crdName}, Method: migration.Auto, Timeout: migratorWait, Out: &out}); err != nil {
		t.Fatalf("kiln migrate-storage: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "-> [v1beta1] (storageversionmigration)") {
		t.Errorf("kiln migrate-storage did not use the cluster's migrator:\n%s", out.String())
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		t.Fatal(err)
	}
	if got := crd.Status.StoredVersions; !slices.Equal(got, []string{"v1beta1"}) {
		t.Errorf("stored versions after the migration: %v, want [v1beta1]", got)
	}
	var after servingv1beta1.InferenceService
	if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(isvc), &after); err != nil || after.Spec.Model.URI != "pvc://models/iris" {
		t.Errorf("the migrated InferenceService at v1beta1: %v %+v", err, after.Spec.Model)
	}
}
