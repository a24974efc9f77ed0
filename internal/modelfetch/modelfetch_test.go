package modelfetch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
)

func TestHTTPURL(t *testing.T) {
	tests := map[string]string{
		"https://example.com/m/model.pt": "https://example.com/m/model.pt",
		"gs://models/iris/model.joblib":  "https://storage.googleapis.com/models/iris/model.joblib",
		"s3://models/iris/model.joblib":  "https://models.s3.amazonaws.com/iris/model.joblib",
	}
	for in, want := range tests {
		if got, err := HTTPURL(in, ""); err != nil || got != want {
			t.Errorf("HTTPURL(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	if got, _ := HTTPURL("s3://models/a.bin", "http://minio:9000/"); got != "http://minio:9000/models/a.bin" {
		t.Errorf("with an endpoint: %s", got)
	}
	if _, err := HTTPURL("ftp://x/y", ""); err == nil {
		t.Error("ftp:// accepted")
	}
}

func TestFetch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/models/iris/model.joblib" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("weights"))
	}))
	defer srv.Close()
	dir := t.TempDir()
	got, err := Fetch(context.Background(), srv.Client(), "s3://models/iris/model.joblib", srv.URL, dir)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(got); string(b) != "weights" {
		t.Errorf("fetched %q", b)
	}
	if _, err := Fetch(context.Background(), srv.Client(), "s3://models/missing", srv.URL, dir); err == nil {
		t.Error("a missing model fetched without error")
	}
}
