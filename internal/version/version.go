// Package version says which build of kiln this is: what `kiln version` prints, and the tag of
// kiln's own image, which every image kiln injects into users' pods defaults to. `make build`
// stamps Version and Commit with -ldflags -X (hack/version.sh); other builds fall back to what
// the Go toolchain recorded.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Repository is where kiln's image is published; Image() adds this build's tag.
const Repository = "ghcr.io/kiln-ml/kiln"

// Stamped at build time (see the Makefile's LDFLAGS).
var (
	// Version is `git describe` of the nearest v* tag, or VERSION's release with -dev and the
	// commit when no tag is there, or VERSION alone when built without git.
	Version = ""
	// Commit is the full commit hash the binary was built from.
	Commit = ""
)

// Get is this binary's version: the stamped one; else the module version the Go toolchain
// recorded (`go install …@v0.2.0`); else "v0.0.0-dev" (go run, go test).
func Get() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && validTag(bi.Main.Version) {
		return bi.Main.Version
	}
	return "v0.0.0-dev"
}

// Image is kiln's image at this build's version: the default of the manager's, the model fetch's
// and the PyTorch init container's image.
func Image() string { return Repository + ":" + Get() }

// GetCommit is the stamped commit, or the one the Go toolchain recorded from git.
func GetCommit() string {
	if Commit != "" {
		return Commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// String is what `kiln version` prints: version, commit, Go and the Kubernetes libraries linked in.
func String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kiln %s\n", Get())
	fmt.Fprintf(&b, "  commit:     %s\n", GetCommit())
	fmt.Fprintf(&b, "  go:         %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	libs := kubernetesLibraries()
	if len(libs) == 0 {
		libs = []string{"none linked"}
	}
	fmt.Fprintf(&b, "  kubernetes: %s\n", strings.Join(libs, ", "))
	fmt.Fprintf(&b, "  image:      %s\n", Image())
	return b.String()
}

// kubernetesLibraries lists the client libraries this binary was linked with, as module@version.
func kubernetesLibraries() []string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	var out []string
	for _, want := range []string{"k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go", "sigs.k8s.io/controller-runtime"} {
		for _, d := range bi.Deps {
			if d.Path == want {
				out = append(out, d.Path+" "+d.Version)
			}
		}
	}
	return out
}

// validTag: an image tag may hold letters, digits, '_', '.' and '-' (no '+', which Go's
// pseudo-versions of dirty trees carry) and must not be "(devel)".
func validTag(v string) bool {
	if v == "" || len(v) > 128 {
		return false
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return false
		}
	}
	return true
}
