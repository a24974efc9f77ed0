// Package release renders what a kiln release ships: the install manifest (config/default through
// kustomize, the manager's image pinned to the release's version) and the Helm chart
// (charts/kiln, its version and appVersion set to the release's). `make release` writes both to
// dist/; the release suite (test/integration/release) applies them to a real kube-apiserver and
// checks that the chart's defaults are the install manifest's objects.
package release

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartsave "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/kiln-ml/kiln/internal/version"
)

// Namespace is where the install manifest puts kiln.
const Namespace = "kiln-system"

// InstallManifest builds config/default under root with kustomize and pins kiln's image to
// tag: the YAML `kubectl apply --server-side -f dist/install.yaml` installs.
func InstallManifest(root, tag string) ([]byte, error) {
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy // Namespace and CRDs first, webhooks last: apply order
	k := krusty.MakeKustomizer(opts)
	res, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(root, "config", "default"))
	if err != nil {
		return nil, fmt.Errorf("kustomize config/default: %w", err)
	}
	built, err := res.AsYaml()
	if err != nil {
		return nil, err
	}
	objs, err := Objects(built)
	if err != nil {
		return nil, err
	}
	out := bytes.NewBufferString("# kiln " + tag + ": kubectl apply --server-side -f install.yaml\n")
	pinned := 0
	for _, obj := range objs {
		containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			if m, ok := c.(map[string]any); ok {
				if img, _ := m["image"].(string); repository(img) == version.Repository {
					m["image"] = version.Repository + ":" + tag
					pinned++
				}
			}
		}
		if containers != nil {
			if err := unstructured.SetNestedSlice(obj.Object, containers, "spec", "template", "spec", "containers"); err != nil {
				return nil, err
			}
		}
		doc, err := yaml.Marshal(obj.Object)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(doc)
	}
	if pinned == 0 {
		return nil, fmt.Errorf("config/default has no container of image %s to pin", version.Repository)
	}
	return out.Bytes(), nil
}

// repository is an image reference without its tag or digest.
func repository(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}

// LoadChart loads a chart folder or packaged .tgz.
func LoadChart(path string) (*chart.Chart, error) {
	ch, err := loader.Load(path)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", path, err)
	}
	return ch, nil
}

// PackageChart writes charts/kiln as <outDir>/kiln-<version>.tgz with its version and appVersion
// set to the release's, and returns the file's path.
func PackageChart(root, tag, outDir string) (string, error) {
	ch, err := LoadChart(filepath.Join(root, "charts", "kiln"))
	if err != nil {
		return "", err
	}
	ch.Metadata.Version = ChartVersion(tag)
	ch.Metadata.AppVersion = tag
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", err
	}
	return chartsave.Save(ch, outDir)
}

// ChartVersion is a release version as SemVer 2, which Helm requires: without the leading v.
func ChartVersion(tag string) string { return strings.TrimPrefix(tag, "v") }

// RenderChart renders a chart as `helm install -n namespace` would with the given values over its
// defaults: the CRDs of its crds/ folder, then its templates' objects, in file order.
func RenderChart(ch *chart.Chart, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	vals, err := chartutil.ToRenderValues(ch, values, chartcommon.ReleaseOptions{Name: "kiln", Namespace: namespace, IsInstall: true}, nil)
	if err != nil {
		return nil, fmt.Errorf("chart values: %w", err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		return nil, fmt.Errorf("rendering the chart: %w", err)
	}
	var objs []*unstructured.Unstructured
	for _, crd := range ch.CRDObjects() {
		o, err := Objects(crd.File.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", crd.Filename, err)
		}
		objs = append(objs, o...)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if strings.HasSuffix(name, ".yaml") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		o, err := Objects([]byte(files[name]))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		objs = append(objs, o...)
	}
	return objs, nil
}

// Objects decodes a multi-document YAML stream, skipping empty documents.
func Objects(data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}
