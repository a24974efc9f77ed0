// Command release writes a kiln release to a folder (make release: dist/):
//
//	go run ./hack/release -version v0.2.0 -out dist
//
// install.yaml (CRDs, RBAC, webhooks, the manager Deployment with its image pinned to the
// version) and kiln-<version>.tgz (the Helm chart, version and appVersion set).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kiln-ml/kiln/internal/release"
)

func main() {
	tag := flag.String("version", "", "the release's version, as hack/version.sh prints it")
	out := flag.String("out", "dist", "folder to write install.yaml and the chart to")
	flag.Parse()
	if *tag == "" {
		fmt.Fprintln(os.Stderr, "release: -version is required (make release passes hack/version.sh's)")
		os.Exit(2)
	}
	if err := run(*tag, *out); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(tag, out string) error {
	manifest, err := release.InstallManifest(".", tag)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "install.yaml"), manifest, 0o644); err != nil {
		return err
	}
	chart, err := release.PackageChart(".", tag, out)
	if err != nil {
		return err
	}
	fmt.Printf("%s\n%s\n", filepath.Join(out, "install.yaml"), chart)
	return nil
}
