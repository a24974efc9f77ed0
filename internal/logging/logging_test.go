package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestLinesCarryTheNamesAndValuesGivenBefore(t *testing.T) {
	var o Options
	o.BindFlags(flag.NewFlagSet("test", flag.ContinueOnError))
	var out bytes.Buffer
	log := o.New(&out).WithName("tfjob").WithValues("namespace", "ns").WithName("reconcile").WithValues("name", "a")
	log.V(4).Info("not at this level")
	log.Info("planned", "pods", 5)
	log.Error(errors.New("boom"), "failed")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %d:\n%s", len(lines), out.String())
	}
	for i, msg := range []string{"planned", "failed"} {
		var got map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatalf("line %q: %v", lines[i], err)
		}
		if got["msg"] != msg || got["logger"] != "tfjob.reconcile" || got["namespace"] != "ns" || got["name"] != "a" {
			t.Errorf("line %d: %v", i, got)
		}
	}
}
