// Package admission runs kiln's admission webhooks for real: the kube-apiserver calls the
// manager's webhook server over TLS with the CA bundle kiln injected itself.
package admission

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/manager"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

var (
	env *testenv.Env
	// opts are the options the suite's manager runs with; probeAddr serves its /readyz.
	opts      manager.Options
	probeAddr string
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, func(e *testenv.Env) (func(), error) {
		webhookAddr, err := devcluster.FreeAddr()
		if err != nil {
			return nil, err
		}
		if probeAddr, err = devcluster.FreeAddr(); err != nil {
			return nil, err
		}
		o, err := devcluster.LocalWebhooks(testenv.ManagerOptions(), webhookAddr, 500*time.Millisecond)
		if err != nil {
			return nil, err
		}
		o.ProbeAddr = probeAddr
		opts = o
		if err := e.InstallWebhooks(o); err != nil {
			return nil, err
		}
		return e.StartManager(o)
	}))
}

// ready waits until the webhooks answer.
func ready(t testing.TB) {
	t.Helper()
	if err := devcluster.WaitForWebhooks(context.Background(), env.Client, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}

// badInput is one rejected request: a create of obj, or, with update set, a create of obj that
// must succeed followed by an update that must be refused.
type badInput struct {
	name   string
	obj    func(ns string) client.Object
	update func(client.Object)
	// field is what the error message must name.
	field string
	// webhookOnly marks rules the CRD schema cannot express.
	webhookOnly bool
}

func tf(ns string) *builder.Job { return builder.TFJob("tf", ns).Replicas("Worker", 2) }
func pt(ns string) *builder.Job {
	return builder.PyTorchJob("pt", ns).Replicas("Master", 1).Replicas("Worker", 2)
}
func xgb(ns string) *builder.Job {
	return builder.XGBoostJob("xgb", ns).Replicas("Master", 1).Replicas("Worker", 2)
}

func mpiJob(ns string) *builder.Job {
	return builder.MPIJob("pi", ns).Replicas("Launcher", 1).Replicas("Worker", 2)
}

func job(b func(string) *builder.Job, edit func(framework.Job)) func(string) client.Object {
	return func(ns string) client.Object { return b(ns).Edit(edit).Obj() }
}

func pyJob(edit func(*trainingv1alpha1.PyJob)) func(string) client.Object {
	return func(ns string) client.Object {
		p := &trainingv1alpha1.PyJob{
			ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns},
			Spec:       trainingv1alpha1.PyJobSpec{Image: "pytorch/pytorch:2.0", Command: []string{"python", "train.py"}},
		}
		edit(p)
		return p
	}
}

func isvc(edit func(*servingv1alpha1.InferenceService)) func(string) client.Object {
	return func(ns string) client.Object {
		i := &servingv1alpha1.InferenceService{
			ObjectMeta: metav1.ObjectMeta{Name: "iris", Namespace: ns},
			Spec:       servingv1alpha1.InferenceServiceSpec{ModelURI: "s3://models/iris/v1", Framework: servingv1alpha1.FrameworkSKLearn},
		}
		edit(i)
		return i
	}
}

// trainJob is a TrainJob on admissionRuntime, a torch ClusterTrainingRuntime made once.
func trainJob(edit func(*trainerv1alpha1.TrainJob)) func(string) client.Object {
	return func(ns string) client.Object {
		makeAdmissionRuntime()
		j := &trainerv1alpha1.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: ns},
			Spec: trainerv1alpha1.TrainJobSpec{RuntimeRef: trainerv1alpha1.RuntimeRef{Name: admissionRuntime}}}
		edit(j)
		return j
	}
}

const admissionRuntime = "kiln-admission-torch"

var makeAdmissionRuntime = sync.OnceFunc(func() {
	rt := &trainerv1alpha1.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: admissionRuntime}}
	rt.Spec.MLPolicy = &trainerv1alpha1.MLPolicy{MLPolicySource: trainerv1alpha1.MLPolicySource{Torch: &trainerv1alpha1.TorchMLPolicySource{}}}
	rj := jobsetv1alpha2.ReplicatedJob{Name: "node"}
	rj.Template.Labels = map[string]string{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
	rj.Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: "node", Image: "pytorch/pytorch:2.0"}}
	model := jobsetv1alpha2.ReplicatedJob{Name: "model-initializer"} // the step a TrainJob's initializer.model needs
	model.Template.Labels = map[string]string{"trainer.kubeflow.org/trainjob-ancestor-step": "model-initializer"}
	model.Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: "model-initializer", Image: "kubeflow/model-initializer"}}
	rt.Spec.Template.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{model, rj}
	if err := env.Client.Create(context.Background(), rt); err != nil && !apierrors.IsAlreadyExists(err) {
		panic(err)
	}
})

// nodePatch is a runtime patch of the node replicated job's pods.
func nodePatch(pod *trainerv1alpha1.PodSpecPatch) trainerv1alpha1.RuntimePatch {
	return trainerv1alpha1.RuntimePatch{Manager: "example.com/placement", TrainingRuntimeSpec: &trainerv1alpha1.TrainingRuntimeSpecPatch{
		Template: &trainerv1alpha1.JobSetTemplatePatch{Spec: &trainerv1alpha1.JobSetSpecPatch{ReplicatedJobs: []trainerv1alpha1.ReplicatedJobPatch{{
			Name: "node", Template: &trainerv1alpha1.JobTemplatePatch{Spec: &trainerv1alpha1.JobSpecPatch{Template: &trainerv1alpha1.PodTemplatePatch{Spec: pod}}}}}}}}}
}

func spec(j framework.Job, rtype kubeflowv1.ReplicaType) *kubeflowv1.ReplicaSpec {
	return j.GetReplicaSpecs()[rtype]
}

func q(s string) *resource.Quantity { v := resource.MustParse(s); return &v }

func elastic(j framework.Job) *kubeflowv1.ElasticPolicy {
	p := j.(*kubeflowv1.PyTorchJob)
	if p.Spec.ElasticPolicy == nil {
		p.Spec.ElasticPolicy = &kubeflowv1.ElasticPolicy{}
	}
	return p.Spec.ElasticPolicy
}

var table = []badInput{
	// TFJob
	{name: "TFJob name not a DNS-1035 label", obj: job(tf, func(j framework.Job) { j.SetName("0-test") }), field: "metadata.name"},
	{name: "TFJob replica without containers", obj: job(tf, func(j framework.Job) { spec(j, "Worker").Template.Spec.Containers = nil }), field: "spec.tfReplicaSpecs"},
	{name: "TFJob container without image", obj: job(tf, func(j framework.Job) { spec(j, "Worker").Template.Spec.Containers[0].Image = "" }), field: "image"},
	{name: "TFJob without a tensorflow container", obj: job(tf, func(j framework.Job) { spec(j, "Worker").Template.Spec.Containers[0].Name = "main" }), field: "tensorflow"},
	{name: "TFJob unknown replica type", obj: func(ns string) client.Object { return tf(ns).Replicas("Launcher", 1).Obj() }, field: "spec.tfReplicaSpecs"},
	{name: "TFJob Chief and Master", obj: func(ns string) client.Object { return tf(ns).Replicas("Chief", 1).Replicas("Master", 1).Obj() }, field: "spec.tfReplicaSpecs"},
	{name: "TFJob no replica types", obj: job(tf, func(j framework.Job) { j.SetReplicaSpecs(map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{}) }), field: "spec.tfReplicaSpecs"},
	{name: "TFJob negative replicas", obj: job(tf, func(j framework.Job) { spec(j, "Worker").Replicas = ptr.To[int32](-1) }), field: "replicas"},
	{name: "TFJob unknown restart policy", obj: job(tf, func(j framework.Job) { spec(j, "Worker").RestartPolicy = "Sometimes" }), field: "restartPolicy"},
	{name: "TFJob negative backoffLimit", obj: job(tf, func(j framework.Job) { j.GetRunPolicy().BackoffLimit = ptr.To[int32](-1) }), field: "spec.runPolicy.backoffLimit"},
	{name: "TFJob unknown successPolicy", obj: job(tf, func(j framework.Job) {
		j.(*kubeflowv1.TFJob).Spec.SuccessPolicy = ptr.To(kubeflowv1.SuccessPolicy("Some"))
	}), field: "spec.successPolicy"},
	{name: "TFJob unknown managedBy", obj: job(tf, func(j framework.Job) { j.GetRunPolicy().ManagedBy = ptr.To("example.com/other") }), field: "spec.runPolicy.managedBy"},
	{name: "TFJob managedBy changed", obj: job(tf, func(framework.Job) {}), update: func(o client.Object) {
		o.(framework.Job).GetRunPolicy().ManagedBy = ptr.To(kubeflowv1.MultiKueueController)
	}, field: "spec.runPolicy.managedBy"},
	{name: "TFJob queue changed", obj: job(tf, func(j framework.Job) {
		j.GetRunPolicy().SchedulingPolicy = &kubeflowv1.SchedulingPolicy{Queue: "a"}
	}), update: func(o client.Object) { o.(framework.Job).GetRunPolicy().SchedulingPolicy.Queue = "b" }, field: "queue"},
	{name: "TFJob name too long for its Services", obj: job(tf, func(j framework.Job) { j.SetName(strings.Repeat("a", 60)) }), field: "metadata.name", webhookOnly: true},
	{name: "TFJob deadline that overflows a Duration", obj: job(tf, func(j framework.Job) { j.GetRunPolicy().ActiveDeadlineSeconds = ptr.To[int64](9_999_999_999) }), field: "spec.runPolicy.activeDeadlineSeconds"},
	{name: "TFJob TTL above ten years", obj: job(tf, func(j framework.Job) { j.GetRunPolicy().TTLSecondsAfterFinished = ptr.To[int32](315_360_001) }), field: "spec.runPolicy.ttlSecondsAfterFinished"},
	{name: "TFJob backoffLimit above a million", obj: job(tf, func(j framework.Job) { j.GetRunPolicy().BackoffLimit = ptr.To[int32](1_000_001) }), field: "spec.runPolicy.backoffLimit"},
	{name: "TFJob negative scheduleTimeoutSeconds", obj: job(tf, func(j framework.Job) {
		j.GetRunPolicy().SchedulingPolicy = &kubeflowv1.SchedulingPolicy{ScheduleTimeoutSeconds: ptr.To[int32](-1)}
	}), field: "scheduleTimeoutSeconds"},
	{name: "TFJob replicas above 10000", obj: job(tf, func(j framework.Job) { spec(j, "Worker").Replicas = ptr.To[int32](10001) }), field: "replicas"},
	{name: "TFJob replicas above its kind's limit in all", obj: func(ns string) client.Object {
		return builder.TFJob("tf", ns).Replicas("Worker", 990).Replicas("PS", 20).Obj()
	}, field: "spec.tfReplicaSpecs"},
	{name: "TFJob replica keys that differ only in case", obj: func(ns string) client.Object {
		j := tf(ns).Obj()
		j.GetReplicaSpecs()["worker"] = spec(j, "Worker").DeepCopy()
		return j
	}, field: "spec.tfReplicaSpecs"},
	// PyTorchJob
	{name: "PyTorchJob rendezvous port above 65535", obj: job(pt, func(j framework.Job) { elastic(j).RDZVPort = ptr.To[int32](70000) }), field: "rdzvPort"},
	{name: "PyTorchJob maxRestarts above a million", obj: job(pt, func(j framework.Job) { elastic(j).MaxRestarts = ptr.To[int32](1_000_001) }), field: "maxRestarts"},
	{name: "PyTorchJob nprocPerNode above 4096", obj: job(pt, func(j framework.Job) { j.(*kubeflowv1.PyTorchJob).Spec.NprocPerNode = ptr.To("5000") }), field: "spec.nprocPerNode"},
	{name: "PyTorchJob nprocPerNode that overflows an int32", obj: job(pt, func(j framework.Job) { j.(*kubeflowv1.PyTorchJob).Spec.NprocPerNode = ptr.To("99999999999") }), field: "spec.nprocPerNode"},
	{name: "PyTorchJob two masters", obj: job(pt, func(j framework.Job) { spec(j, "Master").Replicas = ptr.To[int32](2) }), field: "spec.pytorchReplicaSpecs[Master].replicas"},
	{name: "PyTorchJob no workers", obj: job(pt, func(j framework.Job) { spec(j, "Worker").Replicas = ptr.To[int32](0) }), field: "spec.pytorchReplicaSpecs[Worker].replicas"},
	{name: "PyTorchJob elastic without Worker", obj: func(ns string) client.Object {
		j := builder.PyTorchJob("pt", ns).Replicas("Master", 1).Obj()
		elastic(j).MaxReplicas = ptr.To[int32](3)
		return j
	}, field: "spec.pytorchReplicaSpecs[Worker]"},
	{name: "PyTorchJob bad nprocPerNode", obj: job(pt, func(j framework.Job) { j.(*kubeflowv1.PyTorchJob).Spec.NprocPerNode = ptr.To("lots") }), field: "spec.nprocPerNode"},
	{name: "PyTorchJob nProcPerNode twice", obj: job(pt, func(j framework.Job) {
		elastic(j).NProcPerNode = ptr.To[int32](2)
		j.(*kubeflowv1.PyTorchJob).Spec.NprocPerNode = ptr.To("2")
	}), field: "nProcPerNode"},
	{name: "PyTorchJob elastic min above max", obj: job(pt, func(j framework.Job) {
		elastic(j).MinReplicas, elastic(j).MaxReplicas = ptr.To[int32](4), ptr.To[int32](2)
	}), field: "minReplicas"},
	{name: "PyTorchJob metric averageUtilization of 0 percent", obj: job(pt, func(j framework.Job) {
		elastic(j).Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
			Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](0)}}}}
	}), field: "spec.elasticPolicy.metrics"},
	{name: "PyTorchJob metric without the source its type names", obj: job(pt, func(j framework.Job) {
		elastic(j).Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
			Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)}}}}
	}), field: "spec.elasticPolicy.metrics[0].pods", webhookOnly: true},
	{name: "PyTorchJob Pods metric without an averageValue", obj: job(pt, func(j framework.Job) {
		elastic(j).Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "requests"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("10")}}}}
	}), field: "spec.elasticPolicy.metrics[0].pods.target.averageValue", webhookOnly: true},
	{name: "PyTorchJob unknown replica type", obj: func(ns string) client.Object { return pt(ns).Replicas("Launcher", 1).Obj() }, field: "spec.pytorchReplicaSpecs"},
	{name: "PyTorchJob without a pytorch container", obj: job(pt, func(j framework.Job) { spec(j, "Master").Template.Spec.Containers[0].Name = "main" }), field: "pytorch"},
	{name: "PyTorchJob managedBy changed", obj: job(pt, func(framework.Job) {}), update: func(o client.Object) {
		o.(framework.Job).GetRunPolicy().ManagedBy = ptr.To(kubeflowv1.MultiKueueController)
	}, field: "spec.runPolicy.managedBy"},
	// XGBoostJob
	{name: "XGBoostJob without Master", obj: func(ns string) client.Object { return builder.XGBoostJob("xgb", ns).Replicas("Worker", 2).Obj() }, field: "spec.xgbReplicaSpecs[Master]"},
	{name: "XGBoostJob three masters", obj: job(xgb, func(j framework.Job) { spec(j, "Master").Replicas = ptr.To[int32](3) }), field: "spec.xgbReplicaSpecs[Master].replicas"},
	{name: "XGBoostJob container without image", obj: job(xgb, func(j framework.Job) { spec(j, "Master").Template.Spec.Containers[0].Image = "" }), field: "image"},
	// MPIJob
	{name: "MPIJob without Launcher", obj: func(ns string) client.Object { return builder.MPIJob("pi", ns).Replicas("Worker", 2).Obj() }, field: "spec.mpiReplicaSpecs"},
	{name: "MPIJob two launchers", obj: job(mpiJob, func(j framework.Job) { spec(j, "Launcher").Replicas = ptr.To[int32](2) }), field: "spec.mpiReplicaSpecs[Launcher].replicas", webhookOnly: true},
	{name: "MPIJob unknown replica type", obj: func(ns string) client.Object { return mpiJob(ns).Replicas("Master", 1).Obj() }, field: "spec.mpiReplicaSpecs"},
	{name: "MPIJob replica without containers", obj: job(mpiJob, func(j framework.Job) { spec(j, "Worker").Template.Spec.Containers = nil }), field: "spec.mpiReplicaSpecs"},
	{name: "MPIJob slotsPerWorker 0", obj: job(mpiJob, func(j framework.Job) { j.(*kubeflowv1.MPIJob).Spec.SlotsPerWorker = ptr.To[int32](0) }), field: "spec.slotsPerWorker"},
	{name: "MPIJob slotsPerWorker above 4096", obj: job(mpiJob, func(j framework.Job) { j.(*kubeflowv1.MPIJob).Spec.SlotsPerWorker = ptr.To[int32](5000) }), field: "spec.slotsPerWorker"},
	{name: "MPIJob kubectl-exec without the opt-in", obj: job(mpiJob, func(j framework.Job) {
		j.SetAnnotations(map[string]string{kubeflowv1.AnnotationMPIRemoteStart: kubeflowv1.MPIRemoteStartKubectlExec})
	}), field: "metadata.annotations[kiln.dev/mpi-remote-start]", webhookOnly: true},
	{name: "MPIJob unknown mainContainer", obj: job(mpiJob, func(j framework.Job) { j.(*kubeflowv1.MPIJob).Spec.MainContainer = "trainer" }), field: "spec.mainContainer", webhookOnly: true},
	{name: "MPIJob unknown network policy", obj: job(mpiJob, func(j framework.Job) {
		j.SetAnnotations(map[string]string{"kiln.dev/network-policy": "closed"})
	}), field: "metadata.annotations[kiln.dev/network-policy]", webhookOnly: true},
	// PyJob
	{name: "PyJob egress that is no CIDR", obj: pyJob(func(p *trainingv1alpha1.PyJob) {
		p.Annotations = map[string]string{"kiln.dev/network-policy": "isolated", "kiln.dev/network-policy-egress": "s3.amazonaws.com:443"}
	}), field: "metadata.annotations[kiln.dev/network-policy-egress]", webhookOnly: true},
	{name: "PyJob name not a DNS-1035 label", obj: pyJob(func(p *trainingv1alpha1.PyJob) { p.Name = "1train" }), field: "metadata.name"},
	{name: "PyJob without image", obj: pyJob(func(p *trainingv1alpha1.PyJob) { p.Spec.Image = "" }), field: "spec.image"},
	{name: "PyJob relative dataset path", obj: pyJob(func(p *trainingv1alpha1.PyJob) { p.Spec.DatasetPath = "data" }), field: "spec.datasetPath"},
	{name: "PyJob image changed", obj: pyJob(func(*trainingv1alpha1.PyJob) {}), update: func(o client.Object) {
		o.(*trainingv1alpha1.PyJob).Spec.Image = "pytorch/pytorch:2.1"
	}, field: "spec.image"},
	{name: "PyJob workers above the limit", obj: pyJob(func(p *trainingv1alpha1.PyJob) { p.Spec.Workers = 100001 }), field: "spec.workers"},
	{name: "PyJob backoffLimit above a million", obj: pyJob(func(p *trainingv1alpha1.PyJob) { p.Spec.BackoffLimit = ptr.To[int32](1_000_001) }), field: "spec.backoffLimit"},
	{name: "PyJob TTL above ten years", obj: pyJob(func(p *trainingv1alpha1.PyJob) { p.Spec.TTLSecondsAfterFinished = ptr.To[int32](315_360_001) }), field: "spec.ttlSecondsAfterFinished"},
	{name: "PyJob deadline that overflows a Duration", obj: pyJob(func(p *trainingv1alpha1.PyJob) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](9_999_999_999) }), field: "spec.activeDeadlineSeconds"},
	{name: "PyJob output at the dataset's path", obj: pyJob(func(p *trainingv1alpha1.PyJob) {
		p.Spec.DatasetPath, p.Spec.OutputPath = "/mnt/data", "/mnt/data"
		p.Spec.Dataset = &trainingv1alpha1.DatasetStorage{ClaimName: "data"}
	}), field: "spec.outputPath"},
	{name: "PyJob output at the dataset's path, spelled otherwise", obj: pyJob(func(p *trainingv1alpha1.PyJob) {
		p.Spec.DatasetPath, p.Spec.OutputPath = "/mnt/data", "/mnt/data/"
	}), field: "spec.outputPath", webhookOnly: true},
	{name: "PyJob output on /dev/shm", obj: pyJob(func(p *trainingv1alpha1.PyJob) { p.Spec.OutputPath = "/dev/shm" }), field: "spec.outputPath"},
	{name: "PyJob dataset subPath leaving the claim", obj: pyJob(func(p *trainingv1alpha1.PyJob) {
		p.Spec.DatasetPath = "/mnt/data"
		p.Spec.Dataset = &trainingv1alpha1.DatasetStorage{ClaimName: "data", SubPath: "../other"}
	}), field: "spec.dataset.subPath"},
	{name: "PyJob output claim that is no claim name", obj: pyJob(func(p *trainingv1alpha1.PyJob) {
		p.Spec.OutputPath = "/mnt/out"
		p.Spec.Output = &trainingv1alpha1.OutputStorage{ClaimName: "Bad_Claim"}
	}), field: "spec.output.claimName"},
	{name: "PyJob duplicate env", obj: pyJob(func(p *trainingv1alpha1.PyJob) {
		p.Spec.Env = []corev1.EnvVar{{Name: "EPOCHS", Value: "1"}, {Name: "EPOCHS", Value: "2"}}
	}), field: "spec.env[1].name", webhookOnly: true},
	{name: "PyJob invalid env name", obj: pyJob(func(p *trainingv1alpha1.PyJob) { p.Spec.Env = []corev1.EnvVar{{Name: "1=BAD"}} }), field: "spec.env[0].name", webhookOnly: true},
	{name: "PyJob image with spaces", obj: pyJob(func(p *trainingv1alpha1.PyJob) { p.Spec.Image = "pytorch/pytorch 2.0" }), field: "spec.image", webhookOnly: true},
	// InferenceService
	{name: "InferenceService bad model URI", obj: isvc(func(i *servingv1alpha1.InferenceService) { i.Spec.ModelURI = "ftp://models/iris" }), field: "spec.modelUri"},
	{name: "InferenceService pvc path leaving the claim", obj: isvc(func(i *servingv1alpha1.InferenceService) { i.Spec.ModelURI = "pvc://claim/../x" }), field: "spec.modelUri"},
	{name: "InferenceService pvc claim that is no claim name", obj: isvc(func(i *servingv1alpha1.InferenceService) { i.Spec.ModelURI = "pvc://Bad_Claim/m" }), field: "spec.modelUri"},
	{name: "InferenceService canary pvc path absolute", obj: isvc(func(i *servingv1alpha1.InferenceService) {
		i.Spec.Traffic = &servingv1alpha1.Traffic{CanaryVersion: "pvc://claim//etc", CanaryPercent: 10}
	}), field: "spec.traffic.canaryVersion"},
	{name: "InferenceService invalid pod label", obj: isvc(func(i *servingv1alpha1.InferenceService) {
		i.Spec.Pod = &servingv1alpha1.PodOptions{Labels: map[string]string{"team": "a b"}}
	}), field: "spec.pod.labels", webhookOnly: true},
	{name: "InferenceService pod env name with a character a pod may not have", obj: isvc(func(i *servingv1alpha1.InferenceService) {
		i.Spec.Pod = &servingv1alpha1.PodOptions{Env: []corev1.EnvVar{{Name: "ڪ", Value: "1"}}}
	}), field: "spec.pod.env[0].name", webhookOnly: true},
	{name: "InferenceService pod envFrom prefix with =", obj: isvc(func(i *servingv1alpha1.InferenceService) {
		i.Spec.Pod = &servingv1alpha1.PodOptions{EnvFrom: []corev1.EnvFromSource{{Prefix: "A=", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}}}
	}), field: "spec.pod.envFrom[0].prefix", webhookOnly: true},
	{name: "InferenceService networkPolicy peer with an invalid label", obj: isvc(func(i *servingv1alpha1.InferenceService) {
		i.Spec.NetworkPolicy = &servingv1alpha1.ServiceNetworkPolicy{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"_": "a"}}}}}
	}), field: "spec.networkPolicy.from[0].podSelector.matchLabels", webhookOnly: true},
	{name: "InferenceService GPUs above 128", obj: isvc(func(i *servingv1alpha1.InferenceService) { i.Spec.GPUPerReplica = 1000 }), field: "spec.gpuPerReplica"},
	{name: "InferenceService max below min", obj: isvc(func(i *servingv1alpha1.InferenceService) {
		i.Spec.MinReplicas, i.Spec.MaxReplicas = ptr.To[int32](3), ptr.To[int32](2)
	}), field: "spec.maxReplicas"},
	{name: "InferenceService unknown framework", obj: isvc(func(i *servingv1alpha1.InferenceService) { i.Spec.Framework = "tensorflow-serving" }), field: "spec.framework"},
	{name: "InferenceService custom without image", obj: isvc(func(i *servingv1alpha1.InferenceService) { i.Spec.Framework = servingv1alpha1.FrameworkCustom }), field: "spec.image"},
	{name: "InferenceService name too long", obj: isvc(func(i *servingv1alpha1.InferenceService) { i.Name = strings.Repeat("m", 50) }), field: "metadata.name"},
	{name: "InferenceService CPU request above limit", obj: isvc(func(i *servingv1alpha1.InferenceService) {
		i.Spec.Resources.CPURequest, i.Spec.Resources.CPULimit = q("2"), q("1")
	}), field: "spec.resources.cpuRequest", webhookOnly: true},
	{name: "InferenceService canary is the stable model", obj: isvc(func(i *servingv1alpha1.InferenceService) {
		i.Spec.Traffic = &servingv1alpha1.Traffic{CanaryVersion: i.Spec.ModelURI, CanaryPercent: 10}
	}), field: "spec.traffic.canaryVersion", webhookOnly: true},
	{name: "TrainJob name not an RFC 1035 label", obj: trainJob(func(j *trainerv1alpha1.TrainJob) { j.Name = "1-mnist" }), field: "metadata.name"},
	{name: "TrainJob numNodes 0", obj: trainJob(func(j *trainerv1alpha1.TrainJob) {
		j.Spec.Trainer = &trainerv1alpha1.Trainer{NumNodes: ptr.To[int32](0)}
	}), field: "spec.trainer.numNodes"},
	{name: "TrainJob managedBy unknown", obj: trainJob(func(j *trainerv1alpha1.TrainJob) { j.Spec.ManagedBy = ptr.To("example.com/mine") }), field: "spec.managedBy"},
	{name: "TrainJob sets the framework's variable", obj: trainJob(func(j *trainerv1alpha1.TrainJob) {
		j.Spec.Trainer = &trainerv1alpha1.Trainer{Env: []corev1.EnvVar{{Name: "EPOCHS", Value: "3"}, {Name: "PET_MASTER_PORT", Value: "1234"}}}
	}), field: "spec.trainer.env[1].name", webhookOnly: true},
	{name: "TrainJob initializer whose step the runtime lacks", obj: trainJob(func(j *trainerv1alpha1.TrainJob) {
		j.Spec.Initializer = &trainerv1alpha1.Initializer{Dataset: &trainerv1alpha1.DatasetInitializer{StorageUri: ptr.To("hf://tatsu-lab/alpaca")}}
	}), field: "spec.initializer.dataset", webhookOnly: true},
	{name: "TrainJob patch manager not a domain-prefixed path", obj: trainJob(func(j *trainerv1alpha1.TrainJob) {
		p := nodePatch(&trainerv1alpha1.PodSpecPatch{NodeSelector: map[string]string{"pool": "a"}})
		p.Manager = "me"
		j.Spec.RuntimePatches = []trainerv1alpha1.RuntimePatch{p}
	}), field: "spec.runtimePatches[0].manager", webhookOnly: true},
	{name: "TrainJob patch sets the trainer's variables", obj: trainJob(func(j *trainerv1alpha1.TrainJob) {
		j.Spec.RuntimePatches = []trainerv1alpha1.RuntimePatch{nodePatch(&trainerv1alpha1.PodSpecPatch{Containers: []trainerv1alpha1.ContainerPatch{{Name: "node", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}}})}
	}), field: "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].env", webhookOnly: true},
	{name: "TrainJob patch of a replicated job the runtime lacks", obj: trainJob(func(j *trainerv1alpha1.TrainJob) {
		p := nodePatch(&trainerv1alpha1.PodSpecPatch{NodeSelector: map[string]string{"pool": "a"}})
		p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs[0].Name = "workers"
		j.Spec.RuntimePatches = []trainerv1alpha1.RuntimePatch{p}
	}), field: "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].name", webhookOnly: true},
	{name: "TrainJob patches changed while it runs", obj: trainJob(func(*trainerv1alpha1.TrainJob) {}), update: func(o client.Object) {
		o.(*trainerv1alpha1.TrainJob).Spec.RuntimePatches = []trainerv1alpha1.RuntimePatch{nodePatch(&trainerv1alpha1.PodSpecPatch{NodeSelector: map[string]string{"pool": "a"}})}
	}, field: "spec.runtimePatches", webhookOnly: true},
	{name: "TrainJob runtimeRef changed", obj: trainJob(func(*trainerv1alpha1.TrainJob) {}), update: func(o client.Object) {
		o.(*trainerv1alpha1.TrainJob).Spec.RuntimeRef.Name = "other"
	}, field: "spec.runtimeRef"},
	{name: "TrainingRuntime trainer step without a node container", obj: func(ns string) client.Object {
		rt := &trainerv1alpha1.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"}}
		rj := jobsetv1alpha2.ReplicatedJob{Name: "node"}
		rj.Template.Labels = map[string]string{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
		rj.Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: "trainer", Image: "x"}}
		rt.Spec.Template.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{rj}
		return rt
	}, field: "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers", webhookOnly: true},
}

// runTable asserts each case is rejected with a message naming its field; withWebhooks false
// skips the webhook-only cases.
func runTable(t *testing.T, withWebhooks bool) {
	ctx := context.Background()
	for _, c := range table {
		if c.webhookOnly && !withWebhooks {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			ns := env.Namespace(t)
			obj := c.obj(ns)
			err := env.Client.Create(ctx, obj)
			if c.update != nil {
				if err != nil {
					t.Fatalf("creating the valid object to update: %v", err)
				}
				// The controllers may write the object meanwhile: update the freshest copy.
				err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
					if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
						return err
					}
					c.update(obj)
					return env.Client.Update(ctx, obj)
				})
			}
			switch {
			case err == nil:
				t.Fatalf("accepted; want a rejection naming %s", c.field)
			case !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err):
				t.Fatalf("rejected with %v; want a validation error naming %s", err, c.field)
			case !strings.Contains(err.Error(), c.field):
				t.Fatalf("the message does not name %s: %v", c.field, err)
			}
			t.Log(err)
		})
	}
}

func TestBadInputIsRejectedNamingTheField(t *testing.T) {
	if len(table) < 30 {
		t.Fatalf("the table has %d cases, want at least 30", len(table))
	}
	ready(t)
	t.Run("with webhooks", func(t *testing.T) { runTable(t, true) })
	t.Run("CEL only", func(t *testing.T) {
		if err := env.UninstallWebhooks(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			// Put them back, for the suite's other tests: kiln injects the CA bundle again.
			if err := env.InstallWebhooks(opts); err != nil {
				t.Fatal(err)
			}
		})
		runTable(t, false)
	})
}

// warnings collects the apiserver's warning headers.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

// warningClient is a client whose requests' warnings are collected.
func warningClient(t *testing.T) (client.Client, *warnings) {
	t.Helper()
	seen := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = seen
	c, err := client.New(cfg, client.Options{Scheme: manager.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c, seen
}

func TestDefaultsArePersistedAndWarningsShown(t *testing.T) {
	ready(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	j := &kubeflowv1.TFJob{ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: ns}, Spec: kubeflowv1.TFJobSpec{
		TFReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{"worker": {Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "tensorflow", Image: builder.Image}},
		}}}},
	}}
	if err := env.Client.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	stored := &kubeflowv1.TFJob{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(j), stored); err != nil {
		t.Fatal(err)
	}
	w := stored.Spec.TFReplicaSpecs["Worker"]
	switch {
	case w == nil:
		t.Fatalf("replica type worker was not stored as Worker: %v", stored.Spec.TFReplicaSpecs)
	case ptr.Deref(w.Replicas, -1) != 1, w.RestartPolicy != kubeflowv1.RestartPolicyNever:
		t.Errorf("Worker replicas %v, restartPolicy %q; want 1, Never", w.Replicas, w.RestartPolicy)
	case len(w.Template.Spec.Containers[0].Ports) != 1 || w.Template.Spec.Containers[0].Ports[0].Name != "tfjob-port":
		t.Errorf("default port not added: %+v", w.Template.Spec.Containers[0].Ports)
	case ptr.Deref(stored.Spec.RunPolicy.CleanPodPolicy, "") != kubeflowv1.CleanPodPolicyRunning:
		t.Errorf("cleanPodPolicy %v, want Running", stored.Spec.RunPolicy.CleanPodPolicy)
	}

	c, seen := warningClient(t)
	p := pt(ns).Obj()
	elastic(p).NProcPerNode = ptr.To[int32](2)
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(seen.msgs, "\n"), "spec.elasticPolicy.nProcPerNode is deprecated") {
		t.Errorf("no deprecation warning for spec.elasticPolicy.nProcPerNode; warnings: %q", seen.msgs)
	}
}

// A PyJob whose output claim goes with it (reclaimPolicy Delete) and that is itself deleted by a
// TTL is allowed, with a warning that its results go too.
func TestPyJobDeletingItsResultsIsWarned(t *testing.T) {
	ready(t)
	ns := env.Namespace(t)
	c, seen := warningClient(t)
	size := resource.MustParse("10Gi")
	p := &trainingv1alpha1.PyJob{ObjectMeta: metav1.ObjectMeta{Name: "ephemeral", Namespace: ns}, Spec: trainingv1alpha1.PyJobSpec{
		Image: "pytorch/pytorch:2.0", Command: []string{"python", "train.py"}, OutputPath: "/mnt/output",
		Output:                  &trainingv1alpha1.OutputStorage{Size: &size, ReclaimPolicy: trainingv1alpha1.OutputDelete},
		TTLSecondsAfterFinished: ptr.To[int32](600),
	}}
	if err := c.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(seen.msgs, "\n"), "the output claim and its results are deleted 600 s after the run finishes") {
		t.Errorf("no warning that the results go with the TTL; warnings: %q", seen.msgs)
	}
}

// TestStoredInvalidJobsStayUpdatableAndFailVisibly stores a job only the webhook would refuse
// (while webhooks are away): the reconciler fails it with a message naming the field, and with
// webhooks back, updates that do not touch what was wrong (labels) are still admitted, while new
// mistakes are not.
func TestStoredInvalidJobsStayUpdatableAndFailVisibly(t *testing.T) {
	ready(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	j := tf(ns).Obj()
	j.SetName(strings.Repeat("b", 60))
	if err := createWithoutWebhooks(t, j); err != nil {
		t.Fatalf("without webhooks the CRD schema should accept a long name: %v", err)
	}
	failed := env.WaitCondition(t, j, kubeflowv1.JobFailed, testenv.Timeout)
	if c := failed.GetJobStatus().Conditions; !strings.Contains(c[len(c)-1].Message, "metadata.name") || c[len(c)-1].Reason != "TFJobFailedValidation" {
		t.Errorf("Failed condition %+v; want reason TFJobFailedValidation naming metadata.name", c[len(c)-1])
	}
	labelThroughTheWebhooks(t, j)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error { // kiln may write its status meanwhile
		fresh := &kubeflowv1.TFJob{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(j), fresh); err != nil {
			return err
		}
		fresh.Spec.TFReplicaSpecs["Worker"].Template.Spec.Containers[0].Image = ""
		return env.Client.Update(ctx, fresh)
	})
	if err == nil || !strings.Contains(err.Error(), "image") {
		t.Fatalf("an update adding a mistake was not refused naming the image: %v", err)
	}
}

// Every value torchrun's --nproc-per-node takes passes the CRD's rule and the webhook.
func TestTorchrunNprocValuesAreAccepted(t *testing.T) {
	ready(t)
	ns := env.Namespace(t)
	for _, v := range []string{"auto", "cpu", "gpu", "xpu", "8"} {
		p := pt(ns).Obj().(*kubeflowv1.PyTorchJob)
		p.Name = "nproc-" + v
		p.Spec.NprocPerNode = ptr.To(v)
		if err := env.Client.Create(context.Background(), p); err != nil {
			t.Errorf("nprocPerNode %q: %v", v, err)
		}
	}
}

// A job stored with lower-case replica keys (created before kiln, e.g. under Kubeflow) stays
// updatable although the defaulting webhook respells its keys on every update.
func TestStoredLowerCaseReplicaKeysStayUpdatable(t *testing.T) {
	ready(t)
	ns := env.Namespace(t)
	j := &kubeflowv1.TFJob{ObjectMeta: metav1.ObjectMeta{Name: "migrated", Namespace: ns}, Spec: kubeflowv1.TFJobSpec{
		TFReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{"worker": {Replicas: ptr.To[int32](1), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "tensorflow", Image: builder.Image}},
		}}}},
	}}
	if err := createWithoutWebhooks(t, j); err != nil {
		t.Fatal(err)
	}
	labelThroughTheWebhooks(t, j)
}

// createWithoutWebhooks creates obj as a cluster without kiln's webhooks would store it (an
// older kiln, Kubeflow), then puts the webhooks back.
func createWithoutWebhooks(t *testing.T, obj client.Object) error {
	t.Helper()
	if err := env.UninstallWebhooks(); err != nil {
		t.Fatal(err)
	}
	var err error
	testenv.EventuallyWithin(t, 10*time.Second, func() error {
		err = env.Client.Create(context.Background(), obj)
		if err != nil && strings.Contains(err.Error(), "admission webhook") {
			return err // the apiserver still calls the webhooks it knew a moment ago
		}
		return nil
	})
	if ierr := env.InstallWebhooks(opts); ierr != nil {
		t.Fatal(ierr)
	}
	return err
}

// labelThroughTheWebhooks updates a stored TFJob (a label, as kubectl label does) once the
// webhooks answer again, and fails the test if that is refused.
func labelThroughTheWebhooks(t *testing.T, j client.Object) {
	t.Helper()
	ready(t)
	testenv.Eventually(t, func() error {
		fresh := reflect.New(reflect.TypeOf(j).Elem()).Interface().(client.Object) // of j's kind
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(j), fresh); err != nil {
			return err
		}
		fresh.SetLabels(map[string]string{"team": "vision"})
		return env.Client.Update(context.Background(), fresh)
	})
}

// Every sample under config/samples (what `make run` applies) passes the CRDs' rules and kiln's
// webhooks, so that a sample added for a feature is known to be a valid manifest.
func TestSamplesAreAccepted(t *testing.T) {
	ready(t)
	ns := env.Namespace(t)
	root := filepath.Join(testenv.RepoRoot(), "config", "samples")
	objs, err := devcluster.ReadObjects(root, filepath.Join(root, "serving"))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) < 10 {
		t.Fatalf("read %d samples from %s, want every one", len(objs), root)
	}
	for _, o := range objs {
		o.SetNamespace(ns)
		if err := env.Client.Create(context.Background(), o, client.DryRunAll); err != nil {
			t.Errorf("sample %s %s is refused: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// The webhook server speaks HTTP/1.1 only unless --enable-http2 says otherwise.
func TestWebhookServerSpeaksHTTP1Only(t *testing.T) {
	ready(t)
	addr := net.JoinHostPort(opts.Webhook.Host, strconv.Itoa(opts.Webhook.Port))
	if proto := testenv.NegotiatedProtocol(t, addr); proto != "http/1.1" {
		t.Errorf("the webhook server agreed to speak %q, want http/1.1", proto)
	}
}

// A TrainJob stored with a problem its runtime makes (an initializer whose step the runtime
// lacks, accepted before kiln refused it) stays updatable through the webhooks' ratchet, for
// Kueue's suspension and placement and a label; an update that adds another problem is refused.
func TestStoredTrainJobsWithAProblemStayUpdatable(t *testing.T) {
	ready(t)
	ns := env.Namespace(t)
	j := trainJob(func(j *trainerv1alpha1.TrainJob) {
		j.Spec.Initializer = &trainerv1alpha1.Initializer{Dataset: &trainerv1alpha1.DatasetInitializer{StorageUri: ptr.To("hf://tatsu-lab/alpaca")}}
	})(ns).(*trainerv1alpha1.TrainJob)
	if err := createWithoutWebhooks(t, j); err != nil {
		t.Fatal(err)
	}
	labelThroughTheWebhooks(t, j)
	update := func(edit func(*trainerv1alpha1.TrainJobSpec)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			fresh := &trainerv1alpha1.TrainJob{}
			if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(j), fresh); err != nil {
				return err
			}
			edit(&fresh.Spec)
			return env.Client.Update(context.Background(), fresh)
		})
	}
	testenv.Eventually(t, func() error { // the webhooks have read the runtime
		another := j.DeepCopy()
		another.ResourceVersion, another.Name = "", "another"
		if err := env.Client.Create(context.Background(), another, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "spec.initializer.dataset") {
			return fmt.Errorf("creating another such TrainJob: %v, want it refused naming spec.initializer.dataset", err)
		}
		return nil
	})
	// As Kueue suspends it and gives it its placement.
	if err := update(func(s *trainerv1alpha1.TrainJobSpec) {
		s.Suspend = ptr.To(true)
		s.RuntimePatches = []trainerv1alpha1.RuntimePatch{nodePatch(&trainerv1alpha1.PodSpecPatch{NodeSelector: map[string]string{"pool": "a"}})}
	}); err != nil {
		t.Fatalf("suspending it with a placement patch: %v, want it accepted", err)
	}
	err := update(func(s *trainerv1alpha1.TrainJobSpec) {
		p := nodePatch(&trainerv1alpha1.PodSpecPatch{NodeSelector: map[string]string{"pool": "a"}})
		p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs[0].Name = "workers"
		s.RuntimePatches = []trainerv1alpha1.RuntimePatch{p}
	})
	if err == nil || !strings.Contains(err.Error(), "spec.runtimePatches[0]") {
		t.Fatalf("an update adding a patch of a replicated job the runtime lacks: %v, want it refused naming the patch", err)
	}
}
