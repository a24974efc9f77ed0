// Command kserve-crds makes kiln's generated serving.kserve.io InferenceService CRD accept what
// KServe's own accepts, as KServe's build edits the CRD it generates:
//
//   - a framework shorthand or model of spec.predictor inlines a container, whose name is
//     required; it is not there: the predictor's container is kserve-container;
//
//   - a probe's httpGet or tcpSocket may leave out its port (the container's is meant).
//
//     go run ./hack/kserve-crds config/crd/kserve/serving.kserve.io_inferenceservices.yaml
package main

import (
	"fmt"
	"os"
	"slices"

	"sigs.k8s.io/yaml"
)

func main() {
	for _, path := range os.Args[1:] {
		if err := edit(path); err != nil {
			fmt.Fprintln(os.Stderr, "kserve-crds:", err)
			os.Exit(1)
		}
	}
}

func edit(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	versions, _ := dig(crd, "spec", "versions").([]any)
	for _, v := range versions {
		predictor, _ := dig(v, "schema", "openAPIV3Schema", "properties", "spec", "properties", "predictor", "properties").(map[string]any)
		if predictor == nil {
			return fmt.Errorf("%s: no spec.predictor in the schema", path)
		}
		for _, field := range predictor {
			unrequire(field, "name")
		}
		portOptional(predictor)
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644)
}

// dig follows keys through nested maps; nil where one is missing.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// unrequire drops field from a schema's required list.
func unrequire(schema any, field string) {
	m, ok := schema.(map[string]any)
	if !ok {
		return
	}
	req, _ := m["required"].([]any)
	req = slices.DeleteFunc(slices.Clone(req), func(r any) bool { return r == field })
	if len(req) == 0 {
		delete(m, "required")
	} else {
		m["required"] = req
	}
}

// portOptional makes port optional in every probe's httpGet and tcpSocket below v.
func portOptional(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			if k == "livenessProbe" || k == "readinessProbe" || k == "startupProbe" {
				for _, handler := range []string{"httpGet", "tcpSocket"} {
					unrequire(dig(val, "properties", handler), "port")
				}
			}
			portOptional(val)
		}
	case []any:
		for _, val := range t {
			portOptional(val)
		}
	}
}
