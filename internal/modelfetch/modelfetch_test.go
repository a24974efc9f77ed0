package modelfetch

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/kiln-ml/kiln/test/azblobserver"
	"github.com/kiln-ml/kiln/test/s3server"
)

// credentials sets the environment of a fetch container given a storage Secret for the server.
func credentials(t *testing.T, s *s3server.Server, id, secret string) {
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": id, "AWS_SECRET_ACCESS_KEY": secret, "AWS_ENDPOINT_URL": s.URL,
		"AWS_REGION": s3server.Region, "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"} {
		t.Setenv(k, v)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func tarGz(t *testing.T, files map[string]string) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// A private S3 bucket, read with SigV4 credentials: one object, a prefix with its layout (a
// Triton model repository), an archive unpacked; wrong credentials, a missing key and a model over
// the size limit fail saying what to fix.
func TestFetchFromS3(t *testing.T) {
	s := s3server.Start(t)
	s.Put(t, "models", "iris/model.joblib", []byte("weights"))
	s.Put(t, "models", "triton/resnet/config.pbtxt", []byte("name: \"resnet\""))
	s.Put(t, "models", "triton/resnet/1/model.onnx", []byte("onnx"))
	s.Put(t, "models", "bert.tar.gz", tarGz(t, map[string]string{"bert/config.json": "{}", "bert/model.bin": "bin"}))
	ctx := context.Background()
	ok := Options{}
	credentials(t, s, s3server.AccessKeyID, s3server.SecretAccessKey)

	dir := t.TempDir()
	if _, err := Fetch(ctx, "s3://models/iris/model.joblib", dir, ok); err != nil || read(t, filepath.Join(dir, "model.joblib")) != "weights" {
		t.Fatalf("one object: %v", err)
	}
	dir = t.TempDir()
	if what, err := Fetch(ctx, "s3://models/triton", dir, ok); err != nil || what != "2 files, 18 bytes" {
		t.Fatalf("a prefix: %q, %v", what, err)
	}
	if read(t, filepath.Join(dir, "resnet", "1", "model.onnx")) != "onnx" || read(t, filepath.Join(dir, "resnet", "config.pbtxt")) == "" {
		t.Error("the prefix's layout was not kept")
	}
	dir = t.TempDir()
	if _, err := Fetch(ctx, "s3://models/bert.tar.gz", dir, ok); err != nil || read(t, filepath.Join(dir, "bert", "model.bin")) != "bin" {
		t.Fatalf("an archive: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "bert.tar.gz")); !os.IsNotExist(err) {
		t.Error("the archive stays after unpacking")
	}

	for _, c := range []struct {
		name, uri, id, secret string
		max                   int64
		want                  string
	}{
		{"wrong secret", "s3://models/iris/model.joblib", s3server.AccessKeyID, "wrong", 0, "access denied: check the credentials of storage.secretName"},
		{"unknown key id", "s3://models/triton", "AKIAOTHER", s3server.SecretAccessKey, 0, "access denied"},
		{"missing", "s3://models/nothing-here", s3server.AccessKeyID, s3server.SecretAccessKey, 0, "no object nothing-here and no objects under nothing-here/"},
		{"too large", "s3://models/triton", s3server.AccessKeyID, s3server.SecretAccessKey, 10, ErrTooLarge.Error()},
	} {
		credentials(t, s, c.id, c.secret)
		_, err := Fetch(ctx, c.uri, t.TempDir(), Options{MaxBytes: c.max})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	// A digest names one object: with a prefix it cannot be checked, and is not ignored.
	credentials(t, s, s3server.AccessKeyID, s3server.SecretAccessKey)
	if _, err := Fetch(ctx, "s3://models/triton", t.TempDir(), Options{SHA256: strings.Repeat("a", 64)}); err == nil || !strings.Contains(err.Error(), "storage.sha256 checks a single object, and this is 2 files") {
		t.Errorf("a digest with a prefix: %v", err)
	}
}

// HTTP(S): a digest is checked, an archive's entries may not leave the model folder, and a
// pre-signed URL's signature never appears in an error.
func TestFetchOverHTTP(t *testing.T) {
	evil := tarGz(t, map[string]string{"../../etc/cron.d/evil": "x"})
	var zipped bytes.Buffer
	zw := zip.NewWriter(&zipped)
	w, _ := zw.Create("/abs/model.bin")
	w.Write([]byte("x"))
	zw.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/model.pt":
			w.Write([]byte("weights"))
		case "/evil.tar.gz":
			w.Write(evil)
		case "/evil.zip":
			w.Write(zipped.Bytes())
		default:
			http.Error(w, "no", http.StatusForbidden)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	sum := sha256.Sum256([]byte("weights"))
	if _, err := Fetch(ctx, srv.URL+"/model.pt", t.TempDir(), Options{SHA256: hex.EncodeToString(sum[:])}); err != nil {
		t.Errorf("the right digest: %v", err)
	}
	if _, err := Fetch(ctx, srv.URL+"/model.pt", t.TempDir(), Options{SHA256: strings.Repeat("0", 64)}); err == nil || !strings.Contains(err.Error(), "not "+strings.Repeat("0", 64)+" as storage.sha256 says") {
		t.Errorf("a wrong digest: %v", err)
	}
	for _, name := range []string{"evil.tar.gz", "evil.zip"} {
		dir := t.TempDir()
		_, err := Fetch(ctx, srv.URL+"/"+name, dir, Options{})
		if err == nil || !strings.Contains(err.Error(), "would be written outside the model folder") {
			t.Errorf("%s: %v, want the entry refused", name, err)
		}
	}
	_, err := Fetch(ctx, srv.URL+"/private.bin?X-Amz-Signature=secret-signature", t.TempDir(), Options{})
	if err == nil || strings.Contains(err.Error(), "secret-signature") || !strings.Contains(err.Error(), "403") {
		t.Errorf("a refused pre-signed URL: %v; want 403 without the signature", err)
	}
	if Redact("https://u:p@h/x?sig=1#f") != "https://h/x" {
		t.Errorf("Redact = %q", Redact("https://u:p@h/x?sig=1#f"))
	}
}

// A GCS bucket (fake-gcs-server, the JSON API in process): one object, a prefix with its layout,
// a missing object.
func TestFetchFromGCS(t *testing.T) {
	obj := func(name, body string) fakestorage.Object {
		return fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "models", Name: name}, Content: []byte(body)}
	}
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", Writer: io.Discard,
		InitialObjects: []fakestorage.Object{obj("iris/model.joblib", "weights"), obj("torchserve/store/mnist.mar", "mar"), obj("torchserve/store/config.properties", "x=1")}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL(), "http://"))
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := Fetch(ctx, "gs://models/iris/model.joblib", dir, Options{}); err != nil || read(t, filepath.Join(dir, "model.joblib")) != "weights" {
		t.Fatalf("one object: %v", err)
	}
	dir = t.TempDir()
	if what, err := Fetch(ctx, "gs://models/torchserve", dir, Options{}); err != nil || what != "2 files, 6 bytes" || read(t, filepath.Join(dir, "store", "mnist.mar")) != "mar" {
		t.Fatalf("a prefix: %q, %v", what, err)
	}
	if _, err := Fetch(ctx, "gs://models/gone", t.TempDir(), Options{}); err == nil || !strings.Contains(err.Error(), "no object gone") {
		t.Errorf("a missing object: %v", err)
	}
}

// A Hugging Face Hub model (the Hub's API served by a test server): every file at a revision, the
// token sent; a gated model without access says what to do.
func TestFetchFromTheHub(t *testing.T) {
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer hf_good" {
			http.Error(w, "gated", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/api/models/org/tiny/revision/v1":
			w.Write([]byte(`{"siblings":[{"rfilename":"config.json"},{"rfilename":"tokenizer/vocab.txt"}]}`))
		case "/org/tiny/resolve/v1/config.json":
			w.Write([]byte("{}"))
		case "/org/tiny/resolve/v1/tokenizer/vocab.txt":
			w.Write([]byte("a\nb\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer hub.Close()
	t.Setenv("HF_ENDPOINT", hub.URL)
	t.Setenv("HF_TOKEN", "hf_good")
	dir := t.TempDir()
	if what, err := Fetch(context.Background(), "hf://org/tiny@v1", dir, Options{}); err != nil || what != "2 files, 6 bytes" || read(t, filepath.Join(dir, "tokenizer", "vocab.txt")) != "a\nb\n" {
		t.Fatalf("fetched %q: %v", what, err)
	}
	t.Setenv("HF_TOKEN", "")
	if _, err := Fetch(context.Background(), "hf://org/tiny@v1", t.TempDir(), Options{}); err == nil || !strings.Contains(err.Error(), "needs HF_TOKEN in storage.secretName") {
		t.Errorf("a gated model without a token: %v", err)
	}
}

// An Azure storage account (azblobserver: Shared Key and SAS authorization as Azure checks them):
// one blob and a prefix with the account key, a public container anonymously, a SAS token that
// never shows in an error; a wrong key and an unnamed account fail saying what to fix.
func TestFetchFromAzure(t *testing.T) {
	s := azblobserver.Start(t)
	s.Put("models", "sklearn/iris/model.joblib", []byte("weights"))
	s.Put("models", "triton/resnet/config.pbtxt", []byte("name"))
	s.Put("models", "triton/resnet/1/model.onnx", []byte("onnx"))
	s.Put("open", "model.pt", []byte("pt"))
	s.Public("open")
	env := func(kv ...string) {
		for _, k := range []string{"AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN"} {
			t.Setenv(k, "")
		}
		t.Setenv("AZURE_STORAGE_DOMAIN", s.Host)
		t.Setenv("AZURE_STORAGE_PROTOCOL", "http")
		for i := 0; i < len(kv); i += 2 {
			t.Setenv(kv[i], kv[i+1])
		}
	}
	ctx := context.Background()
	env("AZURE_STORAGE_ACCOUNT", azblobserver.Account, "AZURE_STORAGE_KEY", azblobserver.Key)
	dir := t.TempDir()
	if _, err := Fetch(ctx, "azblob://models/sklearn/iris/model.joblib", dir, Options{}); err != nil || read(t, filepath.Join(dir, "model.joblib")) != "weights" {
		t.Fatalf("one blob: %v", err)
	}
	dir = t.TempDir()
	if what, err := Fetch(ctx, "azblob://models/triton/", dir, Options{}); err != nil || what != "2 files, 8 bytes" || read(t, filepath.Join(dir, "resnet", "1", "model.onnx")) != "onnx" {
		t.Fatalf("a prefix: %q, %v", what, err)
	}
	env("AZURE_STORAGE_ACCOUNT", azblobserver.Account, "AZURE_STORAGE_KEY", base64.StdEncoding.EncodeToString([]byte("wrong")))
	if _, err := Fetch(ctx, "azblob://models/triton", t.TempDir(), Options{}); err == nil || !strings.Contains(err.Error(), "access denied: check the credentials of storage.secretName") {
		t.Errorf("a wrong account key: %v", err)
	}

	env("AZURE_STORAGE_ACCOUNT", azblobserver.Account, "AZURE_STORAGE_SAS_TOKEN", azblobserver.SASToken)
	if _, err := Fetch(ctx, "azblob://models/triton", t.TempDir(), Options{}); err != nil {
		t.Errorf("a SAS token: %v", err)
	}
	env("AZURE_STORAGE_ACCOUNT", azblobserver.Account, "AZURE_STORAGE_SAS_TOKEN", "sv=2023-11-03&sp=rl&sig=expired-signature")
	if _, err := Fetch(ctx, "azblob://models/iris.bin", t.TempDir(), Options{}); err == nil || strings.Contains(err.Error(), "expired-signature") || !strings.Contains(err.Error(), "access denied") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a refused SAS token: %v; want access denied, in one line, without the signature", err)
	}

	env()
	dir = t.TempDir()
	if _, err := Fetch(ctx, "azblob://open/model.pt?storage_account="+azblobserver.Account, dir, Options{}); err != nil || read(t, filepath.Join(dir, "model.pt")) != "pt" {
		t.Errorf("a public container, anonymously: %v", err)
	}
	// KServe's form names the account in the host (the endpoint here is still the test server's).
	if _, err := Fetch(ctx, "https://"+azblobserver.Account+".blob.core.windows.net/open/model.pt", t.TempDir(), Options{}); err != nil {
		t.Errorf("an https://<account>.blob.core.windows.net URI: %v", err)
	}
	if _, err := Fetch(ctx, "azblob://models/triton?storage_account="+azblobserver.Account, t.TempDir(), Options{}); err == nil || !strings.Contains(err.Error(), "access denied") {
		t.Errorf("a private container, anonymously: %v", err)
	}
	if _, err := Fetch(ctx, "azblob://open/model.pt", t.TempDir(), Options{}); err == nil || !strings.Contains(err.Error(), "set AZURE_STORAGE_ACCOUNT in the Secret of storage.secretName") {
		t.Errorf("no account named: %v", err)
	}
}

// Archives are bounded: a small .tar.gz of many empty files or folders, or of deep paths, is
// refused before it uses up the node's inodes; a .tar.gz is unpacked as it arrives (never on
// disk) and its digest is the archive's; a .zip counts itself while it is unpacked beside.
func TestArchivesAreBounded(t *testing.T) {
	many := func(n int, dirs bool) []byte {
		var buf bytes.Buffer
		gz := gzip.NewWriter(&buf)
		tw := tar.NewWriter(gz)
		for i := range n {
			h := &tar.Header{Name: fmt.Sprintf("f%d", i), Mode: 0o644, Typeflag: tar.TypeReg}
			if dirs {
				h = &tar.Header{Name: fmt.Sprintf("d%d/", i), Mode: 0o755, Typeflag: tar.TypeDir}
			}
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
		}
		tw.Close()
		gz.Close()
		return buf.Bytes()
	}
	good := tarGz(t, map[string]string{"model/weights.bin": "weights"})
	deep := tarGz(t, map[string]string{strings.Repeat("d/", 40) + "x": "x"})
	const limit = 1000
	nested := map[string]string{}
	for i := range limit / 2 {
		nested[fmt.Sprintf("a%d/b/f", i)] = "" // two folders per file
	}
	var zipped bytes.Buffer
	zw := zip.NewWriter(&zipped)
	w, _ := zw.CreateHeader(&zip.FileHeader{Name: "model.bin", Method: zip.Store})
	w.Write(bytes.Repeat([]byte("x"), 1000))
	zw.Close()
	manyZipped := zipOf(t, limit+1)
	// An end record that claims 60,000 entries before a central directory of one: refused by its
	// count, before the directory is parsed (an entry in memory each).
	liar := bytes.Clone(zipped.Bytes())
	binary.LittleEndian.PutUint16(liar[len(liar)-22+8:], 60000)
	binary.LittleEndian.PutUint16(liar[len(liar)-22+10:], 60000)
	// `git archive --format=tar.gz` starts with a pax global header holding the commit id.
	var gitArchive bytes.Buffer
	gz := gzip.NewWriter(&gitArchive)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{"comment": strings.Repeat("a", 40)}})
	tw.WriteHeader(&tar.Header{Name: "model/weights.bin", Mode: 0o644, Size: 7, Typeflag: tar.TypeReg})
	tw.Write([]byte("weights"))
	tw.Close()
	gz.Close()
	bodies := map[string][]byte{
		"/many.zip": manyZipped, "/liar.zip": liar, "/git.tar.gz": gitArchive.Bytes(),
		"/files.tar.gz": many(limit+1, false), "/dirs.tar.gz": many(limit+1, true), "/default.tar.gz": many(maxEntries+1, true),
		"/deep.tar.gz": deep, "/nested.tar.gz": tarGz(t, nested), "/good.tgz": good, "/model.zip": zipped.Bytes(),
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(bodies[r.URL.Path]) }))
	defer srv.Close()
	ctx := context.Background()
	// refused fetches name into a folder of its own: it must fail saying want, and leave the
	// folder empty (what it unpacked before it stopped would hold the node's disk and inodes).
	refused := func(name string, o Options, want string) {
		t.Helper()
		dir := t.TempDir()
		if _, err := Fetch(ctx, srv.URL+"/"+name, dir, o); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%s: the refused fetch left %d entries, the first %s", name, len(entries), entries[0].Name())
		}
	}
	refused("default.tar.gz", Options{}, "more than 100000 entries")
	for name, want := range map[string]string{
		"files.tar.gz": "more than 1000 entries", "dirs.tar.gz": "more than 1000 entries",
		"deep.tar.gz": "nests 40 folders deep", "nested.tar.gz": "more than 1000 entries",
		"many.zip": "more than 1000 entries", "liar.zip": "more than 1000 entries",
	} {
		refused(name, Options{MaxEntries: limit}, want)
	}
	sum := sha256.Sum256(good)
	dir := t.TempDir()
	if _, err := Fetch(ctx, srv.URL+"/good.tgz", dir, Options{SHA256: hex.EncodeToString(sum[:]), MaxBytes: 7}); err != nil || read(t, filepath.Join(dir, "model", "weights.bin")) != "weights" {
		t.Fatalf("a .tgz with its digest, unpacked within the limit: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the folder holds %v: want the model only, no archive", entries)
	}
	dir = t.TempDir()
	if _, err := Fetch(ctx, srv.URL+"/git.tar.gz", dir, Options{}); err != nil || read(t, filepath.Join(dir, "model", "weights.bin")) != "weights" {
		t.Errorf("a git archive (a pax global header first): %v", err)
	}
	dir = t.TempDir()
	if _, err := Fetch(ctx, srv.URL+"/good.tgz", dir, Options{SHA256: strings.Repeat("0", 64)}); err == nil {
		t.Error("a .tgz with the wrong digest was accepted")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a .tgz that failed its digest left %v", entries)
	}
	refused("model.zip", Options{MaxBytes: 1500}, "the archive and what it holds together must fit") // 1000 bytes beside themselves
}

// A fetch's error becomes the init container's termination message and the InferenceService's
// status: it names no password or signature, whether the URL does not parse, cannot be reached
// (net/http masks the password, so the URL as given is not in the error), or redirects to a
// signed URL that fails.
func TestFetchErrorsKeepNoSecret(t *testing.T) {
	ctx := context.Background()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	var signed *httptest.Server
	signed = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/start" {
			http.Redirect(w, r, signed.URL+"/blob?sig=SECRET-REDIRECT", http.StatusFound)
			return
		}
		hj, _ := w.(http.Hijacker)
		conn, _, _ := hj.Hijack()
		conn.Close() // an answer cut off: the client's error names the URL it asked
	}))
	defer signed.Close()
	for _, uri := range []string{
		strings.Replace(closed.URL, "http://", "http://u:SECRET-PASSWORD@", 1) + "/m.tar.gz?X-Amz-Signature=SECRET-SIG",
		"https://u:SECRET/PASSWORD@h/x?X-Amz-Signature=SECRET-SIG",
		signed.URL + "/start",
	} {
		_, err := Fetch(ctx, uri, t.TempDir(), Options{})
		if err == nil {
			t.Errorf("%s: fetched", uri)
			continue
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("the error keeps a secret: %v", err)
		}
	}
}

// zipOf is a .zip of n empty files.
func zipOf(t *testing.T, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := range n {
		if _, err := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("f%d", i), Method: zip.Store}); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A .zip's entry count is read from its end record, and from the Zip64 end record where the
// count does not fit 16 bits.
func TestZipEntriesReadsTheEndRecords(t *testing.T) {
	for _, n := range []int{0, 3, 65535, 65536, 70000} {
		file := filepath.Join(t.TempDir(), "m.zip")
		if err := os.WriteFile(file, zipOf(t, n), 0o600); err != nil {
			t.Fatal(err)
		}
		info, _ := os.Stat(file)
		if got, err := zipEntries(file, info.Size()); err != nil || got != uint64(n) {
			t.Errorf("a .zip of %d entries: %d, %v", n, got, err)
		}
	}
	file := filepath.Join(t.TempDir(), "not.zip")
	if err := os.WriteFile(file, []byte("just bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := zipEntries(file, 10); err == nil || !strings.Contains(err.Error(), "not a .zip file") {
		t.Errorf("a file that is no .zip: %v", err)
	}
}
