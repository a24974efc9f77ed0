package v1beta1

import (
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/randfill"

	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	"github.com/kiln-ml/kiln/test/fuzzer"
)

func filler(t *testing.T, seed int64) *randfill.Filler {
	return fuzzer.Filler(t, seed, servingv1alpha1.AddToScheme, AddToScheme)
}

// TestV1beta1RoundTrip: a v1beta1 InferenceService the schema accepts, converted to the v1alpha1
// hub and back, is the same, for every field. (The schema refuses an empty server,
// scaling or gpus object.)
func TestV1beta1RoundTrip(t *testing.T) {
	fuzzer.SpokeRoundTrip[InferenceService, servingv1alpha1.InferenceService](t, filler(t, 1), 500, func(in *InferenceService) {
		if sv := in.Spec.Server; sv != nil && apiequality.Semantic.DeepEqual(*sv, Server{}) {
			in.Spec.Server = nil
		}
		if sc := in.Spec.Scaling; sc != nil && sc.MinReplicas == nil && sc.MaxReplicas == nil {
			in.Spec.Scaling = nil
		}
		if g := in.Spec.GPUs; g != nil && g.Count == 0 && g.Resource == "" {
			in.Spec.GPUs = nil // the schema refuses an empty gpus object
		}
	})
}

// TestV1alpha1RoundTrip: a v1alpha1 InferenceService (as stored before v1beta1) read at v1beta1
// and written back is the same.
func TestV1alpha1RoundTrip(t *testing.T) {
	fuzzer.HubRoundTrip[servingv1alpha1.InferenceService, InferenceService](t, filler(t, 2), 500, nil)
}
