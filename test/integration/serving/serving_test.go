// Package serving runs kiln's InferenceService controller against the real kube-apiserver. The
// tests run in order: the optional APIs (KEDA, Prometheus Operator, Gateway API) are installed
// part way, as a cluster admin would.
package serving

import (
	"context"
	"fmt"
	"k8s.io/utils/ptr"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	"github.com/kiln-ml/kiln/internal/controller/inferenceservice"
	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, func(e *testenv.Env) (func(), error) {
		// KServe's API too, served on the same engine.
		if err := devcluster.InstallCRDs(context.Background(), e.Client, testenv.KServeCRDs()); err != nil {
			return nil, err
		}
		o := testenv.ManagerOptions()
		o.Serving.FetchImage = "kiln.dev/kiln:test"
		o.Kinds = []string{"inferenceservice", "kserve-inferenceservice"}
		return e.StartManager(o)
	}))
}

func newISVC(ns, name string, edit func(*servingv1alpha1.InferenceServiceSpec)) *servingv1alpha1.InferenceService {
	i := &servingv1alpha1.InferenceService{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       servingv1alpha1.InferenceServiceSpec{ModelURI: "s3://models/iris/v1", Framework: servingv1alpha1.FrameworkSKLearn},
	}
	if edit != nil {
		edit(&i.Spec)
	}
	return i
}

func create(t *testing.T, i *servingv1alpha1.InferenceService) *servingv1alpha1.InferenceService {
	t.Helper()
	if err := env.Client.Create(context.Background(), i); err != nil {
		t.Fatalf("creating %s: %v", i.Name, err)
	}
	return i
}

func edit(t *testing.T, i *servingv1alpha1.InferenceService, change func(*servingv1alpha1.InferenceServiceSpec)) {
	t.Helper()
	testenv.Eventually(t, func() error {
		fresh := &servingv1alpha1.InferenceService{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(i), fresh); err != nil {
			return err
		}
		change(&fresh.Spec)
		return env.Client.Update(context.Background(), fresh)
	})
}

// deployment waits for a Deployment to exist and returns it.
func deployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	env.Await(t, ns, name, d)
	return d
}

// makeReady plays the Deployment controller: every replica exists and is ready.
func makeReady(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	testenv.Eventually(t, func() error {
		fresh := &appsv1.Deployment{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(d), fresh); err != nil {
			return err
		}
		n := int32(1)
		if fresh.Spec.Replicas != nil {
			n = *fresh.Spec.Replicas
		}
		// As the Deployment controller reports a finished rollout of the current template.
		fresh.Status.ObservedGeneration = fresh.Generation
		fresh.Status.Replicas, fresh.Status.UpdatedReplicas, fresh.Status.ReadyReplicas, fresh.Status.AvailableReplicas = n, n, n, n
		return env.Client.Status().Update(context.Background(), fresh)
	})
}

// rollOut waits until the Deployment's template serves model, then finishes its rollout.
func rollOut(t *testing.T, ns, name, model string) {
	t.Helper()
	testenv.Eventually(t, func() error {
		if got := deployment(t, ns, name).Spec.Template.Annotations["serving.kiln.dev/model-uri"]; got != model {
			return fmt.Errorf("pod template serves %q, want %q", got, model)
		}
		return nil
	})
	makeReady(t, deployment(t, ns, name))
}

func gone(t *testing.T, o client.Object) {
	t.Helper()
	testenv.Eventually(t, func() error {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("%T %s still exists (%v)", o, o.GetName(), err)
	})
}

func waitStatus(t *testing.T, i *servingv1alpha1.InferenceService, check func(*servingv1alpha1.InferenceService) error) *servingv1alpha1.InferenceService {
	t.Helper()
	fresh := &servingv1alpha1.InferenceService{}
	testenv.Eventually(t, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(i), fresh); err != nil {
			return err
		}
		return check(fresh)
	})
	return fresh
}

func conditionIs(t string, s metav1.ConditionStatus) func(*servingv1alpha1.InferenceService) error {
	return func(i *servingv1alpha1.InferenceService) error {
		c := meta.FindStatusCondition(i.Status.Conditions, t)
		if c == nil || c.Status != s {
			return fmt.Errorf("%s condition %+v, want %s", t, c, s)
		}
		return nil
	}
}

func TestBadInputIsRejectedNamingTheField(t *testing.T) {
	ns := env.Namespace(t)
	tests := []struct {
		name string
		edit func(*servingv1alpha1.InferenceServiceSpec)
		want string
	}{
		{"maxReplicas below minReplicas", func(s *servingv1alpha1.InferenceServiceSpec) {
			s.MinReplicas, s.MaxReplicas = ptr.To[int32](3), ptr.To[int32](2)
		}, "spec.maxReplicas must be at least spec.minReplicas"},
		{"canaryPercent 101", func(s *servingv1alpha1.InferenceServiceSpec) {
			s.Traffic = &servingv1alpha1.Traffic{CanaryVersion: "s3://m/v2", CanaryPercent: 101}
		}, "spec.traffic.canaryPercent"},
		{"unknown framework", func(s *servingv1alpha1.InferenceServiceSpec) { s.Framework = "tensorflow-serving" }, "spec.framework"},
		{"custom without image", func(s *servingv1alpha1.InferenceServiceSpec) { s.Framework = servingv1alpha1.FrameworkCustom }, "spec.image is required with framework custom"},
		{"unknown URI scheme", func(s *servingv1alpha1.InferenceServiceSpec) { s.ModelURI = "ftp://models/iris" }, "spec.modelUri must start with pvc://"},
		{"tokenAuth for Triton", func(s *servingv1alpha1.InferenceServiceSpec) { s.TokenAuth = "Disabled" }, "spec.tokenAuth is TorchServe's"},
		{"a short digest", func(s *servingv1alpha1.InferenceServiceSpec) {
			s.Storage = &servingv1alpha1.ModelStorage{SHA256: "abc"}
		}, "spec.storage.sha256"},
		{"GPU resource without a domain", func(s *servingv1alpha1.InferenceServiceSpec) { s.GPUResource = "gpu" }, "spec.gpuResource must be an extended resource name with a domain"},
		{"startup timeout of 5 s", func(s *servingv1alpha1.InferenceServiceSpec) { s.StartupTimeoutSeconds = ptr.To[int32](5) }, "spec.startupTimeoutSeconds"},
		{"unknown canary URI scheme", func(s *servingv1alpha1.InferenceServiceSpec) {
			s.Traffic = &servingv1alpha1.Traffic{CanaryVersion: "hdfs://x", CanaryPercent: 10}
		}, "spec.traffic.canaryVersion must be a model URI"},
	}
	for _, tc := range tests {
		err := env.Client.Create(context.Background(), newISVC(ns, "bad", tc.edit))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error = %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}

// Every store kiln-fetch reads is accepted, and handed to the fetch as it is.
func TestEveryFetchedSchemeIsAccepted(t *testing.T) {
	ns := env.Namespace(t)
	for i, uri := range []string{"s3://m/v1/", "gs://m/v1/", "azblob://m/v1/", "https://acct.blob.core.windows.net/m/v1/", "hf://org/model@main"} {
		create(t, newISVC(ns, fmt.Sprintf("m%d", i), func(s *servingv1alpha1.InferenceServiceSpec) { s.ModelURI = uri }))
		fetch := deployment(t, ns, fmt.Sprintf("m%d-predictor", i)).Spec.Template.Spec.InitContainers[0]
		if len(fetch.Env) != 1 || fetch.Env[0].Value != uri {
			t.Errorf("%s: the fetch's environment is %v, want the URI as it is", uri, fetch.Env)
		}
	}
}

func TestReadyWithURLAndScale(t *testing.T) {
	ns := env.Namespace(t)
	i := create(t, newISVC(ns, "iris", nil))
	d := deployment(t, ns, "iris-predictor")
	pod := d.Spec.Template.Spec
	if len(pod.InitContainers) != 1 || pod.InitContainers[0].Image != "kiln.dev/kiln:test" ||
		strings.Join(pod.InitContainers[0].Command, " ") != "/kiln-fetch" ||
		strings.Join(pod.InitContainers[0].Args, " ") != "--dest /mnt/models --max-bytes 53687091200" ||
		len(pod.InitContainers[0].Env) != 1 || pod.InitContainers[0].Env[0].Value != "s3://models/iris/v1" {
		t.Errorf("init containers %+v: want kiln-fetch of the model", pod.InitContainers)
	}
	c := pod.Containers[0]
	if c.ReadinessProbe.HTTPGet.Path != "/v2/health/ready" || c.LivenessProbe.HTTPGet.Path != "/v2/health/live" || c.Ports[0].ContainerPort != 8080 {
		t.Errorf("predictor probes/port: %+v %+v %+v", c.ReadinessProbe, c.LivenessProbe, c.Ports)
	}
	for _, name := range []string{"iris", "iris-predictor"} {
		env.Await(t, ns, name, &corev1.Service{})
	}
	waitStatus(t, i, conditionIs("Ready", metav1.ConditionFalse))
	makeReady(t, d)
	ready := waitStatus(t, i, conditionIs("Ready", metav1.ConditionTrue))
	if ready.Status.URL != "http://iris."+ns+".svc.cluster.local" || ready.Status.ReadyReplicas != 1 || ready.Status.ActiveVersion != "s3://models/iris/v1" {
		t.Errorf("status %+v", ready.Status)
	}

	// kubectl scale: the scale subresource sets minReplicas, the Deployment follows.
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 3}}
	if err := env.Client.SubResource("scale").Update(context.Background(), ready, client.WithSubResourceBody(scale)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() error {
		d := deployment(t, ns, "iris-predictor")
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
			return fmt.Errorf("deployment replicas %v, want 3", d.Spec.Replicas)
		}
		return nil
	})

	// A new model rolls the Deployment. Until the rollout completes the old model is the active
	// one and Ready says the change rolls out (kubectl wait --for=condition=Ready waits for it).
	edit(t, i, func(s *servingv1alpha1.InferenceServiceSpec) { s.ModelURI = "s3://models/iris/v2" })
	rolling := waitStatus(t, i, func(i *servingv1alpha1.InferenceService) error {
		c := meta.FindStatusCondition(i.Status.Conditions, "Ready")
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "RolloutProgressing" || !strings.Contains(c.Message, "while s3://models/iris/v2 rolls out") {
			return fmt.Errorf("Ready %+v, want False while v2 rolls out", c)
		}
		return nil
	})
	if c := meta.FindStatusCondition(rolling.Status.Conditions, "Ready"); rolling.Status.ActiveVersion != "s3://models/iris/v1" ||
		c.Message != "s3://models/iris/v1 serves while s3://models/iris/v2 rolls out" {
		t.Errorf("during the rollout: activeVersion %s, Ready %q", rolling.Status.ActiveVersion, c.Message)
	}
	rollOut(t, ns, "iris-predictor", "s3://models/iris/v2")
	done := waitStatus(t, i, conditionIs("Ready", metav1.ConditionTrue))
	if done.Status.ActiveVersion != "s3://models/iris/v2" {
		t.Errorf("after the rollout activeVersion is %s, want v2", done.Status.ActiveVersion)
	}
}

// At every reconcile a service deletes what its spec does not use (an HPA, a NetworkPolicy, a
// canary, ...); its caches say there is none, and the apiserver is not asked again each time (it
// was: most of what kiln asked of the apiserver; docs/performance.md, Measurements behind the code).
func TestReconcilesDoNotReadWhatTheServiceDoesNotUse(t *testing.T) {
	ns := env.Namespace(t)
	i := create(t, newISVC(ns, "quiet", nil))
	makeReady(t, deployment(t, ns, "quiet-predictor"))
	waitStatus(t, i, conditionIs("Ready", metav1.ConditionTrue))

	unused := []string{"horizontalpodautoscalers", "networkpolicies"}
	gets := func() map[string]float64 {
		n := map[string]float64{}
		for _, resource := range unused {
			n[resource] = testenv.MetricValue(t, "kiln_api_requests_total", map[string]string{"method": "GET", "resource": resource})
		}
		return n
	}
	reconciles := func() float64 {
		return testenv.MetricValue(t, "controller_runtime_reconcile_total", map[string]string{"controller": "inferenceservice", "result": "success"})
	}
	before, reconciledBefore := gets(), reconciles()

	// Each scale is a new generation, then a Deployment to follow and report: reconciles.
	for _, replicas := range []int32{2, 3, 4} {
		testenv.Eventually(t, func() error {
			fresh := &servingv1alpha1.InferenceService{}
			if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(i), fresh); err != nil {
				return err
			}
			scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}
			return env.Client.SubResource("scale").Update(context.Background(), fresh, client.WithSubResourceBody(scale))
		})
		testenv.Eventually(t, func() error {
			if d := deployment(t, ns, "quiet-predictor"); d.Spec.Replicas == nil || *d.Spec.Replicas != replicas {
				return fmt.Errorf("deployment replicas %v, want %d", d.Spec.Replicas, replicas)
			}
			return nil
		})
		makeReady(t, deployment(t, ns, "quiet-predictor"))
	}
	waitStatus(t, i, func(i *servingv1alpha1.InferenceService) error {
		if i.Status.ReadyReplicas != 4 {
			return fmt.Errorf("ready replicas %d, want 4", i.Status.ReadyReplicas)
		}
		return nil
	})

	if n := reconciles() - reconciledBefore; n < 3 {
		t.Fatalf("%v reconciles while scaling three times; the test needs 3 at least", n)
	}
	after := gets()
	for _, resource := range unused {
		if n := after[resource] - before[resource]; n != 0 {
			t.Errorf("kiln read %v %s from the apiserver over %v reconciles of services that use none; want 0",
				n, resource, reconciles()-reconciledBefore)
		}
	}
}

// spec.pod, the GPU resource and the startup budget reach the Deployment the apiserver stores.
func TestPodOptionsReachTheDeployment(t *testing.T) {
	ns := env.Namespace(t)
	create(t, newISVC(ns, "llm", func(s *servingv1alpha1.InferenceServiceSpec) {
		s.GPUPerReplica, s.GPUResource, s.StartupTimeoutSeconds = 2, "nvidia.com/mig-3g.20gb", ptr.To[int32](1200)
		s.Pod = &servingv1alpha1.PodOptions{NodeSelector: map[string]string{"pool": "a100"}, ServiceAccountName: "serving",
			Env: []corev1.EnvVar{{Name: "HF_HOME", Value: "/tmp/hf"}}}
	}))
	pod := deployment(t, ns, "llm-predictor").Spec.Template.Spec
	c := pod.Containers[0]
	if got := c.Resources.Limits["nvidia.com/mig-3g.20gb"]; got.Value() != 2 || c.StartupProbe == nil || c.StartupProbe.FailureThreshold*c.StartupProbe.PeriodSeconds != 1200 {
		t.Errorf("limits %v, startup probe %+v: want 2 MIG slices and 1200 s to start", c.Resources.Limits, c.StartupProbe)
	}
	if pod.NodeSelector["pool"] != "a100" || pod.ServiceAccountName != "serving" || len(pod.Tolerations) != 1 || pod.Tolerations[0].Key != "nvidia.com/mig-3g.20gb" {
		t.Errorf("pod %+v: want spec.pod's placement and the GPU toleration", pod)
	}
	if env := c.Env[len(c.Env)-1]; env.Name != "HF_HOME" || len(pod.InitContainers[0].Env) != 1 || pod.InitContainers[0].Env[0].Name != "KILN_MODEL_URI" {
		t.Errorf("server env %v, fetch env %v: want HF_HOME on the server only", c.Env, pod.InitContainers[0].Env)
	}
}

// A private model: the storage Secret's variables reach the fetch container only, the model
// volume and the fetch are bounded by sizeLimit, and the digest is checked.
func TestStorageCredentialsReachTheFetchOnly(t *testing.T) {
	ns := env.Namespace(t)
	create(t, newISVC(ns, "private", func(s *servingv1alpha1.InferenceServiceSpec) {
		s.ModelURI = "s3://private-models/triton-repo/"
		s.Storage = &servingv1alpha1.ModelStorage{SecretName: "s3-reader", SizeLimit: ptr.To(resource.MustParse("2Gi")), SHA256: strings.Repeat("a", 64)}
	}))
	pod := deployment(t, ns, "private-predictor").Spec.Template.Spec
	fetch, server := pod.InitContainers[0], pod.Containers[0]
	if len(fetch.EnvFrom) != 1 || fetch.EnvFrom[0].SecretRef.Name != "s3-reader" || len(server.EnvFrom) != 0 {
		t.Errorf("fetch envFrom %+v, server envFrom %+v: want the Secret on the fetch container only", fetch.EnvFrom, server.EnvFrom)
	}
	if args := strings.Join(fetch.Args, " "); !strings.Contains(args, "--max-bytes 2147483648 --sha256 "+strings.Repeat("a", 64)) {
		t.Errorf("fetch args %q: want the size limit and the digest", args)
	}
	if v := pod.Volumes[0].EmptyDir; v == nil || v.SizeLimit.String() != "2Gi" || fetch.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("model volume %+v, termination message policy %q", v, fetch.TerminationMessagePolicy)
	}
}

// A pod that becomes ready makes the InferenceService Ready at once: the Deployment's status,
// which the ReplicaSet's and the Deployment's controllers write after it, has not caught up.
func TestAReadyPodMakesTheServiceReadyBeforeItsDeploymentSays(t *testing.T) {
	ns := env.Namespace(t)
	i := create(t, newISVC(ns, "early", nil))
	d := deployment(t, ns, "early-predictor")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "early-predictor-abc", Namespace: ns, Labels: d.Spec.Template.Labels}, Spec: d.Spec.Template.Spec}
	if err := env.Client.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() error { // the Deployment controller's word once the pod exists: observed, one replica, none ready
		fresh := deployment(t, ns, "early-predictor")
		fresh.Status.ObservedGeneration = fresh.Generation
		fresh.Status.Replicas, fresh.Status.UpdatedReplicas = 1, 1
		return env.Client.Status().Update(context.Background(), fresh)
	})
	waitStatus(t, i, func(i *servingv1alpha1.InferenceService) error {
		if err := conditionIs("Ready", metav1.ConditionFalse)(i); err != nil || i.Status.Replicas != 1 {
			return fmt.Errorf("replicas %d (%v), want 1 and not Ready", i.Status.Replicas, err)
		}
		return nil
	})
	for _, ready := range []corev1.ConditionStatus{corev1.ConditionFalse, corev1.ConditionTrue} { // running, then ready: only its readiness changes
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}}
		if err := env.Client.Status().Update(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
	ready := waitStatus(t, i, conditionIs("Ready", metav1.ConditionTrue))
	if ready.Status.ReadyReplicas != 1 || ready.Status.Replicas != 1 {
		t.Errorf("replicas %d, ready %d: want the pod's 1 and 1", ready.Status.Replicas, ready.Status.ReadyReplicas)
	}
	if got := deployment(t, ns, "early-predictor").Status; got.ReadyReplicas != 0 {
		t.Fatalf("the Deployment's status says %d ready: the test means it to lag", got.ReadyReplicas)
	}
	// The pod goes: nothing counts it any more, though the Deployment's status has not changed.
	// (First the reconcile that kiln's own status write brings runs and finds the pod still there.)
	time.Sleep(time.Second)
	if err := env.Client.Delete(context.Background(), pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, i, conditionIs("Ready", metav1.ConditionFalse))
}

// A pod of a Deployment whose spec never changed counts once it is ready, though the
// Deployment's status has not counted it at all: its ReplicaSet made it after the Deployment was
// created, so it runs the Deployment's one template (docs/decisions.md, 23).
func TestAFirstTemplatesPodCountsBeforeTheStatusCountsIt(t *testing.T) {
	ns := env.Namespace(t)
	i := create(t, newISVC(ns, "first", nil))
	d := deployment(t, ns, "first-predictor")
	time.Sleep(time.Until(d.CreationTimestamp.Add(time.Second + 50*time.Millisecond))) // the pod is made in a later second
	labels := maps.Clone(d.Spec.Template.Labels)
	labels[appsv1.DefaultDeploymentUniqueLabelKey] = "5d9c7f"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "first-predictor-5d9c7f-x2x", Namespace: ns, Labels: labels,
		Annotations: d.Spec.Template.Annotations}, Spec: d.Spec.Template.Spec}
	if err := env.Client.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if err := env.Client.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	ready := waitStatus(t, i, conditionIs("Ready", metav1.ConditionTrue))
	if ready.Status.ReadyReplicas != 1 || ready.Status.Replicas != 1 {
		t.Errorf("replicas %d, ready %d: want the pod's 1 and 1", ready.Status.Replicas, ready.Status.ReadyReplicas)
	}
	if got := deployment(t, ns, "first-predictor").Status; got.ObservedGeneration != 0 || got.Replicas != 0 {
		t.Fatalf("the Deployment's status %+v: the test means it unwritten (no Deployment controller runs here)", got)
	}
}

// A fetch that fails (wrong credentials) shows in the InferenceService's status with the fetch
// container's message, not only in the pod; a URL's secrets in that message (a kiln-fetch of
// another version, or its logs as the fallback) stay out of the status.
func TestAFailedFetchShowsInTheStatus(t *testing.T) {
	ns := env.Namespace(t)
	i := create(t, newISVC(ns, "denied", func(s *servingv1alpha1.InferenceServiceSpec) {
		s.Storage = &servingv1alpha1.ModelStorage{SecretName: "wrong"}
	}))
	d := deployment(t, ns, "denied-predictor")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "denied-predictor-abc", Namespace: ns, Labels: d.Spec.Template.Labels}, Spec: d.Spec.Template.Spec}
	if err := env.Client.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	const why = "fetching s3://models/iris/v1: access denied: check the credentials of storage.secretName"
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{Name: "model-fetch",
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: why + ` (Get "https://cdn.example/blob?sig=SECRET": EOF)`}}}}}
	if err := env.Client.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, i, func(fresh *servingv1alpha1.InferenceService) error {
		c := meta.FindStatusCondition(fresh.Status.Conditions, "Ready")
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "ModelFetchFailed" || !strings.Contains(c.Message, "fetching the model failed in pod denied-predictor-abc: "+why+` (Get "https://cdn.example/blob": EOF)`) {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
}

func TestDriftIsRepaired(t *testing.T) {
	ns := env.Namespace(t)
	create(t, newISVC(ns, "drift", nil))
	d := deployment(t, ns, "drift-predictor")
	want := d.Spec.Template.Spec.Containers[0].Image
	testenv.Eventually(t, func() error {
		fresh := deployment(t, ns, "drift-predictor")
		fresh.Spec.Template.Spec.Containers[0].Image = "someone/else:1"
		return env.Client.Update(context.Background(), fresh)
	})
	testenv.Eventually(t, func() error {
		if got := deployment(t, ns, "drift-predictor").Spec.Template.Spec.Containers[0].Image; got != want {
			return fmt.Errorf("image %s, want %s back", got, want)
		}
		return nil
	})
	// A Service (a kind without a generation) changed by somebody else is repaired too, though
	// kiln does not send an apply that would change nothing.
	makeReady(t, deployment(t, ns, "drift-predictor"))
	svc := &corev1.Service{}
	env.Await(t, ns, "drift-predictor", svc)
	port := svc.Spec.Ports[0].TargetPort
	testenv.Eventually(t, func() error {
		fresh := &corev1.Service{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(svc), fresh); err != nil {
			return err
		}
		fresh.Spec.Ports[0].TargetPort = intstr.FromInt32(9999)
		return env.Client.Update(context.Background(), fresh)
	})
	testenv.Eventually(t, func() error {
		fresh := &corev1.Service{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(svc), fresh); err != nil {
			return err
		}
		if got := fresh.Spec.Ports[0].TargetPort; got != port {
			return fmt.Errorf("target port %s, want %s back", got.String(), port.String())
		}
		return nil
	})
}

// A Service kiln made and someone deleted comes back at once: Services are watched, so the
// deletion itself is the event (a ready service has nothing else that would reconcile it).
func TestADeletedServiceComesBackAtOnce(t *testing.T) {
	ns := env.Namespace(t)
	i := create(t, newISVC(ns, "kept", nil))
	makeReady(t, deployment(t, ns, "kept-predictor"))
	waitStatus(t, i, conditionIs("Ready", metav1.ConditionTrue))
	for _, name := range []string{"kept", "kept-predictor"} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := env.Client.Delete(context.Background(), svc); err != nil {
			t.Fatal(err)
		}
		testenv.EventuallyWithin(t, 5*time.Second, func() error {
			return env.Client.Get(context.Background(), client.ObjectKeyFromObject(svc), &corev1.Service{})
		})
	}
}

// A Deployment kiln made and someone then stripped of the labels kiln's cache selects is out of
// its sight: kiln finds it when it creates it anew (the create fails on the name), applies it,
// which puts the labels back, and the InferenceService becomes Ready.
func TestADeploymentOutOfSightIsTakenBack(t *testing.T) {
	ns := env.Namespace(t)
	i := create(t, newISVC(ns, "sight", nil))
	uid := deployment(t, ns, "sight-predictor").UID
	// Its Services come with the Deployment's arrival: once they exist, that is past.
	env.Await(t, ns, "sight-predictor", &corev1.Service{})
	testenv.Eventually(t, func() error {
		d := deployment(t, ns, "sight-predictor")
		delete(d.Labels, inferenceservice.LabelService)
		return env.Client.Update(context.Background(), d)
	})
	testenv.Eventually(t, func() error {
		d := deployment(t, ns, "sight-predictor")
		if d.UID != uid || d.Labels[inferenceservice.LabelService] != "sight" {
			return fmt.Errorf("Deployment %s with labels %v, want the Deployment %s with label %s=sight back", d.UID, d.Labels, uid, inferenceservice.LabelService)
		}
		return nil
	})
	makeReady(t, deployment(t, ns, "sight-predictor"))
	waitStatus(t, i, conditionIs("Ready", metav1.ConditionTrue))
}

// A same-named object kiln did not make is never taken over (applying with force would, and
// garbage collection would then delete it with the InferenceService): the InferenceService says
// which object is in the way, and the object is left as it was. That includes another
// InferenceService's object: "a-predictor" and "a" both want a Service "a-predictor".
func TestNoTakeoverOfObjectsKilnDoesNotOwn(t *testing.T) {
	ns := env.Namespace(t)
	theirs := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken-predictor", Labels: map[string]string{"app": "theirs"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "theirs"}, Ports: []corev1.ServicePort{{Port: 9000}}}}
	if err := env.Client.Create(context.Background(), theirs); err != nil {
		t.Fatal(err)
	}
	i := create(t, newISVC(ns, "taken", nil))
	c := meta.FindStatusCondition(waitStatus(t, i, conditionIs("Ready", metav1.ConditionFalse)).Status.Conditions, "Ready")
	waitStatus(t, i, func(i *servingv1alpha1.InferenceService) error {
		c = meta.FindStatusCondition(i.Status.Conditions, "Ready")
		if c.Reason != "NameConflict" || !strings.Contains(c.Message, "Service taken-predictor already exists") {
			return fmt.Errorf("Ready %+v, want NameConflict naming Service taken-predictor", c)
		}
		return nil
	})
	testenv.Consistently(t, func() error {
		got := &corev1.Service{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(theirs), got); err != nil {
			return err
		}
		if len(got.OwnerReferences) > 0 || got.Spec.Selector["app"] != "theirs" || got.Spec.Ports[0].Port != 9000 {
			return fmt.Errorf("the Service was taken over: owners %v, selector %v, ports %v", got.OwnerReferences, got.Spec.Selector, got.Spec.Ports)
		}
		return nil
	})

	first := create(t, newISVC(ns, "a", nil))
	waitStatus(t, first, func(*servingv1alpha1.InferenceService) error {
		return env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "a-predictor"}, &corev1.Service{})
	})
	second := create(t, newISVC(ns, "a-predictor", nil))
	waitStatus(t, second, func(i *servingv1alpha1.InferenceService) error {
		if c := meta.FindStatusCondition(i.Status.Conditions, "Ready"); c == nil || c.Reason != "NameConflict" || !strings.Contains(c.Message, "belongs to InferenceService a,") {
			return fmt.Errorf("Ready %+v, want NameConflict naming InferenceService a", c)
		}
		return nil
	})
}

// Handing the replicas to an HPA keeps the current count: kiln's apply stops setting them, and
// without another owner the field would fall back to 1.
func TestHandingReplicasToAnHPAKeepsTheCount(t *testing.T) {
	ns := env.Namespace(t)
	i := create(t, newISVC(ns, "handover", func(s *servingv1alpha1.InferenceServiceSpec) { s.MinReplicas = ptr.To[int32](3) }))
	testenv.Eventually(t, func() error {
		if n := *deployment(t, ns, "handover-predictor").Spec.Replicas; n != 3 {
			return fmt.Errorf("replicas %d, want 3", n)
		}
		return nil
	})
	edit(t, i, func(s *servingv1alpha1.InferenceServiceSpec) { s.MaxReplicas = ptr.To[int32](6) })
	env.Await(t, ns, "handover-predictor", &autoscalingv2.HorizontalPodAutoscaler{})
	testenv.Consistently(t, func() error {
		if n := *deployment(t, ns, "handover-predictor").Spec.Replicas; n != 3 {
			return fmt.Errorf("replicas %d after the HPA took over, want 3 kept", n)
		}
		return nil
	})
}

// A canary on an autoscaled service, without an accepted route: each version keeps autoscaling
// within its share of the bounds (the HPA is not dropped for fixed counts), and at 0 percent the
// canary keeps a replica while the stable Service selects only the stable version.
func TestCanaryKeepsCapacityAndEveryVersionRuns(t *testing.T) {
	ns := env.Namespace(t)
	i := create(t, newISVC(ns, "cap", func(s *servingv1alpha1.InferenceServiceSpec) {
		s.MinReplicas, s.MaxReplicas = ptr.To[int32](2), ptr.To[int32](8)
	}))
	hpa := func(name string, lo, hi int32) {
		t.Helper()
		testenv.Eventually(t, func() error {
			h := &autoscalingv2.HorizontalPodAutoscaler{}
			if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, h); err != nil {
				return err
			}
			if *h.Spec.MinReplicas != lo || h.Spec.MaxReplicas != hi || h.Spec.ScaleTargetRef.Name != name {
				return fmt.Errorf("HPA %s: %d..%d of %s, want %d..%d", name, *h.Spec.MinReplicas, h.Spec.MaxReplicas, h.Spec.ScaleTargetRef.Name, lo, hi)
			}
			return nil
		})
	}
	hpa("cap-predictor", 2, 8)
	edit(t, i, func(s *servingv1alpha1.InferenceServiceSpec) {
		s.Traffic = &servingv1alpha1.Traffic{CanaryVersion: "s3://models/iris/v2", CanaryPercent: 20}
	})
	hpa("cap-predictor", 2, 7)
	hpa("cap-predictor-canary", 1, 2)
	for name, version := range map[string]string{"cap-predictor": "stable", "cap-predictor-canary": "canary"} {
		svc := &corev1.Service{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
			t.Fatal(err)
		}
		if svc.Spec.Selector["serving.kiln.dev/version"] != version {
			t.Errorf("Service %s selects %v, want version %s only", name, svc.Spec.Selector, version)
		}
	}
	edit(t, i, func(s *servingv1alpha1.InferenceServiceSpec) { s.Traffic.CanaryPercent = 0 })
	hpa("cap-predictor-canary", 1, 1)
	testenv.Eventually(t, func() error {
		svc := &corev1.Service{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "cap"}, svc); err != nil {
			return err
		}
		if svc.Spec.Selector["serving.kiln.dev/version"] != "stable" {
			return fmt.Errorf("at 0 percent the stable Service selects %v, want the stable version only", svc.Spec.Selector)
		}
		return nil
	})
}

// spec.networkPolicy lets only the peers it names reach every version's pods; removing it
// removes the NetworkPolicy.
func TestNetworkPolicyAdmitsOnlyTheNamedPeers(t *testing.T) {
	ns := env.Namespace(t)
	peer := networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "search"}}}
	i := create(t, newISVC(ns, "fenced", func(s *servingv1alpha1.InferenceServiceSpec) {
		s.NetworkPolicy = &servingv1alpha1.ServiceNetworkPolicy{From: []networkingv1.NetworkPolicyPeer{peer}}
	}))
	np := &networkingv1.NetworkPolicy{}
	key := client.ObjectKey{Namespace: ns, Name: "fenced-network-policy"}
	testenv.Eventually(t, func() error { return env.Client.Get(context.Background(), key, np) })
	if np.Spec.PodSelector.MatchLabels["serving.kiln.dev/inferenceservice"] != "fenced" || len(np.Spec.PodSelector.MatchLabels) != 1 ||
		len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress ||
		len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 || np.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels["team"] != "search" {
		t.Errorf("NetworkPolicy %+v", np.Spec)
	}
	edit(t, i, func(s *servingv1alpha1.InferenceServiceSpec) { s.NetworkPolicy = nil })
	gone(t, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name}})
}

func TestHPAWithTheRightBounds(t *testing.T) {
	ns := env.Namespace(t)
	i := create(t, newISVC(ns, "scaled", func(s *servingv1alpha1.InferenceServiceSpec) {
		s.MinReplicas, s.MaxReplicas = ptr.To[int32](2), ptr.To[int32](5)
	}))
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	env.Await(t, ns, "scaled-predictor", hpa)
	if *hpa.Spec.MinReplicas != 2 || hpa.Spec.MaxReplicas != 5 || hpa.Spec.ScaleTargetRef.Name != "scaled-predictor" {
		t.Errorf("HPA spec %+v", hpa.Spec)
	}
	// The HPA owns the replicas: kiln's applies do not set them (its create leaves them to the
	// apiserver's default), and what the autoscaler set stays through kiln's next apply, the
	// one that hands the create's fields to kiln's apply manager.
	d := deployment(t, ns, "scaled-predictor")
	testenv.Eventually(t, func() error { // as the autoscaler scales it
		scale := &autoscalingv1.Scale{}
		if err := env.Client.SubResource("scale").Get(context.Background(), d, scale); err != nil {
			return err
		}
		scale.Spec.Replicas = 4
		return env.Client.SubResource("scale").Update(context.Background(), d, client.WithSubResourceBody(scale), client.FieldOwner("horizontal-pod-autoscaler"))
	})
	edit(t, i, func(s *servingv1alpha1.InferenceServiceSpec) {
		s.MaxReplicas, s.Args = ptr.To[int32](6), append(s.Args, "--log-level=debug") // the Deployment changes too
	})
	testenv.Eventually(t, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(hpa), hpa); err != nil {
			return err
		}
		if hpa.Spec.MaxReplicas != 6 {
			return fmt.Errorf("the HPA's maxReplicas is %d, want 6", hpa.Spec.MaxReplicas)
		}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(d), d); err != nil {
			return err
		}
		if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--log-level=debug") {
			return fmt.Errorf("the Deployment's args are %q, want the edit's", d.Spec.Template.Spec.Containers[0].Args)
		}
		return nil
	})
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 4 {
		t.Errorf("after kiln applied the edited InferenceService the Deployment has %v replicas, want the autoscaler's 4", d.Spec.Replicas)
	}
	applied := false
	for _, mf := range d.ManagedFields {
		switch {
		case mf.Manager != "kiln":
		case mf.Operation == metav1.ManagedFieldsOperationUpdate:
			t.Errorf("kiln's update manager still holds fields after its apply: %s", mf.FieldsV1.Raw)
		case strings.Contains(string(mf.FieldsV1.Raw), `"f:replicas"`):
			t.Errorf("kiln applies spec.replicas of a Deployment its HPA scales")
		default:
			applied = true
		}
	}
	if !applied {
		t.Errorf("no field of the Deployment is kiln's apply's after it applied the edit: %v", d.ManagedFields)
	}
}
