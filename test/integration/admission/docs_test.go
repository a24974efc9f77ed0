package admission

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kiln-ml/kiln/test/testenv"
)

// yamlBlock is a fenced YAML example of a Markdown file.
var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// TestDocExamplesAreAccepted: every example of a kiln kind in the README and docs/ is accepted
// as it is written (a server-side dry run, through kiln's webhooks and conversion).
func TestDocExamplesAreAccepted(t *testing.T) {
	ready(t)
	ns := env.Namespace(t)
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(testenv.RepoRoot(), "README.md"))
	checked := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range yamlBlock.FindAllStringSubmatch(string(data), -1) {
			for _, doc := range strings.Split(m[1], "\n---\n") {
				var obj map[string]any
				if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
					t.Errorf("%s: an example is not YAML: %v\n%s", filepath.Base(file), err, doc)
					continue
				}
				u := &unstructured.Unstructured{Object: obj}
				group := u.GroupVersionKind().Group
				if group != "training.kiln.dev" && group != "serving.kiln.dev" && group != "kubeflow.org" {
					continue
				}
				u.SetNamespace(ns)
				if err := env.Client.Create(context.Background(), u, client.DryRunAll); err != nil {
					t.Errorf("%s: the example %s %s is refused: %v", filepath.Base(file), u.GetAPIVersion(), u.GetName(), err)
				}
				checked++
			}
		}
	}
	if checked < 4 {
		t.Errorf("checked %d examples, want at least the README's and the guides' PyJob and InferenceService ones", checked)
	}
	t.Logf("%d examples accepted", checked)
}
