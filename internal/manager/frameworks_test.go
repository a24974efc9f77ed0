package manager

import (
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/internal/framework"
)

func TestEveryBuiltInFrameworkRegisters(t *testing.T) {
	set, err := Frameworks(Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := "jaxjob mpijob paddlejob pytorchjob tfjob xgboostjob"
	if got := strings.Join(set.Kinds(), " "); got != want {
		t.Errorf("kinds %q, want %q", got, want)
	}
}

func TestAFrameworkOfABuiltInKindStopsTheStart(t *testing.T) {
	set, _ := Frameworks(Options{})
	again, _ := set.Get("tfjob")
	again.Name = "tensorflow-copy"
	if _, err := Frameworks(Options{Frameworks: []framework.Framework{again}}); err == nil || !strings.Contains(err.Error(), "tensorflow-copy") {
		t.Fatalf("got %v, want the start refused naming the second TFJob framework", err)
	}
}

// --kserve adds KServe's InferenceService to the kinds served: all by default, or those --kinds
// names.
func TestKServeAddsKServesKind(t *testing.T) {
	for _, kinds := range [][]string{nil, {"pytorchjob"}} {
		fws, own, err := enabled(Options{Kinds: kinds, KServe: true})
		if err != nil {
			t.Fatal(err)
		}
		if !own[kserveInferenceServiceKind] || (kinds == nil && (!own[inferenceServiceKind] || len(fws) < 6)) || (kinds != nil && (own[inferenceServiceKind] || len(fws) != 1)) {
			t.Errorf("--kinds=%v --kserve: frameworks %d, own kinds %v", kinds, len(fws), own)
		}
	}
	if _, own, _ := enabled(Options{}); own[kserveInferenceServiceKind] {
		t.Errorf("KServe's kind served without --kserve")
	}
}
