package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/kiln-ml/kiln/internal/version"
)

// Platform is an operating system and architecture kubectl-kiln is built for.
type Platform struct{ OS, Arch string }

// Platforms are those a release ships kubectl-kiln for.
var Platforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

// Native is the platform of this machine.
func Native() Platform { return Platform{runtime.GOOS, runtime.GOARCH} }

// Downloads is where a release's files are published, by tag: the krew manifest's URIs.
const Downloads = "https://github.com/kiln-ml/kiln/releases/download/"

// PluginArchive is the name of kubectl-kiln's archive for tag and p.
func PluginArchive(tag string, p Platform) string {
	return fmt.Sprintf("kubectl-kiln_%s_%s_%s.tar.gz", tag, p.OS, p.Arch)
}

// Plugins builds kubectl-kiln (cmd/kubectl-kiln under root) for each platform, stamped with tag
// and commit, archives each into outDir, and writes the krew plugin manifest kiln.yaml beside
// them. It returns the paths it wrote.
func Plugins(root, tag, commit, outDir string, platforms []Platform) ([]string, error) {
	var written []string
	var entries []any
	for _, p := range platforms {
		archive, sum, err := plugin(root, tag, commit, outDir, p)
		if err != nil {
			return nil, err
		}
		written = append(written, archive)
		entries = append(entries, map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"os": p.OS, "arch": p.Arch}},
			"uri":      Downloads + tag + "/" + filepath.Base(archive),
			"sha256":   sum,
			"bin":      "kubectl-kiln",
			"files":    []any{map[string]any{"from": "kubectl-kiln", "to": "."}},
		})
	}
	manifest := map[string]any{
		"apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
		"kind":       "Plugin",
		"metadata":   map[string]any{"name": "kiln"},
		"spec": map[string]any{
			"version":          tag,
			"homepage":         "https://github.com/kiln-ml/kiln",
			"shortDescription": "See, explain and follow kiln's training jobs and InferenceServices",
			"description": "Every kiln kind (Kubeflow's training jobs, TrainJob, PyJob, both InferenceServices) in one table,\n" +
				"why a job waits, the logs of all of a job's replicas at once, and a PyJob from a local script.\n",
			"platforms": entries,
		},
	}
	b, err := yaml.Marshal(manifest)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(outDir, "kiln.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return nil, err
	}
	return append(written, path), nil
}

// plugin builds and archives kubectl-kiln for p; it returns the archive's path and SHA-256.
func plugin(root, tag, commit, outDir string, p Platform) (string, string, error) {
	tmp, err := os.MkdirTemp("", "kubectl-kiln-")
	if err != nil {
		return "", "", err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	bin := filepath.Join(tmp, "kubectl-kiln")
	ldflags := "-s -w -X github.com/kiln-ml/kiln/internal/version.Version=" + tag + " -X github.com/kiln-ml/kiln/internal/version.Commit=" + commit
	cmd := version.GoBuild("-ldflags", ldflags, "-o", bin, "./cmd/kubectl-kiln")
	cmd.Dir = root
	cmd.Env = append(cmd.Env, "GOOS="+p.OS, "GOARCH="+p.Arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("building kubectl-kiln for %s/%s: %w\n%s", p.OS, p.Arch, err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", "", err
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	// A fixed time: the same build archives to the same bytes.
	hdr := &tar.Header{Name: "kubectl-kiln", Mode: 0o755, Size: int64(len(data)), ModTime: time.Unix(0, 0).UTC(), Typeflag: tar.TypeReg}
	if err := tw.WriteHeader(hdr); err != nil {
		return "", "", err
	}
	if _, err := tw.Write(data); err != nil {
		return "", "", err
	}
	if err := tw.Close(); err != nil {
		return "", "", err
	}
	if err := gz.Close(); err != nil {
		return "", "", err
	}
	archive := filepath.Join(outDir, PluginArchive(tag, p))
	if err := os.WriteFile(archive, buf.Bytes(), 0o644); err != nil {
		return "", "", err
	}
	sum := sha256.Sum256(buf.Bytes())
	return archive, hex.EncodeToString(sum[:]), nil
}
