package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

const (
	duration = "kiln.dev/simulate-duration"
	exitCode = "kiln.dev/simulate-exit-code"
)

func TestTFJobAndPyTorchJobRunToSucceeded(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	tf := create(t, builder.TFJob("tf", ns).Replicas("PS", 1).Replicas("Worker", 2).
		Annotate("PS", duration, "1h").Annotate("Worker", duration, "2s").Obj())
	pt := create(t, builder.PyTorchJob("pt", ns).Replicas("Master", 1).Replicas("Worker", 2).
		Annotate("Master", duration, "2s").Annotate("Worker", duration, "2s").Obj())
	for _, job := range []framework.Job{tf, pt} {
		done := waitCondition(t, job, kubeflowv1.JobSucceeded)
		if done.GetJobStatus().CompletionTime == nil || done.GetJobStatus().StartTime == nil {
			t.Errorf("%s: startTime %v completionTime %v, want both", job.GetName(), done.GetJobStatus().StartTime, done.GetJobStatus().CompletionTime)
		}
		// It went through Running: the condition stays, turned False by the success.
		if c := testenv.Condition(done, kubeflowv1.JobRunning); c.Status != corev1.ConditionFalse {
			t.Errorf("%s: Running condition %+v, want one turned False by Succeeded", job.GetName(), c)
		}
	}
	// The PS ran for an hour: cleanPodPolicy Running (kiln's default) deleted it.
	testenv.EventuallyWithin(t, timeout, func() error {
		for _, p := range jobPods(t, tf) {
			if p.Labels[kubeflowv1.LabelReplicaType] == "ps" {
				return fmt.Errorf("PS pod %s still exists", p.Name)
			}
		}
		return nil
	})
}

func TestExitCodePolicyOnARealCluster(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	fails := create(t, builder.TFJob("exit1", ns).Replicas("Worker", 2).RestartPolicy("Worker", kubeflowv1.RestartPolicyExitCode).
		Annotate("Worker", duration, "1s").Annotate("Worker", exitCode, "1").Obj())
	waitCondition(t, fails, kubeflowv1.JobFailed)

	retried := create(t, builder.TFJob("exit137", ns).Replicas("Worker", 1).RestartPolicy("Worker", kubeflowv1.RestartPolicyExitCode).
		Annotate("Worker", duration, "1s").Annotate("Worker", exitCode, "137").Obj())
	seen := map[types.UID]bool{}
	testenv.EventuallyExplained(t, timeout, func() error {
		var now []string
		for _, p := range jobPods(t, retried) {
			seen[p.UID] = true
			now = append(now, fmt.Sprintf("%s %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName))
		}
		if len(seen) < 3 {
			return fmt.Errorf("exit137-worker-0 has had %d incarnations, want at least 3 (retried twice); now: %v", len(seen), now)
		}
		return nil
	}, func() string {
		out, _ := newKubectlKiln(t, ns).output(t, "describe", "tfjob/exit137")
		return "kubectl kiln describe tfjob/exit137:\n" + out
	})
	if job, _ := get(t, retried); hasTrue(job, kubeflowv1.JobFailed) {
		t.Errorf("a job whose worker exits 137 under ExitCode failed: %+v", job.GetJobStatus().Conditions)
	}
}

func TestDeletingAJobGarbageCollectsItsPodsAndServices(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	job := create(t, builder.PyTorchJob("gc", ns).Replicas("Master", 1).Replicas("Worker", 2).Annotate("Master", duration, "1h").Annotate("Worker", duration, "1h").Obj())
	waitPodCount(t, job, 3)
	if err := cluster.Client.Delete(context.Background(), job, client.PropagationPolicy("Background")); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyWithin(t, timeout, func() error {
		if n := len(jobPods(t, job)); n > 0 {
			return fmt.Errorf("%d pods left", n)
		}
		return testenv.Count("services", len(cluster.Services(t, ns, map[string]string{kubeflowv1.LabelJobName: "gc"})), 0)
	})
}

func TestTTLDeletesTheJobAndItsPods(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	job := create(t, builder.XGBoostJob("ttl", ns).Replicas("Master", 1).Annotate("Master", duration, "1s").TTLSecondsAfterFinished(5).Obj())
	waitCondition(t, job, kubeflowv1.JobSucceeded)
	testenv.EventuallyWithin(t, timeout, func() error {
		if _, err := get(t, job); !apierrors.IsNotFound(err) {
			return fmt.Errorf("job still there (%v)", err)
		}
		return testenv.Count("pods", len(jobPods(t, job)), 0)
	})
}

func TestCleanPodPolicies(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	mk := func(name string, p kubeflowv1.CleanPodPolicy) framework.Job {
		return create(t, builder.PyTorchJob(name, ns).Replicas("Master", 1).Replicas("Worker", 1).CleanPodPolicy(p).
			Annotate("Master", duration, "2s").Annotate("Worker", duration, "1h").Obj())
	}
	all, none := mk("all", kubeflowv1.CleanPodPolicyAll), mk("none", kubeflowv1.CleanPodPolicyNone)
	waitCondition(t, all, kubeflowv1.JobSucceeded)
	waitCondition(t, none, kubeflowv1.JobSucceeded)
	waitPodCount(t, all, 0)
	testenv.Consistently(t, func() error { return testenv.Count("pods of none", len(jobPods(t, none)), 2) })
}

func TestSuspendAndResume(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	job := create(t, builder.TFJob("sus", ns).Replicas("Worker", 2).Annotate("Worker", duration, "1h").Obj())
	waitCondition(t, job, kubeflowv1.JobRunning)
	setSuspend(t, job, true)
	waitCondition(t, job, kubeflowv1.JobSuspended)
	waitPodCount(t, job, 0)
	setSuspend(t, job, false)
	waitPodCount(t, job, 2)
	waitCondition(t, job, kubeflowv1.JobRunning)
}

func TestKubectlShowsThePrinterColumns(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	job := create(t, builder.TFJob("cols", ns).Replicas("Worker", 2).Annotate("Worker", duration, "1h").Obj())
	// Same name, other kind: its pod is cols-master-0, the TFJob's cols-worker-<i>.
	create(t, builder.PyTorchJob("cols", ns).Replicas("Master", 1).Annotate("Master", duration, "1h").Obj())
	waitCondition(t, job, kubeflowv1.JobRunning)
	testenv.EventuallyWithin(t, timeout, func() error {
		out := kubectl(t, "get", "tfjobs,pytorchjobs", "-n", ns)
		for _, want := range []string{"STATE", "AGE", "WORKERS-ACTIVE", "tfjob.kubeflow.org/cols", "pytorchjob.kubeflow.org/cols", "Running"} {
			if !strings.Contains(out, want) {
				return fmt.Errorf("kubectl get tfjobs,pytorchjobs lacks %q:\n%s", want, out)
			}
		}
		return nil
	})
}

func TestInstallManifestsAreAccepted(t *testing.T) {
	t.Parallel()
	// A server-side dry run cannot place objects in a namespace it only pretended to create.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kiln-system"}}
	if err := cluster.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// This cluster already has kiln's webhook configurations, pointing at the test's manager by
	// URL; the install's copies (pointing at the Service) are checked under other names.
	docs := strings.Split(kubectl(t, "kustomize", "config/default"), "\n---\n")
	for i, d := range docs {
		if strings.Contains(d, "kind: MutatingWebhookConfiguration") || strings.Contains(d, "kind: ValidatingWebhookConfiguration") {
			d = strings.Replace(d, "\n  name: kiln-defaulting\n", "\n  name: kiln-defaulting-install-check\n", 1)
			docs[i] = strings.Replace(d, "\n  name: kiln-validation\n", "\n  name: kiln-validation-install-check\n", 1)
		}
		if strings.Contains(d, "kind: CustomResourceDefinition") && strings.Contains(d, "conversion:") {
			docs[i] = conversionAsInstalled(t, d)
		}
	}
	manifests := filepath.Join(t.TempDir(), "install.yaml")
	if err := os.WriteFile(manifests, []byte(strings.Join(docs, "\n---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	out := kubectl(t, "apply", "-f", manifests, "--dry-run=server")
	for _, want := range []string{"customresourcedefinition.apiextensions.k8s.io/tfjobs.kubeflow.org", "clusterrole.rbac.authorization.k8s.io/kiln-manager", "deployment.apps/kiln-manager",
		"service/kiln-webhook", "mutatingwebhookconfiguration.admissionregistration.k8s.io/kiln-defaulting-install-check", "validatingwebhookconfiguration.admissionregistration.k8s.io/kiln-validation-install-check"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply -k config/default --dry-run=server did not mention %s:\n%s", want, out)
		}
	}
}

func setSuspend(t *testing.T, job framework.Job, s bool) {
	t.Helper()
	testenv.EventuallyWithin(t, timeout, func() error {
		fresh, err := get(t, job)
		if err != nil {
			return err
		}
		fresh.GetRunPolicy().Suspend = &s
		return cluster.Client.Update(context.Background(), fresh)
	})
}

func hasTrue(job framework.Job, ct kubeflowv1.JobConditionType) bool {
	if job == nil {
		return false
	}
	for _, c := range job.GetJobStatus().Conditions {
		if c.Type == ct && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func TestKubectlScalesPyTorchJobWorkers(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	job := create(t, builder.PyTorchJob("scaled", ns).Replicas("Master", 1).Replicas("Worker", 1).
		Annotate("Master", duration, "1h").Annotate("Worker", duration, "1h").Obj())
	waitPodCount(t, job, 2)
	kubectl(t, "scale", "-n", ns, "pytorchjob/scaled", "--replicas=3")
	waitPodCount(t, job, 4)
	testenv.EventuallyWithin(t, timeout, func() error {
		out := kubectl(t, "get", "-n", ns, "pytorchjob/scaled", "-o", "jsonpath={.status.replicaStatuses.Worker.selector}")
		if !strings.Contains(out, "training.kubeflow.org/replica-type=worker") {
			return fmt.Errorf("Worker selector for the scale subresource = %q", out)
		}
		return nil
	})
}

// A quota that refuses a job's pods: the job's Created condition (the wide output's Message)
// names the quota, and a Warning event tells it.
func TestAJobRefusedByAQuotaSaysWhy(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	refuseAllPods(t, ns)
	job := create(t, builder.TFJob("refused", ns).Replicas("Worker", 1).Annotate("Worker", duration, "1s").Obj())
	testenv.EventuallyWithin(t, timeout, func() error {
		fresh, err := get(t, job)
		if err != nil {
			return err
		}
		if c := testenv.Condition(fresh, kubeflowv1.JobCreated); !strings.Contains(c.Message, "pods cannot be created: ") || !strings.Contains(c.Message, "exceeded quota: no-pods") {
			return fmt.Errorf("Created says %q", c.Message)
		}
		out := kubectl(t, "get", "tfjobs", "-n", ns, "-o", "wide")
		if !strings.Contains(out, "exceeded quota: no-pods") {
			return fmt.Errorf("kubectl get -o wide does not show the quota:\n%s", out)
		}
		t.Logf("%s", out)
		return nil
	})
}

// conversionAsInstalled is the CRD of doc with the conversion webhook this cluster's copy calls
// (kiln's by URL): a CRD's webhook is reached by URL or by Service, never both, and a dry run of
// the install's Service over the cluster's URL would merge the two.
func conversionAsInstalled(t *testing.T, doc string) string {
	t.Helper()
	var crd map[string]any
	if err := yaml.Unmarshal([]byte(doc), &crd); err != nil {
		t.Fatal(err)
	}
	var live apiextensionsv1.CustomResourceDefinition
	name, _, _ := unstructured.NestedString(crd, "metadata", "name")
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Name: name}, &live); err != nil {
		t.Fatal(err)
	}
	cc, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live.Spec.Conversion.Webhook.ClientConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedMap(crd, cc, "spec", "conversion", "webhook", "clientConfig"); err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
