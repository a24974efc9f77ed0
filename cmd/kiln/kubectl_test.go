package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseKubectl(t *testing.T) {
	for _, c := range []struct {
		args []string
		want execRequest
		err  string
	}{
		// What Kubeflow v1's kubexec.sh runs, with and without mainContainer.
		{args: []string{"exec", "pi-worker-0", "--container", "mpi", "--", "/bin/sh", "-c", "orted -mca ess env"},
			want: execRequest{pod: "pi-worker-0", container: "mpi", command: []string{"/bin/sh", "-c", "orted -mca ess env"}}},
		{args: []string{"exec", "pi-worker-1", "--", "/bin/sh", "-c", "hostname"},
			want: execRequest{pod: "pi-worker-1", command: []string{"/bin/sh", "-c", "hostname"}}},
		{args: []string{"exec", "-i", "-n", "team-a", "pi-worker-1", "-c", "mpi", "--", "true"},
			want: execRequest{pod: "pi-worker-1", container: "mpi", namespace: "team-a", stdin: true, command: []string{"true"}}},
		{args: []string{"get", "pods"}, err: "serves only `kubectl exec"},
		{args: []string{"exec", "--", "true"}, err: "name the pod"},
		{args: []string{"exec", "p"}, err: "give the command after --"},
		{args: []string{"exec", "p", "q", "--", "true"}, err: "one pod only"},
	} {
		got, err := parseKubectl(c.args)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: error %v, want one containing %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v: %+v, %v; want %+v", c.args, got, err, c.want)
		}
	}
}

func TestInstallKubectlCopiesItself(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "kubectl")
	if err := runInstallKubectl([]string{dest}); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	want, _ := os.ReadFile(self)
	got, err := os.ReadFile(dest)
	if err != nil || string(got) != string(want) {
		t.Fatalf("kubectl is not a copy of this binary (%d bytes, want %d): %v", len(got), len(want), err)
	}
	if fi, _ := os.Stat(dest); fi.Mode().Perm()&0o111 == 0 {
		t.Errorf("kubectl mode %v: not executable", fi.Mode())
	}
}
