// Package fuzzer runs the conversion round-trip tests: objects filled with random values by
// apimachinery's fuzzer (sane object metadata), converted to the other version and back:
//
//	f := fuzzer.Filler(t, 1, v1.AddToScheme, v2beta1.AddToScheme)
//	fuzzer.SpokeRoundTrip[v2beta1.MPIJob, v1.MPIJob](t, f, 300, func(j *v2beta1.MPIJob) { ... })
package fuzzer

import (
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/controller-runtime/pkg/conversion"
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

// spoke and hub are the pointer types of a convertible version and of the hub it converts
// through.
type spoke[T any] interface {
	*T
	conversion.Convertible
}

type hub[T any] interface {
	*T
	conversion.Hub
}

// SpokeRoundTrip fills n objects of version S, lets accepted make each one its schema accepts,
// converts it to the hub H and back, and fails at the first that changed.
func SpokeRoundTrip[S, H any, PS spoke[S], PH hub[H]](t testing.TB, f *randfill.Filler, n int, accepted func(PS)) {
	t.Helper()
	for range n {
		in := PS(new(S))
		f.Fill(in)
		if accepted != nil {
			accepted(in)
		}
		h := PH(new(H))
		if err := in.ConvertTo(h); err != nil {
			t.Fatal(err)
		}
		out := PS(new(S))
		if err := out.ConvertFrom(h); err != nil {
			t.Fatal(err)
		}
		if !apiequality.Semantic.DeepEqual(in, out) {
			t.Fatalf("%T → %T → back changed it (-in +out):\n%s", in, h, cmp.Diff(in, out))
		}
	}
}

// HubRoundTrip fills n objects of the hub H, lets accepted make each one its schema accepts,
// converts it to version S and back, and fails at the first that changed.
func HubRoundTrip[H, S any, PH hub[H], PS spoke[S]](t testing.TB, f *randfill.Filler, n int, accepted func(PH)) {
	t.Helper()
	for range n {
		in := PH(new(H))
		f.Fill(in)
		if accepted != nil {
			accepted(in)
		}
		s := PS(new(S))
		if err := s.ConvertFrom(in); err != nil {
			t.Fatal(err)
		}
		out := PH(new(H))
		if err := s.ConvertTo(out); err != nil {
			t.Fatal(err)
		}
		if !apiequality.Semantic.DeepEqual(in, out) {
			t.Fatalf("%T → %T → back changed it (-in +out):\n%s", in, s, cmp.Diff(in, out))
		}
	}
}
