package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kiln-ml/kiln/internal/devcluster"
)

// Process is a program a suite started: devcluster's, which make run uses too.
type Process = devcluster.Process

// StartProcess runs bin with args and extra environment, logging to <logDir>/<name>.log.
func StartProcess(name, logDir string, env []string, bin string, args ...string) (*Process, error) {
	return devcluster.StartProcess(name, logDir, env, bin, args...)
}

// ToolVersion is the version of module that hack/tools/<tool>/go.mod pins (the folder
// hack/tools.sh builds an add-on into is named after it).
func ToolVersion(tool, module string) (string, error) {
	path := filepath.Join(RepoRoot(), "hack", "tools", tool, "go.mod")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "require" && f[1] == module {
			return f[2], nil
		}
		if len(f) >= 2 && f[0] == module && strings.HasPrefix(f[1], "v") { // in a require block
			return f[1], nil
		}
	}
	return "", fmt.Errorf("%s requires no version of %s", path, module)
}
