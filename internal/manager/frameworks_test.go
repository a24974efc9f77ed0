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
