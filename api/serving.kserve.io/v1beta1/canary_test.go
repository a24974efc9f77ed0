package v1beta1

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
)

func TestACanaryPredictorIsReadAndWrittenWhole(t *testing.T) {
	in := `{"predictor":{"name":"v2","minReplicas":2,"sklearn":{"storageUri":"gs://m/v2"}},"trafficPercent":10}`
	var c CanarySpec
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	if c.Predictor.Name != "v2" || c.Predictor.Spec.Name != "v2" || c.Predictor.Spec.SKLearn == nil ||
		*c.Predictor.Spec.SKLearn.StorageURI != "gs://m/v2" || *c.Predictor.Spec.MinReplicas != 2 || c.TrafficPercent != 10 {
		t.Fatalf("read %+v, want every field of %s", c, in)
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	// Written and read again, it is the same canary (the inlined container writes its empty name
	// and resources, as KServe's types do).
	var back CanarySpec
	if err := json.Unmarshal(out, &back); err != nil || !equality.Semantic.DeepEqual(back, c) {
		t.Errorf("written as %s and read again as %+v (%v), want %+v", out, back, err, c)
	}
	if cp := c.DeepCopy(); cp.Predictor.Spec.SKLearn == c.Predictor.Spec.SKLearn {
		t.Errorf("DeepCopy shares the canary's predictor")
	}
}

// A field a predictor does not have is kept as written by the open schema, and named.
func TestACanaryPredictorsUnknownFieldIsNamed(t *testing.T) {
	for in, want := range map[string]string{
		`{"predictor":{"name":"v2","sklearn":{"storageUrl":"gs://m/v2"}},"trafficPercent":10}`:        "storageUrl",
		`{"predictor":{"name":"v2","minReplica":2},"trafficPercent":10}`:                              "minReplica",
		`{"predictor":{"name":"v2","minReplicas":2,"containers":[{"name":"c"}]},"trafficPercent":10}`: "",
	} {
		var c CanarySpec
		if err := json.Unmarshal([]byte(in), &c); err != nil {
			t.Fatal(err)
		}
		if c.Predictor.Unknown != want {
			t.Errorf("%s: unknown field %q, want %q", in, c.Predictor.Unknown, want)
		}
	}
}
