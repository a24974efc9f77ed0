package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	"github.com/kiln-ml/kiln/test/s3server"
	"github.com/kiln-ml/kiln/test/testenv"
)

func TestInferenceServiceOnARealCluster(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	isvc := &servingv1alpha1.InferenceService{
		ObjectMeta: metav1.ObjectMeta{Name: "iris", Namespace: ns},
		Spec: servingv1alpha1.InferenceServiceSpec{ModelURI: "gs://models/iris", Framework: servingv1alpha1.FrameworkSKLearn,
			MinReplicas: ptr.To[int32](2)},
	}
	if err := cluster.Client.Create(context.Background(), isvc); err != nil {
		t.Fatal(err)
	}
	// The Deployment controller makes the pods, kwok makes them ready.
	testenv.EventuallyWithin(t, timeout, func() error {
		fresh := &servingv1alpha1.InferenceService{}
		if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(isvc), fresh); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(fresh.Status.Conditions, "Ready"); c == nil || c.Status != metav1.ConditionTrue || fresh.Status.ReadyReplicas != 2 {
			return fmt.Errorf("Ready %+v, readyReplicas %d", c, fresh.Status.ReadyReplicas)
		}
		return nil
	})
	out := kubectl(t, "get", "isvc", "-n", ns)
	for _, want := range []string{"FRAMEWORK", "URL", "READY", "sklearn", "http://iris." + ns + ".svc.cluster.local", "True"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get isvc lacks %q:\n%s", want, out)
		}
	}
	kubectl(t, "scale", "-n", ns, "inferenceservice/iris", "--replicas=3")
	testenv.EventuallyWithin(t, timeout, func() error {
		return testenv.Count("ready pods", readyPods(t, ns, "iris"), 3)
	})

	if err := cluster.Client.Delete(context.Background(), isvc, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyWithin(t, timeout, func() error {
		for _, o := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}} {
			for _, name := range []string{"iris-predictor", "iris"} {
				if _, isDeployment := o.(*appsv1.Deployment); isDeployment && name == "iris" {
					continue
				}
				if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, o); !apierrors.IsNotFound(err) {
					return fmt.Errorf("%T %s still there (%v)", o, name, err)
				}
			}
		}
		return testenv.Count("pods", readyPods(t, ns, "iris"), 0)
	})
}

func readyPods(t *testing.T, ns, name string) int {
	n := 0
	for _, p := range cluster.Pods(t, ns, map[string]string{"serving.kiln.dev/inferenceservice": name}) {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
				n++
			}
		}
	}
	return n
}

// A private model under an s3:// prefix, in pods whose init containers run for real (the test is
// their kubelet, testenv.Kubelet): the real kiln-fetch reads a real S3 API with the storage Secret's
// credentials, which only the fetch container has, and the InferenceService becomes Ready with the
// model's files in its volume. With a wrong Secret the fetch fails and the status says why.
func TestPrivateS3ModelIsFetchedWithCredentialsOnTheFetchOnly(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	s3 := s3server.Start(t)
	s3.Put(t, "private-models", "triton-repo/resnet/config.pbtxt", []byte(`name: "resnet"`))
	s3.Put(t, "private-models", "triton-repo/resnet/1/model.onnx", []byte("onnx"))
	kubelet := cluster.StartKubelet(t, ns, map[string]string{"/kiln-fetch": testenv.BuildCommand(t, "kiln-fetch")})
	secret := func(name, key string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: map[string]string{
			"AWS_ACCESS_KEY_ID": s3server.AccessKeyID, "AWS_SECRET_ACCESS_KEY": key, "AWS_REGION": s3server.Region, "AWS_ENDPOINT_URL": s3.URL}}
	}
	isvc := func(name, secretName string) *servingv1alpha1.InferenceService {
		return &servingv1alpha1.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: servingv1alpha1.InferenceServiceSpec{ModelURI: "s3://private-models/triton-repo/", Framework: servingv1alpha1.FrameworkTriton,
				Storage: &servingv1alpha1.ModelStorage{SecretName: secretName},
				Pod:     &servingv1alpha1.PodOptions{Annotations: map[string]string{testenv.KubeletAnnotation: "test"}}}}
	}
	good, wrong := isvc("triton", "s3-reader"), isvc("wrong", "s3-wrong")
	for _, o := range []client.Object{secret("s3-reader", s3server.SecretAccessKey), secret("s3-wrong", "not-the-key"), good, wrong} {
		if err := cluster.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	condition := func(i *servingv1alpha1.InferenceService, status metav1.ConditionStatus, reason, message string) *metav1.Condition {
		t.Helper()
		var c *metav1.Condition
		testenv.EventuallyWithin(t, timeout, func() error {
			fresh := &servingv1alpha1.InferenceService{}
			if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(i), fresh); err != nil {
				return err
			}
			if c = meta.FindStatusCondition(fresh.Status.Conditions, "Ready"); c == nil || c.Status != status || c.Reason != reason || !strings.Contains(c.Message, message) {
				return fmt.Errorf("Ready %+v", c)
			}
			return nil
		})
		return c
	}
	condition(good, metav1.ConditionTrue, "Ready", "")
	c := condition(wrong, metav1.ConditionFalse, "ModelFetchFailed", "access denied: check the credentials of storage.secretName")
	t.Logf("with a wrong Secret, Ready says: %s", c.Message)

	pods := cluster.Pods(t, ns, map[string]string{"serving.kiln.dev/inferenceservice": "triton"})
	if len(pods) == 0 {
		t.Fatal("no pods")
	}
	if b, err := os.ReadFile(filepath.Join(kubelet.Volume(&pods[0], "model"), "resnet", "1", "model.onnx")); err != nil || string(b) != "onnx" {
		t.Errorf("the model's files were not fetched into the pod's volume: %q, %v", b, err)
	}
	fetch, server := pods[0].Spec.InitContainers[0], pods[0].Spec.Containers[0]
	if len(fetch.EnvFrom) != 1 || fetch.EnvFrom[0].SecretRef.Name != "s3-reader" || len(server.EnvFrom) != 0 {
		t.Errorf("fetch envFrom %+v, server envFrom %+v: want the Secret on the fetch container only", fetch.EnvFrom, server.EnvFrom)
	}
	for _, e := range server.Env {
		if strings.HasPrefix(e.Name, "AWS_") {
			t.Errorf("the model server sees %s", e.Name)
		}
	}
}

// A new model version whose pods cannot be scheduled does not become active: the old version
// serves, Ready says the rollout is held and why, activeVersion stays; fixing the spec completes
// the rollout.
func TestARolloutThatCannotBeScheduledKeepsTheOldVersion(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	isvc := &servingv1alpha1.InferenceService{
		ObjectMeta: metav1.ObjectMeta{Name: "roll", Namespace: ns},
		Spec:       servingv1alpha1.InferenceServiceSpec{ModelURI: "gs://models/iris/v1", Framework: servingv1alpha1.FrameworkSKLearn},
	}
	if err := cluster.Client.Create(context.Background(), isvc); err != nil {
		t.Fatal(err)
	}
	status := func(check func(*servingv1alpha1.InferenceService) error) *servingv1alpha1.InferenceService {
		t.Helper()
		fresh := &servingv1alpha1.InferenceService{}
		testenv.EventuallyWithin(t, timeout, func() error {
			if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(isvc), fresh); err != nil {
				return err
			}
			return check(fresh)
		})
		return fresh
	}
	ready := func(i *servingv1alpha1.InferenceService) error {
		if c := meta.FindStatusCondition(i.Status.Conditions, "Ready"); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	}
	status(ready)
	edit := func(e func(*servingv1alpha1.InferenceServiceSpec)) {
		testenv.EventuallyWithin(t, timeout, func() error {
			fresh := &servingv1alpha1.InferenceService{}
			if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(isvc), fresh); err != nil {
				return err
			}
			e(&fresh.Spec)
			return cluster.Client.Update(context.Background(), fresh)
		})
	}
	edit(func(s *servingv1alpha1.InferenceServiceSpec) {
		s.ModelURI = "gs://models/iris/v2"
		s.Pod = &servingv1alpha1.PodOptions{NodeSelector: map[string]string{"kiln.dev/e2e-no-such-node": "true"}}
	})
	held := status(func(i *servingv1alpha1.InferenceService) error {
		c := meta.FindStatusCondition(i.Status.Conditions, "Ready")
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "RolloutProgressing" || !strings.Contains(c.Message, "cannot be scheduled") {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
	t.Logf("Ready: %s", meta.FindStatusCondition(held.Status.Conditions, "Ready").Message)
	if held.Status.ActiveVersion != "gs://models/iris/v1" || held.Status.ReadyReplicas < 1 {
		t.Errorf("while held: activeVersion %s, %d ready: want v1 still serving", held.Status.ActiveVersion, held.Status.ReadyReplicas)
	}
	edit(func(s *servingv1alpha1.InferenceServiceSpec) { s.Pod = nil })
	done := status(ready)
	if done.Status.ActiveVersion != "gs://models/iris/v2" {
		t.Errorf("after the fix activeVersion is %s, want v2", done.Status.ActiveVersion)
	}
}

// KServe's sklearn sample, unchanged, on a real cluster beside kiln's own InferenceService kind:
// the Deployment controller makes the pod, kwok readies it, and the InferenceService says Ready
// with its address; kubectl reads it by its full name (isvc names kiln's own, as the test above
// checks with both installed: kubectl resolves it to serving.kiln.dev).
func TestKServesSampleOnARealCluster(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	testenv.ApplyKServeRuntimes(t, cluster.Client)
	sample := testenv.KServeManifests(t, "samples/sklearn/v1/sklearn.yaml")[0]
	sample.SetNamespace(ns)
	if err := cluster.Client.Create(context.Background(), sample); err != nil {
		t.Fatal(err)
	}
	awaitKServeCondition(t, client.ObjectKeyFromObject(sample), "Ready", metav1.ConditionTrue)
	pods := cluster.Pods(t, ns, map[string]string{"app": "isvc.sklearn-iris-predictor"})
	if len(pods) != 1 || pods[0].Labels["serving.kserve.io/inferenceservice"] != "sklearn-iris" || pods[0].Spec.InitContainers[0].Name != "storage-initializer" {
		t.Errorf("pods %+v, want one of KServe's labels, its model fetched by storage-initializer", pods)
	}
	out := kubectl(t, "get", "inferenceservices.serving.kserve.io", "-n", ns)
	for _, want := range []string{"URL", "READY", "sklearn-iris", "http://sklearn-iris-predictor." + ns + ".svc.cluster.local", "True"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get inferenceservices.serving.kserve.io lacks %q:\n%s", want, out)
		}
	}
}
