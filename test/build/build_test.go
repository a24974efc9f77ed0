// Package build checks how kiln's binaries are built: with version.GoBuild's flags everywhere,
// and so that the linker can drop the methods nobody calls.
package build

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/internal/version"
	"github.com/kiln-ml/kiln/test/testenv"
)

// TestMakeAndTheImageBuildWithTheFlags fails when `make build` or the Dockerfile builds a binary
// without version.GoBuild's flags (the tests' builds and the release's run version.GoBuild).
func TestMakeAndTheImageBuildWithTheFlags(t *testing.T) {
	flags := strings.Join(version.GoBuild().Args[2:], " ")     // go build <flags>
	goBuild := regexp.MustCompile(`(go|\$\(GO\)) build[^\n]*`) // the Makefile's go is $(GO)
	for _, name := range []string{"Makefile", "Dockerfile"} {
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), name))
		if err != nil {
			t.Fatal(err)
		}
		builds := goBuild.FindAllString(string(data), -1)
		if len(builds) == 0 {
			t.Errorf("%s builds nothing with go build: where do kiln's binaries come from now?", name)
		}
		for _, b := range builds {
			if !strings.Contains(b, " build "+flags) {
				t.Errorf("%s: %q does not build with %q (version.GoBuild); give it the flags every build of kiln takes", name, b, flags)
			}
		}
	}
}

// TestTheLinkerDropsMethodsNobodyCalls links kiln's binaries as they ship and fails when a
// function the program can reach looks methods up by a name known only at run time (the linker
// marks it ReflectMethod): then the linker keeps every exported method of every type, and the
// binary, most of which is resident, grows by a quarter or more (docs/decisions.md, 22).
func TestTheLinkerDropsMethodsNobodyCalls(t *testing.T) {
	for _, name := range []string{"kiln", "kiln-fetch", "kubectl-kiln"} {
		cmd := version.GoBuild("-ldflags=-dumpdep", "-o", os.DevNull, "./cmd/"+name)
		cmd.Dir = testenv.RepoRoot()
		var deps bytes.Buffer
		cmd.Stderr = &deps // the linker prints what it keeps, and go build passes it on here
		if err := cmd.Run(); err != nil {
			t.Fatalf("linking %s: %v\n%s", name, err, testenv.Tail(deps.String(), 80, 4000))
		}
		if !strings.Contains(deps.String(), " -> ") {
			t.Fatalf("linking %s wrote no dependency graph: has -ldflags=-dumpdep changed?", name)
		}
		lookups := map[string]bool{}
		for _, line := range strings.Split(deps.String(), "\n") {
			// "from -> to", either side a symbol and its marks, as in "sym <UsedInIface><ReflectMethod>".
			for _, side := range strings.Split(line, " -> ") {
				if sym, marks, _ := strings.Cut(side, " "); strings.Contains(marks, "<ReflectMethod>") {
					lookups[sym] = true
				}
			}
		}
		if len(lookups) > 0 {
			t.Errorf("%s: %s look methods up by name at run time, so the linker keeps every exported method of every type. "+
				"Find what reaches them (go build %s -ldflags=-dumpdep ./cmd/%s 2>&1 | grep -F -- '-> <function>') and keep that out of the binary",
				name, strings.Join(slices.Sorted(maps.Keys(lookups)), ", "), strings.Join(version.GoBuild().Args[2:], " "), name)
		}
	}
}
