package statuspatch

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type status struct {
	Phase    string            `json:"phase,omitempty"`
	Counts   map[string]int    `json:"counts,omitempty"`
	Messages []string          `json:"messages,omitempty"`
	Extra    map[string]string `json:"extra,omitempty"`
}

func TestPatchCarriesTheStatusChangeAndTheVersionRead(t *testing.T) {
	old := &status{Phase: "Pending", Counts: map[string]int{"worker": 1, "ps": 1}, Extra: map[string]string{"gone": "x"}}
	new := &status{Phase: "Running", Counts: map[string]int{"worker": 2, "ps": 1}, Messages: []string{"a", "b"}}
	patch, err := Patch(`12"3`, old, new)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(patch, &got); err != nil {
		t.Fatalf("patch %s is not JSON: %v", patch, err)
	}
	want := map[string]any{
		"metadata": map[string]any{"resourceVersion": `12"3`},
		// Only what changed; a removed field is null (merge patch), a list is written whole.
		"status": map[string]any{"phase": "Running", "counts": map[string]any{"worker": 2.0}, "messages": []any{"a", "b"}, "extra": nil},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("patch (-want +got):\n%s", d)
	}
}
