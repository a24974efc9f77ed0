package addons

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	kubeflowv2beta1 "github.com/kiln-ml/kiln/api/kubeflow.org/v2beta1"
	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/kueue"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

// kueueConfig runs Kueue for batch Jobs (PyJob's), TFJobs, PyTorchJobs, MPIJobs (its MPIJob
// integration speaks mpi-operator's kubeflow.org/v2beta1, served by kiln's conversion) and
// TrainJobs (Kubeflow Trainer's API, served by kiln) with a queue-name label,
// its webhooks on a local address with the certificate of kueueCertSecret.
const kueueConfig = `apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health:
  healthProbeBindAddress: "0"
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %q
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: true
manageJobsWithoutQueueName: false
integrations:
  frameworks:
  - batch/job
  - kubeflow.org/tfjob
  - kubeflow.org/pytorchjob
  - kubeflow.org/mpijob
  - trainer.kubeflow.org/trainjob
`

// kueueWebhookPaths picks, of Kueue's webhooks, those for its own kinds and the integrations the
// suite enables (the others would call Kueue for every Pod and Deployment of the cluster).
var kueueWebhookPaths = []string{"-kueue-x-k8s-io-", "-batch-v1-job", "-kubeflow-org-v1-tfjob", "-kubeflow-org-v1-pytorchjob", "-kubeflow-org-v2beta1-mpijob", "-trainer-kubeflow-org-v1alpha1-trainjob"}

// kueueConverted are the CRDs Kueue's own kustomization gives a conversion webhook
// (config/components/crd/kustomization.yaml).
var kueueConverted = []string{"localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters"}

// resourceFlavor is the one flavor every test's ClusterQueue offers.
const resourceFlavor = "default"

// startKueue installs Kueue's CRDs and webhooks, wired by URL to a Kueue started on this machine
// (as kiln's are for a local kiln), and waits until its webhooks answer.
func startKueue(c *testenv.Cluster, dir string) (func(), error) {
	home, err := addonDir(c, "kueue", "sigs.k8s.io/kueue")
	if err != nil {
		return nil, err
	}
	addr, err := devcluster.FreeAddr()
	if err != nil {
		return nil, err
	}
	_, portText, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portText)
	secret, bundle, err := kueueCertSecret()
	if err != nil {
		return nil, err
	}
	base := "https://" + addr
	ctx := context.Background()
	if err := installKueueAPI(ctx, c, home, base, bundle); err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secret.Namespace}}
	if err := c.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	if err := c.Client.Create(ctx, secret); err != nil {
		return nil, err
	}
	// Kueue waits for its Secret mounted in its certificate folder, as a kubelet would.
	certDir := filepath.Join(dir, "kueue-certs")
	if err := writeFiles(certDir, secret.Data); err != nil {
		return nil, err
	}
	config := filepath.Join(dir, "kueue.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, kueueConfig, port, certDir), 0o600); err != nil {
		return nil, err
	}
	kueue, err := testenv.StartProcess("kueue", dir, []string{"KUBECONFIG=" + c.Kubeconfig},
		filepath.Join(home, "kueue"), "--config", config, "--feature-gates", "VisibilityOnDemand=false")
	if err != nil {
		return nil, err
	}
	// Kueue answers once its webhooks serve; the flavor every test uses is the probe.
	flavor := kueueObject("ResourceFlavor", "", resourceFlavor, map[string]any{})
	var last error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := kueue.Exited(); err != nil {
			return false, err
		}
		last = c.Client.Create(ctx, flavor.DeepCopy())
		return last == nil || apierrors.IsAlreadyExists(last), nil
	})
	if err != nil {
		return kueue.Stop, fmt.Errorf("Kueue did not answer within 2 minutes: %v (last: %v); its log: %s", err, last, kueue.Log)
	}
	return kueue.Stop, nil
}

// kueueCertSecret is the Secret of Kueue's own certificate management, made up front with a
// serving certificate valid for Kueue's service name (which Kueue checks before using it) and for
// 127.0.0.1 (where the apiserver calls it here). Kueue writes it to its webhook server's folder
// and injects the CA into its webhook configurations and CRDs. (With its certificate management
// off, Kueue reads its metrics certificate from a fixed /etc folder.)
func kueueCertSecret() (*corev1.Secret, []byte, error) {
	files, err := devcluster.ServingCert("kueue", "kueue-webhook-service.kueue-system.svc")
	if err != nil {
		return nil, nil, err
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kueue-system", Name: "kueue-webhook-server-cert"}, Data: files}, files["ca.crt"], nil
}

// installKueueAPI installs Kueue's CRDs (their conversion webhooks at base/convert) and its
// webhook configurations for the kinds the suite uses, all trusting bundle.
func installKueueAPI(ctx context.Context, c *testenv.Cluster, home, base string, bundle []byte) error {
	caBundle := base64.StdEncoding.EncodeToString(bundle)
	crds, err := devcluster.ReadObjects(filepath.Join(home, "crds"))
	if err != nil {
		return err
	}
	for _, crd := range crds {
		plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
		for _, p := range kueueConverted {
			if p == plural {
				_ = unstructured.SetNestedField(crd.Object, map[string]any{
					"strategy": "Webhook",
					"webhook": map[string]any{
						"conversionReviewVersions": []any{"v1"},
						"clientConfig":             map[string]any{"url": base + "/convert", "caBundle": caBundle},
					},
				}, "spec", "conversion")
			}
		}
	}
	if err := devcluster.Apply(ctx, c.Client, "", crds); err != nil {
		return err
	}
	if err := devcluster.WaitEstablished(ctx, c.Client, crds); err != nil {
		return err
	}
	configs, err := devcluster.ReadObjects(filepath.Join(home, "webhooks.yaml"))
	if err != nil {
		return err
	}
	for _, cfg := range configs {
		hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
		var kept []any
		for _, h := range hooks {
			hook := h.(map[string]any)
			path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path")
			for _, p := range kueueWebhookPaths {
				if strings.Contains(path, p) {
					hook["clientConfig"] = map[string]any{"url": base + path, "caBundle": caBundle}
					kept = append(kept, hook)
					break
				}
			}
		}
		cfg.SetName("kueue-" + cfg.GetName())
		if err := unstructured.SetNestedSlice(cfg.Object, kept, "webhooks"); err != nil {
			return err
		}
	}
	return devcluster.Apply(ctx, c.Client, "", configs)
}

// kueueObject is a kueue.x-k8s.io/v1beta2 object.
func kueueObject(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion("kueue.x-k8s.io/v1beta2")
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// queueFor makes a LocalQueue "queue" in ns whose ClusterQueue (named after ns, for ns alone) has
// quota for cpu CPUs: room for one of the test's jobs at a time.
func queueFor(t *testing.T, ns string, cpu int64) {
	t.Helper()
	cq := kueueObject("ClusterQueue", "", ns, map[string]any{
		"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": ns}},
		"resourceGroups": []any{map[string]any{
			"coveredResources": []any{"cpu", "memory"},
			"flavors": []any{map[string]any{"name": resourceFlavor, "resources": []any{
				map[string]any{"name": "cpu", "nominalQuota": cpu},
				map[string]any{"name": "memory", "nominalQuota": "1Ti"},
			}}},
		}},
	})
	lq := kueueObject("LocalQueue", ns, "queue", map[string]any{"clusterQueue": ns})
	for _, o := range []*unstructured.Unstructured{cq, lq} {
		if err := cluster.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), cq) })
}

// oneCPU makes every container of a template ask for one CPU and 1Gi, which Kueue counts against
// the quota.
func oneCPU(t *corev1.PodTemplateSpec) {
	for i := range t.Spec.Containers {
		t.Spec.Containers[i].Resources.Requests = corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"),
		}
	}
}

// queued is the test of every kind Kueue queues: two jobs in a queue with room for one; the one
// Kueue admits first runs to its end while the other has no pods, then the other runs.
// podsOf counts a job's pods, done says it has succeeded, waiting checks what the waiting job
// says of itself.
func queued[J client.Object](t *testing.T, jobs [2]J, podsOf func(J) int, done func(J) (bool, error), waiting func(J) error) {
	t.Helper()
	for _, j := range jobs {
		if err := cluster.Client.Create(context.Background(), j); err != nil {
			t.Fatalf("creating %s: %v", j.GetName(), err)
		}
	}
	var first, second J
	testenv.EventuallyWithin(t, timeout, func() error {
		a, b := podsOf(jobs[0]), podsOf(jobs[1])
		switch {
		case a > 0 && b == 0:
			first, second = jobs[0], jobs[1]
		case b > 0 && a == 0:
			first, second = jobs[1], jobs[0]
		default:
			return fmt.Errorf("%s has %d pods, %s %d: want one job with pods, the other none", jobs[0].GetName(), a, jobs[1].GetName(), b)
		}
		return waiting(second)
	})
	t.Logf("Kueue admitted %s; %s waits", first.GetName(), second.GetName())
	testenv.EventuallyWithin(t, timeout, func() error {
		if n := podsOf(second); n != 0 {
			t.Fatalf("%s has %d pods while %s holds the quota", second.GetName(), n, first.GetName())
		}
		ok, err := done(first)
		if err == nil && !ok {
			err = fmt.Errorf("%s has not succeeded yet", first.GetName())
		}
		return err
	})
	testenv.EventuallyWithin(t, timeout, func() error {
		ok, err := done(second)
		if err == nil && !ok {
			err = fmt.Errorf("%s has not succeeded after %s freed the quota", second.GetName(), first.GetName())
		}
		return err
	})
}

// queuedKind runs queued for a kubeflow.org kind built by job.
func queuedKind(t *testing.T, job func(name, ns string) *builder.Job) {
	t.Parallel()
	ns := cluster.Namespace(t)
	queueFor(t, ns, 2)
	var jobs [2]framework.Job
	for i, name := range []string{"one", "two"} {
		b := job(name, ns)
		for rtype := range b.Obj().GetReplicaSpecs() {
			b.Template(rtype, oneCPU).Annotate(rtype, "kiln.dev/simulate-duration", "5s")
		}
		jobs[i] = b.Edit(func(j framework.Job) { j.SetLabels(map[string]string{kueue.QueueLabel: "queue"}) }).Obj()
	}
	queued(t, jobs, func(j framework.Job) int {
		return len(cluster.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: j.GetName()}))
	}, func(j framework.Job) (bool, error) {
		fresh, err := get(j)
		return err == nil && testenv.Condition(fresh, kubeflowv1.JobSucceeded).Status == corev1.ConditionTrue, err
	}, func(j framework.Job) error {
		fresh, err := get(j)
		if err != nil {
			return err
		}
		return heldByKueue(t, j.GetName(), fresh.GetRunPolicy().Suspend, *fresh.GetJobStatus())
	})
}

// heldByKueue checks that a kubeflow.org job waiting for Kueue is suspended and says so.
func heldByKueue(t *testing.T, name string, suspend *bool, status kubeflowv1.JobStatus) error {
	if !ptr.Deref(suspend, false) {
		return fmt.Errorf("%s waits but Kueue has not suspended it", name)
	}
	c := testenv.StatusCondition(status, kubeflowv1.JobSuspended)
	if c.Status != corev1.ConditionTrue || !strings.Contains(c.Message, "waiting for Kueue to admit it from LocalQueue queue") {
		return fmt.Errorf("%s waits; its Suspended condition is %s: %q", name, c.Status, c.Message)
	}
	t.Logf("%s: %s", name, c.Message)
	return nil
}

func TestKueueQueuesTFJobs(t *testing.T) {
	queuedKind(t, func(name, ns string) *builder.Job { return builder.TFJob(name, ns).Replicas("Worker", 2) })
}

func TestKueueQueuesPyTorchJobs(t *testing.T) {
	queuedKind(t, func(name, ns string) *builder.Job {
		return builder.PyTorchJob(name, ns).Replicas("Master", 1).Replicas("Worker", 1)
	})
}

// Kueue's MPIJob integration, which knows only mpi-operator's v2beta1 API, queues v2beta1 MPIJobs
// that kiln runs: it reads, suspends and resumes them at v2beta1 through kiln's conversion webhook.
// The namespace has a default LocalQueue too: Kueue gives a Job without a queue name that one
// unless it knows the Job's owner as a kind it manages, so the launcher Jobs, named by their
// MPIJobs at v2beta1, must get no queue of their own (they would wait for quota the MPIJob holds).
func TestKueueQueuesV2beta1MPIJobs(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	queueFor(t, ns, 2)
	if err := cluster.Client.Create(context.Background(), kueueObject("LocalQueue", ns, "default", map[string]any{"clusterQueue": ns})); err != nil {
		t.Fatalf("creating the default LocalQueue: %v", err)
	}
	var jobs [2]*kubeflowv2beta1.MPIJob
	for i, name := range []string{"one", "two"} {
		j := builder.MPIJobV2beta1(name, ns, 1)
		j.Labels = map[string]string{kueue.QueueLabel: "queue"}
		for _, spec := range j.Spec.MPIReplicaSpecs {
			oneCPU(&spec.Template)
		}
		j.Spec.MPIReplicaSpecs["Launcher"].Template.Annotations = map[string]string{"kiln.dev/simulate-duration": "5s"}
		jobs[i] = j
	}
	fresh := func(j *kubeflowv2beta1.MPIJob) (*kubeflowv2beta1.MPIJob, error) {
		f := &kubeflowv2beta1.MPIJob{}
		return f, cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(j), f)
	}
	queued(t, jobs, func(j *kubeflowv2beta1.MPIJob) int {
		return len(cluster.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: j.Name}))
	}, func(j *kubeflowv2beta1.MPIJob) (bool, error) {
		f, err := fresh(j)
		return err == nil && testenv.StatusCondition(f.Status, kubeflowv1.JobSucceeded).Status == corev1.ConditionTrue, err
	}, func(j *kubeflowv2beta1.MPIJob) error {
		f, err := fresh(j)
		if err != nil {
			return err
		}
		return heldByKueue(t, j.Name, f.Spec.RunPolicy.Suspend, f.Status)
	})
	var workloads unstructured.UnstructuredList
	workloads.SetAPIVersion("kueue.x-k8s.io/v1beta2")
	workloads.SetKind("WorkloadList")
	if err := cluster.Client.List(context.Background(), &workloads, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, w := range workloads.Items {
		if o := w.GetOwnerReferences(); len(o) != 1 || o[0].APIVersion != "kubeflow.org/v2beta1" || o[0].Kind != "MPIJob" {
			t.Errorf("Workload %s is owned by %v: want a kubeflow.org/v2beta1 MPIJob", w.GetName(), o)
		}
	}
	if len(workloads.Items) != 2 {
		t.Errorf("%d Workloads, want one per MPIJob", len(workloads.Items))
	}
	var launchers batchv1.JobList
	if err := cluster.Client.List(context.Background(), &launchers, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, j := range launchers.Items {
		if q, ok := j.Labels[kueue.QueueLabel]; ok {
			t.Errorf("the launcher Job %s is in queue %q, want none: its MPIJob is queued", j.Name, q)
		}
	}
	if len(launchers.Items) != 2 {
		t.Errorf("%d launcher Jobs, want one per MPIJob", len(launchers.Items))
	}
}

// A PyJob's queue label reaches its batch Job, which Kueue holds suspended (kiln does not resume
// it) while the PyJob says it waits for Kueue.
func TestKueueQueuesPyJobs(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	queueFor(t, ns, 1)
	var jobs [2]*trainingv1alpha1.PyJob
	for i, name := range []string{"one", "two"} {
		jobs[i] = builder.PyJob(name, ns, func(s *trainingv1alpha1.PyJobSpec) {
			s.Resources = trainingv1alpha1.Resources{CPU: ptr.To(resource.MustParse("1")), Memory: ptr.To(resource.MustParse("1Gi"))}
		})
		jobs[i].Labels = map[string]string{kueue.QueueLabel: "queue"}
		jobs[i].Annotations = map[string]string{"kiln.dev/simulate-duration": "5s", "kiln.dev/simulate-exit-code": "0"}

	}
	fresh := func(j *trainingv1alpha1.PyJob) (*trainingv1alpha1.PyJob, error) {
		f := &trainingv1alpha1.PyJob{}
		return f, cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(j), f)
	}
	queued(t, jobs, func(j *trainingv1alpha1.PyJob) int {
		return len(cluster.Pods(t, ns, map[string]string{"training.kiln.dev/pyjob-name": j.Name}))
	}, func(j *trainingv1alpha1.PyJob) (bool, error) {
		f, err := fresh(j)
		return err == nil && f.Status.Phase == trainingv1alpha1.PyJobSucceeded, err
	}, func(j *trainingv1alpha1.PyJob) error {
		f, err := fresh(j)
		if err != nil {
			return err
		}
		var batch batchv1.Job
		if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(j), &batch); err != nil {
			return err
		}
		if !ptr.Deref(batch.Spec.Suspend, false) || batch.Labels[kueue.QueueLabel] != "queue" {
			return fmt.Errorf("batch Job %s: suspend %v, labels %v: want suspended by Kueue, in queue", batch.Name, batch.Spec.Suspend, batch.Labels)
		}
		if f.Status.Phase != trainingv1alpha1.PyJobPending || !strings.Contains(f.Status.Message, "Kueue") {
			return fmt.Errorf("PyJob %s is %s: %q; want Pending, waiting for Kueue", j.Name, f.Status.Phase, f.Status.Message)
		}
		t.Logf("PyJob %s: %s", j.Name, f.Status.Message)
		return nil
	})
}

// Kueue's trainer.kubeflow.org/trainjob integration queues TrainJobs kiln runs: it suspends them
// and resumes the one it admits with its placement in a runtime patch, which reaches the JobSet.
func TestKueueQueuesTrainJobs(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	queueFor(t, ns, 1)
	rt := &trainerv1alpha1.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "torch"}}
	rt.Spec.MLPolicy = &trainerv1alpha1.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainerv1alpha1.MLPolicySource{Torch: &trainerv1alpha1.TorchMLPolicySource{}}}
	rj := jobsetv1alpha2.ReplicatedJob{Name: "node"}
	rj.Template.Labels = map[string]string{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
	rj.Template.Spec.Template.Annotations = map[string]string{"kiln.dev/simulate-duration": "5s"}
	rj.Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: "node", Image: "pytorch/pytorch:2.0"}}
	oneCPU(&rj.Template.Spec.Template)
	rt.Spec.Template.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{rj}
	if err := cluster.Client.Create(context.Background(), rt); err != nil {
		t.Fatal(err)
	}
	var jobs [2]*trainerv1alpha1.TrainJob
	for i, name := range []string{"one", "two"} {
		jobs[i] = &trainerv1alpha1.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{kueue.QueueLabel: "queue"}},
			Spec: trainerv1alpha1.TrainJobSpec{RuntimeRef: trainerv1alpha1.RuntimeRef{Name: "torch", Kind: ptr.To("TrainingRuntime")}}}
	}
	// Kueue's TrainJob webhook reads the runtime from its informer cache, which learns of the
	// runtime a moment after it is created; until then it refuses TrainJobs ("runtime 'torch' not
	// found"). A dry-run create passes through the webhook without making anything.
	testenv.EventuallyWithin(t, timeout, func() error {
		return cluster.Client.Create(context.Background(), jobs[0].DeepCopy(), client.DryRunAll)
	})
	fresh := func(j *trainerv1alpha1.TrainJob) (*trainerv1alpha1.TrainJob, error) {
		f := &trainerv1alpha1.TrainJob{}
		return f, cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(j), f)
	}
	queued(t, jobs, func(j *trainerv1alpha1.TrainJob) int {
		return len(cluster.Pods(t, ns, map[string]string{"jobset.sigs.k8s.io/jobset-name": j.Name}))
	}, func(j *trainerv1alpha1.TrainJob) (bool, error) {
		f, err := fresh(j)
		return err == nil && meta.IsStatusConditionTrue(f.Status.Conditions, trainerv1alpha1.TrainJobComplete), err
	}, func(j *trainerv1alpha1.TrainJob) error {
		f, err := fresh(j)
		if err != nil {
			return err
		}
		if !ptr.Deref(f.Spec.Suspend, false) || !meta.IsStatusConditionTrue(f.Status.Conditions, trainerv1alpha1.TrainJobSuspended) {
			return fmt.Errorf("TrainJob %s: suspend %v, conditions %+v: want suspended by Kueue", j.Name, f.Spec.Suspend, f.Status.Conditions)
		}
		return nil
	})
	for _, j := range jobs {
		f, err := fresh(j)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(f.Spec.RuntimePatches, func(p trainerv1alpha1.RuntimePatch) bool { return p.Manager == "kueue.x-k8s.io/manager" }) {
			t.Errorf("TrainJob %s has no patch of Kueue's: %+v", j.Name, f.Spec.RuntimePatches)
		}
	}
}

func get(job framework.Job) (framework.Job, error) {
	fresh := job.DeepCopyObject().(framework.Job)
	return fresh, cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(job), fresh)
}
