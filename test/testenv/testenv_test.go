package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A control-plane folder outlives a process killed before its Stop ended: the next one made
// removes it, and keeps the folders of processes that still run.
func TestPlaneFoldersOfEndedProcessesGo(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	left := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d-1", planePrefix, ended.Process.Pid))
	running := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d-2", planePrefix, os.Getppid()))
	other := filepath.Join(os.TempDir(), planePrefix+"bin-3") // not a process's
	for _, d := range []string{left, running, other} {
		if err := os.MkdirAll(filepath.Join(d, "etcd"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	mine, err := planeFolder()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("the folder of ended process %d is still there (%v)", ended.Process.Pid, err)
	}
	for _, d := range []string{running, other, mine} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s: %v, want it kept", d, err)
		}
	}
	if want := fmt.Sprintf("%s%d-", planePrefix, os.Getpid()); !strings.HasPrefix(filepath.Base(mine), want) {
		t.Errorf("this process's folder %s, want it named %s…", mine, want)
	}
}
