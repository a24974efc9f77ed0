package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The command's flags reach the fetch: an archive is unpacked into --dest, --max-bytes and
// --sha256 stop a model that is too large or not the one named, and --uri is required.
func TestFlags(t *testing.T) {
	var archive bytes.Buffer
	gz := gzip.NewWriter(&archive)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: "model/weights.bin", Mode: 0o644, Size: 7, Typeflag: tar.TypeReg})
	tw.Write([]byte("weights"))
	tw.Close()
	gz.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(archive.Bytes()) }))
	defer srv.Close()
	uri := srv.URL + "/model.tar.gz"

	dir := t.TempDir()
	if err := run([]string{"--uri", uri, "--dest", dir}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "model", "weights.bin")); err != nil || string(b) != "weights" {
		t.Errorf("unpacked: %q, %v", b, err)
	}
	// As the init container runs it: the URI in the environment, kept out of the process list.
	t.Setenv("KILN_MODEL_URI", uri)
	if err := run([]string{"--dest", t.TempDir()}); err != nil {
		t.Errorf("with KILN_MODEL_URI: %v", err)
	}
	t.Setenv("KILN_MODEL_URI", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--uri", uri, "--dest", t.TempDir(), "--max-bytes", "5"}, "larger than its size limit"},
		{[]string{"--uri", uri, "--dest", t.TempDir(), "--sha256", strings.Repeat("0", 64)}, "as storage.sha256 says"},
		{[]string{"--dest", t.TempDir()}, "--uri (or KILN_MODEL_URI) is required"},
	} {
		if err := run(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
}
