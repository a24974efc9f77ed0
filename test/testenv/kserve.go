package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kiln-ml/kiln/internal/devcluster"
)

// KServeCRDs is the folder of kiln's serving.kserve.io CRDs.
func KServeCRDs() string { return filepath.Join(RepoRoot(), "config", "crd", "kserve") }

// KServeManifests reads KServe's own manifests that hack/tools.sh copied next to the binaries
// (kserve-<version>/runtimes: its config/runtimes; kserve-<version>/samples: the YAML of its
// docs/samples/v1beta1), under the folder sub of one of them, unchanged.
func KServeManifests(t testing.TB, sub string) []*unstructured.Unstructured {
	t.Helper()
	dir, err := toolFolder("kserve-*", sub)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") && filepath.Base(p) != "kustomization.yaml" {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// A few of KServe's samples are not YAML (templates with placeholders): skipped, as no
	// client could apply them either.
	var objs []*unstructured.Unstructured
	for _, f := range files {
		o, err := devcluster.ReadObjects(f)
		if err != nil {
			t.Logf("skipping KServe's %s: %v", strings.TrimPrefix(f, dir+"/"), err)
			continue
		}
		objs = append(objs, o...)
	}
	return objs
}

// ApplyKServeRuntimes applies kiln's KServe runtimes (config/kserve/runtimes.yaml) with c, as an
// install does.
func ApplyKServeRuntimes(t testing.TB, c client.Client) {
	t.Helper()
	runtimes, err := devcluster.ReadObjects(filepath.Join(RepoRoot(), "config", "kserve", "runtimes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := devcluster.Apply(context.Background(), c, "", runtimes); err != nil {
		t.Fatal(err)
	}
}
