package v1beta1

import (
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/randfill"

	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	"github.com/kiln-ml/kiln/test/fuzzer"
)

func filler(t *testing.T, seed int64) *randfill.Filler {
	return fuzzer.Filler(t, seed, trainingv1alpha1.AddToScheme, AddToScheme)
}

// TestV1beta1RoundTrip: a v1beta1 PyJob the schema accepts, converted to the v1alpha1 hub and
// back, is the same, for every field. (The schema refuses what has no v1alpha1 form: an empty
// pod or resources object, a dataset or output without a path.)
func TestV1beta1RoundTrip(t *testing.T) {
	fuzzer.SpokeRoundTrip[PyJob, trainingv1alpha1.PyJob](t, filler(t, 1), 500, func(in *PyJob) {
		if in.Spec.Dataset != nil && in.Spec.Dataset.Path == "" {
			in.Spec.Dataset.Path = "/mnt/data"
		}
		if in.Spec.Output != nil && in.Spec.Output.Path == "" {
			in.Spec.Output.Path = "/mnt/out"
		}
		if in.Spec.Pod != nil && apiequality.Semantic.DeepEqual(*in.Spec.Pod, Pod{}) {
			in.Spec.Pod = nil
		}
		if r := in.Spec.Resources; r != nil && r.CPU == nil && r.Memory == nil {
			in.Spec.Resources = nil
		}
		if g := in.Spec.GPUs; g != nil && g.Count == 0 && g.Resource == "" {
			g.Resource = "nvidia.com/gpu" // the schema's default
		}
	})
}

// TestV1alpha1RoundTrip: a v1alpha1 PyJob (as stored before v1beta1) read at v1beta1 and written
// back is the same.
// (The schema refuses a dataset or output object with nothing in it.)
func TestV1alpha1RoundTrip(t *testing.T) {
	fuzzer.HubRoundTrip[trainingv1alpha1.PyJob, PyJob](t, filler(t, 2), 500, func(in *trainingv1alpha1.PyJob) {
		if d := in.Spec.Dataset; d != nil && d.ClaimName == "" && d.SubPath == "" && d.ReadOnly == nil {
			d.ClaimName = "data"
		}
		if o := in.Spec.Output; o != nil && apiequality.Semantic.DeepEqual(*o, trainingv1alpha1.OutputStorage{}) {
			o.ClaimName = "out"
		}
	})
}
