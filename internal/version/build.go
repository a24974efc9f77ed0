package version

import (
	"os"
	"os/exec"
	"slices"
)

// buildFlags are the flags of every build of kiln's binaries, beside CGO_ENABLED=0:
//   - -trimpath: no path of the building machine in the binary.
//   - -tags=grpcnotrace: gRPC without golang.org/x/net/trace, whose debug pages render with
//     html/template. That executor looks methods up by name at run time, so the linker would
//     keep every exported method of every type. Without it kiln's code and tables are a fifth
//     smaller (50.0 → 39.7 MB), kiln-fetch's two fifths (45.5 → 26.3 MB), and most of them are
//     resident (docs/decisions.md, 22).
var buildFlags = []string{"-trimpath", "-tags=grpcnotrace"}

// GoBuild is `go build` as every build of kiln's binaries runs it: static (CGO_ENABLED=0), with
// the build flags, then args. `make build` and the Dockerfile give the same flags (test/build
// checks them); the tests' builds (testenv.Build) and the release's kubectl-kiln run this.
func GoBuild(args ...string) *exec.Cmd {
	cmd := exec.Command("go", slices.Concat([]string{"build"}, buildFlags, args)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	return cmd
}
