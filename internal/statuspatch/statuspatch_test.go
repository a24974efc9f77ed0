package statuspatch

import (
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
)

type status struct {
	Phase    string            `json:"phase,omitempty"`
	Counts   map[string]int    `json:"counts,omitempty"`
	Messages []string          `json:"messages,omitempty"`
	Extra    map[string]string `json:"extra,omitempty"`
}

func TestPatchSetsTheWholeStatusOnTheVersionRead(t *testing.T) {
	old := &status{Phase: "Pending", Counts: map[string]int{"worker": 1, "ps": 1}, Extra: map[string]string{"gone": "x"}}
	new := &status{Phase: "Running", Counts: map[string]int{"worker": 2}, Messages: []string{"a", "b"}}
	patch, err := Patch(`12"3`, new)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatalf("patch %s is not a JSON patch: %v", patch, err)
	}
	for name, stored := range map[string]map[string]any{
		"an object with a status":    {"metadata": map[string]any{"resourceVersion": "99", "name": "j"}, "spec": map[string]any{"a": 1.0}, "status": old},
		"an object without a status": {"metadata": map[string]any{"resourceVersion": "99", "name": "j"}, "spec": map[string]any{"a": 1.0}},
	} {
		doc, _ := json.Marshal(stored)
		patched, err := p.Apply(doc)
		if err != nil {
			t.Fatalf("%s: applying %s: %v", name, patch, err)
		}
		var got map[string]any
		if err := json.Unmarshal(patched, &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{
			// The version read, for the apiserver to compare with its own; the rest of the
			// object as it was; the status exactly new (what new leaves out is gone).
			"metadata": map[string]any{"resourceVersion": `12"3`, "name": "j"},
			"spec":     map[string]any{"a": 1.0},
			"status":   map[string]any{"phase": "Running", "counts": map[string]any{"worker": 2.0}, "messages": []any{"a", "b"}},
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: patched (-want +got):\n%s", name, d)
		}
	}
}
