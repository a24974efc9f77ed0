package inferenceservice

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	"github.com/kiln-ml/kiln/internal/kueue"
)

// deploymentOf is the Deployment of one version of kiln's InferenceService i.
func deploymentOf(i *servingv1alpha1.InferenceService, version string, replicas *int32) *appsv1.Deployment {
	e := fromKiln(i, "kiln")
	return desiredDeployment(&e, version, replicas)
}

func endpointOf(i *servingv1alpha1.InferenceService) *endpoint {
	e := fromKiln(i, "kiln")
	return &e
}

func isvc(min, max *int32, canaryPct int32) *servingv1alpha1.InferenceService {
	i := &servingv1alpha1.InferenceService{Spec: servingv1alpha1.InferenceServiceSpec{
		ModelURI: "pvc://models/iris", Framework: servingv1alpha1.FrameworkTriton, MinReplicas: min, MaxReplicas: max}}
	if canaryPct >= 0 {
		i.Spec.Traffic = &servingv1alpha1.Traffic{CanaryVersion: "pvc://models/iris2", CanaryPercent: canaryPct}
	}
	return i
}

func TestDecide(t *testing.T) {
	fixed := func(n int32) versionScale { return versionScale{replicas: ptr.To(n)} }
	hpa := func(lo, hi int32) versionScale { return versionScale{hpa: true, hpaMin: lo, hpaMax: hi} }
	tests := []struct {
		name                     string
		isvc                     *servingv1alpha1.InferenceService
		have                     apis
		exact                    servingv1alpha1.TrafficMode
		stable, canary           versionScale
		keda, noZero, zeroPaused bool
		mode                     servingv1alpha1.TrafficMode
		serves                   string
	}{
		{"defaults: one replica", isvc(nil, nil, -1), apis{}, "", fixed(1), versionScale{}, false, false, false, "", ""},
		{"min 2 max 5: HPA", isvc(ptr.To[int32](2), ptr.To[int32](5), -1), apis{}, "", hpa(2, 5), versionScale{}, false, false, false, "", ""},
		{"min 0 without KEDA: one replica", isvc(ptr.To[int32](0), nil, -1), apis{}, "", fixed(1), versionScale{}, false, true, false, "", ""},
		{"min 0 with KEDA alone: one replica", isvc(ptr.To[int32](0), ptr.To[int32](3), -1), apis{keda: true}, "", fixed(1), versionScale{}, false, true, false, "", ""},
		{"min 0 with KEDA and its HTTP add-on", isvc(ptr.To[int32](0), ptr.To[int32](3), -1), apis{keda: true, httpAddOn: true}, "", versionScale{}, versionScale{}, true, false, false, "", ""},
		{"canary 20% of 5 by replicas", isvc(ptr.To[int32](5), nil, 20), apis{}, "", fixed(4), fixed(1), false, false, false, servingv1alpha1.TrafficReplicaSplit, ""},
		{"canary 20% of 1: one of each", isvc(nil, nil, 20), apis{}, "", fixed(1), fixed(1), false, false, false, servingv1alpha1.TrafficReplicaSplit, ""},
		// Capacity: an autoscaled service keeps autoscaling, each version within its share.
		{"canary 20% of HPA 2..8", isvc(ptr.To[int32](2), ptr.To[int32](8), 20), apis{}, "", hpa(2, 7), hpa(1, 2), false, false, false, servingv1alpha1.TrafficReplicaSplit, ""},
		// A version in the spec keeps a replica; at 0 and 100 percent the stable Service selects only
		// the version that takes the traffic.
		{"canary 0%", isvc(ptr.To[int32](3), nil, 0), apis{}, "", fixed(3), fixed(1), false, false, false, servingv1alpha1.TrafficReplicaSplit, stable},
		{"canary 100%", isvc(ptr.To[int32](3), nil, 100), apis{}, "", fixed(1), fixed(3), false, false, false, servingv1alpha1.TrafficReplicaSplit, canary},
		// Gateway API installed is not enough: a parent must have accepted the route.
		{"canary 20%, route not accepted", isvc(ptr.To[int32](5), nil, 20), apis{gateway: true}, "", fixed(4), fixed(1), false, false, false, servingv1alpha1.TrafficReplicaSplit, ""},
		{"canary 20%, route accepted", isvc(ptr.To[int32](5), nil, 20), apis{gateway: true}, servingv1alpha1.TrafficHTTPRoute, fixed(4), fixed(1), false, false, false, servingv1alpha1.TrafficHTTPRoute, ""},
		// Istio's API installed is not enough either: the pods must be in the mesh.
		{"canary 20%, pods outside Istio's mesh", isvc(ptr.To[int32](5), nil, 20), apis{istio: true}, "", fixed(4), fixed(1), false, false, false, servingv1alpha1.TrafficReplicaSplit, ""},
		{"canary 20%, pods in Istio's mesh", isvc(ptr.To[int32](5), nil, 20), apis{istio: true}, servingv1alpha1.TrafficVirtualService, fixed(4), fixed(1), false, false, false, servingv1alpha1.TrafficVirtualService, ""},
		{"canary with min 0: scale to zero paused", isvc(ptr.To[int32](0), ptr.To[int32](4), 50), apis{keda: true}, "", hpa(1, 2), hpa(1, 2), false, false, true, servingv1alpha1.TrafficReplicaSplit, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc := decide(endpointOf(tc.isvc), tc.have, tc.exact)
			for _, v := range []struct {
				name      string
				got, want versionScale
			}{{"stable", sc.stable, tc.stable}, {"canary", sc.canary, tc.canary}} {
				if ptr.Deref(v.got.replicas, -1) != ptr.Deref(v.want.replicas, -1) || v.got.hpa != v.want.hpa || v.got.hpaMin != v.want.hpaMin || v.got.hpaMax != v.want.hpaMax {
					t.Errorf("%s: replicas %d hpa %v %d..%d; want %d %v %d..%d", v.name, ptr.Deref(v.got.replicas, -1), v.got.hpa, v.got.hpaMin, v.got.hpaMax,
						ptr.Deref(v.want.replicas, -1), v.want.hpa, v.want.hpaMin, v.want.hpaMax)
				}
			}
			if sc.keda != tc.keda || (sc.zeroUnavailable != "") != tc.noZero || sc.zeroPaused != tc.zeroPaused || sc.mode != tc.mode || sc.serves != tc.serves {
				t.Errorf("keda %v zeroUnavailable %q zeroPaused %v mode %q serves %q; want %v %v %v %q %q", sc.keda, sc.zeroUnavailable, sc.zeroPaused, sc.mode, sc.serves,
					tc.keda, tc.noZero, tc.zeroPaused, tc.mode, tc.serves)
			}
		})
	}
}

func TestServers(t *testing.T) {
	tests := []struct {
		framework servingv1alpha1.Framework
		port      int32
		ready     string
	}{
		{servingv1alpha1.FrameworkTriton, 8000, "/v2/health/ready"},
		{servingv1alpha1.FrameworkTorchServe, 8080, "/ping"},
		{servingv1alpha1.FrameworkMLServer, 8080, "/v2/health/ready"},
		{servingv1alpha1.FrameworkTensorFlow, 8501, "/v1/models/model"},
		{servingv1alpha1.FrameworkONNX, 8000, "/v2/health/ready"},
		{servingv1alpha1.FrameworkVLLM, 8000, "/health"},
		{servingv1alpha1.FrameworkHuggingFace, 8000, "/health"},
		{servingv1alpha1.FrameworkCustom, 8080, ""},
	}
	for _, tc := range tests {
		i := isvc(nil, nil, -1)
		i.Spec.Framework, i.Spec.Image = tc.framework, "my/image:1"
		c := predictor(i, serverOf(i))
		if c.Image != "my/image:1" || c.Ports[0].ContainerPort != tc.port {
			t.Errorf("%s: image %s port %d", tc.framework, c.Image, c.Ports[0].ContainerPort)
		}
		switch {
		case tc.ready == "" && c.ReadinessProbe.TCPSocket == nil:
			t.Errorf("%s: want a TCP readiness probe", tc.framework)
		case tc.ready != "" && (c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != tc.ready):
			t.Errorf("%s: readiness %+v, want %s", tc.framework, c.ReadinessProbe, tc.ready)
		}
	}
	v3 := isvc(nil, nil, -1)
	v3.Spec.ModelURI = "pvc://models/iris/v3"
	d := deploymentOf(v3, stable, ptr.To[int32](1))
	v := d.Spec.Template.Spec.Volumes[0]
	if v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "models" || !v.PersistentVolumeClaim.ReadOnly ||
		d.Spec.Template.Spec.Containers[0].VolumeMounts[0].SubPath != "iris/v3" || len(d.Spec.Template.Spec.InitContainers) != 0 {
		t.Errorf("pvc:// model: volume %+v mounts %+v", v, d.Spec.Template.Spec.Containers[0].VolumeMounts)
	}
}

// Kueue's Deployment integration: the InferenceService's queue and priority labels reach its
// Deployments and their pods, never the selector (which cannot change).
func TestDeploymentCarriesKueueLabels(t *testing.T) {
	i := isvc(nil, nil, -1)
	i.Labels = map[string]string{kueue.QueueLabel: "serving", kueue.PriorityLabel: "high", "team": "a"}
	d := deploymentOf(i, stable, nil)
	for _, l := range []map[string]string{d.Labels, d.Spec.Template.Labels} {
		if l[kueue.QueueLabel] != "serving" || l[kueue.PriorityLabel] != "high" || l["team"] != "" {
			t.Errorf("labels %v: want Kueue's queue and priority only", l)
		}
	}
	if _, ok := d.Spec.Selector.MatchLabels[kueue.QueueLabel]; ok {
		t.Errorf("selector %v carries the queue", d.Spec.Selector.MatchLabels)
	}
	if d := deploymentOf(isvc(nil, nil, -1), stable, nil); d.Labels[kueue.QueueLabel] != "" {
		t.Errorf("no queue asked, labels %v", d.Labels)
	}
}

// Replicas fit real clusters: spec.pod reaches the pods (env and envFrom the server only, never
// the model fetch), kiln's labels and annotation win, GPUs of the named resource tolerate its
// taint, and a startup probe gives the model time to load before liveness may restart it.
func TestPodsFitRealClusters(t *testing.T) {
	i := isvc(nil, nil, -1)
	i.Spec.ModelURI, i.Spec.GPUPerReplica, i.Spec.GPUResource = "s3://models/llama", 2, "amd.com/gpu"
	i.Spec.Pod = &servingv1alpha1.PodOptions{
		Labels:             map[string]string{"team": "nlp", LabelService: "not-this"},
		Annotations:        map[string]string{"prometheus.io/scrape": "true", "serving.kiln.dev/model-uri": "not-this"},
		NodeSelector:       map[string]string{"pool": "mi300"},
		Tolerations:        []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}},
		ServiceAccountName: "serving", RuntimeClassName: ptr.To("nvidia"), PriorityClassName: "high",
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
		Env:             []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}},
		EnvFrom:         []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "tuning"}}}},
	}
	d := deploymentOf(i, stable, nil)
	tmpl := d.Spec.Template
	if tmpl.Labels["team"] != "nlp" || tmpl.Labels[LabelService] != i.Name || tmpl.Annotations["prometheus.io/scrape"] != "true" || tmpl.Annotations["serving.kiln.dev/model-uri"] != "s3://models/llama" {
		t.Errorf("labels %v annotations %v: want the spec's added, kiln's winning", tmpl.Labels, tmpl.Annotations)
	}
	pod := tmpl.Spec
	if pod.NodeSelector["pool"] != "mi300" || pod.ServiceAccountName != "serving" || *pod.RuntimeClassName != "nvidia" || pod.PriorityClassName != "high" || !*pod.SecurityContext.RunAsNonRoot {
		t.Errorf("pod %+v: want spec.pod's placement and identity", pod)
	}
	if len(pod.Tolerations) != 2 || pod.Tolerations[1].Key != "amd.com/gpu" || pod.Tolerations[1].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("tolerations %v: want spot and the GPU resource's taint", pod.Tolerations)
	}
	server, fetch := pod.Containers[0], pod.InitContainers[0]
	if got := server.Resources.Limits["amd.com/gpu"]; got.Value() != 2 {
		t.Errorf("limits %v: want 2 amd.com/gpu", server.Resources.Limits)
	}
	if len(server.EnvFrom) != 1 || server.Env[len(server.Env)-1].Name != "LOG_LEVEL" || len(fetch.Env) != 1 || fetch.Env[0].Name != FetchURIEnv || len(fetch.EnvFrom) != 0 {
		t.Errorf("server env %v %v, fetch env %v %v: want spec.pod.env on the server only", server.Env, server.EnvFrom, fetch.Env, fetch.EnvFrom)
	}
	if p := server.StartupProbe; p == nil || p.PeriodSeconds*p.FailureThreshold != 600 || p.HTTPGet == nil || p.HTTPGet.Path != "/v2/health/ready" {
		t.Errorf("startup probe %+v: want 600 s of the readiness check", p)
	}
	i.Spec.StartupTimeoutSeconds = ptr.To[int32](1800)
	if p := deploymentOf(i, stable, nil).Spec.Template.Spec.Containers[0].StartupProbe; p.PeriodSeconds*p.FailureThreshold != 1800 {
		t.Errorf("startup budget %d s, want 1800", p.PeriodSeconds*p.FailureThreshold)
	}
	ts := isvc(nil, nil, -1)
	ts.Spec.Framework, ts.Spec.GPUPerReplica = servingv1alpha1.FrameworkTorchServe, 1
	if img := serverOf(ts).image; img != "pytorch/torchserve:0.11.0-gpu" {
		t.Errorf("TorchServe with a GPU runs %s, want its GPU image", img)
	}
	cpu := isvc(nil, nil, -1)
	if got := deploymentOf(cpu, stable, nil).Spec.Template.Spec.Tolerations; len(got) != 0 {
		t.Errorf("a CPU model tolerates %v", got)
	}
}

// An LLM from the Hugging Face Hub on 2 GPUs: kiln-fetch downloads it (the token stays with the
// fetch container), vLLM loads it from the model folder and splits its tensors over the GPUs.
func TestLLMFromTheHub(t *testing.T) {
	i := isvc(nil, nil, -1)
	i.Spec.Framework, i.Spec.ModelURI, i.Spec.GPUPerReplica = servingv1alpha1.FrameworkVLLM, "hf://meta-llama/Llama-3.1-8B-Instruct", 2
	pod := deploymentOf(i, stable, nil).Spec.Template.Spec
	c := pod.Containers[0]
	want := "--model /mnt/models --served-model-name model --port 8000 --tensor-parallel-size 2"
	if got := strings.Join(c.Args, " "); got != want || c.Image != "vllm/vllm-openai:v0.6.3" {
		t.Errorf("vLLM runs %s %q, want %q", c.Image, got, want)
	}
	if len(pod.InitContainers) != 1 || pod.InitContainers[0].Env[0] != (corev1.EnvVar{Name: FetchURIEnv, Value: "hf://meta-llama/Llama-3.1-8B-Instruct"}) {
		t.Errorf("init containers %+v: want kiln-fetch of the Hub model", pod.InitContainers)
	}
	tf := isvc(nil, nil, -1)
	tf.Spec.Framework, tf.Spec.GPUPerReplica = servingv1alpha1.FrameworkTensorFlow, 1
	if img := serverOf(tf).image; img != "tensorflow/serving:2.17.0-gpu" {
		t.Errorf("TensorFlow Serving with a GPU runs %s", img)
	}
}

// TorchServe keeps its token authorization unless the spec turns it off.
func TestTorchServeTokenAuth(t *testing.T) {
	i := isvc(nil, nil, -1)
	i.Spec.Framework = servingv1alpha1.FrameworkTorchServe
	if args := strings.Join(predictor(i, serverOf(i)).Args, " "); strings.Contains(args, "--disable-token-auth") {
		t.Errorf("TorchServe by default runs %q: want token authorization kept", args)
	}
	i.Spec.TokenAuth = "Disabled"
	if args := strings.Join(predictor(i, serverOf(i)).Args, " "); !strings.HasSuffix(args, "--models all --disable-token-auth") {
		t.Errorf("tokenAuth Disabled runs %q", args)
	}
}

// A rollout completes when every pod runs the current template and some are available; a scale-up
// is no rollout; a passed progress deadline fails it.
func TestRollout(t *testing.T) {
	dep := func(gen, observed int64, replicas, updated, available int32, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
		d := &appsv1.Deployment{Status: appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated, AvailableReplicas: available, Conditions: conds}}
		d.Generation = gen
		return d
	}
	deadline := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}
	for _, c := range []struct {
		name string
		d    *appsv1.Deployment
		want rollout
	}{
		{"none yet", nil, rollout{reason: "RolloutProgressing"}},
		{"not observed", dep(2, 1, 1, 1, 1), rollout{reason: "RolloutProgressing"}},
		{"old pods remain", dep(2, 2, 2, 1, 1), rollout{reason: "RolloutProgressing"}},
		{"new pods not available", dep(2, 2, 1, 1, 0), rollout{reason: "RolloutProgressing"}},
		{"scaling up", dep(3, 3, 2, 2, 2), rollout{complete: true}},
		{"done", dep(2, 2, 1, 1, 1), rollout{complete: true}},
		{"deadline passed", dep(2, 2, 2, 1, 1, deadline), rollout{reason: "RolloutFailed"}},
	} {
		if got := rolloutOf(c.d); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	if got := (rollout{reason: "RolloutFailed"}).message("v1", "v2", trouble{"Unschedulable", "pod p cannot be scheduled: …"}); got != "v1 serves; the rollout of v2 passed its progress deadline: pod p cannot be scheduled: …" {
		t.Errorf("message %q", got)
	}
}

// A pod's readiness counts as soon as the cache has it, where the Deployment's status has not
// caught up, speaks of one template and counts the pods the cache has, or where the Deployment
// never changed and its ReplicaSet made the pods after it was created; never against a status
// that says more.
func TestAsPodsSay(t *testing.T) {
	type status struct{ generation, observed, replicas, updated, ready int32 }
	created := time.Unix(100, 0)
	dep := func(s status) *appsv1.Deployment {
		d := &appsv1.Deployment{Status: appsv1.DeploymentStatus{ObservedGeneration: int64(s.observed), Replicas: s.replicas, UpdatedReplicas: s.updated,
			ReadyReplicas: s.ready, AvailableReplicas: s.ready}}
		d.Generation, d.CreationTimestamp = int64(s.generation), metav1.Time{Time: created}
		d.Spec.Replicas = ptr.To(max(1, s.replicas))
		d.Spec.Template.Annotations = map[string]string{modelURIAnnotation: "s3://m/2", revisionAnnotation: "r2"}
		return d
	}
	pod := func(ready bool, phase corev1.PodPhase, going bool) corev1.Pod {
		p := corev1.Pod{Status: corev1.PodStatus{Phase: phase, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionFalse}}}}
		if ready {
			p.Status.Conditions[1].Status = corev1.ConditionTrue
		}
		if going {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	// made is p as a ReplicaSet of template hash made it, after the Deployment's creation, from
	// a template of the Deployment's model and revision.
	made := func(p corev1.Pod, hash string, after time.Duration) corev1.Pod {
		p.Labels = map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: hash}
		p.Annotations = map[string]string{modelURIAnnotation: "s3://m/2", revisionAnnotation: "r2"}
		p.CreationTimestamp = metav1.Time{Time: created.Add(after)}
		return p
	}
	of := func(p corev1.Pod, annotation, value string) corev1.Pod {
		p.Annotations = map[string]string{modelURIAnnotation: "s3://m/2", revisionAnnotation: "r2", annotation: value}
		return p
	}
	readyPod, startingPod := pod(true, corev1.PodRunning, false), pod(false, corev1.PodPending, false)
	for _, c := range []struct {
		name   string
		status status
		pods   []corev1.Pod
		ready  int32 // what asPodsSay says; -1: d as it is
		counts int32 // the replicas it says, where more than the status counts
	}{
		{"its pod ready before the status says", status{1, 1, 1, 1, 0}, []corev1.Pod{readyPod}, 1, 0},
		{"scaling up", status{2, 2, 3, 3, 1}, []corev1.Pod{readyPod, readyPod, startingPod}, 2, 0},
		{"a pod going beside the ready one", status{1, 1, 1, 1, 0}, []corev1.Pod{pod(true, corev1.PodRunning, true), readyPod}, 1, 0},
		{"the pod not counted yet", status{1, 1, 0, 0, 0}, []corev1.Pod{readyPod}, -1, 0},
		{"its pod starting", status{1, 1, 1, 1, 0}, []corev1.Pod{startingPod}, -1, 0},
		{"not observed", status{2, 1, 1, 1, 0}, []corev1.Pod{readyPod}, -1, 0},
		{"rolling out", status{2, 2, 2, 1, 0}, []corev1.Pod{readyPod, readyPod}, -1, 0},
		{"an older template's pod not seen going", status{2, 2, 1, 1, 0}, []corev1.Pod{readyPod, startingPod}, -1, 0},
		{"the status says more", status{1, 1, 2, 2, 2}, []corev1.Pod{readyPod, startingPod}, -1, 0},
		{"going, ended or failed pods", status{1, 1, 0, 0, 0}, []corev1.Pod{pod(true, corev1.PodRunning, true), pod(false, corev1.PodSucceeded, false), pod(false, corev1.PodFailed, false)}, -1, 0},
		// A Deployment whose spec never changed has had one template: pods of its model that its
		// ReplicaSet made after it was created are that template's, counted or not.
		{"its first template's pod, not observed yet", status{1, 0, 0, 0, 0}, []corev1.Pod{made(readyPod, "a", 2*time.Second)}, 1, 1},
		{"its first template's pod, not counted yet", status{1, 1, 0, 0, 0}, []corev1.Pod{made(readyPod, "a", time.Second)}, 1, 1},
		{"more of its first template's pods than counted", status{1, 1, 1, 1, 0}, []corev1.Pod{made(readyPod, "a", time.Second), made(readyPod, "a", 3*time.Second)}, 2, 2},
		{"a pod made in the second the Deployment was", status{1, 1, 0, 0, 0}, []corev1.Pod{made(readyPod, "a", 500*time.Millisecond)}, -1, 0},
		{"an earlier Deployment's pod", status{1, 1, 0, 0, 0}, []corev1.Pod{made(readyPod, "a", -time.Second)}, -1, 0},
		{"two templates' pods", status{1, 1, 0, 0, 0}, []corev1.Pod{made(readyPod, "a", time.Second), made(startingPod, "b", time.Second)}, -1, 0},
		{"a pod no ReplicaSet made", status{1, 1, 0, 0, 0}, []corev1.Pod{made(readyPod, "", time.Second)}, -1, 0},
		{"an earlier Deployment's pod going beside its pod", status{1, 1, 0, 0, 0}, []corev1.Pod{pod(true, corev1.PodRunning, true), made(readyPod, "a", time.Second)}, 1, 1},
		{"an earlier model's pod", status{1, 1, 0, 0, 0}, []corev1.Pod{of(made(readyPod, "a", time.Second), modelURIAnnotation, "s3://m/1")}, -1, 0},
		{"an earlier revision's pod", status{1, 1, 0, 0, 0}, []corev1.Pod{of(made(readyPod, "a", time.Second), revisionAnnotation, "r1")}, -1, 0},
		{"a changed spec", status{2, 2, 1, 1, 0}, []corev1.Pod{made(readyPod, "a", time.Second), made(startingPod, "a", time.Second)}, -1, 0},
	} {
		d := dep(c.status)
		before := d.DeepCopy()
		got := asPodsSay(d, c.pods)
		if !equality.Semantic.DeepEqual(d, before) {
			t.Errorf("%s: changed the Deployment it was given", c.name)
		}
		if c.ready < 0 {
			if got != d {
				t.Errorf("%s: %+v, want the Deployment as it is", c.name, got.Status)
			}
			continue
		}
		want := before.Status
		want.ReadyReplicas, want.AvailableReplicas = c.ready, c.ready
		if c.counts > 0 {
			want.ObservedGeneration, want.Replicas, want.UpdatedReplicas = before.Generation, c.counts, c.counts
		}
		if !equality.Semantic.DeepEqual(got.Status, want) {
			t.Errorf("%s: %+v, want %+v", c.name, got.Status, want)
		}
		if ok, _, _ := versionReady(got, false, ""); !ok {
			t.Errorf("%s: not ready", c.name)
		}
		if r := rolloutOf(got); !r.complete {
			t.Errorf("%s: rollout %+v, want complete", c.name, r)
		}
	}
	if asPodsSay(nil, []corev1.Pod{readyPod}) != nil {
		t.Error("no Deployment: want none")
	}
	slow := dep(status{1, 1, 1, 1, 0})
	slow.Spec.MinReadySeconds = 30
	if got := asPodsSay(slow, []corev1.Pod{readyPod}).Status; got.ReadyReplicas != 1 || got.AvailableReplicas != 0 {
		t.Errorf("minReadySeconds 30: %+v, want a ready replica not yet available", got)
	}
}

// A service that scales to zero is reached through the HTTP add-on's interceptor: its namespace
// may reach the pods too.
func TestNetworkPolicyLetsTheInterceptorIn(t *testing.T) {
	i := isvc(ptr.To[int32](0), nil, -1)
	i.Spec.NetworkPolicy = &servingv1alpha1.ServiceNetworkPolicy{}
	np := desiredNetworkPolicy(endpointOf(i), scaling{keda: true}, DefaultKEDAHTTPInterceptor)
	if from := np.Spec.Ingress[0].From; len(from) != 1 || from[0].NamespaceSelector.MatchLabels[corev1.LabelMetadataName] != "keda" {
		t.Errorf("ingress from %+v, want the interceptor's namespace keda", from)
	}
	// No peers is no ingress rule: a rule with no peers would admit everyone.
	if np := desiredNetworkPolicy(endpointOf(i), scaling{}, DefaultKEDAHTTPInterceptor); len(np.Spec.Ingress) != 0 || len(np.Spec.PolicyTypes) != 1 {
		t.Errorf("without scale to zero and peers, ingress %+v, want none", np.Spec.Ingress)
	}
}

// A pre-signed URL's signature and a URL's password are credentials: they reach only the fetch
// container's environment, never the pod's arguments or annotations, nor the status.
func TestModelURISecretsStayOutOfSpecsAndStatus(t *testing.T) {
	i := isvc(nil, nil, -1)
	i.Spec.ModelURI = "https://u:pass@models.example.com/iris.tar.gz?X-Amz-Signature=s3cr3t"
	i.Spec.Traffic = &servingv1alpha1.Traffic{CanaryVersion: "https://models.example.com/v2.tar.gz?sig=c4n4ry", CanaryPercent: 10}
	d := deploymentOf(i, stable, nil)
	if env := d.Spec.Template.Spec.InitContainers[0].Env; len(env) != 1 || env[0].Value != i.Spec.ModelURI {
		t.Fatalf("fetch env %v: want the whole URI there", env)
	}
	d.Spec.Template.Spec.InitContainers[0].Env = nil
	st := status(i, endpointOf(i), scaling{}, d, nil, trouble{}, false, "", metav1.Now())
	for what, v := range map[string]any{"deployment": d, "status": st} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{"s3cr3t", "c4n4ry", "pass"} {
			if strings.Contains(string(b), secret) {
				t.Errorf("the %s holds %q: %s", what, secret, b)
			}
		}
	}
	if got := d.Spec.Template.Annotations[modelURIAnnotation]; got != "https://models.example.com/iris.tar.gz" {
		t.Errorf("model annotation %q", got)
	}
}
