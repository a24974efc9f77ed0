// Command crd-descriptions post-processes the generated CRDs:
//
//   - it reflows descriptions: controller-gen keeps the line breaks of Go comments, which
//     `kubectl explain` prints as ragged lines. Lines of a paragraph are joined; blank lines stay;
//
//   - it drops the descriptions inside embedded pod templates (the Kubernetes Pod documentation,
//     which `kubectl explain pod.spec` shows anyway). That takes a CRD from ~320 KB to under
//     100 KB, so that a plain client-side `kubectl apply` fits its last-applied annotation
//     (256 KiB).
//
//     go run ./hack/crd-descriptions config/crd/bases/*.yaml
package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

func main() {
	for _, path := range os.Args[1:] {
		if err := reflowFile(path); err != nil {
			fmt.Fprintln(os.Stderr, "crd-descriptions:", err)
			os.Exit(1)
		}
	}
}

func reflowFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	out, err := yaml.Marshal(reflow(doc, false))
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644)
}

// reflow walks a CRD; inTemplate is true below the properties of a pod template.
func reflow(v any, inTemplate bool) any {
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			switch s, isString := val.(string); {
			case k == "description" && isString && inTemplate:
				delete(t, k)
			case k == "description" && isString:
				t[k] = Reflow(s)
			case k == "template":
				if m, ok := val.(map[string]any); ok {
					if props, ok := m["properties"]; ok {
						m["properties"] = reflow(props, true)
					}
					t[k] = reflow(m, inTemplate)
				}
			default:
				t[k] = reflow(val, inTemplate)
			}
		}
	case []any:
		for i := range t {
			t[i] = reflow(t[i], inTemplate)
		}
	}
	return v
}

var singleBreak = regexp.MustCompile(`([^\n])\n([^\n])`)

// Reflow joins the lines of each paragraph of s with spaces.
func Reflow(s string) string {
	return strings.TrimSpace(singleBreak.ReplaceAllString(s, "$1 $2"))
}
