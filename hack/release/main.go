// Command release writes a kiln release to a folder (make release: dist/):
//
//	go run ./hack/release -version v0.2.0 -out dist
//
// install.yaml (CRDs, RBAC, webhooks, the manager Deployment with its image pinned to the
// version), kiln-<version>.tgz (the Helm chart, version and appVersion set), and kubectl kiln:
// kubectl-kiln_<version>_<os>_<arch>.tar.gz for Linux and macOS on amd64 and arm64, and kiln.yaml,
// its krew plugin manifest.
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
	out := flag.String("out", "dist", "folder to write install.yaml, the chart and the plugin to")
	commit := flag.String("commit", "unknown", "the commit stamped into kubectl-kiln")
	flag.Parse()
	if *tag == "" {
		fmt.Fprintln(os.Stderr, "release: -version is required (make release passes hack/version.sh's)")
		os.Exit(2)
	}
	if err := run(*tag, *commit, *out); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(tag, commit, out string) error {
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
	plugins, err := release.Plugins(".", tag, commit, out, release.Platforms)
	if err != nil {
		return err
	}
	for _, p := range plugins {
		fmt.Println(p)
	}
	return nil
}
