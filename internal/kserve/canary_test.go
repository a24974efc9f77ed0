package kserve

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	kservev1beta1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1beta1"
)

func predictorOf(t *testing.T, doc string) kservev1beta1.PredictorSpec {
	t.Helper()
	var p kservev1beta1.PredictorSpec
	if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// A canary's predictor is the predictor with the canary's fields laid over it: what the canary
// sets wins (objects merged field by field, lists whole), what it leaves empty is the
// predictor's, and the scaling is not the canary's own.
func TestACanaryIsThePredictorWithItsFieldsOverIt(t *testing.T) {
	stable := predictorOf(t, `
minReplicas: 2
maxReplicas: 4
serviceAccountName: reader
sklearn: {storageUri: "gs://m/v1", env: [{name: A, value: "1"}], resources: {limits: {cpu: "2"}}}
`)
	c := predictorOf(t, `
name: v2
minReplicas: 1
sklearn: {storageUri: "gs://m/v2", env: [{name: B, value: "2"}]}
`)
	got, err := CanaryPredictor(stable, kservev1beta1.CanaryPredictor{Name: c.Name, Spec: c})
	if err != nil {
		t.Fatal(err)
	}
	m := got.SKLearn
	if got.Name != "v2" || m == nil || *m.StorageURI != "gs://m/v2" || len(m.Env) != 1 || m.Env[0].Name != "B" ||
		m.Resources.Limits.Cpu().String() != "2" || got.ServiceAccountName != "reader" {
		t.Errorf("canary predictor = %+v, want v2's model and env over the predictor's limits and service account", got)
	}
	if got.MinReplicas != nil || got.MaxReplicas != 0 {
		t.Errorf("canary scaling = %v..%d, want none of its own", got.MinReplicas, got.MaxReplicas)
	}
	if *stable.SKLearn.StorageURI != "gs://m/v1" {
		t.Errorf("the predictor changed: %s", *stable.SKLearn.StorageURI)
	}
}

// A canary that gives its model in another form replaces the predictor's model: the result is one
// model, not two.
func TestACanaryInAnotherFormReplacesTheModel(t *testing.T) {
	stable := predictorOf(t, `{sklearn: {storageUri: "gs://m/v1"}}`)
	c := kservev1beta1.PredictorSpec{Model: &kservev1beta1.ModelSpec{ModelFormat: kservev1beta1.ModelFormat{Name: "xgboost"},
		PredictorExtensionSpec: kservev1beta1.PredictorExtensionSpec{StorageURI: ptr.To("gs://m/x"), Container: corev1.Container{Name: ""}}}}
	got, err := CanaryPredictor(stable, kservev1beta1.CanaryPredictor{Name: "x", Spec: c})
	if err != nil {
		t.Fatal(err)
	}
	if got.SKLearn != nil || got.Model == nil || got.Model.ModelFormat.Name != "xgboost" {
		t.Errorf("canary predictor = %+v, want the xgboost model alone", got)
	}
}
