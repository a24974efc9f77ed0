// Package modelfetch puts a model into a folder before a model server starts: kiln-fetch, the
// init container of InferenceServices whose model is not on a claim. An s3:// or gs:// URI names
// one object or a prefix whose objects are all fetched with their layout (a Triton model
// repository, a TorchServe model store); a single fetched .tar.gz, .tgz or .zip is unpacked. s3:// and gs:// are read
// with their vendors' SDKs through gocloud.dev/blob, signed with the credentials the environment
// gives (AWS_* variables, GOOGLE_APPLICATION_CREDENTIALS, workload identity), anonymously without;
// hf://<org>/<model>[@<revision>] through the Hugging Face Hub's API (HF_TOKEN); http(s):// as it is.
package modelfetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"cloud.google.com/go/compute/metadata"
	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"
	"gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/s3blob" // s3:// buckets
	"gocloud.dev/gcerrors"
	"google.golang.org/api/option"

	"github.com/kiln-ml/kiln/internal/modeluri"
)

// Options bound a fetch.
type Options struct {
	// MaxBytes stops the fetch once the model grows past it (0: no limit).
	MaxBytes int64
	// SHA256 is the hex digest a single-object model must have ("": not checked).
	SHA256 string
	// MaxEntries bounds the files and folders of the fetch (0: 100,000).
	MaxEntries int
}

// ErrTooLarge is returned when the model grows past Options.MaxBytes.
var ErrTooLarge = errors.New("the model is larger than its size limit")

// Fetch puts the model at uri into dir and says what it fetched. Its error quotes no URL with its
// secrets (modeluri.RedactText): it becomes the init container's termination message, and from
// there the InferenceService's status.
func Fetch(ctx context.Context, uri, dir string, o Options) (string, error) {
	what, err := fetch(ctx, uri, dir, o)
	if err != nil {
		// What it wrote before it stopped (a prefix's first objects, an archive's first entries)
		// would hold the node's disk and inodes until the pod goes: the folder is the model's,
		// and the next try starts from nothing anyway.
		clearFolder(dir)
		return "", redacted{err, uri}
	}
	return what, nil
}

// redacted is an error of the fetch of uri, told without the secrets of any URL it quotes.
type redacted struct {
	err error
	uri string
}

func (r redacted) Error() string { return modeluri.RedactText(r.err.Error(), r.uri) }
func (r redacted) Unwrap() error { return r.err }

func fetch(ctx context.Context, uri, dir string, o Options) (string, error) {
	u, err := url.Parse(uri)
	if err != nil {
		// url.Parse's error quotes what it could not read, a password's pieces included.
		return "", fmt.Errorf("model URI %s does not parse as a URL: percent-encode the special characters of its user info and path", Redact(uri))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	f := &fetcher{dir: filepath.Clean(dir), o: o}
	var single string
	switch u.Scheme {
	case "s3", "gs", "azblob":
		var b *blob.Bucket
		if b, err = openBucket(ctx, u); err == nil {
			single, err = f.bucket(ctx, b, strings.TrimPrefix(u.Path, "/"))
			b.Close()
		}
	case "https":
		if account, ok := strings.CutSuffix(u.Host, ".blob.core.windows.net"); ok && u.RawQuery == "" {
			// KServe's form of an Azure blob or prefix; with a query it is a pre-signed URL.
			container, key, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
			var b *blob.Bucket
			if b, err = openAzure(ctx, account, container); err == nil {
				single, err = f.bucket(ctx, b, key)
				b.Close()
			}
			break
		}
		single, err = f.http(ctx, uri)
	case "http":
		single, err = f.http(ctx, uri)
	case "hf":
		err = f.hub(ctx, u)
	default:
		err = fmt.Errorf("scheme %q is not one of http, https, s3, gs, azblob, hf (pvc:// is mounted, not fetched)", u.Scheme)
	}
	if err != nil {
		return "", fmt.Errorf("fetching %s: %w", Redact(uri), err)
	}
	if single == "" {
		if o.SHA256 != "" {
			return "", fmt.Errorf("fetching %s: storage.sha256 checks a single object, and this is %d files: remove it, or name the object", Redact(uri), f.files)
		}
		return fmt.Sprintf("%d files, %d bytes", f.files, f.bytes), nil
	}
	if o.SHA256 != "" && !strings.EqualFold(o.SHA256, f.digest) {
		return "", fmt.Errorf("fetching %s: its sha256 is %s, not %s as storage.sha256 says", Redact(uri), f.digest, o.SHA256)
	}
	if isZip(single) {
		// The archive's bytes stay counted while it is on disk beside what it holds.
		if err := f.unzip(filepath.Join(dir, single)); err != nil {
			return "", fmt.Errorf("unpacking %s: %w", single, err)
		}
		f.unpacked = true
	}
	if f.unpacked {
		return fmt.Sprintf("%s (%d bytes), unpacked", single, f.bytes), nil
	}
	return fmt.Sprintf("%s (%d bytes)", single, f.bytes), nil
}

// Redact is uri without its secrets (modeluri.Redact).
func Redact(uri string) string { return modeluri.Redact(uri) }

// hasAWSCredentials says whether the environment gives the AWS SDK credentials (the variables of
// storage.secretName, a profile, workload identity); without, s3:// is read anonymously.
func hasAWSCredentials() bool {
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI"} {
		if os.Getenv(v) != "" {
			return true
		}
	}
	return false
}

// hasGCPCredentials says whether the environment gives the GCS client credentials. A Secret's
// GOOGLE_APPLICATION_CREDENTIALS holds the key's JSON, where the client wants a file: it is
// written to one first. On Google Cloud the metadata server's identity (workload identity)
// counts; elsewhere, without credentials, gs:// is read anonymously.
func hasGCPCredentials() (bool, error) {
	v := os.Getenv("GOOGLE_APPLICATION_CREDENTIALS")
	if strings.HasPrefix(strings.TrimSpace(v), "{") {
		f, err := os.CreateTemp("", "gcp-key-*.json")
		if err != nil {
			return false, err
		}
		defer f.Close()
		if _, err := f.WriteString(v); err != nil {
			return false, err
		}
		if err := os.Setenv("GOOGLE_APPLICATION_CREDENTIALS", f.Name()); err != nil {
			return false, err
		}
	}
	return v != "" || os.Getenv("STORAGE_EMULATOR_HOST") != "" || metadata.OnGCE(), nil
}

// fetcher writes into dir and counts what it wrote against the size limit.
type fetcher struct {
	dir          string
	o            Options
	files, bytes int64
	digest       string // of the last single object
	// unpacked says the single object was an archive unpacked as it arrived (object).
	unpacked bool
	// made are the folders the fetch created under dir (place).
	made map[string]bool
}

// save writes r to the relative path rel under dir, through a temporary file.
func (f *fetcher) save(rel string, r io.Reader) error {
	dst, err := f.place(rel)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".fetch-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), f.limit(r))
	f.bytes += n
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	f.files++
	f.digest = hex.EncodeToString(h.Sum(nil))
	return os.Rename(tmp.Name(), dst)
}

// limit reads r until the fetch as a whole reaches MaxBytes, then fails with ErrTooLarge.
func (f *fetcher) limit(r io.Reader) io.Reader {
	if f.o.MaxBytes <= 0 {
		return r
	}
	return &limited{r: r, left: f.o.MaxBytes - f.bytes}
}

type limited struct {
	r    io.Reader
	left int64
}

func (l *limited) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n, ErrTooLarge
	}
	return n, err
}

// http fetches one http(s):// object and returns the saved file's name.
func (f *fetcher) http(ctx context.Context, src string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err // Fetch redacts the URLs it quotes
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s answered %s", Redact(src), resp.Status)
	}
	name := path.Base(strings.TrimSuffix(req.URL.Path, "/"))
	if name == "." || name == "/" || name == "" {
		name = "model"
	}
	return name, f.object(name, resp.Body)
}

// bucket fetches key from b: the object key, or every object under the prefix key/ with the
// layout below it. It returns the saved file's name for a single object, "" for a prefix.
func (f *fetcher) bucket(ctx context.Context, b *blob.Bucket, key string) (string, error) {
	if key != "" && !strings.HasSuffix(key, "/") {
		r, err := b.NewReader(ctx, key, nil)
		if err == nil {
			defer r.Close()
			name := path.Base(key)
			return name, f.object(name, r)
		}
		if gcerrors.Code(err) != gcerrors.NotFound {
			return "", explain(err)
		}
		key += "/" // not an object: a prefix
	}
	it := b.List(&blob.ListOptions{Prefix: key})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", explain(err)
		}
		if obj.IsDir || strings.HasSuffix(obj.Key, "/") {
			continue
		}
		r, err := b.NewReader(ctx, obj.Key, nil)
		if err != nil {
			return "", explain(err)
		}
		err = f.save(strings.TrimPrefix(obj.Key, key), r)
		r.Close()
		if err != nil {
			return "", fmt.Errorf("%s: %w", obj.Key, err)
		}
	}
	if f.files == 0 {
		return "", fmt.Errorf("no object %s and no objects under %s", strings.TrimSuffix(key, "/"), key)
	}
	return "", nil
}

// openBucket opens u's bucket, signed with the environment's credentials, anonymously without.
// s3: AWS_ENDPOINT_URL (an S3-compatible store) with path style addressing, AWS_REGION (us-east-1
// when unset, as S3 needs one to sign). gs: STORAGE_EMULATOR_HOST (an emulator) is honoured;
// objects are read through the JSON API, as they are listed.
func openBucket(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	if u.Scheme == "azblob" {
		return openAzure(ctx, u.Query().Get("storage_account"), u.Host)
	}
	if u.Scheme == "gs" {
		ok, err := hasGCPCredentials()
		if err != nil {
			return nil, err
		}
		opts := []option.ClientOption{storage.WithJSONReads()}
		if !ok {
			opts = append(opts, option.WithoutAuthentication())
		}
		c, err := storage.NewClient(ctx, opts...)
		if err != nil {
			return nil, err
		}
		return gcsblob.OpenBucket(ctx, nil, u.Host, &gcsblob.Options{Client: c})
	}
	q := url.Values{}
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = "us-east-1"
	}
	q.Set("region", region)
	if e := os.Getenv("AWS_ENDPOINT_URL"); e != "" {
		q.Set("endpoint", e)
		q.Set("use_path_style", "true")
		if strings.HasPrefix(e, "http://") {
			q.Set("disable_https", "true")
		}
	}
	if !hasAWSCredentials() {
		q.Set("anonymous", "true")
	}
	return blob.OpenBucket(ctx, "s3://"+u.Host+"?"+q.Encode())
}

// openAzure opens a container of an Azure storage account (AZURE_STORAGE_ACCOUNT when account is
// ""), signed with the environment's credentials — AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN, a
// connection string, workload or managed identity (AZURE_CLIENT_ID and the like) — anonymously
// without. AZURE_STORAGE_DOMAIN and AZURE_STORAGE_PROTOCOL name another endpoint (an emulator).
func openAzure(ctx context.Context, account, name string) (*blob.Bucket, error) {
	opts := azureblob.NewDefaultServiceURLOptions()
	if account != "" {
		opts.AccountName = account
	}
	if opts.AccountName == "" {
		return nil, errors.New("the Azure storage account is not named: set AZURE_STORAGE_ACCOUNT in the Secret of storage.secretName, or add ?storage_account=<name> to the URI")
	}
	svc, err := azureblob.NewServiceURL(opts)
	if err != nil {
		return nil, err
	}
	var c *container.Client
	if hasAzureCredentials() {
		c, err = azureblob.NewDefaultClient(svc, azureblob.ContainerName(name))
	} else {
		var u string
		if u, err = url.JoinPath(string(svc), name); err == nil {
			c, err = container.NewClientWithNoCredential(u, nil)
		}
	}
	if err != nil {
		return nil, err
	}
	return azureblob.OpenBucket(ctx, c, nil)
}

// hasAzureCredentials says whether the environment gives the Azure SDK credentials; without, a
// container is read anonymously (a public one).
func hasAzureCredentials() bool {
	for _, v := range []string{"AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_CONNECTION_STRING",
		"AZURE_STORAGEBLOB_CONNECTIONSTRING", "AZURE_CLIENT_ID", "AZURE_FEDERATED_TOKEN_FILE", "IDENTITY_ENDPOINT", "MSI_ENDPOINT"} {
		if os.Getenv(v) != "" {
			return true
		}
	}
	return false
}

// explain turns a storage error into what to fix.
func explain(err error) error {
	code := gcerrors.Code(err)
	var az *azcore.ResponseError
	if errors.As(err, &az) && az.RawResponse != nil { // its message is the whole response, many lines
		r := az.RawResponse.Request
		err = fmt.Errorf("%s %s answered %d %s", r.Method, Redact(r.URL.String()), az.StatusCode, az.ErrorCode)
	}
	switch code {
	case gcerrors.PermissionDenied:
		return fmt.Errorf("access denied: check the credentials of storage.secretName (%w)", err)
	case gcerrors.NotFound:
		return fmt.Errorf("not found: check the bucket and key (%w)", err)
	}
	return err
}

// clearFolder removes what is in dir, best effort: a fetch that failed leaves nothing.
func clearFolder(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

// within is rel under dir, refusing a path that would leave it.
func within(dir, rel string) (string, error) {
	clean := filepath.Clean(filepath.FromSlash(rel))
	if rel == "" || filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%q would be written outside the model folder", rel)
	}
	return filepath.Join(dir, clean), nil
}
