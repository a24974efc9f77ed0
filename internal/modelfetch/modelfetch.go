// Package modelfetch downloads a model into a folder before a model server starts: `kiln fetch`,
// the init container of InferenceServices whose model is not on a claim. It fetches one object
// over HTTP(S); s3:// and gs:// URIs are read through their public HTTPS endpoints.
package modelfetch

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// HTTPURL maps a model URI to the HTTPS address it is read from. s3Endpoint, when set (e.g. a
// MinIO address from AWS_ENDPOINT_URL), serves s3://bucket/key as <endpoint>/bucket/key.
func HTTPURL(uri, s3Endpoint string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", fmt.Errorf("model URI %q: %w", uri, err)
	}
	key := strings.TrimPrefix(u.Path, "/")
	switch u.Scheme {
	case "http", "https":
		return uri, nil
	case "gs":
		return "https://storage.googleapis.com/" + u.Host + "/" + key, nil
	case "s3":
		if s3Endpoint != "" {
			return strings.TrimSuffix(s3Endpoint, "/") + "/" + u.Host + "/" + key, nil
		}
		return "https://" + u.Host + ".s3.amazonaws.com/" + key, nil
	}
	return "", fmt.Errorf("model URI %q: scheme %q is not one of http, https, s3, gs (pvc:// is mounted, not fetched)", uri, u.Scheme)
}

// Fetch downloads uri into dir, under the object's base name, and returns the file's path.
func Fetch(ctx context.Context, c *http.Client, uri, s3Endpoint, dir string) (string, error) {
	src, err := HTTPURL(uri, s3Endpoint)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", fmt.Errorf("fetching %s: %w", src, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("fetching %s: %s", src, resp.Status)
	}
	name := path.Base(strings.TrimSuffix(req.URL.Path, "/"))
	if name == "." || name == "/" || name == "" {
		name = "model"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	dest := filepath.Join(dir, name)
	f, err := os.CreateTemp(dir, ".fetch-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return "", fmt.Errorf("fetching %s: %w", src, err)
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return dest, os.Rename(f.Name(), dest)
}
