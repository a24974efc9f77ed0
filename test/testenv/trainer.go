package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/internal/devcluster"
)

// InstallTrainerRuntimes applies Kubeflow Trainer's own runtime manifests (TrainerRuntimes),
// unchanged; again is harmless (server-side apply).
func (e *Env) InstallTrainerRuntimes(t testing.TB) {
	t.Helper()
	var files []string
	err := filepath.WalkDir(TrainerRuntimes(t), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") && filepath.Base(p) != "kustomization.yaml" {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := devcluster.ReadObjects(files...)
	if err != nil {
		t.Fatal(err)
	}
	if err := devcluster.Apply(context.Background(), e.Client, "default", objs); err != nil {
		t.Fatalf("applying Trainer's runtime manifests: %v", err)
	}
}
