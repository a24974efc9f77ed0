package manager

import (
	"maps"
	"net/http"
	"reflect"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	kservev1alpha1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1alpha1"
	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
	"github.com/kiln-ml/kiln/internal/controller/pyjob"
	"github.com/kiln-ml/kiln/internal/metrics"
	"github.com/kiln-ml/kiln/internal/replicajob"
)

func TestCachedChildrenKeepOnlyTheLabelsKilnReads(t *testing.T) {
	child := func(job, rtype, index string) map[string]string {
		return map[string]string{
			kubeflowv1.LabelOperatorName: "tfjob-controller", kubeflowv1.LabelJobName: job,
			kubeflowv1.LabelReplicaType: rtype, kubeflowv1.LabelReplicaIndex: index,
			kubeflowv1.LabelJobRole: "master", "team": "vision",
		}
	}
	podOf := func(l map[string]string) *corev1.Pod {
		obj, err := keepPodStatus(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: l}})
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*corev1.Pod)
	}
	serviceOf := func(l map[string]string) *corev1.Service {
		obj, err := keepServiceMeta(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: l},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}})
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*corev1.Service)
	}

	a, b := podOf(child("a", "worker", "3")), serviceOf(child("b", "worker", "3"))
	want := map[string]string{kubeflowv1.LabelReplicaType: "worker", kubeflowv1.LabelReplicaIndex: "3"}
	if diff := cmp.Diff(want, a.Labels); diff != "" {
		t.Errorf("cached pod labels (-want +got):\n%s", diff)
	}
	if reflect.ValueOf(a.Labels).UnsafePointer() != reflect.ValueOf(b.Labels).UnsafePointer() {
		t.Error("worker 3 of two jobs: the cached pod and service do not share one label map")
	}
	if b.Spec.ClusterIP != "" {
		t.Errorf("cached service keeps its spec (clusterIP %q)", b.Spec.ClusterIP)
	}
	if c := podOf(child("a", "worker", "4")); reflect.ValueOf(c.Labels).UnsafePointer() == reflect.ValueOf(a.Labels).UnsafePointer() {
		t.Error("worker 3 and worker 4 share a label map")
	}

	p := podOf(map[string]string{pyjob.LabelPyJob: "train", "batch.kubernetes.io/job-name": "train"})
	if diff := cmp.Diff(map[string]string{pyjob.LabelPyJob: "train"}, p.Labels); diff != "" {
		t.Errorf("cached PyJob pod labels (-want +got):\n%s", diff)
	}
	if l := podOf(map[string]string{"app": "x"}).Labels; l != nil {
		t.Errorf("a pod with none of kiln's labels keeps %v", l)
	}
}

func TestCachedPodsKeepOnlyTheAnnotationsKilnReads(t *testing.T) {
	obj, err := keepPodStatus(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{
		replicajob.AnnotationRestarts: "3", "batch.kubernetes.io/job-completion-index": "1", "team": "a",
	}}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{replicajob.AnnotationRestarts: "3", "batch.kubernetes.io/job-completion-index": "1"}
	if got := obj.(*corev1.Pod).Annotations; !maps.Equal(got, want) {
		t.Errorf("annotations %v, want %v", got, want)
	}
}

// The shared label maps stop growing at their limit; children past it still get the right labels.
func TestSharedLabelsAreBounded(t *testing.T) {
	s := sharedLabels{sets: map[[2]string]map[string]string{}, limit: 3}
	for i := range 10 {
		l := s.get("Worker", strconv.Itoa(i))
		if l[kubeflowv1.LabelReplicaType] != "Worker" || l[kubeflowv1.LabelReplicaIndex] != strconv.Itoa(i) {
			t.Errorf("labels of worker %d: %v", i, l)
		}
	}
	if len(s.sets) != 3 {
		t.Errorf("%d shared maps after 10 indexes, want the limit of 3", len(s.sets))
	}
	a, b := s.get("Worker", "1"), s.get("Worker", "1")
	a["probe"] = "x"
	if b["probe"] != "x" {
		t.Error("an index under the limit does not share its map")
	}
}

// The informer may hand the transform a pod it already slimmed (client-go asks for idempotence).
func TestKeepPodStatusIsIdempotent(t *testing.T) {
	exit := corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", Message: "long log tail"}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{
			kubeflowv1.LabelReplicaType: "worker", kubeflowv1.LabelReplicaIndex: "0", "team": "a"}},
		Spec: corev1.PodSpec{NodeName: "n1"},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionFalse},
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes"},
		}, ContainerStatuses: []corev1.ContainerStatus{{Name: "c", RestartCount: 2, Image: "x", State: corev1.ContainerState{Terminated: &exit}}}},
	}
	once, err := keepPodStatus(pod)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{kubeflowv1.LabelReplicaType: "worker", kubeflowv1.LabelReplicaIndex: "0"}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes"},
		}, ContainerStatuses: []corev1.ContainerStatus{{Name: "c", RestartCount: 2, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}}},
	}
	if diff := cmp.Diff(want, once); diff != "" {
		t.Fatalf("slimmed pod (-want +got):\n%s", diff)
	}
	twice, err := keepPodStatus(once)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, twice); diff != "" {
		t.Errorf("slimmed twice (-want +got):\n%s", diff)
	}
}

// A pod's Ready condition is kept only when another replica waits for it to be ready: a pod
// turning ready costs a reconcile only where that is read.
func TestReadyIsKeptOnlyWhereAwaited(t *testing.T) {
	pod := func(annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Annotations: annotations},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	}
	for _, c := range []struct {
		annotations map[string]string
		want        int
	}{{nil, 0}, {map[string]string{replicajob.AnnotationReadinessAwaited: "true"}, 1}} {
		once, err := keepPodStatus(pod(c.annotations))
		if err != nil {
			t.Fatal(err)
		}
		twice, _ := keepPodStatus(once)
		if got := len(twice.(*corev1.Pod).Status.Conditions); got != c.want {
			t.Errorf("annotations %v: %d conditions kept, want %d", c.annotations, got, c.want)
		}
	}
}

// The cache's HTTP client (watchtrim's) goes through the manager's connections: client-go keeps
// one transport per TLS configuration, whatever wraps it.
func TestTheCacheSharesTheManagersConnections(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	cfg.Wrap(metrics.CountRequests)
	managers, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts := cache.Options{Scheme: runtime.NewScheme()}
	if err := trimWatches(&opts, cfg); err != nil {
		t.Fatal(err)
	}
	caches := opts.HTTPClient
	if opts.NewInformer == nil {
		t.Error("the cache's informers are client-go's: its JSON watch events would be decoded five times over")
	}
	if a, b := innermost(managers.Transport), innermost(caches.Transport); a != b {
		t.Errorf("the cache's transport %T %p is not the manager's %T %p", b, b, a, a)
	}
	if innermost(caches.Transport) == caches.Transport {
		t.Error("the cache's client has no wrappers: watchtrim is missing")
	}
}

func innermost(rt http.RoundTripper) http.RoundTripper {
	for {
		w, ok := rt.(utilnet.RoundTripperWrapper)
		if !ok {
			return rt
		}
		rt = w.WrappedRoundTripper()
	}
}

func TestCachedJobSetsKeepWhatTheTrainJobControllerReads(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "mnist", Annotations: map[string]string{"trainer.kiln.dev/jobset-spec-hash": "abc"},
			OwnerReferences: []metav1.OwnerReference{{Name: "mnist", Controller: ptr.To(true)}}},
		Spec:   jobsetv1alpha2.JobSetSpec{Suspend: ptr.To(true), ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "node", Replicas: 1}}},
		Status: jobsetv1alpha2.JobSetStatus{ReplicatedJobsStatus: []jobsetv1alpha2.ReplicatedJobStatus{{Name: "node", Ready: 1}}},
	}
	js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: "node", Image: "pytorch"}}
	want := js.DeepCopy()
	want.Spec.ReplicatedJobs[0].Template = batchv1.JobTemplateSpec{}
	got, err := keepJobSetSummary(js)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cached JobSet (-want +got):\n%s", diff)
	}
}

// A manager of kinds with their own controllers only (--kinds=inferenceservice) caches no
// operator's pods, and starts.
func TestKindsOfTheirOwnControllersAloneStart(t *testing.T) {
	o := cacheOptions(nil, nil, nil, "")
	var pods cache.ByObject
	for k, v := range o.ByObject {
		if _, ok := k.(*corev1.Pod); ok {
			pods = v
		}
	}
	if pods.Label == nil || pods.Label.Matches(labels.Set{kubeflowv1.LabelOperatorName: "none"}) || pods.Label.Matches(labels.Set{}) {
		t.Errorf("pods selected by %v, want none", pods.Label)
	}
}

// The runtimes of KServe and of Trainer are handed out uncopied (reconciles read them every time)
// when kiln serves their kind, and not named at all otherwise: a ByObject entry needs its kind
// served when the manager starts, and a kind kiln does not serve needs no CRD installed.
func TestRuntimesAreReadOnlyWhenTheirKindIsServed(t *testing.T) {
	readOnlyRuntimes := func(o cache.Options) (kserve, trainer int) {
		for k, v := range o.ByObject {
			switch k.(type) {
			case *kservev1alpha1.ServingRuntime, *kservev1alpha1.ClusterServingRuntime:
				kserve++
			case *trainerv1alpha1.TrainingRuntime, *trainerv1alpha1.ClusterTrainingRuntime:
				trainer++
			default:
				continue
			}
			if v.UnsafeDisableDeepCopy == nil || !*v.UnsafeDisableDeepCopy {
				t.Errorf("%T is copied on every read", k)
			}
		}
		return kserve, trainer
	}
	for _, c := range []struct {
		own                 map[string]bool
		wantKServe, wantTrn int
	}{
		{map[string]bool{kserveInferenceServiceKind: true}, 2, 0},
		{map[string]bool{trainJobKind: true}, 0, 2},
		{map[string]bool{inferenceServiceKind: true, pyJobKind: true}, 0, 0},
	} {
		if k, tr := readOnlyRuntimes(cacheOptions(nil, nil, c.own, "")); k != c.wantKServe || tr != c.wantTrn {
			t.Errorf("kinds %v: %d KServe and %d Trainer runtime kinds in the cache's options, want %d and %d", c.own, k, tr, c.wantKServe, c.wantTrn)
		}
	}
}

// A cached Deployment keeps what kiln reads (its replicas, selector, status, and its template's
// labels and annotations), not its managedFields or its pod template's spec.
func TestCachedDeploymentsKeepTheirSummary(t *testing.T) {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "x-predictor", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kiln"}}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"serving.kiln.dev/model-uri": "gs://m"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "kserve-container", Image: "i"}}}}},
		Status: appsv1.DeploymentStatus{ReadyReplicas: 2},
	}
	out, err := keepDeploymentSummary(d)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*appsv1.Deployment)
	if got.ManagedFields != nil || len(got.Spec.Template.Spec.Containers) != 0 {
		t.Errorf("kept managedFields %v and containers %v", got.ManagedFields, got.Spec.Template.Spec.Containers)
	}
	if *got.Spec.Replicas != 2 || got.Status.ReadyReplicas != 2 || got.Spec.Template.Annotations["serving.kiln.dev/model-uri"] != "gs://m" {
		t.Errorf("lost what kiln reads: %+v", got)
	}
}
