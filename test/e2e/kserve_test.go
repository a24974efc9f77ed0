package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kservev1beta1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1beta1"
	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/test/testenv"
)

// awaitKServe waits until KServe's InferenceService key passes check, and returns it.
func awaitKServe(t *testing.T, key client.ObjectKey, check func(*kservev1beta1.InferenceService) error) *kservev1beta1.InferenceService {
	t.Helper()
	isvc := &kservev1beta1.InferenceService{}
	testenv.EventuallyWithin(t, timeout, func() error {
		if err := cluster.Client.Get(context.Background(), key, isvc); err != nil {
			return err
		}
		return check(isvc)
	})
	return isvc
}

// awaitKServeCondition waits until KServe's InferenceService key has condition ct of status, for
// its current generation.
func awaitKServeCondition(t *testing.T, key client.ObjectKey, ct string, status metav1.ConditionStatus) *kservev1beta1.InferenceService {
	t.Helper()
	return awaitKServe(t, key, func(isvc *kservev1beta1.InferenceService) error {
		if c := meta.FindStatusCondition(isvc.Status.Conditions, ct); c == nil || c.Status != status || c.ObservedGeneration != isvc.Generation {
			return fmt.Errorf("%s %+v, want %s at generation %d", ct, c, status, isvc.Generation)
		}
		return nil
	})
}

// trafficOf is the predictor's traffic in the status, as "tag:percent" (tag "" for the latest
// revision alone).
func trafficOf(isvc *kservev1beta1.InferenceService) string {
	var out []string
	for _, tt := range isvc.Status.Components["predictor"].Traffic {
		out = append(out, fmt.Sprintf("%s:%d", tt.Tag, ptr.Deref(tt.Percent, -1)))
	}
	return strings.Join(out, ",")
}

// KServe's rollout samples applied in turn, as a KServe user rolls out a model, with the real
// Deployment controller and kwok's pods: default.yaml serves flowers; canary.yaml (10%) runs
// flowers-2 beside the flowers pods, each Ready, and without a mesh the status and kubectl say
// the split in force (one ready pod each: 50%); promotion.yaml rolls flowers-2 out and the
// canary goes.
func TestKServesRolloutOnARealCluster(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	testenv.ApplyKServeRuntimes(t, cluster.Client)
	apply := func(sub string) client.ObjectKey {
		t.Helper()
		objs := testenv.KServeManifests(t, sub)
		if err := devcluster.Apply(context.Background(), cluster.Client, ns, objs); err != nil {
			t.Fatal(err)
		}
		return client.ObjectKey{Namespace: ns, Name: objs[0].GetName()}
	}
	key := apply("samples/rollout/default.yaml")
	first := awaitKServeCondition(t, key, "Ready", metav1.ConditionTrue).Status.Components["predictor"]

	apply("samples/rollout/canary.yaml")
	awaitKServeCondition(t, key, "CanaryPredictorReady", metav1.ConditionTrue)
	isvc := awaitKServe(t, key, func(isvc *kservev1beta1.InferenceService) error {
		if got := trafficOf(isvc); got != "prev:50,latest:50" {
			return fmt.Errorf("traffic %s, want prev:50,latest:50", got)
		}
		return nil
	})
	if !meta.IsStatusConditionTrue(isvc.Status.Conditions, "Ready") || isvc.Status.Components["predictor"].Traffic[0].RevisionName != first.LatestRolledoutRevision {
		t.Errorf("status %+v, want Ready, the rolled-out revision %s beside the canary", isvc.Status, first.LatestRolledoutRevision)
	}
	for name, model := range map[string]string{"my-model-predictor": "flowers", "my-model-predictor-canary": "flowers-2"} {
		pods := cluster.Pods(t, ns, map[string]string{"app": "isvc." + name})
		if len(pods) != 1 || !strings.HasSuffix(pods[0].Annotations["serving.kiln.dev/model-uri"], "/"+model) {
			t.Errorf("pods of %s: %d, want one serving %s", name, len(pods), model)
		}
	}
	out := kubectl(t, "get", "inferenceservices.serving.kserve.io", "-n", ns, "my-model")
	if fields := strings.Fields(strings.Split(out, "\n")[1]); len(fields) < 5 || fields[3] != "50" || fields[4] != "50" {
		t.Errorf("kubectl get: want PREV 50 and LATEST 50:\n%s", out)
	}

	apply("samples/rollout/promotion.yaml")
	testenv.EventuallyWithin(t, timeout, func() error {
		err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "my-model-predictor-canary"}, &appsv1.Deployment{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("the canary's Deployment after the promotion: %v", err)
		}
		return nil
	})
	awaitKServe(t, key, func(isvc *kservev1beta1.InferenceService) error {
		c := isvc.Status.Components["predictor"]
		if !meta.IsStatusConditionTrue(isvc.Status.Conditions, "Ready") || trafficOf(isvc) != ":100" || c.PreviousRolledoutRevision != first.LatestRolledoutRevision {
			return fmt.Errorf("Ready %v, traffic %s, predictor %+v: want Ready, flowers-2 rolled out after %s",
				meta.IsStatusConditionTrue(isvc.Status.Conditions, "Ready"), trafficOf(isvc), c, first.LatestRolledoutRevision)
		}
		return nil
	})
}

// Model-form InferenceServices (testdata/kserve-models.yaml) on the real cluster: xgboost on
// kserve-xgbserver, onnx on the runtime it names (kserve-tritonserver), sklearn under an HPA, all
// Ready; a format no runtime serves says so and makes nothing; autoscalerClass none fixes the
// replicas without an HPA.
func TestKServeModelFormsOnARealCluster(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	testenv.ApplyKServeRuntimes(t, cluster.Client)
	objs, err := devcluster.ReadObjects(filepath.Join(testenv.RepoRoot(), "test", "e2e", "testdata", "kserve-models.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := devcluster.Apply(context.Background(), cluster.Client, ns, objs); err != nil {
		t.Fatal(err)
	}
	for name, runtime := range map[string]string{"xgboost-iris": "kserve-xgbserver", "style-sample": "kserve-tritonserver", "sklearn-hpa": "kserve-sklearnserver", "sklearn-fixed": "kserve-sklearnserver"} {
		isvc := awaitKServeCondition(t, client.ObjectKey{Namespace: ns, Name: name}, "Ready", metav1.ConditionTrue)
		if isvc.Status.ClusterServingRuntimeName != runtime || isvc.Status.URL != "http://"+name+"-predictor."+ns+".svc.cluster.local" {
			t.Errorf("%s: runtime %q, url %q; want %s and its predictor's address", name, isvc.Status.ClusterServingRuntimeName, isvc.Status.URL, runtime)
		}
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "sklearn-hpa-predictor"}, hpa); err != nil ||
		*hpa.Spec.MinReplicas != 1 || hpa.Spec.MaxReplicas != 3 || *hpa.Spec.Metrics[0].Resource.Target.AverageUtilization != 70 {
		t.Errorf("HPA sklearn-hpa-predictor = %+v (%v), want 1..3 at 70%% CPU", hpa.Spec, err)
	}
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "sklearn-fixed-predictor"}, &autoscalingv2.HorizontalPodAutoscaler{}); !apierrors.IsNotFound(err) {
		t.Errorf("autoscalerClass none made an HPA: %v", err)
	}
	if pods := cluster.Pods(t, ns, map[string]string{"app": "isvc.sklearn-fixed-predictor"}); len(pods) != 2 {
		t.Errorf("sklearn-fixed runs %d pods, want minReplicas 2", len(pods))
	}
	caffe := awaitKServeCondition(t, client.ObjectKey{Namespace: ns, Name: "caffe-net"}, "Ready", metav1.ConditionFalse)
	if c := meta.FindStatusCondition(caffe.Status.Conditions, "Ready"); c.Reason != "NoSupportingRuntime" || !strings.Contains(c.Message, "caffe") {
		t.Errorf("caffe-net Ready %+v, want NoSupportingRuntime naming caffe", c)
	}
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "caffe-net-predictor"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Deployment for a format no runtime serves: %v", err)
	}
}
