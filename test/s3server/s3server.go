// Package s3server runs a real S3 API for tests (github.com/johannesboyne/gofakes3 in memory)
// behind AWS Signature Version 4 authentication: a request signed with other credentials is
// refused with AccessDenied, as S3 refuses it.
package s3server

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Credentials the server accepts.
const (
	AccessKeyID     = "AKIAKILNTEST"
	SecretAccessKey = "kiln-test-secret"
	Region          = "us-east-1"
)

// Server is a running S3 API.
type Server struct {
	URL     string
	backend *s3mem.Backend
}

// Start runs a server until the test ends.
func Start(t testing.TB) *Server {
	backend := s3mem.New()
	faker := gofakes3.New(backend, gofakes3.WithAutoBucket(true))
	srv := httptest.NewServer(signedBy(AccessKeyID, SecretAccessKey, faker.Server()))
	t.Cleanup(srv.Close)
	return &Server{URL: srv.URL, backend: backend}
}

// Put stores an object.
func (s *Server) Put(t testing.TB, bucket, key string, data []byte) {
	t.Helper()
	if err := s.backend.CreateBucket(bucket); err != nil && !gofakes3.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := s.backend.PutObject(bucket, key, map[string]string{}, bytes.NewReader(data), int64(len(data)), nil); err != nil {
		t.Fatal(err)
	}
}

// signedBy lets through only requests signed (SigV4, Authorization header) with the key pair.
func signedBy(id, secret string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := verify(r, id, secret); err != nil {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>%s</Message></Error>`, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// verify signs again, with the server's secret, what the client says it signed, and compares.
func verify(r *http.Request, id, secret string) error {
	auth := r.Header.Get("Authorization")
	fields := map[string]string{}
	for _, part := range strings.Split(strings.TrimPrefix(auth, "AWS4-HMAC-SHA256 "), ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 || fields["Signature"] == "" {
		return fmt.Errorf("the request is not signed with AWS Signature Version 4")
	}
	if scope[0] != id {
		return fmt.Errorf("the AWS access key ID %s does not exist", scope[0])
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("X-Amz-Date: %v", err)
	}
	again, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		return err
	}
	for _, h := range strings.Split(fields["SignedHeaders"], ";") {
		if h != "host" {
			again.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	creds := aws.Credentials{AccessKeyID: id, SecretAccessKey: secret}
	if err := v4.NewSigner().SignHTTP(r.Context(), creds, again, r.Header.Get("X-Amz-Content-Sha256"), scope[3], scope[2], at); err != nil {
		return err
	}
	if !strings.HasSuffix(again.Header.Get("Authorization"), "Signature="+fields["Signature"]) {
		return fmt.Errorf("the request signature does not match: check the secret access key")
	}
	return nil
}
