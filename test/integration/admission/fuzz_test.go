package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	servingv1beta1 "github.com/kiln-ml/kiln/api/serving/v1beta1"
	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	"github.com/kiln-ml/kiln/internal/controller/inferenceservice"
	"github.com/kiln-ml/kiln/internal/controller/pyjob"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/manager"
	"github.com/kiln-ml/kiln/internal/netpol"
	"github.com/kiln-ml/kiln/internal/replicajob"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

// FuzzAcceptedJobsMakeValidChildren takes random training jobs through the admission kiln
// serves (the CRD schema and its rules, the defaulting and validating webhooks) and, for every
// job accepted, through the engine's pure builders: the real apiserver must accept every pod and
// Service they make (a server-side dry run). An accepted job whose children the apiserver refuses
// would never run. It fails too on a webhook that breaks (an internal error) on any input.
func FuzzAcceptedJobsMakeValidChildren(f *testing.F) {
	f.Add(uint8(0), "mnist", uint8(2), "tensorflow", int32(6006), "", "EPOCHS", "team", "a")
	f.Add(uint8(1), "bert", uint8(3), "pytorch", int32(0), "metrics", "LR", "app.kubernetes.io/name", "bert")
	f.Add(uint8(2), "iris", uint8(1), "xgboost", int32(70000), "xgboostjob-port", "1BAD", "a/b/c", "x")
	f.Add(uint8(3), "jax", uint8(1), "jax", int32(8080), "http", "A=B", "", "")
	f.Add(uint8(4), "paddle", uint8(2), "Paddle", int32(2222), "a-very-long-port-name", "X", "team", "a b")
	f.Add(uint8(5), "pi", uint8(2), "mpi", int32(22), "ssh", "OMPI", "team", "-bad")
	frameworks, err := manager.Frameworks(testenv.ManagerOptions())
	if err != nil {
		f.Fatal(err)
	}
	all := frameworks.All()
	ready(f)
	ns := env.Namespace(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, kind uint8, name string, replicas uint8, container string, port int32, portName, envName, labelKey, labelValue string) {
		fw := all[int(kind)%len(all)]
		job := fuzzJob(fw, ns, name, int32(replicas%4)+1, container, port, portName, envName, labelKey, labelValue)
		if !admitted(t, fw.Kind, env.Client.Create(ctx, job, client.DryRunAll)) {
			return // refused: the user is told why
		}
		childrenAreValid(t, fw, job, fmt.Sprintf("%+v", job.GetReplicaSpecs()))
	})
}

// admitted says whether admission accepted a dry run's object (err is the create's), and fails
// the test when a webhook broke (an internal error) instead of answering.
func admitted(t *testing.T, kind string, err error) bool {
	t.Helper()
	if apierrors.IsInternalError(err) || (err != nil && strings.Contains(err.Error(), "failed calling webhook")) {
		t.Fatalf("the admission of a %s broke: %v", kind, err)
	}
	return err == nil
}

// childrenAreValid has the apiserver check (a server-side dry run) every child the engine
// builds for an accepted job: its pods and Services, and the extras it wants while it runs (an
// elastic PyTorchJob's HPA, an MPIJob's hostfile ConfigMap). It fails at the first refused,
// saying what was fuzzed (input).
func childrenAreValid(t *testing.T, fw framework.Framework, job framework.Job, input string) {
	t.Helper()
	replicajob.Default(fw, job, kubeflowv1.CleanPodPolicyRunning) // as the manager's cache does
	pods, services, err := replicajob.Children(fw, job)
	if err != nil {
		t.Fatalf("an accepted %s has no children: %v", fw.Kind, err)
	}
	var children []client.Object
	for _, p := range pods {
		children = append(children, p)
	}
	for _, s := range services {
		children = append(children, s)
	}
	if fw.Extras != nil {
		for _, e := range fw.Extras(job, framework.State{Active: true}) {
			if e.Wanted {
				children = append(children, e.Object)
			}
		}
	}
	for _, c := range children {
		if err := env.Client.Create(context.Background(), c, client.DryRunAll); apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			t.Fatalf("a %s was accepted, but the apiserver refuses its %T %s: %v\ninput: %s", fw.Kind, c, c.GetName(), err, input)
		}
	}
}

// FuzzAcceptedElasticMetricsMakeValidHPAs takes elastic PyTorchJobs with one random metric
// through admission: the HPA of every job accepted must be one the apiserver accepts (Kubeflow
// passes spec.elasticPolicy.metrics to it as they are).
func FuzzAcceptedElasticMetricsMakeValidHPAs(f *testing.F) {
	f.Add(uint8(1), uint8(1), uint8(1), int32(80), "", "", "cpu", "pytorch")
	f.Add(uint8(1), uint8(1), uint8(2), int32(0), "", "", "cpu", "pytorch")
	f.Add(uint8(1), uint8(1), uint8(1), int32(0), "", "", "memory", "pytorch")
	f.Add(uint8(2), uint8(1), uint8(1), int32(80), "", "", "cpu", "pytorch")
	f.Add(uint8(2), uint8(2), uint8(3), int32(0), "", "-1", "requests", "pytorch")
	f.Add(uint8(3), uint8(3), uint8(2), int32(0), "10", "", "", "pytorch")
	f.Add(uint8(4), uint8(4), uint8(3), int32(0), "", "5", "queue_depth", "pytorch")
	f.Add(uint8(5), uint8(5), uint8(1), int32(-5), "", "", "cpu", "pytorch")
	f.Add(uint8(0), uint8(0), uint8(0), int32(0), "", "", "", "pytorch")
	f.Add(uint8(6), uint8(1), uint8(4), int32(101), "1k", "0", "cpu", "pytorch")
	f.Add(uint8(5), uint8(5), uint8(3), int32(0), "", "1", "gpu", "pytorch")
	f.Add(uint8(1), uint8(1), uint8(3), int32(0), "", "1", "gpu", "pytorch")
	f.Add(uint8(5), uint8(5), uint8(3), int32(0), "", "1", "nvidia.com/gpu", "Pytorch")
	f.Add(uint8(3), uint8(3), uint8(2), int32(0), "10", "", "a/b", "")
	frameworks, err := manager.Frameworks(testenv.ManagerOptions())
	if err != nil {
		f.Fatal(err)
	}
	fw, _ := frameworks.Get(kubeflowv1.PyTorchJobKind)
	types := []autoscalingv2.MetricSourceType{"", autoscalingv2.ResourceMetricSourceType, autoscalingv2.PodsMetricSourceType,
		autoscalingv2.ObjectMetricSourceType, autoscalingv2.ExternalMetricSourceType, autoscalingv2.ContainerResourceMetricSourceType, "Bogus"}
	targets := []autoscalingv2.MetricTargetType{"", autoscalingv2.UtilizationMetricType, autoscalingv2.ValueMetricType, autoscalingv2.AverageValueMetricType, "Bogus"}
	ready(f)
	ns := env.Namespace(f)
	f.Fuzz(func(t *testing.T, metricType, source, targetType uint8, utilization int32, value, averageValue, name, container string) {
		target := autoscalingv2.MetricTarget{Type: targets[int(targetType)%len(targets)]}
		if utilization != 0 {
			target.AverageUtilization = ptr.To(utilization)
		}
		for _, q := range []struct {
			s  string
			to **resource.Quantity
		}{{value, &target.Value}, {averageValue, &target.AverageValue}} {
			if v, err := resource.ParseQuantity(q.s); err == nil {
				*q.to = &v
			}
		}
		m := autoscalingv2.MetricSpec{Type: types[int(metricType)%len(types)]}
		id := autoscalingv2.MetricIdentifier{Name: name}
		switch types[int(source)%len(types)] {
		case autoscalingv2.ResourceMetricSourceType:
			m.Resource = &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceName(name), Target: target}
		case autoscalingv2.PodsMetricSourceType:
			m.Pods = &autoscalingv2.PodsMetricSource{Metric: id, Target: target}
		case autoscalingv2.ObjectMetricSourceType:
			m.Object = &autoscalingv2.ObjectMetricSource{DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service", Name: name}, Metric: id, Target: target}
		case autoscalingv2.ExternalMetricSourceType:
			m.External = &autoscalingv2.ExternalMetricSource{Metric: id, Target: target}
		case autoscalingv2.ContainerResourceMetricSourceType:
			m.ContainerResource = &autoscalingv2.ContainerResourceMetricSource{Name: corev1.ResourceName(name), Container: container, Target: target}
		}
		job := builder.PyTorchJob("elastic", ns).Replicas(kubeflowv1.PyTorchJobReplicaTypeWorker, 2).Edit(func(j framework.Job) {
			j.(*kubeflowv1.PyTorchJob).Spec.ElasticPolicy = &kubeflowv1.ElasticPolicy{
				MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](4), Metrics: []autoscalingv2.MetricSpec{m}}
		}).Obj()
		if !admitted(t, "PyTorchJob", env.Client.Create(context.Background(), job, client.DryRunAll)) {
			return // refused: the user is told why
		}
		childrenAreValid(t, fw, job, fmt.Sprintf("%+v", m))
	})
}

// FuzzAcceptedPyJobsMakeValidChildren does for PyJobs what FuzzAcceptedJobsMakeValidChildren
// does for the training kinds: every PyJob the CRD schema and the webhooks accept must make
// children (its batch Job, Service, output claim, script ConfigMap and NetworkPolicy) that the
// apiserver accepts.
func FuzzAcceptedPyJobsMakeValidChildren(f *testing.F) {
	f.Add("train", "pytorch/pytorch:2.0", uint8(1), uint8(0), "/data", "/output", "EPOCHS", "data", "", "print(1)", "team", "a")
	f.Add("ddp", "trainer:1", uint8(4), uint8(8), "/mnt/data", "/mnt/out", "1BAD", "Bad_Claim", "../x", "", "a/b/c", "x")
	f.Add("shm", "img", uint8(2), uint8(1), "/dev/shm", "/dev/shm", "A=B", "claim", "/abs", "x", "", "")
	f.Add(strings.Repeat("n", 60), "img", uint8(255), uint8(200), "data", "/tmp", "", "c", "sub", "", "app", "-bad")
	ready(f)
	ns := env.Namespace(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, name, image string, workers, gpus uint8, datasetPath, outputPath, envName, claim, subPath, script, labelKey, labelValue string) {
		job := &trainingv1alpha1.PyJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: trainingv1alpha1.PyJobSpec{Image: image, Workers: int32(workers), GPU: int32(gpus), DatasetPath: datasetPath, OutputPath: outputPath}}
		if script != "" {
			job.Spec.Script = script
		} else {
			job.Spec.Command = []string{"python", "train.py"}
		}
		if envName != "" {
			job.Spec.Env = []corev1.EnvVar{{Name: envName, Value: "1"}}
		}
		if claim != "" {
			job.Spec.Dataset = &trainingv1alpha1.DatasetStorage{ClaimName: claim, SubPath: subPath}
			job.Spec.Output = &trainingv1alpha1.OutputStorage{Size: ptr.To(resource.MustParse("1Gi"))}
		}
		if labelKey != "" {
			job.Labels = map[string]string{labelKey: labelValue}
		}
		if !admitted(t, "PyJob", env.Client.Create(ctx, job, client.DryRunAll)) {
			return // refused: the user is told why
		}
		for _, isolation := range []string{netpol.None, netpol.Isolated} {
			for _, c := range pyjob.Children(job, isolation) {
				if err := env.Client.Create(ctx, c, client.DryRunAll); apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
					t.Fatalf("a PyJob was accepted, but the apiserver refuses its %T %s: %v\njob: %+v", c, c.GetName(), err, job.Spec)
				}
			}
		}
	})
}

// fuzzJob is a job of fw whose every replica type has the fuzzed replicas and one container of
// the fuzzed name, port, environment variable and pod label.
func fuzzJob(fw framework.Framework, ns, name string, replicas int32, container string, port int32, portName, envName, labelKey, labelValue string) framework.Job {
	job := fw.NewJob()
	job.SetName(name)
	job.SetNamespace(ns)
	specs := map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{}
	for i, rtype := range fw.ReplicaTypes {
		if i > 1 {
			break // two types are enough to meet the kinds' rules (a master or launcher, workers)
		}
		c := corev1.Container{Name: container, Image: "trainer:1"}
		if port != 0 || portName != "" {
			c.Ports = []corev1.ContainerPort{{Name: portName, ContainerPort: port}}
		}
		if envName != "" {
			c.Env = []corev1.EnvVar{{Name: envName, Value: "1"}}
		}
		s := &kubeflowv1.ReplicaSpec{Replicas: ptr.To(replicas), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}}
		if labelKey != "" {
			s.Template.Labels = map[string]string{labelKey: labelValue}
		}
		if i == 0 && len(fw.ReplicaTypes) > 1 {
			s.Replicas = ptr.To[int32](1) // the master, chief or launcher
		}
		specs[rtype] = s
	}
	job.SetReplicaSpecs(specs)
	return job
}

// FuzzAcceptedInferenceServicesMakeValidChildren does for InferenceServices what
// FuzzAcceptedJobsMakeValidChildren does for the training kinds: every InferenceService the CRD
// schema and the webhooks accept (written at the version users write, converted to the hub as
// the controller reads it) must make children (its Deployments, Services, HPAs, NetworkPolicy
// and the optional APIs' routes, scalers and monitors, their CRDs installed here) that the
// apiserver accepts.
func FuzzAcceptedInferenceServicesMakeValidChildren(f *testing.F) {
	f.Add("iris", uint8(3), "s3://models/iris/v1", "", int32(0), uint8(1), uint8(1), uint8(0), "", int32(0), "", "team", "a", "", "", "")
	f.Add("llm", uint8(8), "hf://org/model", "vllm/vllm:1", int32(8000), uint8(0), uint8(4), uint8(2), "", int32(0), "HF_TOKEN", "", "", "role", "HF_", "10.0.0.0/8")
	f.Add("canary", uint8(1), "pvc://models/iris", "", int32(8080), uint8(2), uint8(6), uint8(0), "pvc://models/iris2", int32(20), "1BAD", "a/b/c", "x", "a b", "A=", "010.0.0.0/8")
	f.Add("split", uint8(9), "https://u:p@host/m", "img", int32(65535), uint8(3), uint8(3), uint8(0), "gs://b/m", int32(100), "A=B", "app", "-bad", "-x", "1_", "10.0.0.1")
	f.Add("relaxed", uint8(3), "s3://models/iris/v1", "", int32(0), uint8(1), uint8(1), uint8(0), "", int32(0), "1BAD", "", "", "", "1_", "010.0.0.0/8")
	f.Add(strings.Repeat("n", 46), uint8(0), "pvc://Bad_Claim/m", "", int32(70000), uint8(200), uint8(100), uint8(9), "pvc://c/../x", int32(-1), "", "team", "a b", "", "", "::/0")
	frameworks := []servingv1alpha1.Framework{servingv1alpha1.FrameworkTriton, servingv1alpha1.FrameworkTorchServe, servingv1alpha1.FrameworkMLServer,
		servingv1alpha1.FrameworkSKLearn, servingv1alpha1.FrameworkXGBoost, servingv1alpha1.FrameworkTensorFlow, servingv1alpha1.FrameworkONNX,
		servingv1alpha1.FrameworkHuggingFace, servingv1alpha1.FrameworkVLLM, servingv1alpha1.FrameworkCustom}
	ready(f)
	crds := filepath.Join(testenv.RepoRoot(), "test", "testdata", "crds")
	env.InstallCRDs(f, testenv.GatewayAPICRDs(f), testenv.IstioCRDs(f), filepath.Join(testenv.KEDACRDs(f), "keda.sh_scaledobjects.yaml"),
		filepath.Join(crds, "http.keda.sh_interceptorroutes.yaml"),
		filepath.Join(crds, "monitoring.coreos.com_servicemonitors.yaml"), filepath.Join(crds, "monitoring.coreos.com_prometheusrules.yaml"))
	ns := env.Namespace(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, name string, framework uint8, uri, image string, port int32, minReplicas, maxReplicas, gpus uint8,
		canaryURI string, canaryPercent int32, envName, labelKey, labelValue, peerKey, envPrefix, cidr string) {
		isvc := &servingv1beta1.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: servingv1beta1.InferenceServiceSpec{
				Model:   servingv1beta1.Model{URI: uri, Framework: frameworks[int(framework)%len(frameworks)]},
				Scaling: &servingv1beta1.Scaling{MinReplicas: ptr.To(int32(minReplicas)), MaxReplicas: ptr.To(int32(maxReplicas))},
			}}
		if image != "" || port != 0 {
			isvc.Spec.Server = &servingv1beta1.Server{Image: image, Port: port}
		}
		if gpus > 0 {
			isvc.Spec.GPUs = &servingv1beta1.GPUs{Count: int32(gpus)}
		}
		if canaryURI != "" {
			isvc.Spec.Traffic = &servingv1alpha1.Traffic{CanaryVersion: canaryURI, CanaryPercent: canaryPercent}
		}
		if envName != "" || labelKey != "" || envPrefix != "" {
			isvc.Spec.Pod = &servingv1alpha1.PodOptions{}
			if envName != "" {
				isvc.Spec.Pod.Env = []corev1.EnvVar{{Name: envName, Value: "1"}}
			}
			if envPrefix != "" {
				isvc.Spec.Pod.EnvFrom = []corev1.EnvFromSource{{Prefix: envPrefix, ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}
			}
			if labelKey != "" {
				isvc.Spec.Pod.Labels = map[string]string{labelKey: labelValue}
			}
		}
		if peerKey != "" || cidr != "" {
			isvc.Spec.NetworkPolicy = &servingv1alpha1.ServiceNetworkPolicy{}
			if peerKey != "" {
				isvc.Spec.NetworkPolicy.From = append(isvc.Spec.NetworkPolicy.From, networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{peerKey: labelValue}}})
			}
			if cidr != "" {
				isvc.Spec.NetworkPolicy.From = append(isvc.Spec.NetworkPolicy.From, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr}})
			}
		}
		if !admitted(t, "InferenceService", env.Client.Create(ctx, isvc, client.DryRunAll)) { // the answer is the object as admitted, defaults set
			return // refused: the user is told why
		}
		hub := &servingv1alpha1.InferenceService{}
		if err := isvc.ConvertTo(hub); err != nil {
			t.Fatalf("an accepted InferenceService does not convert to the hub: %v", err)
		}
		for _, c := range inferenceservice.Children(hub, inferenceservice.Options{}) {
			// Any error: every kind is served here (an unserved one would be a NoKindMatch).
			if err := env.Client.Create(ctx, c, client.DryRunAll); err != nil {
				spec, _ := json.Marshal(isvc.Spec)
				t.Fatalf("an InferenceService was accepted, but the apiserver refuses its %s %s: %v\nspec: %s", c.GetObjectKind().GroupVersionKind().Kind, c.GetName(), err, spec)
			}
		}
	})
}
