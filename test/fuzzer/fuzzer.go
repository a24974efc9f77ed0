// Package fuzzer fills API objects with random values for the conversion round-trip tests, with
// apimachinery's fuzzer (sane object metadata):
//
//	f := fuzzer.Filler(t, 1, v1.AddToScheme, v2beta1.AddToScheme)
//	f.Fill(&job)
package fuzzer

import (
	"math/rand"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"
)

// Filler fills objects of the schemes add registers, from seed (logged, to reproduce a failure).
func Filler(t testing.TB, seed int64, add ...func(*runtime.Scheme) error) *randfill.Filler {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, a := range add {
		if err := a(scheme); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d", seed)
	return fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(seed), serializer.NewCodecFactory(scheme)).NilChance(0.3).MaxDepth(8)
}
